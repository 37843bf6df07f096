"""tet.open: metadata, basic indexing in the source's types, laziness, damage, errors."""

from __future__ import annotations

import hashlib
import os
import pathlib

import numpy as np
import pytest

import tet
from conftest import REFERENCE, need, save_npy

# One array per source element type the engine lowers or keeps: i8 (stored i16), bool
# (stored u8), complex (stored as two real datasets), f16, the rest as they are.
ARRAYS = {
    "i8": (np.arange(-60, 60, dtype=np.int8).reshape(10, 12)),
    "boolean": (np.arange(77) % 3 == 0).reshape(7, 11),
    "c64": (np.arange(30, dtype=np.float32) + 1j * np.arange(30, 0, -1, dtype=np.float32))
    .astype(np.complex64)
    .reshape(5, 6),
    "c128": np.exp(1j * np.linspace(0, 3, 24)).reshape(2, 3, 4),
    "f16": np.linspace(-2, 2, 40, dtype=np.float16).reshape(8, 5),
    "u16": np.arange(1000, dtype=np.uint16).reshape(10, 10, 10),
    "i64": (np.arange(120, dtype=np.int64) * -987654321).reshape(4, 30),
    "f64": np.random.default_rng(1).standard_normal((13, 17)),
}


@pytest.fixture(scope="module")
def npy_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("npy")
    return {k: save_npy(d, k, v) for k, v in ARRAYS.items()}


@pytest.mark.parametrize("name", sorted(ARRAYS))
@pytest.mark.parametrize("codec", ["raw", "zstd"])
def test_values_come_back_in_the_source_type(npy_files, converted, name, codec):
    want = ARRAYS[name]
    out = converted(npy_files[name], codec=codec, chunk="256")
    with tet.open(out) as f:
        (ds,) = f.datasets.values()
        assert ds.name == name
        assert ds.dtype == want.dtype
        assert ds.shape == want.shape
        got = ds[...]
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
        assert ds[-1, ::-2].tolist() == want[-1, ::-2].tolist()
        assert ds[1:3, 2].tolist() == want[1:3, 2].tolist()


def test_scalar_is_0d(tmp_path, converted):
    src = save_npy(tmp_path, "s", np.array(-42, dtype=np.int8))
    with tet.open(converted(src)) as f:
        ds = f["s"]
        assert ds.shape == () and ds.chunks == ()
        v = ds[()]
        assert v.shape == () and v.dtype == np.int8 and int(v) == -42
        assert int(ds[...]) == -42


def test_metadata_and_history(npy_files, converted):
    src = npy_files["u16"]
    out = converted(src, codec="zstd", chunk="u16:3,4,10")
    digest = "sha256:" + hashlib.sha256(pathlib.Path(src).read_bytes()).hexdigest()
    with tet.open(out) as f:
        ds = f["u16"]
        assert ds.chunks == (3, 4, 10)
        assert ds.stored == ("u16",)
        assert len(f.history) == 1
        row = f.history[0]
        assert row.op == "convert" and row.source == "npy"
        assert [p.digest for p in row.parents] == [digest]
        assert row.parents[0].algorithm == "sha256"
        assert row.tool == "tet-convert"
        assert row.params["codec"].startswith("zstd")
        assert row.time is not None and row.time.year >= 2024
        assert f.history_lines and "convert" in f.history_lines[0]
        assert f.footer_error is None
        assert f.verified  # its footer digest matched; every chunk read is checked
        assert "u16" in f and list(f) == ["u16"]
        with pytest.raises(tet.NotFoundError):
            f["nope"]
        with pytest.raises(LookupError):
            f["nope"]


def test_complex_is_one_array_stored_in_two(npy_files, converted):
    with tet.open(converted(npy_files["c64"])) as f:
        ds = f["c64"]
        assert ds.stored == ("c64/real", "c64/imag")
        assert ds[2, 3] == ARRAYS["c64"][2, 3]


def test_indexing_forms(npy_files, converted):
    want = ARRAYS["u16"]
    with tet.open(converted(npy_files["u16"], codec="zstd", chunk="u16:3,4,3")) as f:
        ds = f["u16"]
        for key in [
            (0,),
            (-1, -1, -1),
            (Ellipsis, 3),
            (slice(None, None, -1), 2, Ellipsis),
            (slice(8, 1, -3), slice(None), slice(1, 9, 4)),
            (slice(5, 5), 1),
            (None, 2, slice(3, 7)),
            (np.array([9, 0, 4, 4]), slice(None), -1),
            ([True, False] * 5, 1, 1),
        ]:
            np.testing.assert_array_equal(ds[key], want[key], err_msg=repr(key))
        for bad in [(10,), (0, 0, 0, 0), (-11,), ("a",), (1.5,)]:
            with pytest.raises(IndexError):
                ds[bad]


def test_only_touched_chunks_are_read(tmp_path, converted):
    a = np.arange(20 * 30, dtype=np.float32).reshape(20, 30)
    src = save_npy(tmp_path, "grid", a)
    with tet.open(converted(src, codec="zstd", chunk="grid:5,10")) as f:
        ds = f["grid"]
        assert f.chunks_read == 0
        assert ds[0, 0] == 0
        assert f.chunks_read == 1
        np.testing.assert_array_equal(ds[4:6, 9:11], a[4:6, 9:11])
        assert f.chunks_read == 1 + 4
        # A strided row that skips the middle chunk of the three along axis 1.
        np.testing.assert_array_equal(ds[7, ::25], a[7, ::25])
        assert f.chunks_read == 5 + 2
        ds[...]
        assert f.chunks_read == 7 + 12


def test_damaged_chunk_raises_naming_dataset_chunk_and_bytes(tmp_path, converted):
    a = np.arange(10 * 10, dtype=np.float64).reshape(10, 10)
    src = save_npy(tmp_path, "dmg", a)
    good = converted(src, codec="raw", chunk="dmg:5,5")
    bad = tmp_path / "bad.tet"
    b = bytearray(good.read_bytes())
    with tet.open(good) as f:
        assert f.verify(deep=True)["ok"]
    # The first chunk's payload starts after the 32-byte superblock and the directory; flip a
    # byte of the value 12.0 (row 2, column 2: inside chunk [0, 0]).
    needle = np.float64(12.0).tobytes()
    at = bytes(b).find(needle)
    assert at > 0
    b[at] ^= 0xFF
    bad.write_bytes(bytes(b))
    with tet.open(bad) as f:
        ds = f["dmg"]
        np.testing.assert_array_equal(ds[5:, 5:], a[5:, 5:])  # undamaged chunk reads
        with pytest.raises(tet.CorruptError) as e:
            ds[0, 0]
        msg = str(e.value)
        assert "dmg" in msg and "[0, 0]" in msg and "bytes" in msg, msg
        assert not f.verify(deep=True)["ok"]


def test_errors_are_typed(tmp_path):
    with pytest.raises(tet.NotFoundError):
        tet.open(tmp_path / "missing.tet")
    junk = tmp_path / "junk.tet"
    junk.write_bytes(b"not a tet file at all" * 4)
    with pytest.raises(tet.CorruptError):
        tet.open(junk)
    assert issubclass(tet.CorruptError, tet.TetError)


def test_closed_file_refuses_reads(npy_files, converted):
    f = tet.open(converted(npy_files["f64"]))
    ds = f["f64"]
    with f:
        ds[0]
    assert f.closed
    with pytest.raises(ValueError):
        ds[0]


def _f16_1_to_6(a):
    return a.astype(np.float32).tolist()


@pytest.mark.parametrize(
    "name,dtype",
    [
        ("sample.tet", np.float32),
        ("multichunk_u8.tet", np.uint8),
        ("multichunk_u32.tet", np.uint32),
        ("multichunk_f16.tet", np.float16),
        ("plan.tet", np.float32),
    ],
)
def test_reference_files_one_to_six(name, dtype):
    path = need(REFERENCE / name)
    if name == "plan.tet":
        # Its footer is deliberately corrupt: refused, unless asked for the stored datasets.
        with pytest.raises(tet.CorruptError, match="footer"):
            tet.open(path)
    with tet.open(path, allow_damaged_footer=name == "plan.tet") as f:
        (ds,) = f.datasets.values()
        assert ds.dtype == dtype and ds.shape == (2, 3) and ds.chunks == (2, 2)
        assert ds[...].astype(np.float64).tolist() == [[1, 2, 3], [4, 5, 6]]
        assert ds[:, 2].tolist() == [3, 6]
        # The reference tools record no checksums: the values are not vouched for.
        assert f.verified is False
        assert bool(f.footer_error) == (name == "plan.tet")


def test_reference_large_and_cf():
    with tet.open(need(REFERENCE / "large.tet")) as f:
        a = f["a"]
        want = np.arange(34 * 64, dtype=np.float32).reshape(34, 64)
        np.testing.assert_array_equal(a[...], want)
        np.testing.assert_array_equal(a[3:8, 10:17], want[3:8, 10:17])
    with tet.open(need(REFERENCE / "converted_small_cf.tet")) as f:
        assert f["chunked"][...].ravel().tolist() == list(range(700))
        assert f["x"][...].tolist() == [0, 10, 20, 30, 40, 50, 60]
        assert f["x"].coords["x"][6] == "60"
        assert f["t"][...].tolist() == [v * 0.5 for v in range(100)]
        assert f.history[0].op == "convert" and f.history[0].source == "nc"
        assert f.info["tool"] == "tet convert"
        assert f["packedf"].attrs["scale_factor"] == "2"
    with tet.open(need(REFERENCE / "converted_cf_3d.tet")) as f:
        assert len(f) == 8
        lat = f["lat"][...]
        assert (lat[0], lat[31], len(lat)) == (-90.0, 90.0, 32)
        assert f["temperature"].dims == ("time", "lat", "lon")
        assert f["time"][...].tolist() == list(range(32))
