//! The Blosc2 HDF5 filter (registered id 32026), decoded without a libhdf5 plugin by
//! [`tet_blosc2`] (the frame and chunk format is described there).
//!
//! # What the filter stores
//!
//! Observed on files written by h5py 3.16 + hdf5plugin 7.1 (`hdf5plugin.Blosc2`) and by
//! PyTables 3.11 (`complib='blosc2:…'`), every codec (blosclz, lz4, lz4hc, zlib, zstd), every
//! filter (none, shuffle, bitshuffle, delta), 1-, 2- and 3-D chunks, clevel 0 to 9:
//!
//! * **cd_values**: `[0]` filter revision (1), `[1]` block size (0 = automatic; PyTables stores
//!   the one it chose), `[2]` type size, `[3]` chunk size in bytes, `[4]` clevel, `[5]` the
//!   Blosc2 filter (0 none, 1 shuffle, 2 bitshuffle, 3 delta, 4 truncate precision), `[6]` the
//!   codec (0 blosclz, 1 lz4, 2 lz4hc, 4 zlib, 5 zstd); for chunks of more than one dimension
//!   `[7]` the rank and `[8..]` the chunk shape. A truncate-precision dataset written by
//!   hdf5plugin (which cannot pass a precision) has every chunk stored unfiltered (filter mask
//!   bit set): the filter failed, and HDF5 skipped it as optional.
//! * **Every stored chunk is one Blosc2 *contiguous frame*** (a serialised super-chunk), never a
//!   bare Blosc2 chunk, whatever the rank: rank 1 without a metalayer (one Blosc2 chunk of the
//!   HDF5 chunk's size; edge chunks are full size, as everywhere in HDF5), rank ≥ 2 with a
//!   `b2nd` metalayer whose array shape is the HDF5 chunk shape.
//!
//! Datasets whose cd_values name a codec or filter missing in [`tet_blosc2`] are refused at
//! open ([`unsupported_variant`]): libhdf5 reads them when it finds hdf5plugin's plugin.

use super::DecodeError;

/// Why a Blosc2 dataset cannot be decoded here, from its cd_values (see the module doc): the
/// codec or filter `blosc2-pure-rs` is built without (`codec snappy`, `Blosc2 filter 35`).
/// `None` when it can be (or when the values do not say: the chunks' own headers are checked
/// when read).
pub fn unsupported_variant(cd_values: &[u32]) -> Option<String> {
    let codec = match cd_values.get(6) {
        None | Some(0..=2 | 4 | 5) => None,
        Some(3) => Some("snappy".to_string()),
        Some(32) => Some("ndlz".to_string()),
        Some(33..=35) => Some("zfp".to_string()),
        Some(c) => Some(c.to_string()),
    };
    if let Some(c) = codec {
        return Some(format!("codec {c}"));
    }
    let filter = match cd_values.get(5) {
        None | Some(0..=4) => return None,
        Some(32) => "ndcell",
        Some(33) => "ndmean",
        Some(34 | 35) => "bytedelta",
        Some(36) => "int_trunc",
        Some(_) => "",
    };
    let f = cd_values.get(5).copied().unwrap_or_default();
    Some(if filter.is_empty() {
        format!("Blosc2 filter {f}")
    } else {
        format!("Blosc2 filter {f} ({filter})")
    })
}

/// Decodes one HDF5 chunk stored by the Blosc2 filter (one Blosc2 contiguous frame) into
/// exactly `max` bytes, the dataset's chunk size (see [`tet_blosc2::decode_frame`]); its error
/// as a chunk [`DecodeError::Blosc2`] (same message, the decoder's error kept as the source).
pub fn blosc2_decompress(input: &[u8], max: usize) -> Result<Vec<u8>, DecodeError> {
    tet_blosc2::decode_frame(input, max).map_err(DecodeError::Blosc2)
}
