//! The HDF5 filter pipeline decoded in Rust, outside libhdf5 and its lock: the filter ids, a
//! dataset's pipeline as stored ([`FilterSpec`], [`read_pipeline`]), the decoders this crate has
//! ([`Filter`]), and the stages undone in reverse order into a caller's buffer
//! ([`decode_filters_into`]). One module per decoder.
//!
//! Decodable filters: deflate (1, a zlib stream, decoded with libdeflate: see [`inflate`]),
//! shuffle (2), fletcher32 (3, verified then stripped) and LZF (32000, h5py's filter, decoded by
//! [`lzf_decompress`]; libhdf5 itself cannot read it), and the common plugin filters, which
//! libhdf5 reads only with a plugin: Blosc (32001, PyTables' default; one Blosc 1.x buffer,
//! decoded by c-blosc from `blosc-src`, the build Zarr uses), Zstandard (32015, hdf5plugin's;
//! plain frames, `zstd`), bzip2 (307, one stream, `bzip2`), LZO (305, PyTables'; one LZO1X
//! stream, `lzokay`, see [`lzo_decompress`]), LZ4 (32004, the HDF Group
//! filter's block framing, see [`lz4_decompress`]; blocks decoded by `lz4_flex`) and Blosc2
//! (32026, hdf5plugin's and PyTables'; one Blosc2 frame per chunk, parsed by [`crate::filters::blosc2`],
//! its chunks decoded by `blosc2-pure-rs`). A dataset with any other filter (szip,
//! scale-offset, n-bit, …), a Blosc2 codec or filter that decoder lacks (see
//! [`crate::filters::blosc2::unsupported_variant`]), a non-chunked layout, or a datatype
//! with variable-length parts is reported as [`crate::chunks::ChunkAccess::Library`] with the reason: read it
//! with `H5Dread` (libhdf5 loads filter plugins from `HDF5_PLUGIN_PATH`).
//!
//! A decoder never produces more than the caller's bound (the dataset's chunk size, plus 4 bytes
//! per fletcher32 filter), and sizes no buffer from a number in the stream before checking it.

use hdf5_sys::h5i::hid_t;
use hdf5_sys::h5p::{H5Pget_filter2, H5Pget_nfilters};
use tet_source::{Lib, Result, SourceError};

mod blosc;
pub mod blosc2;
mod bzip2;
mod deflate;
mod fletcher32;
mod lz4;
mod lzf;
mod lzo;
mod zstd;

pub use self::blosc::blosc_decompress;
pub use self::bzip2::bzip2_decompress;
pub use self::deflate::{inflate, inflate_bound, inflate_into};
use self::fletcher32::fletcher32_check;
pub use self::fletcher32::{fletcher32, fletcher32_strip};
pub use self::lz4::lz4_decompress;
pub use self::lzf::lzf_decompress;
pub use self::lzo::lzo_decompress;
pub use self::zstd::zstd_decompress;

/// HDF5 filter id of deflate (zlib).
pub const FILTER_DEFLATE: i32 = 1;
/// HDF5 filter id of the byte shuffle.
pub const FILTER_SHUFFLE: i32 = 2;
/// HDF5 filter id of the fletcher32 checksum.
pub const FILTER_FLETCHER32: i32 = 3;
/// HDF5 filter id of szip.
pub const FILTER_SZIP: i32 = 4;
/// HDF5 filter id of n-bit packing.
pub const FILTER_NBIT: i32 = 5;
/// HDF5 filter id of scale-offset.
pub const FILTER_SCALEOFFSET: i32 = 6;
/// Registered id of PyTables' LZO filter.
pub const FILTER_LZO: i32 = 305;
/// Registered id of the bzip2 filter (PyTables, hdf5plugin).
pub const FILTER_BZIP2: i32 = 307;
/// Registered id of h5py's LZF filter.
pub const FILTER_LZF: i32 = 32000;
/// Registered id of the Blosc filter (PyTables' default, hdf5plugin).
pub const FILTER_BLOSC: i32 = 32001;
/// Registered id of the LZ4 filter (HDF Group's, as hdf5plugin ships it).
pub const FILTER_LZ4: i32 = 32004;
/// Registered id of the Zstandard filter (hdf5plugin's).
pub const FILTER_ZSTD: i32 = 32015;
/// Registered id of the Blosc2 filter (PyTables, hdf5plugin; see [`crate::filters::blosc2`]).
pub const FILTER_BLOSC2: i32 = 32026;

/// One entry of a dataset's filter pipeline, as stored in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterSpec {
    /// The registered filter id (1 = deflate, 2 = shuffle, 32000 = LZF, …).
    pub id: i32,
    /// `H5Z_FLAG_*` bits (bit 0: optional).
    pub flags: u32,
    /// The filter's client data values.
    pub cd_values: Vec<u32>,
    /// The name stored with the filter (may be empty).
    pub name: String,
}

impl FilterSpec {
    /// A short label: `deflate(4)`, `shuffle`, `fletcher32`, `lzf`, `szip`, `nbit`,
    /// `scaleoffset`, `blosc`, `zstd`, … or `filter <id>`.
    pub fn label(&self) -> String {
        match self.id {
            FILTER_DEFLATE => match self.cd_values.first() {
                Some(l) => format!("deflate({l})"),
                None => "deflate".into(),
            },
            FILTER_SHUFFLE => "shuffle".into(),
            FILTER_FLETCHER32 => "fletcher32".into(),
            FILTER_SZIP => "szip".into(),
            FILTER_NBIT => "nbit".into(),
            FILTER_SCALEOFFSET => "scaleoffset".into(),
            FILTER_LZO => "lzo".into(),
            FILTER_BZIP2 => "bzip2".into(),
            FILTER_LZF => "lzf".into(),
            FILTER_BLOSC => "blosc".into(),
            FILTER_LZ4 => "lz4".into(),
            32008 => "bitshuffle".into(),
            32013 => "zfp".into(),
            FILTER_ZSTD => "zstd".into(),
            32017 => "sz".into(),
            FILTER_BLOSC2 => "blosc2".into(),
            id => {
                let name = self.name.trim();
                if name.is_empty() {
                    format!("filter {id}")
                } else {
                    format!("filter {id} ({name})")
                }
            }
        }
    }

    /// The filter for messages, said once: `blosc2 (id 32026)`, `lzo (id 305)` (the name
    /// stored with an unregistered id), `id 305` (no name).
    pub fn named(&self) -> String {
        let label = self.label();
        match label.strip_prefix("filter ") {
            Some(rest) => match rest.split_once(" (") {
                Some((_, n)) => format!("{} (id {})", n.strip_suffix(')').unwrap_or(n), self.id),
                None => format!("id {}", self.id),
            },
            None => match label.split_once('(') {
                // `deflate(4)`: the level is not part of the name.
                Some((n, _)) => format!("{n} (id {})", self.id),
                None => format!("{label} (id {})", self.id),
            },
        }
    }

    /// Whether the filter reduces size (everything but shuffle and fletcher32).
    pub fn is_compression(&self) -> bool {
        !matches!(self.id, FILTER_SHUFFLE | FILTER_FLETCHER32)
    }

    /// The Rust decoder for this filter, `None` when this module cannot decode it. `elem_size`
    /// is the datatype size, used by shuffle when the filter stored no element size.
    pub fn decoder(&self, elem_size: usize) -> Option<Filter> {
        match self.id {
            FILTER_DEFLATE => Some(Filter::Deflate),
            FILTER_SHUFFLE => {
                let s = self
                    .cd_values
                    .first()
                    .map(|&v| v as usize)
                    .filter(|&v| v > 0)
                    .unwrap_or(elem_size);
                Some(Filter::Shuffle { elem_size: s })
            }
            FILTER_FLETCHER32 => Some(Filter::Fletcher32),
            FILTER_LZF => Some(Filter::Lzf),
            FILTER_BLOSC => Some(Filter::Blosc),
            FILTER_ZSTD => Some(Filter::Zstd),
            FILTER_BZIP2 => Some(Filter::Bzip2),
            FILTER_LZO => Some(Filter::Lzo),
            FILTER_LZ4 => Some(Filter::Lz4),
            FILTER_BLOSC2 => crate::filters::blosc2::unsupported_variant(&self.cd_values)
                .is_none()
                .then_some(Filter::Blosc2),
            _ => None,
        }
    }
}

/// A filter this module decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Filter {
    /// zlib stream (RFC 1950).
    Deflate,
    /// Byte shuffle of elements of this size.
    Shuffle { elem_size: usize },
    /// Fletcher-32 checksum appended (little-endian) to the chunk.
    Fletcher32,
    /// LZF (liblzf format, no header).
    Lzf,
    /// One Blosc (1.x) buffer: 16-byte header, then the blocks (decoded by c-blosc).
    Blosc,
    /// Zstandard frames (hdf5plugin's filter stores the chunk as plain frames).
    Zstd,
    /// One bzip2 stream.
    Bzip2,
    /// One LZO1X stream, PyTables' LZO filter (see [`lzo_decompress`]).
    Lzo,
    /// The HDF5 LZ4 filter's framing of LZ4 blocks (see [`lz4_decompress`]).
    Lz4,
    /// One Blosc2 contiguous frame (see [`crate::filters::blosc2`]).
    Blosc2,
}

/// A chunk that could not be decoded: what [`decode_filters`] and each decoder return. The
/// message is one line; a decoder library's own error, when one refused the stream, is kept as
/// the [`source`](std::error::Error::source) (the chunk reader keeps this error in turn as the
/// cause of its [`SourceError`]).
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// A decoder library refused the stream: the filter, then the library's message
    /// (`zstd: Unknown frame descriptor`).
    #[error("{filter}: {source}")]
    Codec {
        /// The filter whose decoder failed (`zstd`, `bzip2`, `lz4`).
        filter: &'static str,
        /// The library's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// A decoder library refused the stream, said in this crate's words
    /// (`deflate: invalid or truncated zlib stream (or wrong checksum)`,
    /// `lzo: chunk decompresses past 400 bytes`).
    #[error("{filter}: {detail}")]
    Refused {
        /// The filter whose decoder failed (`deflate`, `lzo`).
        filter: &'static str,
        /// What the refusal means, one line.
        detail: String,
        /// The library's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// The Blosc2 frame decoder's error, its message as it is (it starts with `blosc2: `).
    #[error("{0}")]
    Blosc2(#[source] tet_blosc2::Blosc2Error),
    /// A stream this crate's own checks found malformed: a truncated header or block, sizes
    /// that disagree, output past the chunk's bound, a bad back-reference, a checksum mismatch.
    #[error("{filter}: {detail}")]
    Malformed {
        /// The filter (`blosc`, `lzf`, `lz4`, `deflate`, …).
        filter: &'static str,
        /// What is wrong, one line.
        detail: String,
    },
    /// The chunk's Fletcher-32 trailer does not match its bytes (either byte order).
    #[error("fletcher32 checksum mismatch (stored {stored:#010x}, computed {computed:#010x})")]
    Fletcher32 {
        /// The checksum stored after the chunk (read little-endian).
        stored: u32,
        /// The checksum of the chunk's bytes.
        computed: u32,
    },
    /// The pipeline decoded to other than the dataset's chunk size.
    #[error("chunk decodes to {decoded} bytes, expected {expected}")]
    ChunkSize {
        /// Bytes the pipeline produced (or would).
        decoded: usize,
        /// The chunk size.
        expected: usize,
    },
    /// The caller's output buffer is not the chunk's decoded size.
    #[error("chunk decodes to {decoded} bytes, the output holds {held}")]
    OutputSize {
        /// The chunk's decoded size.
        decoded: usize,
        /// The output buffer's length.
        held: usize,
    },
    /// The chunk size plus the checksums of the pipeline's fletcher32 filters overflows.
    #[error("chunk size overflows")]
    SizeOverflow,
}

impl DecodeError {
    /// A stream `filter`'s own checks found malformed ([`DecodeError::Malformed`]).
    pub(crate) fn malformed(filter: &'static str, detail: impl Into<String>) -> DecodeError {
        DecodeError::Malformed {
            filter,
            detail: detail.into(),
        }
    }

    /// A decoder library's refusal, its error kept ([`DecodeError::Codec`]).
    pub(crate) fn codec(
        filter: &'static str,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> DecodeError {
        DecodeError::Codec {
            filter,
            source: Box::new(source),
        }
    }

    /// A decoder library's refusal said in words, its error kept ([`DecodeError::Refused`]).
    pub(crate) fn refused(
        filter: &'static str,
        detail: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> DecodeError {
        DecodeError::Refused {
            filter,
            detail: detail.into(),
            source: Box::new(source),
        }
    }
}

/// `Err` of [`DecodeError::malformed`].
pub(crate) fn derr<T>(
    filter: &'static str,
    detail: impl Into<String>,
) -> std::result::Result<T, DecodeError> {
    Err(DecodeError::malformed(filter, detail))
}

/// Decodes one stored chunk: the filters of `pipeline` (in encode order, as stored) are undone
/// in reverse order, skipping filter `i` when bit `i` of `filter_mask` is set. The result must
/// be exactly `chunk_bytes` long.
///
/// A convenience over [`decode_filters_into`], which decodes into a caller's buffer and reuses
/// the intermediate buffers; the output here is allocated only once the last stage is about to
/// write it (after the checks that a stream can reach `chunk_bytes` at all).
pub fn decode_filters(
    pipeline: &[Filter],
    filter_mask: u32,
    stored: Vec<u8>,
    chunk_bytes: usize,
) -> std::result::Result<Vec<u8>, DecodeError> {
    let mut out = Vec::new();
    decode_stages(
        pipeline,
        filter_mask,
        &stored,
        Sink::Vec(&mut out),
        chunk_bytes,
        &mut StageBuffers::default(),
    )?;
    out.truncate(chunk_bytes);
    Ok(out)
}

/// The buffers [`decode_filters_into`] keeps between calls for the stages before the last one
/// (the last stage writes into the caller's buffer). Reusing one value avoids allocating, and
/// the kernel zero-filling, a fresh chunk-sized buffer per stage and chunk.
#[derive(Debug, Default)]
pub struct StageBuffers {
    a: Vec<u8>,
    b: Vec<u8>,
}

impl StageBuffers {
    /// Bytes held.
    pub fn capacity(&self) -> usize {
        self.a.capacity() + self.b.capacity()
    }
}

/// Decodes one stored chunk, like [`decode_filters`], straight into `out`, which must be
/// exactly the chunk's decoded size. The last stage of the pipeline writes `out` directly: for
/// shuffle + deflate, the stream is inflated into `bufs` and unshuffled into `out`; for deflate
/// alone it is inflated into `out`. `out` may hold anything on entry; on error its contents are
/// unspecified.
pub fn decode_filters_into(
    pipeline: &[Filter],
    filter_mask: u32,
    stored: &[u8],
    out: &mut [u8],
    bufs: &mut StageBuffers,
) -> std::result::Result<(), DecodeError> {
    let chunk_bytes = out.len();
    decode_stages(
        pipeline,
        filter_mask,
        stored,
        Sink::Slice(out),
        chunk_bytes,
        bufs,
    )
}

/// Where the last decode stage writes: a caller's buffer of exactly the chunk size, or a vector
/// grown to that size only when the stage writes (so a corrupt chunk size costs no memory
/// before the stream has been checked against it).
pub(crate) enum Sink<'a> {
    Slice(&'a mut [u8]),
    Vec(&'a mut Vec<u8>),
}

impl Sink<'_> {
    /// The `n` bytes the last stage writes; `n` must be the chunk size.
    fn take(
        &mut self,
        n: usize,
        chunk_bytes: usize,
    ) -> std::result::Result<&mut [u8], DecodeError> {
        if n != chunk_bytes {
            return Err(DecodeError::ChunkSize {
                decoded: n,
                expected: chunk_bytes,
            });
        }
        match self {
            Sink::Slice(s) => {
                let held = s.len();
                s.get_mut(..n)
                    .filter(|_| held == n)
                    .ok_or(DecodeError::OutputSize { decoded: n, held })
            }
            Sink::Vec(v) => Ok(grow(v, n)),
        }
    }
}

/// The first `n` bytes of `buf`, lengthened with zeros if shorter (bytes already there are
/// kept, not cleared: every caller overwrites all `n`).
pub(crate) fn grow(buf: &mut Vec<u8>, n: usize) -> &mut [u8] {
    if buf.len() < n {
        buf.resize(n, 0);
    }
    &mut buf[..n]
}

/// The decode pipeline behind [`decode_filters`] and [`decode_filters_into`]. No stage may
/// produce more than the chunk plus 4 bytes per active fletcher32 filter before it in the
/// pipeline, and the last one must produce exactly the chunk.
pub(crate) fn decode_stages(
    pipeline: &[Filter],
    filter_mask: u32,
    stored: &[u8],
    mut sink: Sink<'_>,
    chunk_bytes: usize,
    bufs: &mut StageBuffers,
) -> std::result::Result<(), DecodeError> {
    let active = |i: usize| i >= 32 || filter_mask & (1u32 << i) == 0;
    // The last stage to decode is the first active filter of the pipeline.
    let Some(last) = (0..pipeline.len()).find(|&i| active(i)) else {
        // Every filter skipped: the stored bytes are the chunk.
        sink.take(stored.len(), chunk_bytes)?
            .copy_from_slice(stored);
        return Ok(());
    };
    /// Where the current stage's input is.
    #[derive(Clone, Copy)]
    enum At {
        Stored,
        A,
        B,
    }
    let mut at = At::Stored;
    let mut len = stored.len();
    let StageBuffers { a, b } = bufs;
    for (i, f) in pipeline.iter().enumerate().rev() {
        if !active(i) {
            continue;
        }
        let is_last = i == last;
        // The decoded size of stage i is the encoder input of stage i: the chunk plus the
        // checksums of the active fletcher32 filters before it.
        let fletchers = pipeline[..i]
            .iter()
            .enumerate()
            .filter(|&(j, g)| active(j) && *g == Filter::Fletcher32)
            .count();
        let bound = fletchers
            .checked_mul(4)
            .and_then(|x| chunk_bytes.checked_add(x))
            .ok_or(DecodeError::SizeOverflow)?;
        // This stage's input, and the buffer it decodes into unless it is the last one.
        let (input, spare, next): (&[u8], &mut Vec<u8>, At) = match at {
            At::Stored => (&stored[..len], &mut *a, At::A),
            At::A => (&a[..len], &mut *b, At::B),
            At::B => (&b[..len], &mut *a, At::A),
        };
        match *f {
            Filter::Fletcher32 => {
                // Checked in place; the stage's output is its input without the trailer.
                len = fletcher32_check(input)?;
                if is_last {
                    let body = &input[..len];
                    sink.take(len, chunk_bytes)?.copy_from_slice(body);
                }
                continue;
            }
            Filter::Deflate => {
                // With no compression filter before it in the pipeline, the stage decodes to
                // exactly `bound` bytes: refuse a chunk size its stream cannot reach before
                // allocating for it. After one, `bound` is only the most it may produce. (The
                // last stage always has nothing before it.)
                let reach = inflate_bound(input.len());
                let exact = !pipeline[..i].iter().enumerate().any(|(j, g)| {
                    active(j) && !matches!(g, Filter::Shuffle { .. } | Filter::Fletcher32)
                });
                if exact && bound > reach {
                    return derr(
                        "deflate",
                        format!(
                            "{} stored bytes cannot inflate to {bound} bytes",
                            input.len()
                        ),
                    );
                }
                let dst = if is_last {
                    sink.take(bound, chunk_bytes)?
                } else {
                    grow(spare, bound.min(reach))
                };
                let n = inflate_into(input, dst)?;
                if is_last && n != bound {
                    return Err(DecodeError::ChunkSize {
                        decoded: n,
                        expected: chunk_bytes,
                    });
                }
                len = n;
            }
            Filter::Shuffle { elem_size } => {
                // Same size out as in.
                let n = input.len();
                let dst = if is_last {
                    sink.take(n, chunk_bytes)?
                } else {
                    grow(spare, n)
                };
                unshuffle(input, elem_size, dst);
                len = n;
            }
            Filter::Lzf
            | Filter::Blosc
            | Filter::Zstd
            | Filter::Bzip2
            | Filter::Lzo
            | Filter::Lz4
            | Filter::Blosc2 => {
                // These decoders size their own output from the stream.
                let v = match *f {
                    Filter::Lzf => lzf_decompress(input, bound)?,
                    Filter::Blosc => blosc_decompress(input, bound)?,
                    Filter::Zstd => zstd_decompress(input, bound)?,
                    Filter::Bzip2 => bzip2_decompress(input, bound)?,
                    Filter::Lzo => lzo_decompress(input, bound)?,
                    Filter::Blosc2 => crate::filters::blosc2::blosc2_decompress(input, bound)?,
                    _ => lz4_decompress(input, bound)?,
                };
                len = v.len();
                if is_last {
                    sink.take(len, chunk_bytes)?.copy_from_slice(&v);
                } else {
                    *spare = v;
                }
            }
        }
        at = next;
    }
    Ok(())
}

/// Reads a decoder to its end into at most `max` bytes (growing with the data, so a stream
/// that claims a large size costs nothing until it delivers it).
pub(crate) fn read_bounded(
    what: &'static str,
    mut r: impl std::io::Read,
    max: usize,
) -> std::result::Result<Vec<u8>, DecodeError> {
    use std::io::Read;
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    let mut out = Vec::new();
    r.by_ref()
        .take(limit)
        .read_to_end(&mut out)
        .map_err(|e| DecodeError::codec(what, e))?;
    if out.len() > max {
        return derr(what, format!("chunk decompresses past {max} bytes"));
    }
    Ok(out)
}

/// Reads a dataset creation property list's filter pipeline (takes the library lock).
pub fn read_pipeline(dcpl: hid_t) -> Result<Vec<FilterSpec>> {
    hdf5::sync::sync(|| {
        // SAFETY: a by-value query of the property list id under the library lock (libhdf5
        // checks the id and returns an error value for a wrong one).
        let n = unsafe { H5Pget_nfilters(dcpl) };
        if n < 0 {
            return Err(SourceError::library_status(
                Lib::Hdf5,
                "H5Pget_nfilters",
                "cannot read the filter pipeline",
            ));
        }
        let mut out = Vec::with_capacity(n as usize);
        for i in 0..n as u32 {
            let mut flags = 0u32;
            let mut cd = vec![0u32; 32];
            let mut nelmts: usize = cd.len();
            let mut name = vec![0u8; 257];
            let mut config = 0u32;
            // SAFETY: under the library lock; libhdf5 writes one value through each of `flags`,
            // `nelmts` and `config`, at most `nelmts` (= `cd.len()`) values into `cd`, and at
            // most `name.len()` bytes (NUL included) into `name`.
            let id = unsafe {
                H5Pget_filter2(
                    dcpl,
                    i,
                    &mut flags,
                    &mut nelmts,
                    cd.as_mut_ptr(),
                    name.len(),
                    name.as_mut_ptr().cast(),
                    &mut config,
                )
            };
            if id < 0 {
                return Err(SourceError::library_status(
                    Lib::Hdf5,
                    "H5Pget_filter2",
                    format!("cannot read filter {i} of the pipeline"),
                ));
            }
            cd.truncate(nelmts.min(32));
            let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
            out.push(FilterSpec {
                id,
                flags,
                cd_values: cd,
                name: String::from_utf8_lossy(&name[..end]).into_owned(),
            });
        }
        Ok(out)
    })
}

/// Undoes HDF5's byte shuffle (the same transposition as Blosc2's; see [`tet_blosc2::unshuffle`]).
pub use tet_blosc2::unshuffle;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_are_named_once() {
        let spec = |id: i32, name: &str, cd: Vec<u32>| FilterSpec {
            id,
            flags: 0,
            cd_values: cd,
            name: name.into(),
        };
        assert_eq!(spec(305, "lzo", vec![]).named(), "lzo (id 305)");
        assert_eq!(spec(305, "", vec![]).named(), "lzo (id 305)");
        assert_eq!(
            spec(32009, "fcidecomp", vec![]).named(),
            "fcidecomp (id 32009)"
        );
        assert_eq!(spec(32009, "", vec![]).named(), "id 32009");
        assert_eq!(
            spec(FILTER_BLOSC2, "blosc2", vec![]).named(),
            "blosc2 (id 32026)"
        );
        assert_eq!(spec(FILTER_DEFLATE, "", vec![4]).named(), "deflate (id 1)");
        assert_eq!(spec(FILTER_SZIP, "", vec![]).named(), "szip (id 4)");
    }

    #[test]
    fn a_corrupt_zstd_chunk_keeps_zstds_error() {
        use std::error::Error;
        // A frame's magic, then bytes no frame header starts with.
        let mut stored = vec![0x28, 0xb5, 0x2f, 0xfd];
        stored.extend_from_slice(&[0xff; 12]);
        let e = decode_filters(&[Filter::Zstd], 0, stored, 64).unwrap_err();
        let source = e.source().expect("zstd's error as the source");
        let io = source
            .downcast_ref::<std::io::Error>()
            .expect("the zstd decoder's io::Error");
        // The message is what it was as text: the filter, then zstd's own words.
        assert_eq!(e.to_string(), format!("zstd: {io}"));
        assert!(
            matches!(e, DecodeError::Codec { filter: "zstd", .. }),
            "{e:?}"
        );
    }

    #[test]
    fn a_corrupt_deflate_chunk_keeps_libdeflates_error() {
        use std::error::Error;
        // A zlib header (deflate, 32 KiB window), then a block of the reserved type 3.
        let stored = vec![0x78, 0x9c, 0xff, 0xff, 0xff, 0xff];
        let e = decode_filters(&[Filter::Deflate], 0, stored, 64).unwrap_err();
        assert_eq!(
            e.to_string(),
            "deflate: invalid or truncated zlib stream (or wrong checksum)"
        );
        let source = e.source().expect("libdeflate's error as the source");
        assert!(
            matches!(
                source.downcast_ref::<libdeflater::DecompressionError>(),
                Some(libdeflater::DecompressionError::BadData)
            ),
            "{source:?}"
        );
    }

    #[test]
    fn own_checks_keep_their_messages() {
        use std::error::Error;
        let e = decode_filters(&[Filter::Lzf], 0, vec![5, 1], 64).unwrap_err();
        assert_eq!(e.to_string(), "lzf: literal run past the end of the input");
        assert!(e.source().is_none());
        let e =
            decode_filters(&[Filter::Fletcher32], 0, vec![1, 2, 3, 4, 0, 0, 0, 0], 4).unwrap_err();
        assert_eq!(
            e.to_string(),
            "fletcher32 checksum mismatch (stored 0x00000000, computed 0x05080406)"
        );
        let e = decode_filters(&[], 0, vec![1, 2, 3], 4).unwrap_err();
        assert_eq!(e.to_string(), "chunk decodes to 3 bytes, expected 4");
    }
}
