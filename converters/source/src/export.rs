//! The exporter API: what a format crate that writes files (netCDF, Zarr, NPY) receives.
//!
//! It is the import model read in the other direction. The engine reads a `.tet` file, undoes
//! what it did to store the file's arrays (widening, complex numbers split in two, 0-d
//! variables stored as shape `[1]`) as far as the target can hold them ([`Capabilities`]), and
//! hands the exporter a [`Model`]: what the file held, not how `.tet` stores it. The exporter
//! pulls the values through a [`ChunkSource`], one chunk at a time in the array's element type,
//! and writes them at [`Output::staging`]; the engine then moves the result into place.
//!
//! An exporter never sees `.tet`: no dataset ids, footer keys or storage codecs, only the one
//! fact it may use to copy stored bytes verbatim ([`ChunkSource::zstd_frame`]).

use std::fmt;
use std::path::{Path, PathBuf};

use crate::{Attrs, ElementType, Fact, Role, TextVariable};

/// What a target format can hold, declared by its exporter. The engine raises the stored
/// arrays only as far as this says: a complex pair stays two real arrays, a bool stays `u8`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// The target has a boolean element type.
    pub has_bool: bool,
    /// The target has complex element types (`C64`, `C128`).
    pub has_complex: bool,
}

/// A format's writer, as the engine's driver registry holds it: its names, the extensions of its
/// outputs, what it can hold, and the writer itself. One value per target (NPY and NPZ are two).
pub trait Exporter: Sync {
    /// The name `tet export --to` takes first (`netcdf`, `zarr`, `npy`, `npz`).
    fn name(&self) -> &'static str;
    /// Other names `--to` accepts (`nc`, `netcdf4`).
    fn aliases(&self) -> &'static [&'static str] {
        &[]
    }
    /// Output extensions that name this target, lower case, without the dot.
    fn extensions(&self) -> &'static [&'static str];
    /// What the target can hold.
    fn capabilities(&self) -> Capabilities;
    /// Writes `model` at `out.staging`, pulling values from `chunks`.
    fn write(
        &self,
        model: &Model,
        chunks: &mut dyn ChunkSource,
        out: Output<'_>,
        compression: Compression,
    ) -> Result<Written>;
}

/// Everything an export writes: the arrays, string variables and file-level metadata of the
/// file, after the `--dataset` selection.
#[derive(Debug, Clone, Default)]
pub struct Model {
    /// The numeric arrays, in the order they were stored.
    pub arrays: Vec<Array>,
    /// File-level attributes in source order. An attribute of a group is named
    /// `group/path/name` (the group path, then the attribute's own name); see
    /// [`Model::attr_owner`] for where the group path ends.
    pub global_attrs: Attrs,
    /// The file's provenance as text lines, oldest first (one per conversion step).
    pub history: Vec<String>,
    /// The string variables, in the order they were stored.
    pub text_variables: Vec<TextEntry>,
    /// Only some arrays were selected: attributes of groups that hold none of them are left
    /// out.
    pub subset: bool,
    /// The file's facts ([`crate::Source::global_facts`], read back): e.g. a format's private
    /// records of its group attributes' types or of dimensions no variable uses.
    pub global_facts: Vec<Fact>,
}

impl Model {
    /// The group (`""` for the root) and the own name of the file-level attribute recorded
    /// under `key` (see [`Model::global_attrs`]): as its [`Fact::AttrGroup`] says when it has
    /// one (an attribute whose own name holds a `/`), else split at the key's last `/`.
    pub fn attr_owner<'k>(&self, key: &'k str) -> (&'k str, &'k str) {
        attr_owner(&self.global_facts, key)
    }
}

/// The group and own name of the file-level attribute `key`, given the file's `facts` (see
/// [`Model::attr_owner`]). A [`Fact::AttrGroup`] whose group is no prefix of the key (a
/// malformed record) is passed over.
pub fn attr_owner<'k>(facts: &[Fact], key: &'k str) -> (&'k str, &'k str) {
    let recorded = facts.iter().find_map(|f| match f {
        Fact::AttrGroup { attr, group } if attr == key => {
            if group.is_empty() {
                Some(("", key))
            } else {
                key.strip_prefix(group.as_str())
                    .and_then(|rest| rest.strip_prefix('/'))
                    .filter(|name| !name.is_empty())
                    .map(|name| (&key[..group.len()], name))
            }
        }
        _ => None,
    });
    recorded.unwrap_or_else(|| split_group(key))
}

/// One string variable of the file, as it was recorded.
#[derive(Debug, Clone, PartialEq)]
pub enum TextEntry {
    /// A well-formed string variable.
    Variable(TextVariable),
    /// A record that could not be read back (a field missing, a value count that does not
    /// match its shape): the exporter leaves it out and may say so.
    Malformed {
        /// Its name, when the record has one.
        name: Option<String>,
    },
}

impl TextEntry {
    /// The variable's name, `?` for a malformed record without one.
    pub fn name(&self) -> &str {
        match self {
            TextEntry::Variable(t) => &t.name,
            TextEntry::Malformed { name } => name.as_deref().unwrap_or("?"),
        }
    }
}

/// One numeric array as the file held it.
#[derive(Debug, Clone, PartialEq)]
pub struct Array {
    /// Name: the group path joined with `/`, then the array's own name; no leading slash.
    pub name: String,
    /// The element type [`ChunkSource::chunk`] delivers: the source's own type (i8, bool,
    /// complex and f16 included), except where the target lacks it (see [`Array::bool_as_u8`]
    /// and [`Capabilities`]) and for bfloat16, which comes as the f32 it was widened to.
    pub dtype: ElementType,
    /// Shape; empty for a 0-d (scalar) array.
    pub shape: Vec<u64>,
    /// The extent of each chunk the source delivers, per axis (each at least 1 and at most the
    /// axis length, unless the axis is empty); empty for a 0-d array. The last chunk along an
    /// axis may be shorter.
    pub chunk_shape: Vec<u64>,
    /// One dimension name per axis, when the file names them.
    pub dims: Option<Vec<String>>,
    /// Attributes, typed, in source order.
    pub attrs: Attrs,
    /// Data or coordinate variable.
    pub role: Role,
    /// The dimensions (names from [`Array::dims`]) that were unlimited (growable) in the
    /// source.
    pub unlimited_dims: Vec<String>,
    /// The array holds booleans, delivered as `u8` 0/1 because the target has no boolean type
    /// ([`Capabilities::has_bool`] is false).
    pub bool_as_u8: bool,
    /// The variable's recorded facts ([`crate::Variable::facts`], read back), for what only the
    /// target's own format reads (its [`Fact::Private`] records).
    pub facts: Vec<Fact>,
}

impl Array {
    /// The group path (empty for the root) and the array's own name.
    pub fn split_name(&self) -> (&str, &str) {
        split_group(&self.name)
    }

    /// Number of chunks along each axis (empty for a 0-d array).
    pub fn chunk_counts(&self) -> Vec<u64> {
        self.shape
            .iter()
            .zip(&self.chunk_shape)
            .map(|(&s, &c)| s.div_ceil(c.max(1)))
            .collect()
    }

    /// Every chunk's grid coordinates, in C order (the last axis fastest): the order in which
    /// the values are stored, which a [`ChunkSource`] serves best. A 0-d array has one chunk,
    /// `[]`; an array with an empty axis has none.
    pub fn chunk_coords(&self) -> impl Iterator<Item = Vec<u64>> {
        let counts = self.chunk_counts();
        let total = counts
            .iter()
            .try_fold(1u64, |acc, &n| acc.checked_mul(n))
            .unwrap_or(0);
        (0..total).map(move |mut linear| {
            let mut out = vec![0u64; counts.len()];
            for axis in (0..counts.len()).rev() {
                let n = counts[axis].max(1);
                out[axis] = linear % n;
                linear /= n;
            }
            out
        })
    }

    /// Number of bytes of the whole array, `None` on overflow.
    pub fn byte_len(&self) -> Option<u64> {
        self.shape
            .iter()
            .try_fold(self.dtype.size() as u64, |acc, &d| acc.checked_mul(d))
    }
}

/// (`a/b`, `c`) for `a/b/c`; (``, `c`) for `c`.
pub fn split_group(name: &str) -> (&str, &str) {
    match name.rfind('/') {
        Some(i) => (&name[..i], &name[i + 1..]),
        None => ("", name),
    }
}

/// One chunk of an array: where it lies and its values.
#[derive(Debug)]
pub struct Chunk<'a> {
    /// The first index of the chunk on each axis (empty for a 0-d array).
    pub start: Vec<u64>,
    /// The chunk's extent on each axis (empty for a 0-d array).
    pub count: Vec<u64>,
    /// The values in C order, little-endian, in the array's [`Array::dtype`]
    /// (`product(count) * dtype.size()` bytes).
    pub bytes: &'a [u8],
}

/// Where an exporter gets the values of the [`Model`]'s arrays. A chunk is borrowed from the
/// source until the next call; memory stays at a few chunks whatever the array size.
pub trait ChunkSource {
    /// The chunk at grid coordinates `coords` (see [`Array::chunk_coords`]) of array `array`
    /// (its index in [`Model::arrays`]).
    fn chunk(&mut self, array: usize, coords: &[u64]) -> Result<Chunk<'_>>;

    /// The chunk at `coords` of `array` as it is stored, when that is one standard zstd frame
    /// (declaring its content size) of exactly the values [`ChunkSource::chunk`] would deliver,
    /// checked against its recorded checksum: a target that stores chunks as zstd frames of
    /// the same bytes may copy it verbatim. `None` when the chunk is stored otherwise or its
    /// values are changed on the way out.
    fn zstd_frame(&mut self, array: usize, coords: &[u64]) -> Result<Option<&[u8]>>;
}

/// Compression of the exported chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    /// The target's default: NetCDF zlib level 4 with shuffle, Zarr zstd level 3 (reusing the
    /// `.tet` zstd frames), NPY/NPZ none.
    #[default]
    Default,
    /// No compression.
    None,
    /// zlib / deflate at a level 1..=9.
    Zlib(u32),
    /// zstd at a level 1..=22.
    Zstd(i32),
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Compression::Default => f.write_str("default"),
            Compression::None => f.write_str("none"),
            Compression::Zlib(l) => write!(f, "zlib:{l}"),
            Compression::Zstd(l) => write!(f, "zstd:{l}"),
        }
    }
}

impl std::str::FromStr for Compression {
    type Err = CompressionError;
    fn from_str(s: &str) -> Result<Self, CompressionError> {
        let (name, level) = match s.split_once(':') {
            Some((n, l)) => (n, Some(l)),
            None => (s, None),
        };
        let lvl = |lo: i64, hi: i64, def: i64| -> Result<i64, CompressionError> {
            match level {
                None => Ok(def),
                Some(l) => l
                    .parse::<i64>()
                    .ok()
                    .filter(|v| (lo..=hi).contains(v))
                    .ok_or_else(|| CompressionError::Level {
                        name: name.to_string(),
                        level: l.to_string(),
                        lo,
                        hi,
                    }),
            }
        };
        match name {
            "none" if level.is_none() => Ok(Compression::None),
            "zlib" | "deflate" => Ok(Compression::Zlib(lvl(1, 9, 4)? as u32)),
            "zstd" => Ok(Compression::Zstd(lvl(1, 22, 3)? as i32)),
            _ => Err(CompressionError::Unknown(s.to_string())),
        }
    }
}

/// A `--compress` value that names no [`Compression`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompressionError {
    /// The level is not a number in the codec's range.
    #[error("{name} level `{level}` is not in {lo}..={hi}")]
    Level {
        /// The codec's name as given.
        name: String,
        /// The level as given.
        level: String,
        /// The lowest level.
        lo: i64,
        /// The highest level.
        hi: i64,
    },
    /// Not a codec this knows (the value as given).
    #[error("unknown compression `{0}` (none, zlib[:1-9], zstd[:1-22])")]
    Unknown(String),
}

/// Where an export goes.
#[derive(Debug, Clone, Copy)]
pub struct Output<'a> {
    /// The path the user asked for: for messages and for what its name says (e.g. a single
    /// `.npy`). The exporter never writes it.
    pub path: &'a Path,
    /// Where the exporter writes its file or directory: a path that does not exist yet, in a
    /// directory private to this export (scratch files may go beside it). The engine makes it
    /// durable and renames it onto [`Output::path`] once the exporter succeeded, and removes
    /// it otherwise.
    pub staging: &'a Path,
}

/// One array as the exporter wrote it.
#[derive(Debug, Clone, PartialEq)]
pub struct WrittenArray {
    /// Its name in the output.
    pub name: String,
    /// The element type written.
    pub dtype: ElementType,
    /// The shape written.
    pub shape: Vec<u64>,
}

impl WrittenArray {
    /// `a` written as it is.
    pub fn of(a: &Array) -> Self {
        WrittenArray {
            name: a.name.clone(),
            dtype: a.dtype,
            shape: a.shape.clone(),
        }
    }
}

/// What an exporter reports.
#[derive(Debug, Clone, Default)]
pub struct Written {
    /// Every array written, in [`Model::arrays`] order.
    pub arrays: Vec<WrittenArray>,
    /// Chunks whose stored zstd frames were copied verbatim.
    pub reused_chunks: u64,
    /// What the target could not keep as it was, one line each.
    pub warnings: Vec<String>,
}

/// Errors of an export. Every message is one line naming what failed.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// A file system operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The path operated on.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The request cannot be honoured (unknown dataset, an option the target lacks, a name
    /// the target cannot hold, …).
    #[error("{0}")]
    Invalid(String),
    /// The data contradicts its own metadata (a value outside the recorded source type, a
    /// chunk that fails its checksum, …).
    #[error("{0}")]
    Data(String),
    /// Writing the output's archive failed (the NPZ zip container): the output's path, with the
    /// archive writer's error kept as the [`std::error::Error::source`] (its text ends the
    /// message too).
    #[error("{path}: {source}")]
    Archive {
        /// The output being written (the path the user asked for).
        path: PathBuf,
        /// The archive writer's error, kept.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// The target library failed: which one, what was being done, and its own error as the
    /// [`std::error::Error::source`] (its text ends the message too, since front ends print one
    /// line).
    #[error("{context}: {source}")]
    Library {
        /// The library.
        lib: crate::Lib,
        /// What was being done (`zarr `a/b``, `netCDF: define variable `x``).
        context: String,
        /// The library's error, kept.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// The container being exported failed (a `.tet` file that cannot be read, a chunk that
    /// fails its checksum); the container's own error is kept as the cause.
    #[error(transparent)]
    Container(Box<dyn std::error::Error + Send + Sync + 'static>),
    /// Stopped between two chunks because the front end asked (a signal: its number); the
    /// staged output is removed, nothing is left at the output.
    #[error("stopped by signal {0}")]
    Interrupted(i32),
}

/// A result with an [`ExportError`].
pub type Result<T, E = ExportError> = std::result::Result<T, E>;

/// Maps an I/O error on `path` to [`ExportError::Io`].
pub fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> ExportError + '_ {
    move |source| ExportError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// IEEE half → single, exactly (for a target without f16).
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h >> 15) << 31;
    let exp = u32::from((h >> 10) & 0x1f);
    let frac = u32::from(h & 0x3ff);
    let bits = match (exp, frac) {
        (0, 0) => sign,
        (0, f) => {
            // Subnormal: normalise.
            let mut e = 127 - 15 + 1;
            let mut f = f;
            while f & 0x400 == 0 {
                f <<= 1;
                e -= 1;
            }
            sign | (e << 23) | ((f & 0x3ff) << 13)
        }
        (0x1f, f) => sign | 0x7f80_0000 | (f << 13),
        (e, f) => sign | ((e + 127 - 15) << 23) | (f << 13),
    };
    f32::from_bits(bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_widens_exactly() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x0001), 2f32.powi(-24));
        assert!(f16_to_f32(0x7e00).is_nan());
        assert_eq!(f16_to_f32(0x7c00), f32::INFINITY);
        assert_eq!(f16_to_f32(0x7bff), 65504.0);
    }

    #[test]
    fn compression_parses() {
        assert_eq!("zlib".parse(), Ok(Compression::Zlib(4)));
        assert_eq!("zstd:7".parse(), Ok(Compression::Zstd(7)));
        assert_eq!("none".parse(), Ok(Compression::None));
        assert_eq!(
            "zlib:0".parse::<Compression>(),
            Err(CompressionError::Level {
                name: "zlib".into(),
                level: "0".into(),
                lo: 1,
                hi: 9
            })
        );
        assert_eq!(
            "lz4".parse::<Compression>(),
            Err(CompressionError::Unknown("lz4".into()))
        );
    }

    fn array(shape: Vec<u64>, chunk_shape: Vec<u64>) -> Array {
        Array {
            name: "g/x".into(),
            dtype: ElementType::F32,
            shape,
            chunk_shape,
            dims: None,
            attrs: Vec::new(),
            role: Role::Data,
            unlimited_dims: Vec::new(),
            bool_as_u8: false,
            facts: Vec::new(),
        }
    }

    #[test]
    fn chunk_grid_in_c_order() {
        let a = array(vec![5, 3], vec![2, 2]);
        assert_eq!(a.chunk_counts(), vec![3, 2]);
        let all: Vec<Vec<u64>> = a.chunk_coords().collect();
        assert_eq!(all.len(), 6);
        assert_eq!(all[1], vec![0, 1]);
        assert_eq!(all[2], vec![1, 0]);
        assert_eq!(a.split_name(), ("g", "x"));
        let scalar = array(Vec::new(), Vec::new());
        assert_eq!(
            scalar.chunk_coords().collect::<Vec<_>>(),
            vec![Vec::<u64>::new()]
        );
        assert_eq!(scalar.byte_len(), Some(4));
        let empty = array(vec![0, 4], vec![1, 4]);
        assert_eq!(empty.chunk_coords().count(), 0);
    }

    #[test]
    fn attr_owner_follows_the_recorded_group() {
        let facts: Vec<Fact> = [("", "a/b"), ("g", "c/d"), ("g/h", "x/y/z")]
            .into_iter()
            .filter_map(|(g, n)| Fact::attr_group(g, n))
            .chain([
                // Malformed: the group is no prefix of the key, or leaves no name.
                Fact::AttrGroup {
                    attr: "p/q".into(),
                    group: "z".into(),
                },
                Fact::AttrGroup {
                    attr: "m/".into(),
                    group: "m".into(),
                },
            ])
            .collect();
        let model = Model {
            global_facts: facts,
            ..Model::default()
        };
        assert_eq!(model.attr_owner("a/b"), ("", "a/b"));
        assert_eq!(model.attr_owner("g/c/d"), ("g", "c/d"));
        assert_eq!(model.attr_owner("g/h/x/y/z"), ("g/h", "x/y/z"));
        // No fact: split at the last `/`.
        assert_eq!(model.attr_owner("g/units"), ("g", "units"));
        assert_eq!(model.attr_owner("title"), ("", "title"));
        assert_eq!(model.attr_owner("p/q"), ("p", "q"));
        assert_eq!(model.attr_owner("m/"), ("m", ""));
        assert_eq!(Model::default().attr_owner("a/b"), ("a", "b"));
    }

    #[test]
    fn archive_and_io_errors_keep_their_cause_on_one_line() {
        use std::error::Error as _;
        let cause = std::io::Error::new(std::io::ErrorKind::StorageFull, "disk full");
        let e = ExportError::Archive {
            path: PathBuf::from("/out/a.npz"),
            source: Box::new(cause),
        };
        assert_eq!(e.to_string(), "/out/a.npz: disk full");
        let kept = e.source().and_then(|s| s.downcast_ref::<std::io::Error>());
        assert_eq!(
            kept.map(std::io::Error::kind),
            Some(std::io::ErrorKind::StorageFull)
        );
        let e = io_err(Path::new("/out"))(std::io::Error::other("no"));
        assert_eq!(e.to_string(), "/out: no");
        assert!(e.source().is_some_and(|s| s.is::<std::io::Error>()));
    }
}
