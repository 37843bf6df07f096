//! A Zarr store under an object prefix, as a zarrs storage: every key a ranged GET (or a HEAD,
//! or a delimited listing) of the object under the prefix, through the same [`Object`] (its
//! retries counted, its errors one line naming the URL and the cause, kept as the `source()` of
//! zarrs' error). The Zarr importer opens it with [`tet_zarr::open_storage`]: nothing is
//! downloaded into a spool.
//!
//! The `zarrs_object_store` crate adapts an `object_store` store the same way; it is not used so
//! that the reads go through [`Object`] (the retry count of the ledger, the error
//! classification, the secrets kept out of messages) rather than around it.

use std::sync::Arc;

use object_store::GetRange;
use zarrs_storage::byte_range::{ByteRange, ByteRangeIterator};
use zarrs_storage::{
    Bytes, ListableStorageTraits, MaybeBytes, MaybeBytesIterator, ReadableListableStorage,
    ReadableStorageTraits, StorageError as ZarrsError, StoreKey, StoreKeys, StoreKeysPrefixes,
    StorePrefix,
};

use super::{Object, StorageError};

/// The objects under a prefix as a read-only, listable zarrs storage.
#[derive(Debug, Clone)]
pub struct ObjectStorage {
    root: Object,
}

impl ObjectStorage {
    /// The store whose root is the prefix `root` (a URL ending in `/` or not).
    pub fn new(root: Object) -> ObjectStorage {
        ObjectStorage { root }
    }

    /// As the storage the Zarr importer takes.
    pub fn shared(self) -> ReadableListableStorage {
        Arc::new(self)
    }

    fn object(&self, key: &str) -> Object {
        if key.is_empty() {
            self.root.clone()
        } else {
            self.root.child(key)
        }
    }
}

/// Our error, kept whole inside zarrs' (as the I/O error's inner error).
fn kept(e: StorageError) -> ZarrsError {
    ZarrsError::from(std::io::Error::other(e))
}

/// The `object_store` range of a zarrs byte range (`Some(None)`: the whole value), `None` for a
/// range of no bytes (which `object_store` refuses). A range past the end of the value reads to
/// its end (the importer's guarded store refuses those before they get here).
fn range_of(r: ByteRange) -> Option<Option<GetRange>> {
    match r {
        ByteRange::FromStart(0, None) => Some(None),
        ByteRange::FromStart(offset, None) => Some(Some(GetRange::Offset(offset))),
        ByteRange::FromStart(_, Some(0)) | ByteRange::Suffix(0) => None,
        ByteRange::FromStart(offset, Some(len)) => {
            Some(Some(GetRange::Bounded(offset..offset.saturating_add(len))))
        }
        ByteRange::Suffix(len) => Some(Some(GetRange::Suffix(len))),
    }
}

impl ReadableStorageTraits for ObjectStorage {
    fn get(&self, key: &StoreKey) -> Result<MaybeBytes, ZarrsError> {
        self.object(key.as_str()).get_maybe(None).map_err(kept)
    }

    fn get_partial_many<'a>(
        &'a self,
        key: &StoreKey,
        byte_ranges: ByteRangeIterator<'a>,
    ) -> Result<MaybeBytesIterator<'a>, ZarrsError> {
        let object = self.object(key.as_str());
        let mut out: Vec<Result<Bytes, ZarrsError>> = Vec::new();
        for r in byte_ranges {
            let Some(range) = range_of(r) else {
                out.push(Ok(Bytes::new()));
                continue;
            };
            match object.get_maybe(range).map_err(kept)? {
                Some(bytes) => out.push(Ok(bytes)),
                None => return Ok(None),
            }
        }
        Ok(Some(Box::new(out.into_iter())))
    }

    fn size_key(&self, key: &StoreKey) -> Result<Option<u64>, ZarrsError> {
        self.object(key.as_str()).size_maybe().map_err(kept)
    }

    fn supports_get_partial(&self) -> bool {
        true
    }
}

/// Store keys of names relative to the root (`prefix` + each of `names`).
fn keys(prefix: &str, names: &[String]) -> Result<StoreKeys, ZarrsError> {
    names
        .iter()
        .map(|n| StoreKey::new(format!("{prefix}{n}")).map_err(ZarrsError::from))
        .collect()
}

impl ListableStorageTraits for ObjectStorage {
    fn list(&self) -> Result<StoreKeys, ZarrsError> {
        self.list_prefix(&StorePrefix::root())
    }

    fn list_prefix(&self, prefix: &StorePrefix) -> Result<StoreKeys, ZarrsError> {
        let listed = self.object(prefix.as_str()).list().map_err(kept)?;
        let names: Vec<String> = listed.into_iter().map(|l| l.relative).collect();
        keys(prefix.as_str(), &names)
    }

    fn list_dir(&self, prefix: &StorePrefix) -> Result<StoreKeysPrefixes, ZarrsError> {
        let (objects, prefixes) = self.object(prefix.as_str()).list_dir().map_err(kept)?;
        let prefixes = prefixes
            .iter()
            .map(|p| StorePrefix::new(format!("{}{p}/", prefix.as_str())).map_err(ZarrsError::from))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(StoreKeysPrefixes::new(
            keys(prefix.as_str(), &objects)?,
            prefixes,
        ))
    }

    fn size_prefix(&self, prefix: &StorePrefix) -> Result<u64, ZarrsError> {
        let listed = self.object(prefix.as_str()).list().map_err(kept)?;
        Ok(listed.iter().map(|l| l.info.size).sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        assert_eq!(range_of(ByteRange::FromStart(0, None)), Some(None));
        assert_eq!(
            range_of(ByteRange::FromStart(5, None)),
            Some(Some(GetRange::Offset(5)))
        );
        assert_eq!(
            range_of(ByteRange::FromStart(5, Some(3))),
            Some(Some(GetRange::Bounded(5..8)))
        );
        assert_eq!(
            range_of(ByteRange::Suffix(16)),
            Some(Some(GetRange::Suffix(16)))
        );
        assert_eq!(range_of(ByteRange::FromStart(5, Some(0))), None);
        assert_eq!(
            range_of(ByteRange::FromStart(u64::MAX, Some(2))),
            Some(Some(GetRange::Bounded(u64::MAX..u64::MAX)))
        );
    }
}
