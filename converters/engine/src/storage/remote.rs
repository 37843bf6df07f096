//! Objects through the `object_store` crate: a URL parsed into a store and a key, and the few
//! operations a conversion needs (stat with user metadata, list under a prefix, ranged reads,
//! download into a spool folder, multipart upload completed only at the end), each run to
//! completion on this module's tokio runtime, so callers stay synchronous.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::fs::File;
use std::io::Write as _;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures_util::StreamExt as _;
use object_store::client::{
    ClientOptions, HttpClient, HttpConnector, HttpError, HttpErrorKind, HttpRequest, HttpResponse,
    HttpService, ReqwestConnector,
};
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path as Key;
use object_store::{
    Attribute, AttributeValue, Attributes, GetOptions, ObjectStore, ObjectStoreExt as _,
    ObjectStoreScheme, PutMultipartOptions, PutPayload, RetryConfig,
};
use sha2::{Digest as _, Sha256};

use super::{Answer, Cause, Options, StorageError, Store};
use crate::control::Cancel;

pub mod ranged;

/// Spool folders are named `.tet-spool-XXXXXX` and hold a `.lock` file their owner keeps
/// locked (`flock`) while it lives.
pub const SPOOL_PREFIX: &str = ".tet-spool-";
/// Bytes per uploaded part (S3 takes 5 MiB to 5 GiB; memory is this × parts in flight).
const PART_BYTES: usize = 16 << 20;
/// Parts uploaded at once.
const PARTS_IN_FLIGHT: usize = 4;
/// Room left on the spool's file system beyond the object itself.
const SPOOL_MARGIN: u64 = 64 << 20;
/// Error answers longer than this are not kept whole (their code and message come first).
const MAX_ERROR_BODY: usize = 64 << 10;

/// User metadata stored with an uploaded object (`x-amz-meta-*` on S3).
pub type UploadMetadata = BTreeMap<String, String>;

/// The runtime every transfer runs on: two threads, started on first use.
fn runtime() -> Result<&'static tokio::runtime::Runtime, StorageError> {
    static RT: OnceLock<std::io::Result<tokio::runtime::Runtime>> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("tet-storage")
            .enable_all()
            .build()
    })
    .as_ref()
    .map_err(|e| StorageError::Local {
        path: PathBuf::from("(object storage runtime)"),
        source: std::io::Error::new(e.kind(), e.to_string()),
    })
}

/// What the requests of one store met: how many were sent, how many failed transiently (an
/// answer 5xx, 429 or 408, or a connection that failed: object_store retries each of those
/// until its retries run out), and the last error answer. Every request of the store, its
/// credential fetches included, goes through [`Counting`].
#[derive(Debug, Default)]
struct Tally {
    requests: AtomicU64,
    transient: AtomicU64,
    last: Mutex<Option<Failure>>,
    /// A GET with a `Range` header was answered 200 with the whole object, not 206 (a plain
    /// HTTP server without range support).
    ranges_ignored: std::sync::atomic::AtomicBool,
}

/// A failed request: its number (in [`Tally::requests`]), the host it went to, and the answer
/// (`None` when there was none: the connection failed).
#[derive(Debug, Clone)]
struct Failure {
    request: u64,
    host: String,
    answer: Option<Answer>,
    transport: Option<HttpErrorKind>,
}

/// Where a [`Tally`] stood when an operation began.
#[derive(Debug, Clone, Copy)]
struct Mark {
    requests: u64,
    transient: u64,
}

impl Tally {
    fn mark(&self) -> Mark {
        Mark {
            requests: self.requests.load(Ordering::SeqCst),
            transient: self.transient.load(Ordering::SeqCst),
        }
    }

    /// The last failed request since `mark`.
    fn failure_since(&self, mark: Mark) -> Option<Failure> {
        let last = self.last.lock().ok()?.clone()?;
        (last.request > mark.requests).then_some(last)
    }

    fn record(&self, f: Failure, transient: bool) {
        if transient {
            self.transient.fetch_add(1, Ordering::SeqCst);
        }
        if let Ok(mut last) = self.last.lock() {
            *last = Some(f);
        }
    }
}

impl Tally {
    /// The answer `r` to request number `request`, its body counted as a transient failure
    /// when its stream breaks (object_store asks for the rest again, a retry this client sees
    /// only as a new request; or the operation fails with it).
    fn watch_body(self: Arc<Self>, r: HttpResponse, request: u64, host: String) -> HttpResponse {
        use http_body_util::BodyExt as _;
        let (parts, body) = r.into_parts();
        let body = body.map_err(move |e: HttpError| {
            let failure = Failure {
                request,
                host: host.clone(),
                answer: None,
                transport: Some(e.kind()),
            };
            self.record(failure, true);
            e
        });
        HttpResponse::from_parts(parts, object_store::client::HttpResponseBody::new(body))
    }
}

/// Whether object_store retries an answer with this status.
fn transient_status(status: u16) -> bool {
    status >= 500 || status == 429 || status == 408
}

/// The client of every store built here: object_store's own (reqwest), each request counted in
/// the store's [`Tally`], and the body of an error answer read to keep its code and message.
#[derive(Debug)]
struct Counting {
    inner: HttpClient,
    tally: Arc<Tally>,
}

#[async_trait::async_trait]
impl HttpService for Counting {
    async fn call(&self, req: HttpRequest) -> Result<HttpResponse, HttpError> {
        let request = self.tally.requests.fetch_add(1, Ordering::SeqCst) + 1;
        let host = req.uri().host().unwrap_or_default().to_string();
        let ranged = req.headers().contains_key("range");
        match self.inner.execute(req).await {
            Ok(r) if ranged && r.status().as_u16() == 200 => {
                self.tally.ranges_ignored.store(true, Ordering::SeqCst);
                Ok(self.tally.clone().watch_body(r, request, host))
            }
            Ok(r) if r.status().as_u16() >= 400 => {
                let status = r.status().as_u16();
                let (parts, body) = r.into_parts();
                let read = body.bytes().await;
                let body = read.as_deref().unwrap_or_default();
                let (code, message) = error_fields(&body[..body.len().min(MAX_ERROR_BODY)]);
                let answer = Answer {
                    status: Some(status),
                    code,
                    message,
                };
                let transport = read.as_ref().err().map(HttpError::kind);
                let failure = Failure {
                    request,
                    host,
                    answer: Some(answer),
                    transport,
                };
                // An answer whose body broke off is retried like a lost connection.
                self.tally
                    .record(failure, transient_status(status) || transport.is_some());
                Ok(HttpResponse::from_parts(parts, read?.into()))
            }
            Ok(r) => Ok(self.tally.clone().watch_body(r, request, host)),
            Err(e) => {
                let kind = e.kind();
                let transient = matches!(
                    kind,
                    HttpErrorKind::Connect
                        | HttpErrorKind::Request
                        | HttpErrorKind::Timeout
                        | HttpErrorKind::Interrupted
                );
                let failure = Failure {
                    request,
                    host,
                    answer: None,
                    transport: Some(kind),
                };
                self.tally.record(failure, transient);
                Err(e)
            }
        }
    }
}

/// Makes [`Counting`] clients for a store (object_store asks once per client it needs).
#[derive(Debug)]
struct Connector(Arc<Tally>);

impl HttpConnector for Connector {
    fn connect(&self, options: &ClientOptions) -> object_store::Result<HttpClient> {
        Ok(HttpClient::new(Counting {
            inner: ReqwestConnector::default().connect(options)?,
            tally: self.0.clone(),
        }))
    }
}

/// The error code and message of an error answer's body: XML `<Code>`/`<Message>` (S3, Azure)
/// or JSON `{"error": {"message": …}}` (GCS).
fn error_fields(body: &[u8]) -> (Option<String>, Option<String>) {
    let text = String::from_utf8_lossy(body);
    let element = |name: &str| {
        let open = format!("<{name}>");
        let close = format!("</{name}>");
        let i = text.find(&open)? + open.len();
        let n = text[i..].find(&close)?;
        Some(one_line(&text[i..i + n])).filter(|s| !s.is_empty())
    };
    if let (Some(c), m) = (element("Code"), element("Message")) {
        return (Some(c), m);
    }
    let json: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    let message = json
        .as_ref()
        .and_then(|j| j.get("error")?.get("message")?.as_str().map(one_line));
    (None, message)
}

/// What a stat of an object says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectInfo {
    pub size: u64,
    pub etag: Option<String>,
    /// RFC 3339, UTC.
    pub last_modified: String,
}

impl ObjectInfo {
    fn of(m: &object_store::ObjectMeta) -> ObjectInfo {
        ObjectInfo {
            size: m.size,
            etag: m.e_tag.clone(),
            last_modified: m.last_modified.to_rfc3339(),
        }
    }

    /// The up-to-date stamp of an object input: ETag, size and last-modified in one string
    /// (what `inode + mtime` is for a file).
    pub fn stamp(&self) -> String {
        format!(
            "object:{}:{}:{}",
            self.size,
            self.etag.as_deref().unwrap_or("-"),
            self.last_modified
        )
    }
}

/// An object listed under a prefix: its key relative to the prefix, and its stat.
#[derive(Debug, Clone)]
pub struct Listed {
    pub relative: String,
    pub info: ObjectInfo,
}

/// One object (or a prefix) in a store.
#[derive(Clone)]
pub struct Object {
    url: String,
    store: Arc<dyn ObjectStore>,
    /// The same store's multipart API (S3, GCS, Azure; not plain HTTP).
    multipart: Option<Arc<dyn MultipartStore>>,
    key: Key,
    /// What every object of this store shares.
    shared: Arc<Shared>,
}

/// What the objects of one parsed store share.
#[derive(Debug, Default)]
struct Shared {
    /// Values never to show (secrets among the options and the environment).
    secrets: Vec<String>,
    /// Its requests (every clone of an [`Object`] and its children count in the same one).
    tally: Arc<Tally>,
    /// A store given no credentials: they are asked of the instance metadata service, and a
    /// failure to reach it means there are none.
    keyless: Option<Store>,
}

impl std::fmt::Debug for Object {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Object").field("url", &self.url).finish()
    }
}

/// A store as both of the APIs used here.
type Stores = (Arc<dyn ObjectStore>, Option<Arc<dyn MultipartStore>>);

fn both<S: ObjectStore + MultipartStore>(s: S) -> Stores {
    let s = Arc::new(s);
    (s.clone(), Some(s))
}

/// The `--storage-option` / `storage_options` names a kind of store takes, for naming the
/// closest to one it does not: every name below that the store's own parser accepts (each
/// store also takes its prefixed forms, `aws_…`, `google_…`, `azure_…`), and ours.
fn option_names(scheme: &ObjectStoreScheme) -> Vec<&'static str> {
    #[rustfmt::skip]
    const NAMES: &[&str] = &[
        // ours
        "max_retries", "retry_timeout",
        // every HTTP client
        "allow_http", "allow_invalid_certificates", "connect_timeout", "timeout", "proxy_url",
        "proxy_ca_certificate", "proxy_excludes", "user_agent", "http1_only", "http2_only",
        "pool_idle_timeout", "read_timeout", "default_content_type",
        // s3://
        "access_key_id", "secret_access_key", "session_token", "region", "default_region",
        "endpoint", "endpoint_url", "bucket", "virtual_hosted_style_request", "skip_signature",
        "unsigned_payload", "checksum_algorithm", "s3_express", "imdsv1_fallback",
        "metadata_endpoint", "role_arn", "role_session_name", "web_identity_token_file",
        "request_payer", "server_side_encryption", "sse_kms_key_id", "conditional_put",
        "copy_if_not_exists", "disable_tagging", "aws_access_key_id", "aws_secret_access_key",
        "aws_session_token", "aws_region", "aws_endpoint", "aws_endpoint_url", "aws_allow_http",
        // gs://
        "service_account", "service_account_key", "application_credentials", "bearer_token",
        "base_url", "google_service_account", "google_application_credentials",
        // az://
        "account_name", "access_key", "client_id", "client_secret", "tenant_id", "sas_token",
        "token", "use_emulator", "use_azure_cli", "container_name", "azure_storage_account_name",
        "azure_storage_account_key", "azure_storage_endpoint", "azure_allow_http",
    ];
    let takes = |k: &str| -> bool {
        use object_store::{aws, azure, gcp, ClientConfigKey};
        matches!(k, "max_retries" | "retry_timeout")
            || match scheme {
                ObjectStoreScheme::AmazonS3 => k.parse::<aws::AmazonS3ConfigKey>().is_ok(),
                ObjectStoreScheme::GoogleCloudStorage => k.parse::<gcp::GoogleConfigKey>().is_ok(),
                ObjectStoreScheme::MicrosoftAzure => k.parse::<azure::AzureConfigKey>().is_ok(),
                _ => k.parse::<ClientConfigKey>().is_ok(),
            }
    };
    NAMES.iter().copied().filter(|k| takes(k)).collect()
}

/// Our own options, read before the store's: retries of transient errors.
fn retry_config(options: &Options) -> Result<RetryConfig, Cause> {
    let mut r = RetryConfig {
        max_retries: 5,
        retry_timeout: Duration::from_secs(120),
        ..RetryConfig::default()
    };
    for (k, v) in options {
        match k.as_str() {
            "max_retries" => r.max_retries = v.parse().map_err(|_| Cause::NotANumber(k.clone()))?,
            "retry_timeout" => {
                let secs = v.parse().map_err(|_| Cause::NotANumber(k.clone()))?;
                r.retry_timeout = Duration::from_secs(secs)
            }
            _ => {}
        }
    }
    Ok(r)
}

/// Whether the store said that the key does not exist (its bucket does).
fn is_no_such_key(e: &StorageError) -> bool {
    matches!(
        e,
        StorageError::Remote {
            cause: Cause::NoSuchKey,
            ..
        }
    )
}

/// Whether an S3 store gets credentials from the environment or the options (keys, a web
/// identity, container credentials) or needs none (`skip_signature`); otherwise object_store
/// asks the instance metadata service.
fn s3_has_credentials(options: &Options) -> bool {
    let given = |names: &[&str]| {
        names.iter().any(|n| {
            options.iter().any(|(k, v)| k == n && !v.is_empty())
                || std::env::var(n.to_ascii_uppercase()).is_ok_and(|v| !v.is_empty())
        })
    };
    given(&["aws_access_key_id", "aws_secret_access_key"])
        || options.iter().any(|(k, v)| {
            matches!(k.as_str(), "access_key_id" | "secret_access_key")
                || (matches!(k.as_str(), "skip_signature" | "aws_skip_signature")
                    && v.eq_ignore_ascii_case("true"))
        })
        || std::env::var("AWS_SKIP_SIGNATURE").is_ok_and(|v| v.eq_ignore_ascii_case("true"))
        || given(&[
            "aws_web_identity_token_file",
            "aws_container_credentials_relative_uri",
            "aws_container_credentials_full_uri",
        ])
}

/// Whether one of `keys` is given as an option, or as an environment variable (upper case).
fn given(options: &Options, keys: &[&str]) -> bool {
    keys.iter().any(|n| {
        options.iter().any(|(k, v)| k == n && !v.is_empty())
            || std::env::var(n.to_ascii_uppercase()).is_ok_and(|v| !v.is_empty())
    })
}

/// Whether `key` (an option, or its upper-case environment variable) is `true`.
fn set_true(options: &Options, key: &str) -> bool {
    options
        .iter()
        .any(|(k, v)| k == key && v.eq_ignore_ascii_case("true"))
        || std::env::var(key.to_ascii_uppercase()).is_ok_and(|v| v.eq_ignore_ascii_case("true"))
}

/// Whether a GCS store gets credentials from the environment or the options (a service
/// account, application default credentials) or needs none; otherwise object_store asks the
/// metadata server.
fn gcs_has_credentials(options: &Options) -> bool {
    let adc = std::env::var_os("HOME").is_some_and(|h| {
        Path::new(&h)
            .join(".config/gcloud/application_default_credentials.json")
            .exists()
    });
    adc || given(
        options,
        &[
            "google_service_account",
            "service_account",
            "google_service_account_path",
            "service_account_path",
            "google_service_account_key",
            "service_account_key",
            "google_application_credentials",
            "application_credentials",
        ],
    ) || set_true(options, "google_skip_signature")
        || set_true(options, "skip_signature")
}

/// Whether an Azure store gets credentials from the environment or the options (an account
/// key, a SAS, a token, a service principal, workload identity, the Azure CLI) or needs none;
/// otherwise object_store asks the managed identity endpoint.
fn azure_has_credentials(options: &Options) -> bool {
    given(
        options,
        &[
            "azure_storage_account_key",
            "azure_storage_access_key",
            "azure_storage_master_key",
            "access_key",
            "account_key",
            "master_key",
            "azure_storage_sas_key",
            "azure_storage_sas_token",
            "sas_key",
            "sas_token",
            "azure_storage_token",
            "bearer_token",
            "token",
            "azure_storage_client_secret",
            "azure_client_secret",
            "client_secret",
            "azure_federated_token_file",
            "federated_token_file",
        ],
    ) || [
        "azure_use_azure_cli",
        "use_azure_cli",
        "azure_skip_signature",
        "skip_signature",
        "azure_storage_use_emulator",
        "use_emulator",
    ]
    .iter()
    .any(|k| set_true(options, k))
}

/// Values of options and environment variables that are secrets.
fn secrets(options: &Options) -> Vec<String> {
    let secret = |k: &str| {
        let k = k.to_ascii_lowercase();
        [
            "secret",
            "token",
            "password",
            "access_key",
            "account_key",
            "sas",
            "credential",
        ]
        .iter()
        .any(|s| k.contains(s))
    };
    let mut out: Vec<String> = options
        .iter()
        .filter(|(k, v)| secret(k) && v.len() >= 4)
        .map(|(_, v)| v.clone())
        .collect();
    for (k, v) in std::env::vars() {
        let ours = ["AWS_", "GOOGLE_", "AZURE_"]
            .iter()
            .any(|p| k.starts_with(p));
        if ours && secret(&k) && v.len() >= 4 {
            out.push(v);
        }
    }
    out
}

impl Object {
    /// The store and key a URL names; `options` (`--storage-option`) over the environment's
    /// settings. A trailing `/` names a prefix.
    pub fn parse(url: &str, options: &Options) -> Result<Object, StorageError> {
        let fail = |cause: Cause| StorageError::of_url(url, cause);
        let mut u = url::Url::parse(url).map_err(|e| StorageError::Remote {
            url: url.to_string(),
            cause: Cause::NotAnObjectUrl(e.to_string()),
            retries: 0,
            source: Some(Box::new(e)),
        })?;
        let trimmed = u.path().trim_end_matches('/').to_string();
        u.set_path(&trimmed);
        let (scheme, key) = ObjectStoreScheme::parse(&u).map_err(|e| StorageError::Remote {
            url: url.to_string(),
            cause: Cause::NotAnObjectUrl(one_line(&e.to_string())),
            retries: 0,
            source: Some(Box::new(e)),
        })?;
        let retry = retry_config(options).map_err(fail)?;
        let ours = |k: &str| matches!(k, "max_retries" | "retry_timeout");
        let theirs = options.iter().filter(|(k, _)| !ours(k));
        let unknown = |k: &str| {
            let known = option_names(&scheme);
            let closest = crate::select::closest(k, known.iter().copied());
            fail(Cause::UnknownOption {
                key: k.to_string(),
                closest,
            })
        };
        let tally = Arc::new(Tally::default());
        let built = |e: object_store::Error| StorageError::Remote {
            url: url.to_string(),
            cause: Cause::Other(one_line(&e.to_string())),
            retries: 0,
            source: Some(Box::new(e)),
        };
        // Each builder takes the settings by their own names, then our retry policy and client.
        macro_rules! configured {
            ($builder:expr) => {{
                let mut b = $builder;
                for (k, v) in theirs {
                    b = b.with_config(k.parse().map_err(|_| unknown(k))?, v);
                }
                b.with_retry(retry)
                    .with_http_connector(Connector(tally.clone()))
                    .build()
                    .map_err(built)?
            }};
        }
        let mut keyless = None;
        let (store, multipart) = match scheme {
            ObjectStoreScheme::AmazonS3 => {
                keyless = (!s3_has_credentials(options)).then_some(Store::S3);
                both(configured!(
                    object_store::aws::AmazonS3Builder::from_env().with_url(u.as_str())
                ))
            }
            ObjectStoreScheme::GoogleCloudStorage => {
                keyless = (!gcs_has_credentials(options)).then_some(Store::Gcs);
                both(configured!(
                    object_store::gcp::GoogleCloudStorageBuilder::from_env().with_url(u.as_str())
                ))
            }
            ObjectStoreScheme::MicrosoftAzure => {
                keyless = (!azure_has_credentials(options)).then_some(Store::Azure);
                both(configured!(
                    object_store::azure::MicrosoftAzureBuilder::from_env().with_url(u.as_str())
                ))
            }
            ObjectStoreScheme::Http => {
                let base = &u[..url::Position::BeforePath];
                let http = configured!(object_store::http::HttpBuilder::new().with_url(base));
                (Arc::new(http) as Arc<dyn ObjectStore>, None)
            }
            other => {
                return Err(fail(Cause::NotAnObjectUrl(format!(
                    "{other:?} is not a store this build reads"
                ))))
            }
        };
        Ok(Object {
            url: url.to_string(),
            store,
            multipart,
            key,
            shared: Arc::new(Shared {
                secrets: secrets(options),
                tally,
                keyless,
            }),
        })
    }

    /// How many requests of this store (every clone of this object, its children and
    /// siblings) failed transiently and were retried, so far. A request that failed and whose
    /// retries ran out counts here too (its error says how many retries it had).
    pub fn retries(&self) -> u64 {
        self.shared.tally.transient.load(Ordering::SeqCst)
    }

    /// Whether the store answered a ranged GET with the whole object (HTTP 200, not 206): a
    /// server without range support, whose objects are read from a spooled copy instead.
    pub fn ignores_ranges(&self) -> bool {
        self.shared.tally.ranges_ignored.load(Ordering::SeqCst)
    }

    /// The URL as given.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The last part of the key (`in.nc` of `s3://b/x/in.nc`).
    pub fn file_name(&self) -> Option<&str> {
        self.key.filename()
    }

    /// The object `relative` (`/`-separated) under this prefix, in the same store.
    pub fn child(&self, relative: &str) -> Object {
        let rel = relative.trim_matches('/');
        let key = Key::from(format!("{}/{rel}", self.key.as_ref()).trim_start_matches('/'));
        Object {
            url: format!("{}/{rel}", self.url.trim_end_matches('/')),
            store: self.store.clone(),
            multipart: self.multipart.clone(),
            key,
            shared: self.shared.clone(),
        }
    }

    /// The store's error for an operation that began at `mark`: one line naming the URL and
    /// the cause ([`classify`]), secrets removed, the error kept as the source.
    fn error(&self, e: object_store::Error, mark: Mark) -> StorageError {
        let mut text = chain(&e);
        for s in self.shared.secrets.iter() {
            text = text.replace(s.as_str(), "***");
        }
        let tally = &self.shared.tally;
        let failure = tally.failure_since(mark);
        let cause = classify(&e, failure.as_ref(), self.shared.keyless, text);
        // Transient failures of this operation; the last one was not retried when it is what
        // ended it.
        let transient = tally
            .transient
            .load(Ordering::SeqCst)
            .saturating_sub(mark.transient);
        let last_transient = failure.as_ref().is_some_and(|f| match &f.answer {
            Some(a) => a.status.is_some_and(transient_status),
            None => f.transport.is_some(),
        });
        let retries = transient.saturating_sub(u64::from(last_transient && transient > 0));
        StorageError::Remote {
            url: self.url.clone(),
            cause,
            retries,
            source: Some(Box::new(e)),
        }
    }

    fn block<T>(
        &self,
        f: impl std::future::Future<Output = object_store::Result<T>>,
    ) -> Result<T, StorageError> {
        let rt = runtime()?;
        let mark = self.shared.tally.mark();
        rt.block_on(f).map_err(|e| self.error(e, mark))
    }

    /// Size, ETag and last-modified of the object (one HEAD request). A missing object is told
    /// apart from a missing bucket.
    pub fn info(&self) -> Result<ObjectInfo, StorageError> {
        match self.block(self.store.head(&self.key)) {
            Ok(m) => Ok(ObjectInfo::of(&m)),
            Err(e) if e.is_not_found() => Err(self.missing_what()),
            Err(e) => Err(e),
        }
    }

    /// "no such bucket" when listing the store's root fails with not found, else "no such key".
    fn missing_what(&self) -> StorageError {
        let root = self.store.list_with_delimiter(None);
        let bucket_missing = matches!(self.block(root), Err(e) if e.is_not_found());
        let cause = if bucket_missing {
            Cause::NoSuchBucket
        } else {
            Cause::NoSuchKey
        };
        StorageError::of_url(&self.url, cause)
    }

    /// The up-to-date stamp and size of the object, or of every object under the prefix (a
    /// Zarr store: `prefix:OBJECTS:BYTES:SHA256` of the keys, sizes and ETags).
    pub fn stamp(&self) -> Result<(String, u64), StorageError> {
        match self.info() {
            Ok(i) => Ok((i.stamp(), i.size)),
            Err(e) if e.is_not_found() => {
                let listed = self.list()?;
                if listed.is_empty() {
                    return Err(e);
                }
                let mut h = Sha256::new();
                let mut bytes = 0u64;
                for l in &listed {
                    h.update(format!("{}\0{}\0", l.relative, l.info.stamp()).as_bytes());
                    bytes = bytes.saturating_add(l.info.size);
                }
                let stamp = format!("prefix:{}:{bytes}:{:x}", listed.len(), h.finalize());
                Ok((stamp, bytes))
            }
            Err(e) => Err(e),
        }
    }

    /// The stat and the user metadata of the object, `None` when there is none.
    pub fn metadata(&self) -> Result<Option<(ObjectInfo, UploadMetadata)>, StorageError> {
        let opts = GetOptions::new().with_head(true);
        match self.block(self.store.get_opts(&self.key, opts)) {
            Ok(r) => {
                let mut meta = UploadMetadata::new();
                for (k, v) in &r.attributes {
                    if let Attribute::Metadata(k) = k {
                        meta.insert(k.to_string(), v.as_ref().to_string());
                    }
                }
                Ok(Some((ObjectInfo::of(&r.meta), meta)))
            }
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Every object under this prefix, sorted by key.
    pub fn list(&self) -> Result<Vec<Listed>, StorageError> {
        let prefix = (!self.key.as_ref().is_empty()).then_some(&self.key);
        let found = self.block(async {
            let mut s = self.store.list(prefix);
            let mut out = Vec::new();
            while let Some(m) = s.next().await {
                out.push(m?);
            }
            Ok(out)
        })?;
        let mut out: Vec<Listed> = found
            .iter()
            .filter_map(|m| {
                let rel: Vec<String> = match prefix {
                    Some(p) => m
                        .location
                        .prefix_match(p)?
                        .map(|x| x.as_ref().into())
                        .collect(),
                    None => m.location.parts().map(|x| x.as_ref().into()).collect(),
                };
                Some(Listed {
                    relative: rel.join("/"),
                    info: ObjectInfo::of(m),
                })
            })
            .collect();
        out.sort_by(|a, b| a.relative.cmp(&b.relative));
        Ok(out)
    }

    /// Bytes `start..end` of the object (one ranged GET).
    pub fn read_range(&self, start: u64, end: u64) -> Result<Vec<u8>, StorageError> {
        Ok(self
            .block(self.store.get_range(&self.key, start..end))?
            .to_vec())
    }

    /// Streams the object's bytes into `sink`, checking `cancel` between pieces; the GET is
    /// conditional on `info`'s ETag, so a replaced object is an error, not a mix. Checks that
    /// `info.size` bytes came. `Ok(Err(e))`: the sink failed.
    fn stream(
        &self,
        info: &ObjectInfo,
        cancel: &Cancel,
        mut sink: impl FnMut(&[u8]) -> std::io::Result<()>,
    ) -> Result<std::io::Result<()>, StorageError> {
        let mut opts = GetOptions::new();
        opts.if_match = info.etag.clone();
        let mut written = 0u64;
        let fetch = async {
            let mut s = self.store.get_opts(&self.key, opts).await?.into_stream();
            while let Some(piece) = s.next().await {
                if let Some(sig) = cancel.requested() {
                    return Ok(Some(Ok(sig)));
                }
                let piece = piece?;
                if let Err(e) = sink(&piece) {
                    return Ok(Some(Err(e)));
                }
                written = written.saturating_add(piece.len() as u64);
            }
            Ok(None)
        };
        match self.wait(fetch, cancel)? {
            Some(Ok(signal)) => Err(StorageError::Interrupted {
                url: self.url.clone(),
                signal,
            }),
            Some(Err(e)) => Ok(Err(e)),
            None if written != info.size => {
                let size = info.size;
                let cause = Cause::Truncated { written, size };
                Err(StorageError::of_url(&self.url, cause))
            }
            None => Ok(Ok(())),
        }
    }

    /// Streams the object into `file` ([`Object::stream`]).
    fn download_into(
        &self,
        file: &Path,
        info: &ObjectInfo,
        cancel: &Cancel,
    ) -> Result<(), StorageError> {
        let local = |source| StorageError::Local {
            path: file.to_path_buf(),
            source,
        };
        let mut out =
            std::io::BufWriter::with_capacity(1 << 20, File::create(file).map_err(local)?);
        self.stream(info, cancel, |piece| out.write_all(piece))?
            .map_err(local)?;
        out.flush().map_err(local)
    }

    /// The input digest (`sha256:…`) and size of the object, streamed (one GET, conditional on
    /// its ETag), as [`crate::meta::digest_input`] gives for a file; of a prefix, its objects'
    /// ([`Object::prefix_digest`]).
    pub fn digest(&self, cancel: &Cancel) -> Result<(String, u64), StorageError> {
        let info = match self.info() {
            Ok(info) => info,
            Err(e) if e.is_not_found() => return self.prefix_digest(cancel),
            Err(e) => return Err(e),
        };
        let mut h = Sha256::new();
        let streamed = self.stream(&info, cancel, |piece| {
            h.update(piece);
            Ok(())
        })?;
        streamed.map_err(|source| StorageError::Local {
            path: PathBuf::from(&self.url),
            source,
        })?;
        Ok((format!("sha256:{:x}", h.finalize()), info.size))
    }

    /// The digest and size of the objects under this prefix (a Zarr store), streamed: what
    /// [`crate::meta::digest_input`] gives for the same files in a local folder (SHA-256 over
    /// each file's relative path, size and bytes, in path order), so that a store converted from
    /// an object prefix records the parent digest its local copy would.
    pub fn prefix_digest(&self, cancel: &Cancel) -> Result<(String, u64), StorageError> {
        let mut listed = self.list()?;
        if listed.is_empty() {
            return Err(StorageError::of_url(&self.url, Cause::NoSuchKey));
        }
        listed.sort_by(|a, b| Path::new(&a.relative).cmp(Path::new(&b.relative)));
        let mut h = Sha256::new();
        let mut total = 0u64;
        for l in &listed {
            h.update(l.relative.as_bytes());
            h.update([0]);
            h.update(l.info.size.to_string().as_bytes());
            h.update([0]);
            let hashed = self.child(&l.relative).stream(&l.info, cancel, |piece| {
                h.update(piece);
                Ok(())
            })?;
            // The sink above never fails.
            if let Err(source) = hashed {
                return Err(StorageError::Local {
                    path: PathBuf::from(&l.relative),
                    source,
                });
            }
            total = total.saturating_add(l.info.size);
        }
        Ok((format!("sha256:{:x}", h.finalize()), total))
    }

    /// Bytes `range` of the object (all of it for `None`), `None` when there is no such key.
    pub fn get_maybe(
        &self,
        range: Option<object_store::GetRange>,
    ) -> Result<Option<zarrs_storage::Bytes>, StorageError> {
        let mut opts = GetOptions::new();
        opts.range = range;
        let got = self.block(async { self.store.get_opts(&self.key, opts).await?.bytes().await });
        match got {
            Ok(b) => Ok(Some(b)),
            Err(e) if is_no_such_key(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The object's size (one HEAD), `None` when there is no such key.
    pub fn size_maybe(&self) -> Result<Option<u64>, StorageError> {
        match self.block(self.store.head(&self.key)) {
            Ok(m) => Ok(Some(m.size)),
            Err(e) if is_no_such_key(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The objects and the prefixes directly under this prefix (one delimited listing), by
    /// their names relative to it, sorted.
    pub fn list_dir(&self) -> Result<(Vec<String>, Vec<String>), StorageError> {
        let prefix = (!self.key.as_ref().is_empty()).then_some(&self.key);
        let found = self.block(self.store.list_with_delimiter(prefix))?;
        let relative = |p: &Key| -> Option<String> {
            let rel: Vec<String> = match prefix {
                Some(pre) => p.prefix_match(pre)?.map(|x| x.as_ref().into()).collect(),
                None => p.parts().map(|x| x.as_ref().into()).collect(),
            };
            Some(rel.join("/")).filter(|r| !r.is_empty())
        };
        let mut objects: Vec<String> = found
            .objects
            .iter()
            .filter_map(|m| relative(&m.location))
            .collect();
        let mut prefixes: Vec<String> = found.common_prefixes.iter().filter_map(relative).collect();
        objects.sort();
        prefixes.sort();
        Ok((objects, prefixes))
    }

    /// Downloads the object (or, for a prefix, every object under it: a Zarr store) into a new
    /// spool folder under `dir`, after checking that `dir` has room for it. The spool is
    /// removed when dropped.
    pub fn download(&self, dir: &Path, cancel: &Cancel) -> Result<Spool, StorageError> {
        let (objects, total) = match self.info() {
            Ok(info) => {
                let size = info.size;
                (vec![(String::new(), info)], size)
            }
            Err(e) if e.is_not_found() => {
                let listed = self.list()?;
                if listed.is_empty() {
                    return Err(e);
                }
                let total = listed.iter().map(|l| l.info.size).sum::<u64>();
                (
                    listed.into_iter().map(|l| (l.relative, l.info)).collect(),
                    total,
                )
            }
            Err(e) => return Err(e),
        };
        let free = free_space(dir).map_err(|source| StorageError::Local {
            path: dir.to_path_buf(),
            source,
        })?;
        if free < total.saturating_add(SPOOL_MARGIN) {
            let cause = Cause::NoRoom {
                dir: dir.to_path_buf(),
                free,
                need: total,
            };
            return Err(StorageError::of_url(&self.url, cause));
        }
        let name = self.file_name().unwrap_or("input").to_string();
        let spool = Spool::create(dir, &name)?;
        for (rel, info) in &objects {
            let (obj, file) = if rel.is_empty() {
                (self.clone(), spool.path.clone())
            } else {
                (self.child(rel), spool.path.join(rel))
            };
            if let Some(parent) = file.parent() {
                std::fs::create_dir_all(parent).map_err(|source| StorageError::Local {
                    path: parent.to_path_buf(),
                    source,
                })?;
            }
            obj.download_into(&file, info, cancel)?;
        }
        Ok(spool)
    }

    /// Uploads `file` as this object with a multipart upload that is completed only after the
    /// last part: until then nothing is visible at the key. Any failure (or `cancel`) aborts
    /// the upload. While it runs, a marker object `.NAME.tet-upload-ID` beside the key holds
    /// the upload's id, so that a run killed outright leaves something the next one finds
    /// ([`Object::abort_stale_uploads`]). `metadata` is stored with the object.
    pub fn upload(
        &self,
        file: &Path,
        metadata: &UploadMetadata,
        cancel: &Cancel,
    ) -> Result<(), StorageError> {
        let Some(mp) = self.multipart.clone() else {
            return Err(StorageError::of_url(&self.url, Cause::ReadOnly));
        };
        let size = std::fs::metadata(file)
            .map_err(|source| StorageError::Local {
                path: file.to_path_buf(),
                source,
            })?
            .len();
        let attributes: Attributes = metadata
            .iter()
            .map(|(k, v)| {
                (
                    Attribute::Metadata(k.clone().into()),
                    AttributeValue::from(v.clone()),
                )
            })
            .collect();
        let opts = PutMultipartOptions {
            attributes,
            ..PutMultipartOptions::default()
        };
        let id = self.wait(mp.create_multipart_opts(&self.key, opts), cancel)?;
        let marker = self.marker(&id);
        let result = self
            .wait(
                self.store.put(&marker.key, PutPayload::from(id.clone())),
                cancel,
            )
            .and_then(|_| self.put_parts(&mp, &id, file, size, cancel))
            .and_then(|parts| self.wait(mp.complete_multipart(&self.key, &id, parts), cancel));
        if result.is_err() {
            if let Err(e) = self.block(mp.abort_multipart(&self.key, &id)) {
                log::warn!("{}: cannot abort the upload: {e}", self.url);
            }
        }
        if let Err(e) = marker.delete() {
            log::debug!("{}: marker left: {e}", marker.url);
        }
        result.map(|_| ())
    }

    /// The marker object of upload `id` of this key.
    fn marker(&self, id: &str) -> Object {
        let tag = format!("{:x}", Sha256::digest(id.as_bytes()));
        let name = format!(
            ".{}.tet-upload-{}",
            self.file_name().unwrap_or("out"),
            &tag[..16]
        );
        self.sibling(&name)
    }

    /// The folder of keys this key is in (`None`: the store's root).
    fn folder(&self) -> Option<Key> {
        let k = self.key.as_ref();
        k.rsplit_once('/').map(|(p, _)| Key::from(p))
    }

    /// The object `name` in the same folder of keys.
    fn sibling(&self, name: &str) -> Object {
        let key = match self.folder() {
            Some(f) => Key::from(format!("{}/{name}", f.as_ref())),
            None => Key::from(name),
        };
        let base = self.url.rsplit_once('/').map_or("", |(b, _)| b);
        Object {
            url: format!("{base}/{name}"),
            store: self.store.clone(),
            multipart: self.multipart.clone(),
            key,
            shared: self.shared.clone(),
        }
    }

    /// Aborts the uploads to this key that earlier runs left (killed before they could abort:
    /// their marker objects are still there) and removes the markers. Returns how many.
    pub fn abort_stale_uploads(&self) -> Result<usize, StorageError> {
        let Some(mp) = self.multipart.clone() else {
            return Ok(0);
        };
        let prefix = format!(".{}.tet-upload-", self.file_name().unwrap_or("out"));
        let folder = self.folder();
        let listed = self.block(self.store.list_with_delimiter(folder.as_ref()))?;
        let mut aborted = 0;
        for m in listed.objects {
            let name = m.location.filename().unwrap_or_default();
            if !name.starts_with(&prefix) {
                continue;
            }
            let marker = self.sibling(name);
            let id = self.block(async { self.store.get(&marker.key).await?.bytes().await })?;
            let id = String::from_utf8_lossy(&id).into_owned();
            match self.block(mp.abort_multipart(&self.key, &id)) {
                Ok(()) => aborted += 1,
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e),
            }
            marker.delete()?;
            log::info!("{}: aborted a stale upload of an earlier run", self.url);
        }
        Ok(aborted)
    }

    /// Uploads the parts of `file` (`size` bytes), a few at a time, in order.
    fn put_parts(
        &self,
        mp: &Arc<dyn MultipartStore>,
        id: &str,
        file: &Path,
        size: u64,
        cancel: &Cancel,
    ) -> Result<Vec<PartId>, StorageError> {
        use std::os::unix::fs::FileExt as _;
        let local = |source| StorageError::Local {
            path: file.to_path_buf(),
            source,
        };
        let f = File::open(file).map_err(local)?;
        let part = PART_BYTES as u64;
        let count = size.div_ceil(part).max(1);
        let id = id.to_string();
        let failed_read = std::sync::Mutex::new(None);
        let parts = (0..count).map(|i| {
            let (f, id, failed_read) = (&f, &id, &failed_read);
            async move {
                let start = i * part;
                let len = usize::try_from(part.min(size - start)).unwrap_or(PART_BYTES);
                let mut buf = vec![0u8; len];
                if let Err(e) = f.read_exact_at(&mut buf, start) {
                    let msg = e.to_string();
                    if let Ok(mut g) = failed_read.lock() {
                        *g = Some(e);
                    }
                    return Err(object_store::Error::Generic {
                        store: "local",
                        source: msg.into(),
                    });
                }
                let idx = usize::try_from(i).unwrap_or(usize::MAX);
                mp.put_part(&self.key, id, idx, PutPayload::from(buf)).await
            }
        });
        let all = async {
            let mut s = futures_util::stream::iter(parts).buffered(PARTS_IN_FLIGHT);
            let mut ids = Vec::new();
            while let Some(p) = s.next().await {
                ids.push(p?);
            }
            Ok(ids)
        };
        let r = self.wait(all, cancel);
        if let Ok(Some(e)) = failed_read.into_inner() {
            return Err(local(e));
        }
        r
    }

    /// [`Object::block`], stopped as soon as `cancel` asks (checked every 100 ms), even while a
    /// request hangs.
    fn wait<T>(
        &self,
        f: impl std::future::Future<Output = object_store::Result<T>>,
        cancel: &Cancel,
    ) -> Result<T, StorageError> {
        let watch = async {
            loop {
                if let Some(sig) = cancel.requested() {
                    return sig;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        };
        let both = async {
            futures_util::pin_mut!(f);
            futures_util::pin_mut!(watch);
            match futures_util::future::select(f, watch).await {
                futures_util::future::Either::Left((r, _)) => Ok(r),
                futures_util::future::Either::Right((sig, _)) => Err(sig),
            }
        };
        let rt = runtime()?;
        let mark = self.shared.tally.mark();
        match rt.block_on(both) {
            Ok(r) => r.map_err(|e| self.error(e, mark)),
            Err(signal) => Err(StorageError::Interrupted {
                url: self.url.clone(),
                signal,
            }),
        }
    }

    /// Removes the object (a stale output).
    pub fn delete(&self) -> Result<(), StorageError> {
        self.block(self.store.delete(&self.key))
    }
}

#[cfg(test)]
impl Object {
    /// The object `key` of an in-memory store, as a URL parsed would be (tests of what reads
    /// objects, without a server).
    pub(crate) fn in_memory(store: Arc<object_store::memory::InMemory>, key: &str) -> Object {
        Object {
            url: format!("memory:///{key}"),
            store: store.clone(),
            multipart: Some(store),
            key: Key::from(key),
            shared: Arc::new(Shared::default()),
        }
    }

    /// Runs `f` on the storage runtime (tests that fill a store).
    pub(crate) fn run<T>(
        &self,
        f: impl std::future::Future<Output = object_store::Result<T>>,
    ) -> Result<T, StorageError> {
        self.block(f)
    }
}

/// The cause of a store error: by its variant (not found, access denied, precondition…), for
/// the others by what the last failed request of the operation met (`failure`: the HTTP status
/// and the service's error code, or the transport error), else the error's `text`. `keyless`:
/// the kind of a store without credentials, whose failure to reach the instance metadata
/// service (or GCS's metadata server) means there are none.
fn classify(
    e: &object_store::Error,
    failure: Option<&Failure>,
    keyless: Option<Store>,
    text: String,
) -> Cause {
    use object_store::Error as E;
    let answer = failure.and_then(|f| f.answer.clone()).unwrap_or_default();
    let code = answer.code.as_deref().unwrap_or_default();
    match e {
        E::NotFound { .. } if code == "NoSuchBucket" || code == "ContainerNotFound" => {
            return Cause::NoSuchBucket
        }
        E::NotFound { .. } => return Cause::NoSuchKey,
        E::PermissionDenied { .. } | E::Unauthenticated { .. } => {
            return Cause::AccessDenied(answer)
        }
        E::Precondition { .. } => return Cause::Changed,
        E::NotSupported { .. } | E::NotImplemented { .. } => return Cause::NotSupported(text),
        _ => {}
    }
    // The instance metadata service (a link-local address) failed: no credentials anywhere.
    let metadata_host = |h: &str| {
        h.starts_with("169.254.") || h.contains("fd00:ec2::") || h == "metadata.google.internal"
    };
    if let Some(store) = keyless.filter(|_| failure.is_some_and(|f| metadata_host(&f.host))) {
        return Cause::NoCredentials(store);
    }
    // A transport error ended it (the error holds one), else the last error answer does.
    let transport = transport_kind(e);
    let status = answer.status.filter(|_| transport.is_none());
    match (
        status,
        transport.or_else(|| failure.and_then(|f| f.transport)),
    ) {
        (Some(403) | Some(401), _) => Cause::AccessDenied(answer),
        (Some(429), _) => Cause::Throttled(answer),
        (Some(503), _) if code == "SlowDown" => Cause::Throttled(answer),
        (Some(s), _) if s >= 500 => Cause::ServerError(answer),
        (Some(404), _) if code == "NoSuchBucket" => Cause::NoSuchBucket,
        (Some(s), _) if s >= 400 => Cause::Refused(answer),
        (_, Some(HttpErrorKind::Connect)) => Cause::Unreachable(text),
        (_, Some(HttpErrorKind::Timeout)) => Cause::TimedOut(text),
        (_, Some(HttpErrorKind::Request | HttpErrorKind::Interrupted | HttpErrorKind::Decode)) => {
            Cause::ConnectionLost(text)
        }
        _ => Cause::Other(text),
    }
}

/// The kind of the transport error among the sources of `e`, if one is.
fn transport_kind(e: &object_store::Error) -> Option<HttpErrorKind> {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(x) = next {
        if let Some(h) = x.downcast_ref::<HttpError>() {
            return Some(h.kind());
        }
        next = x.source();
    }
    None
}

/// An error and its sources, on one line.
fn chain(e: &dyn std::error::Error) -> String {
    one_line(&crate::format::schema::error_chain(e))
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A download's folder: `.tet-spool-XXXXXX/NAME` under the spool directory, locked while it
/// lives, removed when dropped (and by [`clean_stale_spools`] when its owner died).
#[derive(Debug)]
pub struct Spool {
    dir: tempfile::TempDir,
    path: PathBuf,
    _lock: File,
}

impl Spool {
    fn create(root: &Path, name: &str) -> Result<Spool, StorageError> {
        let local = |path: &Path, source| StorageError::Local {
            path: path.to_path_buf(),
            source,
        };
        let dir = tempfile::Builder::new()
            .prefix(SPOOL_PREFIX)
            .tempdir_in(root)
            .map_err(|e| local(root, e))?;
        // The lock is taken before `.lock` appears: made and locked under another name, then
        // renamed (the lock stays with the open file). A `.lock` another process could open
        // before this one locks it would let that process's clean_stale_spools take it and
        // remove the folder in use; until the rename, the folder is young and has no `.lock`,
        // which clean_stale_spools leaves alone.
        let lock_path = dir.path().join(".lock");
        let new_path = dir.path().join(".lock-new");
        let lock = File::create(&new_path).map_err(|e| local(&new_path, e))?;
        lock.lock().map_err(|e| local(&new_path, e))?;
        std::fs::rename(&new_path, &lock_path).map_err(|e| local(&lock_path, e))?;
        let path = dir.path().join(name);
        Ok(Spool {
            dir,
            path,
            _lock: lock,
        })
    }

    /// A spool folder for a file this process writes (a staged output named `name`).
    pub fn for_output(root: &Path, name: &str) -> Result<Spool, StorageError> {
        Spool::create(root, name)
    }

    /// The downloaded object (a file) or prefix (a folder).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The spool folder itself.
    pub fn folder(&self) -> &Path {
        self.dir.path()
    }
}

/// Removes spool folders under `root` whose owner is gone (their `.lock` can be taken).
pub fn clean_stale_spools(root: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(root) else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.flatten() {
        if !e
            .file_name()
            .as_bytes()
            .starts_with(SPOOL_PREFIX.as_bytes())
        {
            continue;
        }
        let lock = e.path().join(".lock");
        let free = match File::open(&lock) {
            Ok(f) => f.try_lock().is_ok(),
            // A folder whose lock file was never made (killed at once), once a minute old.
            Err(_) => e
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t.elapsed().is_ok_and(|d| d > Duration::from_secs(60))),
        };
        if free && std::fs::remove_dir_all(e.path()).is_ok() {
            log::info!("removed {} (its owner is gone)", e.path().display());
            removed += 1;
        }
    }
    removed
}

/// Bytes free for an unprivileged writer on the file system holding `dir`.
pub fn free_space(dir: &Path) -> std::io::Result<u64> {
    let c = CString::new(dir.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    let mut s = std::mem::MaybeUninit::<libc::statvfs>::zeroed();
    // SAFETY: `c` is a NUL-terminated path and `s` points to writable memory of the type
    // statvfs fills; both outlive the call.
    let rc = unsafe { libc::statvfs(c.as_ptr(), s.as_mut_ptr()) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: statvfs returned 0, so it filled the struct (and zeroed memory is a valid one).
    let s = unsafe { s.assume_init() };
    Ok(s.f_bavail.saturating_mul(s.f_frsize))
}
