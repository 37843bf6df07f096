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

#[cfg(feature = "object-store")]
mod remote;
#[cfg(feature = "object-store")]
pub use remote::{
    clean_stale_spools, free_space, Listed, Object, ObjectInfo, Spool, UploadMetadata, SPOOL_PREFIX,
};

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
pub fn parse_option(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_ascii_lowercase(), v.to_string())),
        _ => Err(format!("--storage-option {s:?}: expected KEY=VALUE")),
    }
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
    /// The store answered with an error, or could not be reached.
    #[error("{url}: {reason}")]
    Remote {
        url: String,
        reason: String,
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

impl StorageError {
    /// The cause alone, for a line that names the URL already.
    pub fn cause(&self) -> String {
        match self {
            StorageError::Remote { reason, .. } => reason.clone(),
            StorageError::Interrupted { .. } => "interrupted".into(),
            other => other.to_string(),
        }
    }

    /// Whether the store said the object (or its bucket) does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, StorageError::Remote { reason, .. } if reason.starts_with("no such"))
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

    #[test]
    fn options() {
        assert_eq!(
            parse_option("AWS_REGION=eu-west-1").unwrap(),
            ("aws_region".into(), "eu-west-1".into())
        );
        assert_eq!(parse_option("k=a=b").unwrap().1, "a=b");
        assert!(parse_option("novalue").is_err());
        assert!(parse_option("=x").is_err());
    }
}
