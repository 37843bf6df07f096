"""Extension codecs (zstd over shuffled / bit-shuffled / delta-coded elements, docs/FORMAT.md
"Extension codecs"): ``tet.open`` reads files written with them, and each stored frame holds
exactly the transform of the chunk that numpy computes on its own."""

from __future__ import annotations

import struct

import numpy as np
import pytest

import tet
from conftest import save_npy

# Big enough that every chunk compresses (a chunk zstd shrinks by less than 1/32 stays raw).
ARRAYS = {
    "f32": (280 + np.cumsum(np.random.default_rng(3).normal(0, 0.05, 24 * 37)))
    .astype(np.float32)
    .reshape(24, 37),
    "f64": np.linspace(-1, 1, 30 * 41).reshape(30, 41),
    "i16": (np.arange(40 * 33, dtype=np.int16) * 3 - 100).reshape(40, 33),
    "u8": (np.arange(1000) % 7).astype(np.uint8).reshape(40, 25),
    "i64": (np.arange(301, dtype=np.int64) * -98765).reshape(301),
    "f16": np.linspace(-3, 3, 40 * 33, dtype=np.float16).reshape(40, 33),
}
CODEC_IDS = {
    "zstd-shuffle": 128,
    "zstd-bitshuffle": 129,
    "zstd-delta": 130,
    "zstd-delta-bitshuffle": 131,
}


def index_rows(path):
    """(coords, payload_offset, raw_byte_len, stored_byte_len, codec) of every index row, read
    with ``struct`` from the v1 layout (superblock, then 104-byte rows after a 32-byte header)."""
    b = open(path, "rb").read()
    assert b[:4] == b"TETR"
    index_off, _ = struct.unpack_from("<QQ", b, 16)
    assert b[index_off:index_off + 4] == b"TIDX"
    (count,) = struct.unpack_from("<Q", b, index_off + 8)
    rows = []
    for r in range(count):
        at = index_off + 32 + 104 * r
        f = struct.unpack_from("<Q8QQQQI", b, at)
        rows.append((f[1:9], f[9], f[10], f[11], f[12]))
    return b, rows


def numpy_shuffle(chunk: np.ndarray) -> bytes:
    """numpy's own byte shuffle: byte k of every element, for k = 0 .. itemsize - 1."""
    a = np.ascontiguousarray(chunk).astype(chunk.dtype.newbyteorder("<"))
    return np.frombuffer(a.tobytes(), dtype=np.uint8).reshape(-1, a.itemsize).T.tobytes()


def numpy_bitshuffle(chunk: np.ndarray) -> bytes:
    """Bit-plane 8k + j (bit j, LSB first, of byte k) of the first 8*floor(n/8) elements, eight
    elements to a byte (element 8g + t at bit t of byte g); then the rest of the bytes as they
    are."""
    a = np.ascontiguousarray(chunk).astype(chunk.dtype.newbyteorder("<"))
    s = a.itemsize
    raw = np.frombuffer(a.tobytes(), dtype=np.uint8)
    m = raw.size // s // 8 * 8
    by_byte = raw[: m * s].reshape(m, s).T  # (s, m)
    bits = np.unpackbits(by_byte[:, :, None], axis=2, bitorder="little")  # (s, m, 8)
    planes = bits.transpose(0, 2, 1).reshape(s * 8, m)  # plane 8k + j
    packed = np.packbits(planes, axis=1, bitorder="little")
    return packed.tobytes() + raw[m * s:].tobytes()


def numpy_delta(chunk: np.ndarray) -> np.ndarray:
    """Each element, as a little-endian unsigned integer of its size, minus the one before it in
    C order (numpy's unsigned arithmetic wraps modulo 2^bits); the first as it is."""
    a = np.ascontiguousarray(chunk).astype(chunk.dtype.newbyteorder("<")).reshape(-1)
    u = a.view(np.dtype(f"<u{a.itemsize}"))
    d = u.copy()
    d[1:] = u[1:] - u[:-1]
    return d


TRANSFORMS = {
    "zstd-shuffle": numpy_shuffle,
    "zstd-bitshuffle": numpy_bitshuffle,
    "zstd-delta": lambda c: numpy_shuffle(numpy_delta(c)),
    "zstd-delta-bitshuffle": lambda c: numpy_bitshuffle(numpy_delta(c)),
}


@pytest.mark.parametrize("name", sorted(ARRAYS))
@pytest.mark.parametrize("codec", sorted(CODEC_IDS))
def test_extension_codecs_read_back_and_frames_hold_numpys_transform(
    tmp_path, converted, name, codec
):
    zstd = pytest.importorskip("numcodecs").Zstd()
    want = ARRAYS[name]
    src = save_npy(tmp_path, name, want)
    # Chunks that leave clipped edge chunks on every axis.
    chunk = ",".join(str(max(1, n // 2 - 1)) for n in want.shape)
    out = converted(src, codec=f"{codec}:1", chunk=f"{name}:{chunk}")
    with tet.open(out) as f:
        ds = f[name]
        got = ds[...]
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype
        cshape = ds.chunks
    b, rows = index_rows(out)
    assert rows and {r[4] for r in rows} <= {0, CODEC_IDS[codec]}
    seen = 0
    for coords, off, raw_len, stored_len, cid in rows:
        sl = tuple(
            slice(c * n, min((c + 1) * n, full))
            for c, n, full in zip(coords, cshape, want.shape)
        )
        part = want[sl]
        assert raw_len == part.nbytes
        if cid != CODEC_IDS[codec]:
            continue
        seen += 1
        inner = bytes(zstd.decode(b[off:off + stored_len]))
        assert inner == TRANSFORMS[codec](part), (coords, codec)
    assert seen, "no chunk was stored with the codec"
