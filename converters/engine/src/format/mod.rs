//! The `.tet` v1 container: constants, element types, chunk-grid arithmetic, and the reader,
//! streaming writer, footer model and verifier built on them.
//!
//! Layout (see `docs/FORMAT.md`): a 32-byte superblock, the dataset directory, the `TIDX` chunk
//! index at `align8(40 + dataset_blob_len)`, the chunk payloads (in index order, each raw one at a
//! multiple of its element size: [`payload_alignment`]) and, when flag bit 0 is set, the `THST`
//! footer at the end of the file. All integers are little-endian.

pub mod budget;
pub mod codec;
pub mod footer;
pub mod integrity;
pub mod open_checks;
pub mod reader;
pub mod schema;
pub mod verify;
pub mod writer;

use std::fmt;

pub use budget::{pool_limit, MemoryBudget, DEFAULT_MEMORY_BUDGET};
pub use footer::{DatasetMeta, Footer, HistoryRow};
pub use reader::{ChunkEntry, DatasetInfo, TetFile};
pub use verify::{deep_verify, DeepVerified, DeepVerifyError};
pub use writer::{
    ChunkDigest, ChunkPayload, DatasetSpec, PayloadBytes, TetWriter, WriterOptions, TEMP_SUFFIX,
};

/// `TETR`
pub const MAGIC: [u8; 4] = *b"TETR";
/// `TIDX`
pub const INDEX_MAGIC: [u8; 4] = *b"TIDX";
/// `THST`
pub const FOOTER_MAGIC: [u8; 4] = *b"THST";
pub const LAYOUT_VERSION: u32 = 1;
pub const INDEX_VERSION: u32 = 1;
pub const FOOTER_VERSION: u32 = 1;
pub const SUPERBLOCK_LEN: u64 = 32;
pub const INDEX_HEADER_LEN: u64 = 32;
pub const INDEX_ROW_LEN: u64 = 104;
/// Footer trailer: history_json_len (u64) + history_version (u32) + magic.
pub const FOOTER_TRAILER_LEN: u64 = 16;
/// Superblock flag: a THST footer ends the file.
pub const FLAG_FOOTER: u32 = 1;
/// Highest rank v1 allows.
pub const MAX_RANK: usize = 8;

/// Upper bound of a zstd frame's expansion: an RLE block of 4 bytes yields at most 128 KiB.
pub const ZSTD_MAX_RATIO: u64 = 32 * 1024;

/// The most bytes a zstd frame of `stored` bytes can decode to ([`ZSTD_MAX_RATIO`] plus one
/// block's slack): refusing larger claims keeps every allocation proportional to the file. The
/// reader, the verifier and the exporter all apply this one bound.
pub fn zstd_max_raw_len(stored: u64) -> u64 {
    stored
        .saturating_mul(ZSTD_MAX_RATIO)
        .saturating_add(1 << 17)
}

/// Codec id of a chunk payload: the two of `.tet` v1 (raw, zstd), and this project's extension
/// codecs (zstd over transformed elements, [`codec`]), which the reference reader refuses as an
/// unsupported codec (`docs/FORMAT.md`, "Extension codecs").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Codec {
    Raw,
    Zstd,
    /// Extension: zstd over byte-shuffled elements.
    ZstdShuffle,
    /// Extension: zstd over bit-shuffled elements.
    ZstdBitShuffle,
    /// Extension: zstd over delta-coded (subtraction), byte-shuffled elements.
    ZstdDelta,
    /// Extension: zstd over delta-coded (subtraction), bit-shuffled elements.
    ZstdDeltaBitShuffle,
}

/// Every codec with its id and name, in id order: the one table ids and names are read from.
const CODECS: [(Codec, u32, &str); 6] = [
    (Codec::Raw, 0, "raw"),
    (Codec::Zstd, 1, "zstd"),
    (Codec::ZstdShuffle, 128, "zstd-shuffle"),
    (Codec::ZstdBitShuffle, 129, "zstd-bitshuffle"),
    (Codec::ZstdDelta, 130, "zstd-delta"),
    (Codec::ZstdDeltaBitShuffle, 131, "zstd-delta-bitshuffle"),
];

impl Codec {
    /// Every codec, v1 first.
    pub const ALL: [Codec; 6] = [
        Codec::Raw,
        Codec::Zstd,
        Codec::ZstdShuffle,
        Codec::ZstdBitShuffle,
        Codec::ZstdDelta,
        Codec::ZstdDeltaBitShuffle,
    ];

    fn row(self) -> (Codec, u32, &'static str) {
        CODECS
            .into_iter()
            .find(|r| r.0 == self)
            .unwrap_or((self, u32::MAX, "?"))
    }
    pub fn id(self) -> u32 {
        self.row().1
    }
    pub fn from_id(id: u32) -> Option<Codec> {
        CODECS.into_iter().find(|r| r.1 == id).map(|r| r.0)
    }
    pub fn name(self) -> &'static str {
        self.row().2
    }
    pub fn from_name(name: &str) -> Option<Codec> {
        CODECS.into_iter().find(|r| r.2 == name).map(|r| r.0)
    }
    /// Whether `.tet` v1 (and so the reference reader) knows this codec.
    pub fn is_v1(self) -> bool {
        matches!(self, Codec::Raw | Codec::Zstd)
    }
    /// Whether the stored bytes are one zstd frame decoding to `raw_byte_len` bytes (every codec
    /// but raw: the extensions' frames hold the transformed bytes, of the same length).
    pub fn is_zstd_frame(self) -> bool {
        self != Codec::Raw
    }
    /// The element transform applied before zstd (extension codecs only).
    pub fn transform(self) -> Option<codec::Transform> {
        match self {
            Codec::Raw | Codec::Zstd => None,
            Codec::ZstdShuffle => Some(codec::Transform::Shuffle),
            Codec::ZstdBitShuffle => Some(codec::Transform::BitShuffle),
            Codec::ZstdDelta => Some(codec::Transform::DeltaShuffle),
            Codec::ZstdDeltaBitShuffle => Some(codec::Transform::DeltaBitShuffle),
        }
    }
}

/// Element type of a `.tet` dataset (wire tags 1–10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
    F64,
    I32,
    I64,
    U8,
    U16,
    I16,
    U32,
    F16,
    U64,
}

impl DType {
    pub const ALL: [DType; 10] = [
        DType::F32,
        DType::F64,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U16,
        DType::I16,
        DType::U32,
        DType::F16,
        DType::U64,
    ];

    pub fn tag(self) -> u32 {
        match self {
            DType::F32 => 1,
            DType::F64 => 2,
            DType::I32 => 3,
            DType::I64 => 4,
            DType::U8 => 5,
            DType::U16 => 6,
            DType::I16 => 7,
            DType::U32 => 8,
            DType::F16 => 9,
            DType::U64 => 10,
        }
    }

    pub fn from_tag(tag: u32) -> Option<DType> {
        DType::ALL.get((tag as usize).wrapping_sub(1)).copied()
    }

    pub fn size(self) -> usize {
        match self {
            DType::U8 => 1,
            DType::U16 | DType::I16 | DType::F16 => 2,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F64 | DType::I64 | DType::U64 => 8,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U8 => "u8",
            DType::U16 => "u16",
            DType::I16 => "i16",
            DType::U32 => "u32",
            DType::F16 => "f16",
            DType::U64 => "u64",
        }
    }

    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Errors of the `.tet` reader, writer and footer.
#[derive(Debug, thiserror::Error)]
pub enum TetError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The bytes break a structural rule of the format.
    #[error("{0}")]
    Corrupt(String),
    /// The THST footer is present but unreadable; the datasets may still be readable.
    #[error("footer: {0}")]
    Footer(String),
    /// A caller error (bad dataset spec, region outside the shape, buffer of the wrong size…).
    #[error("{0}")]
    Invalid(String),
}

pub type Result<T, E = TetError> = std::result::Result<T, E>;

pub(crate) fn corrupt(msg: impl Into<String>) -> TetError {
    TetError::Corrupt(msg.into())
}

pub(crate) fn invalid(msg: impl Into<String>) -> TetError {
    TetError::Invalid(msg.into())
}

/// Rounds up to a multiple of 8, `None` on overflow.
pub fn align8(n: u64) -> Option<u64> {
    n.checked_add(7).map(|v| v & !7)
}

/// What a chunk payload's file offset is a multiple of in the files our writer produces: a raw
/// payload's element size, so that typed zero-copy readers (the reference query engine, numpy
/// views over a memory map) can use it in place; 1 for a zstd frame. The writer puts the fewest
/// zero bytes before a payload that reach it (fewer than 8), so a file has padding only where a
/// payload would otherwise be unaligned (docs/FORMAT.md, "Payload alignment").
pub fn payload_alignment(codec: Codec, dtype: DType) -> u64 {
    match codec {
        Codec::Raw => dtype.size() as u64,
        _ => 1,
    }
}

/// Why a shape and a chunk shape make no chunk grid ([`Grid::new`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GridError {
    /// The rank is 0 or over [`MAX_RANK`].
    #[error("rank {0} is outside 1..=8")]
    Rank(usize),
    /// The chunk shape has another rank than the shape.
    #[error("chunk_shape has {chunk} axes, shape has {shape}")]
    ChunkRank {
        /// Axes of the chunk shape.
        chunk: usize,
        /// Axes of the shape.
        shape: usize,
    },
    /// A chunk shape entry is 0.
    #[error("chunk_shape[{0}] is 0")]
    ZeroChunk(usize),
    /// The number of chunks does not fit in a u64.
    #[error("chunk grid size overflows u64")]
    Overflow,
}

/// The chunk grid of a dataset: `ceil(shape / chunk_shape)` per axis, with checked arithmetic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grid {
    pub shape: Vec<u64>,
    pub chunk_shape: Vec<u64>,
    /// Chunks per axis.
    pub counts: Vec<u64>,
    /// Total number of chunks (0 when an axis has length 0).
    pub total: u64,
}

impl Grid {
    /// Validates `chunk_shape` (rank match, every entry ≥ 1) and computes the grid.
    pub fn new(shape: &[u64], chunk_shape: &[u64]) -> Result<Grid, GridError> {
        if shape.is_empty() || shape.len() > MAX_RANK {
            return Err(GridError::Rank(shape.len()));
        }
        if chunk_shape.len() != shape.len() {
            return Err(GridError::ChunkRank {
                chunk: chunk_shape.len(),
                shape: shape.len(),
            });
        }
        let mut counts = Vec::with_capacity(shape.len());
        let mut total = 1u64;
        for (axis, (&s, &c)) in shape.iter().zip(chunk_shape).enumerate() {
            if c == 0 {
                return Err(GridError::ZeroChunk(axis));
            }
            let n = s.div_ceil(c);
            counts.push(n);
            total = total.checked_mul(n).ok_or(GridError::Overflow)?;
        }
        Ok(Grid {
            shape: shape.to_vec(),
            chunk_shape: chunk_shape.to_vec(),
            counts,
            total,
        })
    }

    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Row-major linear index of grid coordinates, `None` when outside the grid.
    pub fn linear(&self, coords: &[u64]) -> Option<u64> {
        if coords.len() != self.rank() {
            return None;
        }
        let mut idx = 0u64;
        for (&c, &n) in coords.iter().zip(&self.counts) {
            if c >= n {
                return None;
            }
            idx = idx * n + c; // cannot overflow: idx < total ≤ u64::MAX
        }
        Some(idx)
    }

    /// Grid coordinates of a row-major linear index (`linear < total`).
    pub fn coords(&self, mut linear: u64) -> Vec<u64> {
        let mut out = vec![0u64; self.rank()];
        for axis in (0..self.rank()).rev() {
            let n = self.counts[axis].max(1);
            out[axis] = linear % n;
            linear /= n;
        }
        out
    }

    /// Start and (clipped) extent of the chunk at `coords`.
    pub fn chunk_region(&self, coords: &[u64]) -> (Vec<u64>, Vec<u64>) {
        let mut start = Vec::with_capacity(self.rank());
        let mut count = Vec::with_capacity(self.rank());
        for axis in 0..self.rank() {
            let s = coords[axis] * self.chunk_shape[axis];
            start.push(s);
            count.push(self.chunk_shape[axis].min(self.shape[axis] - s));
        }
        (start, count)
    }

    /// Element count of the clipped chunk at `coords` (cannot overflow when the dataset's total
    /// byte size fits u64, which callers check with [`Grid::byte_len`]).
    pub fn chunk_elements(&self, coords: &[u64]) -> u64 {
        let (_, count) = self.chunk_region(coords);
        count.iter().product()
    }

    /// Total element count, `None` on overflow.
    pub fn element_count(&self) -> Option<u64> {
        self.shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d))
    }

    /// Total byte size for elements of `elem_size` bytes, `None` on overflow.
    pub fn byte_len(&self, elem_size: usize) -> Option<u64> {
        self.element_count()?.checked_mul(elem_size as u64)
    }
}

/// Copies a C-order block `src` (shape `src_count`) into a C-order buffer `dst` (shape
/// `dst_shape`) at offset `dst_start`, for elements of `elem` bytes. Inner rows are copied whole.
pub(crate) fn copy_block(
    src: &[u8],
    src_count: &[u64],
    dst: &mut [u8],
    dst_shape: &[u64],
    dst_start: &[u64],
    elem: usize,
) {
    let rank = src_count.len();
    if src_count.contains(&0) {
        return;
    }
    let row = src_count[rank - 1] as usize * elem;
    // Strides of dst in bytes.
    let mut dst_strides = vec![0usize; rank];
    let mut s = elem;
    for axis in (0..rank).rev() {
        dst_strides[axis] = s;
        s *= dst_shape[axis] as usize;
    }
    let rows: u64 = src_count[..rank - 1].iter().product();
    let mut idx = vec![0u64; rank];
    for r in 0..rows as usize {
        let mut off = 0usize;
        for axis in 0..rank {
            off += (dst_start[axis] + idx[axis]) as usize * dst_strides[axis];
        }
        dst[off..off + row].copy_from_slice(&src[r * row..(r + 1) * row]);
        // advance the row counter over axes 0..rank-1
        for axis in (0..rank - 1).rev() {
            idx[axis] += 1;
            if idx[axis] < src_count[axis] {
                break;
            }
            idx[axis] = 0;
        }
    }
}

/// Extracts the sub-block (C order) `off .. off + count` of a C-order block of shape `shape`.
pub fn gather_block(src: &[u8], shape: &[u64], off: &[u64], count: &[u64], elem: usize) -> Vec<u8> {
    let rank = shape.len();
    let total: u64 = count.iter().product();
    let mut out = Vec::with_capacity(total as usize * elem);
    let mut strides = vec![0usize; rank];
    let mut s = elem;
    for a in (0..rank).rev() {
        strides[a] = s;
        s *= shape[a] as usize;
    }
    let row = count[rank - 1] as usize * elem;
    let rows: u64 = count[..rank - 1].iter().product();
    let mut idx = vec![0u64; rank];
    for _ in 0..rows {
        let mut o = 0usize;
        for a in 0..rank {
            o += (off[a] + idx[a]) as usize * strides[a];
        }
        out.extend_from_slice(&src[o..o + row]);
        for a in (0..rank - 1).rev() {
            idx[a] += 1;
            if idx[a] < count[a] {
                break;
            }
            idx[a] = 0;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dtype_tags_round_trip() {
        for d in DType::ALL {
            assert_eq!(DType::from_tag(d.tag()), Some(d));
            assert_eq!(DType::from_name(d.name()), Some(d));
        }
        assert_eq!(DType::from_tag(0), None);
        assert_eq!(DType::from_tag(11), None);
        assert_eq!(DType::from_tag(u32::MAX), None);
    }

    #[test]
    fn grid_math() {
        let g = Grid::new(&[2, 3], &[2, 2]).unwrap();
        assert_eq!(g.counts, vec![1, 2]);
        assert_eq!(g.total, 2);
        assert_eq!(g.chunk_region(&[0, 1]), (vec![0, 2], vec![2, 1]));
        assert_eq!(g.linear(&[0, 1]), Some(1));
        assert_eq!(g.coords(1), vec![0, 1]);
        assert_eq!(Grid::new(&[2, 3], &[0, 2]), Err(GridError::ZeroChunk(0)));
        assert_eq!(
            Grid::new(&[2, 3], &[2]),
            Err(GridError::ChunkRank { chunk: 1, shape: 2 })
        );
        assert_eq!(Grid::new(&[], &[]), Err(GridError::Rank(0)));
        assert_eq!(Grid::new(&[0, 3], &[1, 2]).unwrap().total, 0);
        assert_eq!(
            Grid::new(&[u64::MAX, u64::MAX], &[1, 1]),
            Err(GridError::Overflow)
        );
    }

    #[test]
    fn copy_block_places_rows() {
        // dst 3x4 of u8, block 2x2 at (1,1)
        let mut dst = vec![0u8; 12];
        copy_block(&[1, 2, 3, 4], &[2, 2], &mut dst, &[3, 4], &[1, 1], 1);
        assert_eq!(dst, vec![0, 0, 0, 0, 0, 1, 2, 0, 0, 3, 4, 0]);
    }
}
