//! A Zarr hierarchy in any listable zarrs storage (an object store prefix through the caller's
//! adapter, a store in memory): its metadata read by key, its groups walked by listing the
//! prefixes under them, its arrays read through the same storage. A directory store is read by
//! [`crate::open_store`], which walks the file system itself (symbolic link loops, names that
//! are not UTF-8).

use std::path::Path;
use std::sync::Arc;

use tet_source::{Lib, OpenOptions, Part, Result, SourceError};
use zarrs::storage::{
    ReadableListableStorage, ReadableListableStorageTraits, StoreKey, StorePrefix,
};

use crate::{key_of, read_node, Backing, Node, NodeMeta, ZarrSource, MAX_DEPTH};

/// Where the metadata files of one node are: `size` of `file` (`None`: there is none) and its
/// bytes. `rel` is the node's path from the root (`""` for the root).
pub(crate) trait NodeDir {
    fn size(&self, rel: &str, file: &str) -> Result<Option<u64>>;
    fn read(&self, rel: &str, file: &str) -> Result<Vec<u8>>;
}

/// A node's directory on disk.
impl NodeDir for Path {
    fn size(&self, _rel: &str, file: &str) -> Result<Option<u64>> {
        match std::fs::metadata(self.join(file)) {
            Ok(m) if m.is_file() => Ok(Some(m.len())),
            Ok(_) => Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(SourceError::Io(e)),
        }
    }

    fn read(&self, _rel: &str, file: &str) -> Result<Vec<u8>> {
        Ok(std::fs::read(self.join(file))?)
    }
}

impl NodeDir for std::path::PathBuf {
    fn size(&self, rel: &str, file: &str) -> Result<Option<u64>> {
        self.as_path().size(rel, file)
    }

    fn read(&self, rel: &str, file: &str) -> Result<Vec<u8>> {
        self.as_path().read(rel, file)
    }
}

/// Every node of a storage: its files are keys `rel/file`.
struct InStorage<'a>(&'a dyn ReadableListableStorageTraits);

fn store_error(key: &str, e: impl std::error::Error + Send + Sync + 'static) -> SourceError {
    SourceError::library(Lib::Zarrs, key.to_string(), e)
}

impl NodeDir for InStorage<'_> {
    fn size(&self, rel: &str, file: &str) -> Result<Option<u64>> {
        let key = key_of(rel, file);
        let k = StoreKey::new(key.as_str()).map_err(|e| store_error(&key, e))?;
        self.0.size_key(&k).map_err(|e| store_error(&key, e))
    }

    fn read(&self, rel: &str, file: &str) -> Result<Vec<u8>> {
        let key = key_of(rel, file);
        let k = StoreKey::new(key.as_str()).map_err(|e| store_error(&key, e))?;
        match self.0.get(&k).map_err(|e| store_error(&key, e))? {
            Some(bytes) => Ok(bytes.to_vec()),
            None => Err(SourceError::Io(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{key}: gone while the store was read"),
            ))),
        }
    }
}

/// Opens the Zarr hierarchy at the root of `storage`; `name` is the store's name (`x.zarr`),
/// whose stem names a root array.
pub fn open_storage(
    storage: ReadableListableStorage,
    name: &str,
    options: &OpenOptions,
) -> Result<ZarrSource> {
    crate::register();
    let files = InStorage(storage.as_ref());
    let root = read_node(&files, "")?.ok_or_else(|| {
        Part::Header.malformed("no zarr.json, .zgroup or .zarray at the top: not a Zarr store")
    })?;
    let root_is_group = matches!(root, NodeMeta::Group(_));
    let mut nodes = vec![Node {
        path: String::new(),
        meta: root,
    }];
    if root_is_group {
        walk(storage.as_ref(), "", 0, &mut nodes)?;
    }
    nodes.sort_by(|a, b| a.path.cmp(&b.path));
    let stem = Path::new(name.trim_end_matches('/'))
        .file_stem()
        .and_then(|s| s.to_str())
        .filter(|s| !s.is_empty())
        .unwrap_or("data")
        .to_string();
    let fs: Arc<Backing> = storage;
    crate::from_nodes(nodes, Vec::new(), &fs, stem, options)
}

/// Adds the nodes below group `rel` (at nesting `depth`), depth first: each prefix under it
/// with metadata is a node (one without is not part of the hierarchy, as on disk).
fn walk(
    store: &dyn ReadableListableStorageTraits,
    rel: &str,
    depth: usize,
    nodes: &mut Vec<Node>,
) -> Result<()> {
    if depth > MAX_DEPTH {
        return Err(Part::Metadata.malformed(format!(
            "group '{rel}' is nested deeper than {MAX_DEPTH} levels"
        )));
    }
    let prefix = if rel.is_empty() {
        StorePrefix::root()
    } else {
        StorePrefix::new(format!("{rel}/")).map_err(|e| store_error(rel, e))?
    };
    let listed = store.list_dir(&prefix).map_err(|e| store_error(rel, e))?;
    let mut children: Vec<&str> = listed
        .prefixes()
        .iter()
        .filter_map(|p| p.as_str().strip_prefix(prefix.as_str())?.strip_suffix('/'))
        .filter(|name| !name.is_empty() && !name.contains('/'))
        .collect();
    children.sort_unstable();
    for name in children {
        // Zarr node names: not only dots, not the reserved `__` prefix (zarrs' rule).
        if name.starts_with("__") || name.chars().all(|c| c == '.') {
            continue;
        }
        let child_rel = key_of(rel, name);
        match read_node(&InStorage(store), &child_rel)? {
            None => {}
            Some(NodeMeta::Group(attrs)) => {
                nodes.push(Node {
                    path: child_rel.clone(),
                    meta: NodeMeta::Group(attrs),
                });
                walk(store, &child_rel, depth + 1, nodes)?;
            }
            Some(meta) => nodes.push(Node {
                path: child_rel,
                meta,
            }),
        }
    }
    Ok(())
}
