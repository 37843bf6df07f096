//! Blosc 1.x (filter 32001, PyTables' default): one buffer, decoded by c-blosc (`blosc-src`).

use super::{derr, DecodeError};

/// Decodes one Blosc 1.x buffer (the Blosc filter, id 32001: PyTables' `hdf5-blosc` stores the
/// chunk as one `blosc_compress` result) into at most `max` bytes, with the c-blosc that is
/// already built for Zarr (`blosc-src`, every codec: blosclz, lz4, lz4hc, snappy, zlib, zstd;
/// byte and bit shuffle).
pub fn blosc_decompress(input: &[u8], max: usize) -> std::result::Result<Vec<u8>, DecodeError> {
    use std::ffi::c_void;
    let le32 = |at: usize| -> usize {
        let b = [input[at], input[at + 1], input[at + 2], input[at + 3]];
        u32::from_le_bytes(b) as usize
    };
    if input.len() < 16 {
        return derr("blosc", "chunk shorter than the 16-byte Blosc header");
    }
    let (version, nbytes, cbytes) = (input[0], le32(4), le32(12));
    if version != blosc_src::BLOSC_VERSION_FORMAT as u8 {
        return derr(
            "blosc",
            format!("format version {version} (this c-blosc reads 2)"),
        );
    }
    if cbytes > input.len() {
        return derr(
            "blosc",
            format!(
                "header claims {cbytes} bytes, the chunk holds {}",
                input.len()
            ),
        );
    }
    let frame = &input[..cbytes];
    if nbytes > max {
        return derr(
            "blosc",
            format!("header claims {nbytes} bytes, more than {max}"),
        );
    }
    let mut checked = 0usize;
    // SAFETY: `frame` is a live slice of `frame.len()` bytes; c-blosc reads its 16-byte header
    // (the length was checked above, and again by the function) and writes one usize.
    let rc = unsafe {
        blosc_src::blosc_cbuffer_validate(
            frame.as_ptr().cast::<c_void>(),
            frame.len(),
            &mut checked,
        )
    };
    if rc < 0 || checked != nbytes {
        return derr("blosc", "invalid Blosc header");
    }
    let mut out = vec![0u8; nbytes];
    if nbytes == 0 {
        return Ok(out);
    }
    // SAFETY: the source is the validated buffer (its header's compressed size equals the
    // slice length, and c-blosc bounds every block offset and size by that compressed size);
    // the destination is `out`, `nbytes` writable bytes, and c-blosc writes at most `destsize`
    // bytes. One internal thread: no shared state, so concurrent calls are safe.
    let got = unsafe {
        blosc_src::blosc_decompress_ctx(
            frame.as_ptr().cast::<c_void>(),
            out.as_mut_ptr().cast::<c_void>(),
            out.len(),
            1,
        )
    };
    if usize::try_from(got).ok() != Some(nbytes) {
        return derr("blosc", format!("corrupt data (c-blosc returned {got})"));
    }
    Ok(out)
}
