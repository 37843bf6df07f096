//! Chunk codecs beyond `.tet` v1: zstd over elements transformed first (byte shuffle, bit
//! shuffle, subtraction delta then byte or bit shuffle). Each transform keeps the chunk's
//! length, so the zstd frame of such a chunk decodes to exactly `raw_byte_len` bytes — every
//! check of a zstd frame (size bound, content checksum, decoded length) applies unchanged — and
//! the inverse transform then gives the chunk's bytes. The exact definitions are in `docs/FORMAT.md` ("Extension
//! codecs"); the reference reader refuses these codec ids (unsupported codec).
//!
//! [`ChunkCodec`] owns both directions of one codec: [`ChunkCodec::encode`] and
//! [`ChunkCodec::decode`] sit side by side, so a transform and its inverse change together.
//!
//! Every transform works on `s`-byte elements (`s` = the dataset's element size) and is defined
//! for any `s >= 1` and any length: the `n = len / s` whole elements are transformed, and the
//! trailing `len % s` bytes (never present in a chunk our writer makes, whose length is a whole
//! number of elements) are copied verbatim after them.

use super::Codec;

/// The element transform of an extension codec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transform {
    /// Byte `k` of element `i` goes to `k * n + i` ([`shuffle`]).
    Shuffle,
    /// Bit `j` of byte `k` of element `i` goes to bit-plane `8k + j`, position `i` (whole
    /// groups of 8 elements; the rest verbatim: [`bitshuffle`]).
    BitShuffle,
    /// Each element minus the one before it ([`delta`]), then [`Transform::Shuffle`].
    DeltaShuffle,
    /// Each element minus the one before it ([`delta`]), then [`Transform::BitShuffle`].
    DeltaBitShuffle,
}

impl Transform {
    /// Writes the transformed `src` into `dst` (same length).
    pub fn forward(self, elem: usize, src: &[u8], dst: &mut [u8]) {
        debug_assert_eq!(src.len(), dst.len());
        match self {
            Transform::Shuffle => shuffle(elem, src, dst),
            Transform::BitShuffle => bitshuffle(elem, src, dst),
            Transform::DeltaShuffle | Transform::DeltaBitShuffle => {
                let mut d = vec![0u8; src.len()];
                delta(elem, src, &mut d);
                if self == Transform::DeltaShuffle {
                    shuffle(elem, &d, dst);
                } else {
                    bitshuffle(elem, &d, dst);
                }
            }
        }
    }

    /// Undoes [`Transform::forward`]: writes the original bytes of `src` into `dst`.
    pub fn inverse(self, elem: usize, src: &[u8], dst: &mut [u8]) {
        debug_assert_eq!(src.len(), dst.len());
        match self {
            Transform::Shuffle => unshuffle(elem, src, dst),
            Transform::BitShuffle => unbitshuffle(elem, src, dst),
            Transform::DeltaShuffle => {
                unshuffle(elem, src, dst);
                undelta_in_place(elem, dst);
            }
            Transform::DeltaBitShuffle => {
                unbitshuffle(elem, src, dst);
                undelta_in_place(elem, dst);
            }
        }
    }

    /// Bytes of scratch memory [`Transform::forward`] takes beyond its output, for a chunk of
    /// `len` bytes (the delta's intermediate copy).
    pub fn scratch_bytes(self, len: u64) -> u64 {
        match self {
            Transform::Shuffle | Transform::BitShuffle => 0,
            Transform::DeltaShuffle | Transform::DeltaBitShuffle => len,
        }
    }
}

/// Why a chunk does not decode.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error("zstd payload does not decode: {0}")]
    Zstd(#[source] std::io::Error),
    #[error("zstd payload decodes to {got} bytes, raw_byte_len is {want}")]
    Length { got: usize, want: usize },
    #[error("codec {0} is not a zstd codec")]
    NotZstd(&'static str),
}

/// One chunk codec for one element size: compresses and decompresses a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkCodec {
    pub codec: Codec,
    /// The dataset's element size in bytes.
    pub elem: usize,
}

impl ChunkCodec {
    pub fn new(codec: Codec, elem: usize) -> ChunkCodec {
        ChunkCodec { codec, elem }
    }

    /// Compresses `raw` into `out` (cleared first; its capacity is kept) with `zstd`, through
    /// `scratch` for the transformed bytes. Raw chunks are the caller's business.
    pub fn encode(
        &self,
        raw: &[u8],
        zstd: &mut zstd::bulk::Compressor<'_>,
        scratch: &mut Vec<u8>,
        out: &mut Vec<u8>,
    ) -> std::io::Result<()> {
        out.clear();
        let input: &[u8] = match self.codec.transform() {
            Some(t) => {
                scratch.clear();
                scratch.resize(raw.len(), 0);
                t.forward(self.elem, raw, scratch);
                scratch
            }
            None => raw,
        };
        out.reserve_exact(zstd::zstd_safe::compress_bound(input.len()));
        zstd.compress_to_buffer(input, out)?;
        Ok(())
    }

    /// Decodes the zstd frame `stored` into `out` (exactly `raw_byte_len` long) and undoes the
    /// transform. A transformed codec decodes the frame through a buffer of `out`'s size.
    pub fn decode(&self, stored: &[u8], out: &mut [u8]) -> Result<(), CodecError> {
        if !self.codec.is_zstd_frame() {
            return Err(CodecError::NotZstd(self.codec.name()));
        }
        match self.codec.transform() {
            None => unzstd(stored, out),
            Some(t) => {
                let mut mid = vec![0u8; out.len()];
                unzstd(stored, &mut mid)?;
                t.inverse(self.elem, &mid, out);
                Ok(())
            }
        }
    }
}

fn unzstd(stored: &[u8], out: &mut [u8]) -> Result<(), CodecError> {
    let got = zstd::bulk::decompress_to_buffer(stored, out).map_err(CodecError::Zstd)?;
    if got != out.len() {
        return Err(CodecError::Length {
            got,
            want: out.len(),
        });
    }
    Ok(())
}

/// Byte shuffle: byte `k` of element `i` to `k * n + i`; the trailing partial element verbatim.
pub fn shuffle(elem: usize, src: &[u8], dst: &mut [u8]) {
    let elem = elem.max(1);
    let n = src.len() / elem;
    let body = n * elem;
    if elem == 1 {
        dst.copy_from_slice(src);
        return;
    }
    for (i, e) in src[..body].chunks_exact(elem).enumerate() {
        for (k, &b) in e.iter().enumerate() {
            dst[k * n + i] = b;
        }
    }
    dst[body..].copy_from_slice(&src[body..]);
}

/// Inverse of [`shuffle`].
pub fn unshuffle(elem: usize, src: &[u8], dst: &mut [u8]) {
    let elem = elem.max(1);
    let n = src.len() / elem;
    let body = n * elem;
    if elem == 1 {
        dst.copy_from_slice(src);
        return;
    }
    for (i, e) in dst[..body].chunks_exact_mut(elem).enumerate() {
        for (k, b) in e.iter_mut().enumerate() {
            *b = src[k * n + i];
        }
    }
    dst[body..].copy_from_slice(&src[body..]);
}

/// Transposes the 8×8 bit matrix whose row `r` is byte `r` of `x` (bit `c` = column `c`): bit
/// `8r + c` goes to `8c + r`. Its own inverse.
fn transpose8(mut x: u64) -> u64 {
    let t = (x ^ (x >> 7)) & 0x00AA_00AA_00AA_00AA;
    x = x ^ t ^ (t << 7);
    let t = (x ^ (x >> 14)) & 0x0000_CCCC_0000_CCCC;
    x = x ^ t ^ (t << 14);
    let t = (x ^ (x >> 28)) & 0x0000_0000_F0F0_F0F0;
    x ^ t ^ (t << 28)
}

/// Bit shuffle of the first `m = 8 * floor(n / 8)` elements: plane `p = 8k + j` (bit `j`, LSB
/// first, of byte `k` of each element) holds `m / 8` bytes at `p * m / 8`, element `i`'s bit
/// in byte `i / 8` at bit `i % 8`. Bytes from `m * elem` on are copied verbatim.
pub fn bitshuffle(elem: usize, src: &[u8], dst: &mut [u8]) {
    let elem = elem.max(1);
    let groups = src.len() / elem / 8;
    let body = groups * 8 * elem;
    for g in 0..groups {
        let base = g * 8 * elem;
        for k in 0..elem {
            let mut x = 0u64;
            for t in 0..8 {
                x |= u64::from(src[base + t * elem + k]) << (8 * t);
            }
            let y = transpose8(x).to_le_bytes();
            for (j, &b) in y.iter().enumerate() {
                dst[(8 * k + j) * groups + g] = b;
            }
        }
    }
    dst[body..].copy_from_slice(&src[body..]);
}

/// Inverse of [`bitshuffle`].
pub fn unbitshuffle(elem: usize, src: &[u8], dst: &mut [u8]) {
    let elem = elem.max(1);
    let groups = src.len() / elem / 8;
    let body = groups * 8 * elem;
    for g in 0..groups {
        let base = g * 8 * elem;
        for k in 0..elem {
            let mut y = [0u8; 8];
            for (j, b) in y.iter_mut().enumerate() {
                *b = src[(8 * k + j) * groups + g];
            }
            let x = transpose8(u64::from_le_bytes(y));
            for t in 0..8 {
                dst[base + t * elem + k] = (x >> (8 * t)) as u8;
            }
        }
    }
    dst[body..].copy_from_slice(&src[body..]);
}

/// Subtraction delta: each whole element, read as a little-endian unsigned integer of `elem`
/// bytes, minus the element before it, modulo `2^(8 * elem)` (the first element unchanged); the
/// trailing partial element verbatim.
pub fn delta(elem: usize, src: &[u8], dst: &mut [u8]) {
    let elem = elem.max(1);
    let body = src.len() / elem * elem;
    if elem <= 8 {
        let mask = u64::MAX >> (64 - 8 * elem);
        let mut prev = 0u64;
        for (d, s) in dst[..body]
            .chunks_exact_mut(elem)
            .zip(src[..body].chunks_exact(elem))
        {
            let v = le_u64(s);
            d.copy_from_slice(&(v.wrapping_sub(prev) & mask).to_le_bytes()[..elem]);
            prev = v;
        }
    } else {
        dst[..body].copy_from_slice(&src[..body]);
        let mut i = body;
        while i >= 2 * elem {
            // Backwards: element `i / elem - 1` minus its (still original) predecessor.
            let (a, b) = dst[i - 2 * elem..i].split_at_mut(elem);
            sub_le(b, a);
            i -= elem;
        }
    }
    dst[body..].copy_from_slice(&src[body..]);
}

/// Inverse of [`delta`], in place: each element plus the (already restored) one before it.
pub fn undelta_in_place(elem: usize, buf: &mut [u8]) {
    let elem = elem.max(1);
    let body = buf.len() / elem * elem;
    if elem <= 8 {
        let mask = u64::MAX >> (64 - 8 * elem);
        let mut prev = 0u64;
        for e in buf[..body].chunks_exact_mut(elem) {
            prev = le_u64(e).wrapping_add(prev) & mask;
            e.copy_from_slice(&prev.to_le_bytes()[..elem]);
        }
    } else {
        let mut i = elem;
        while i + elem <= body {
            let (a, b) = buf[i - elem..i + elem].split_at_mut(elem);
            add_le(b, a);
            i += elem;
        }
    }
}

/// Up to 8 little-endian bytes as a u64.
fn le_u64(b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w[..b.len()].copy_from_slice(b);
    u64::from_le_bytes(w)
}

/// `x -= y` for little-endian unsigned integers of equal length, modulo `2^(8 len)`.
fn sub_le(x: &mut [u8], y: &[u8]) {
    let mut borrow = 0u16;
    for (a, &b) in x.iter_mut().zip(y) {
        let d = u16::from(*a)
            .wrapping_sub(u16::from(b))
            .wrapping_sub(borrow);
        *a = d as u8;
        borrow = (d >> 8) & 1;
    }
}

/// `x += y` for little-endian unsigned integers of equal length, modulo `2^(8 len)`.
fn add_le(x: &mut [u8], y: &[u8]) {
    let mut carry = 0u16;
    for (a, &b) in x.iter_mut().zip(y) {
        let s = u16::from(*a) + u16::from(b) + carry;
        *a = s as u8;
        carry = s >> 8;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transpose8_moves_bit_rc_to_cr() {
        for r in 0..8 {
            for c in 0..8 {
                assert_eq!(transpose8(1u64 << (8 * r + c)), 1u64 << (8 * c + r));
            }
        }
    }
}
