//! Object storage: `s3://`, `gs://`, `az://` and `http(s)://` URLs as conversion inputs and
//! outputs, beside local paths.
//!
//! This module only knows objects: what a URL names ([`is_url`]), how to stat, list, read a
//! range of, download and upload one (`remote`, behind the cargo feature `object-store`, over
//! the `object_store` crate and a small tokio runtime of its own, so that the rest of the engine
//! stays synchronous). What a conversion does with them — spool the input, convert, upload the
//! output only once it is whole and checked — is the batch layer's (`batch::remote`).
//!
//! Credentials, region and endpoint come from the environment variables of each ecosystem
//! (`AWS_*`, `GOOGLE_*`, `AZURE_*`) and from `--storage-option KEY=VALUE` pairs ([`Options`]);
//! none of them is ever part of an error message, a ledger row or a history row: errors name the
//! URL (which holds no secret) and the cause.

use std::path::{Path, PathBuf};

mod open;
#[cfg(feature = "object-store")]
mod remote;
#[cfg(feature = "object-store")]
mod zarr;
pub use open::{digest_path, open_tet, other_format, FetchError, OpenTetError, OpenedTet};
#[cfg(feature = "object-store")]
pub use remote::ranged::RangedObject;
#[cfg(feature = "object-store")]
pub use remote::{
    clean_stale_spools, free_space, Listed, Object, ObjectInfo, Spool, UploadMetadata, SPOOL_PREFIX,
};
#[cfg(feature = "object-store")]
pub use zarr::ObjectStorage;

/// The URL schemes taken wherever a path is.
pub const SCHEMES: &[&str] = &[
    "s3://", "s3a://", "gs://", "az://", "azure://", "abfs://", "abfss://", "http://", "https://",
];

/// `--storage-option KEY=VALUE` pairs, in the order given (later ones win).
pub type Options = Vec<(String, String)>;

/// Whether `p` is an object URL rather than a local path.
pub fn is_url(p: &Path) -> bool {
    p.to_str()
        .is_some_and(|s| SCHEMES.iter().any(|scheme| s.starts_with(scheme)))
}

/// Parses `KEY=VALUE` (a `--storage-option`); the key is lower-cased as `object_store` expects.
pub fn parse_option(s: &str) -> Result<(String, String), BadOption> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_ascii_lowercase(), v.to_string())),
        Some(_) => Err(BadOption::EmptyKey),
        None => Err(BadOption::NoEquals {
            chars: s.chars().count(),
        }),
    }
}

/// A `--storage-option` that is not `KEY=VALUE`. The argument itself is never shown: a
/// mistyped one may be a secret (`secret_access_key:…`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadOption {
    /// No `=` in the argument.
    #[error("--storage-option: expected KEY=VALUE, got {chars} characters without `=` (not shown: it may hold a secret)")]
    NoEquals {
        /// The argument's length in characters.
        chars: usize,
    },
    /// Nothing before the `=`.
    #[error("--storage-option: expected KEY=VALUE, the key is empty")]
    EmptyKey,
}

/// What the history row of a conversion names as its input when the converted file is a local
/// copy of an object: the URL, and params describing the object (its stamp, `input_object`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Origin {
    pub name: String,
    pub params: std::collections::BTreeMap<String, String>,
}

/// The history param holding an object input's stamp (ETag, size, last-modified).
pub const OBJECT_STAMP_KEY: &str = "input_object";

/// An object storage failure: the URL and the cause, on one line, never a credential.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The store answered with an error or could not be reached, or the URL cannot name an
    /// object; `retries` transient failures of the request were retried before it gave up.
    #[error("{url}: {cause}{}", after_retries(*retries))]
    Remote {
        url: String,
        cause: Cause,
        retries: u64,
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// A local file of the transfer (the spool, the staged output) failed.
    #[error("{}: {source}", path.display())]
    Local {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The transfer was stopped by this signal (a cancelled run).
    #[error("{url}: interrupted")]
    Interrupted { url: String, signal: i32 },
    /// This build has no object storage.
    #[error("{url}: this build reads no object storage (cargo feature `object-store`)")]
    NotBuilt { url: String },
}

fn after_retries(n: u64) -> String {
    match n {
        0 => String::new(),
        1 => ", after 1 retry".into(),
        n => format!(", after {n} retries"),
    }
}

/// Why an object could not be read or written, as a few words (the `Display`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    /// The bucket (container) does not exist.
    NoSuchBucket,
    /// The bucket exists, the key does not.
    NoSuchKey,
    /// The store refused the credentials or the request (HTTP 401, 403).
    AccessDenied(Answer),
    /// No credentials were configured for this kind of store and none could be found (none
    /// of the environment variables and options its client reads, and no instance metadata
    /// service answered). The line names the variables to set, never a value.
    NoCredentials(Store),
    /// The store asked to slow down (HTTP 429, S3 `SlowDown`) until the retries ran out.
    Throttled(Answer),
    /// The store failed (HTTP 5xx) until the retries ran out.
    ServerError(Answer),
    /// The store refused the request otherwise (another 4xx).
    Refused(Answer),
    /// No connection to the endpoint could be made.
    Unreachable(String),
    /// The connection broke during the request or its answer.
    ConnectionLost(String),
    /// The request took longer than the client's timeout.
    TimedOut(String),
    /// The object was replaced during the transfer (its ETag no longer matched).
    Changed,
    /// A download ended early.
    Truncated { written: u64, size: u64 },
    /// The spool folder has too little room for the download.
    NoRoom { dir: PathBuf, free: u64, need: u64 },
    /// The text is not a URL of an object store this build reads.
    NotAnObjectUrl(String),
    /// A `--storage-option` this kind of store does not take, and the closest names it takes.
    UnknownOption { key: String, closest: Vec<String> },
    /// A numeric `--storage-option` (`max_retries`, `retry_timeout`) that is not a number.
    NotANumber(String),
    /// Writing to a kind of URL that takes no uploads (plain HTTP).
    ReadOnly,
    /// The store does not do this operation.
    NotSupported(String),
    /// The staged output failed its check before the upload (its footer digest).
    BadStagedOutput(String),
    /// Anything else the store said, as its text (secrets removed).
    Other(String),
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cause::NoSuchBucket => f.write_str("no such bucket"),
            Cause::NoSuchKey => f.write_str("no such key"),
            Cause::AccessDenied(a) => write!(f, "access denied ({a})"),
            Cause::NoCredentials(store) => f.write_str(store.no_credentials()),
            Cause::Throttled(a) => write!(f, "throttled ({a})"),
            Cause::ServerError(a) => write!(f, "server error ({a})"),
            Cause::Refused(a) => write!(f, "refused ({a})"),
            Cause::Unreachable(d) => write!(f, "endpoint unreachable ({d})"),
            Cause::ConnectionLost(d) => write!(f, "connection lost ({d})"),
            Cause::TimedOut(d) => write!(f, "timed out ({d})"),
            Cause::Changed => f.write_str("the object changed during the transfer"),
            Cause::Truncated { written, size } => {
                write!(f, "the download ended after {written} of {size} bytes")
            }
            Cause::NoRoom { dir, free, need } => write!(
                f,
                "the spool folder {} has {free} bytes free, the input needs {need} (+64 MiB)",
                dir.display()
            ),
            Cause::NotAnObjectUrl(d) => write!(f, "not an object URL: {d}"),
            Cause::UnknownOption { key, closest } => write!(
                f,
                "unknown storage option {key} for this kind of URL {}",
                crate::select::closest_note(closest)
            ),
            Cause::NotANumber(k) => write!(f, "storage option {k}: not a number"),
            Cause::ReadOnly => f.write_str("this kind of URL is read-only here (no uploads)"),
            Cause::NotSupported(d) => write!(f, "not supported by this store ({d})"),
            Cause::BadStagedOutput(d) => write!(f, "the staged output failed its check: {d}"),
            Cause::Other(d) => f.write_str(d),
        }
    }
}

/// The kinds of store that take credentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Store {
    /// `s3://`: Amazon S3 and S3-compatible servers.
    S3,
    /// `gs://`: Google Cloud Storage.
    Gcs,
    /// `az://`, `azure://`, `abfs://`: Azure Blob Storage.
    Azure,
}

impl Store {
    /// What a store without credentials says: the environment variables (and options) the
    /// `object_store` client of this kind of store reads, and how to read a public bucket.
    pub fn no_credentials(self) -> &'static str {
        match self {
            Store::S3 => {
                "no credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set (nor \
                 --storage-option access_key_id and secret_access_key, a web identity or \
                 container credentials) and no instance metadata service gave any; a public \
                 bucket reads with --storage-option skip_signature=true"
            }
            Store::Gcs => {
                "no credentials: GOOGLE_SERVICE_ACCOUNT (a service account file), \
                 GOOGLE_SERVICE_ACCOUNT_KEY (its JSON) and GOOGLE_APPLICATION_CREDENTIALS are not \
                 set (nor --storage-option google_service_account or \
                 google_service_account_key), gcloud's application default credentials were not \
                 found and no metadata server gave any; a public bucket reads with \
                 --storage-option skip_signature=true"
            }
            Store::Azure => {
                "no credentials: AZURE_STORAGE_ACCOUNT_NAME with AZURE_STORAGE_ACCOUNT_KEY, \
                 AZURE_STORAGE_SAS_KEY, AZURE_STORAGE_TOKEN, AZURE_CLIENT_ID with \
                 AZURE_CLIENT_SECRET and AZURE_TENANT_ID, or AZURE_FEDERATED_TOKEN_FILE are not \
                 set (nor the same --storage-option keys in lower case) and \
                 AZURE_USE_AZURE_CLI is not true, and no managed identity endpoint gave any; a \
                 public container reads with --storage-option skip_signature=true"
            }
        }
    }
}

/// What an error answer of a store said: its HTTP status and the service's error code and
/// message (S3 and Azure `<Code>`/`<Message>`, GCS `error.message`), when there were any.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Answer {
    pub status: Option<u16>,
    pub code: Option<String>,
    pub message: Option<String>,
}

impl std::fmt::Display for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.code, &self.message, self.status) {
            (Some(c), Some(m), _) => write!(f, "{c}: {m}"),
            (Some(c), None, _) => f.write_str(c),
            (None, Some(m), Some(s)) => write!(f, "HTTP {s}: {m}"),
            (None, Some(m), None) => f.write_str(m),
            (None, None, Some(s)) => write!(f, "HTTP {s}"),
            (None, None, None) => f.write_str("no answer"),
        }
    }
}

impl StorageError {
    /// The cause alone (with the retries), for a line that names the URL already.
    pub fn cause(&self) -> String {
        match self {
            StorageError::Remote { cause, retries, .. } => {
                format!("{cause}{}", after_retries(*retries))
            }
            StorageError::Interrupted { .. } => "interrupted".into(),
            other => other.to_string(),
        }
    }

    /// Whether the store said the object (or its bucket) does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(
            self,
            StorageError::Remote {
                cause: Cause::NoSuchKey | Cause::NoSuchBucket,
                ..
            }
        )
    }

    /// A failure that is the URL's or the options' (no request was made).
    #[cfg(feature = "object-store")]
    pub fn of_url(url: &str, cause: Cause) -> StorageError {
        StorageError::Remote {
            url: url.to_string(),
            cause,
            retries: 0,
            source: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_paths() {
        for u in [
            "s3://b/k.nc",
            "gs://b/x/",
            "az://c/k",
            "https://h/x.npy",
            "http://h:1/x",
        ] {
            assert!(is_url(Path::new(u)), "{u}");
        }
        for p in ["x.nc", "/data/s3/x.nc", "s3:/x", "./s3://x"] {
            assert!(!is_url(Path::new(p)), "{p}");
        }
    }

    /// Each kind of store names the variables its client reads, and no value of them.
    #[test]
    fn no_credentials_names_the_variables_of_each_store() {
        let line = |store| {
            StorageError::Remote {
                url: "x://b/k".into(),
                cause: Cause::NoCredentials(store),
                retries: 0,
                source: None,
            }
            .to_string()
        };
        for (store, names) in [
            (
                Store::S3,
                &["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"][..],
            ),
            (
                Store::Gcs,
                &[
                    "GOOGLE_SERVICE_ACCOUNT ",
                    "GOOGLE_SERVICE_ACCOUNT_KEY",
                    "GOOGLE_APPLICATION_CREDENTIALS",
                ][..],
            ),
            (
                Store::Azure,
                &[
                    "AZURE_STORAGE_ACCOUNT_NAME",
                    "AZURE_STORAGE_ACCOUNT_KEY",
                    "AZURE_STORAGE_SAS_KEY",
                    "AZURE_CLIENT_SECRET",
                    "AZURE_FEDERATED_TOKEN_FILE",
                ][..],
            ),
        ] {
            let text = line(store);
            assert!(text.starts_with("x://b/k: no credentials: "), "{text}");
            assert_eq!(text.lines().count(), 1);
            for n in names {
                assert!(text.contains(n), "{store:?}: {n} in {text}");
            }
            // The other stores' variables are not named.
            let others = ["AWS_", "GOOGLE_", "AZURE_"];
            let own = match store {
                Store::S3 => "AWS_",
                Store::Gcs => "GOOGLE_",
                Store::Azure => "AZURE_",
            };
            for o in others.iter().filter(|o| **o != own) {
                assert!(!text.contains(o), "{store:?}: {text}");
            }
            assert!(text.contains("skip_signature=true"));
        }
    }

    #[test]
    fn options() {
        assert_eq!(
            parse_option("AWS_REGION=eu-west-1").unwrap(),
            ("aws_region".into(), "eu-west-1".into())
        );
        assert_eq!(parse_option("k=a=b").unwrap().1, "a=b");
        let e = parse_option("secret_access_key:SEKRIT").unwrap_err();
        assert_eq!(e, BadOption::NoEquals { chars: 24 });
        assert!(!e.to_string().contains("SEKRIT"), "{e}");
        assert_eq!(parse_option("=x"), Err(BadOption::EmptyKey));
    }
}
