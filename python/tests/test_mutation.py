"""The Python reader never returns damaged data (issue 32): damaged copies of converted files —
single bit flips, zeroed runs, truncations, over every region of the file — either read equal to
the original (values, attributes, history, string variables) or raise a ``tet.TetError`` before
any value is returned; never another exception, lost metadata or different values.

The sources are written by numpy, netCDF4 and h5py and converted with ``tet.convert`` (zstd and
raw chunks, several chunks per array, attributes, history, string variables, a complex array).
The mutants are drawn from a seeded generator, so every run tries the same ones.
"""

from __future__ import annotations

import collections
import dataclasses
import pathlib
import random
import struct

import numpy as np
import pytest

import tet

from conftest import REFERENCE, need

SEED = 32
FLIPS, ZERO_RUNS, CUTS = 12, 5, 3  # per region and file


# -- the sources ---------------------------------------------------------------------------------


def _netcdf_source(d: pathlib.Path) -> pathlib.Path:
    netCDF4 = pytest.importorskip("netCDF4")
    p = d / "nc_source.nc"
    with netCDF4.Dataset(p, "w") as nc:
        nc.title = "mutation source"
        nc.history = "written by test_mutation"
        nc.version = np.int32(3)
        nc.createDimension("time", None)
        nc.createDimension("x", 16)
        nc.createDimension("strlen", 6)
        t = nc.createVariable("time", "f8", ("time",))
        t.units = "days since 2000-01-01"
        t[:] = np.arange(12.0)
        v = nc.createVariable("temp", "f4", ("time", "x"), zlib=True)
        v.units = "K"
        v.valid_range = np.array([0.0, 400.0], dtype="f4")
        v[:] = (np.arange(12 * 16, dtype="f4") * 0.5 + 250).reshape(12, 16)
        c = nc.createVariable("count", "i2", ("time", "x"), fill_value=-1)
        c.long_name = "counts"
        c[:] = (np.arange(12 * 16) % 300).astype("i2").reshape(12, 16)
        s = nc.createVariable("station", "S1", ("x", "strlen"))
        s.long_name = "station code"
        names = np.array([f"st{i:02d}" for i in range(16)], dtype="S6")
        s[:] = netCDF4.stringtochar(names)
        lab = nc.createVariable("label", str, ("x",))
        lab[:] = np.array([f"label number {i}" for i in range(16)], dtype=object)
    return p


def _hdf5_source(d: pathlib.Path) -> pathlib.Path:
    h5py = pytest.importorskip("h5py")
    p = d / "h5_source.h5"
    with h5py.File(p, "w") as h:
        h.attrs["title"] = "h5 source"
        h.attrs["n"] = np.int64(7)
        g = h.create_group("grid")
        g.attrs["note"] = "a group"
        v = g.create_dataset(
            "values", data=np.arange(600, dtype="<i4").reshape(20, 30), chunks=(5, 30)
        )
        v.attrs["units"] = "m"
        h.create_dataset("flags", data=np.array([True, False, False] * 7))
        h.create_dataset("cplx", data=(np.arange(8) + 1j * np.arange(8)).astype("c16"))
    return p


def _npy_source(d: pathlib.Path) -> pathlib.Path:
    p = d / "a.npy"
    np.save(p, np.sin(np.arange(60 * 40, dtype="f8")).reshape(60, 40))
    return p


@pytest.fixture(scope="module")
def originals(tmp_path_factory):
    """The converted files: name → path."""
    d = tmp_path_factory.mktemp("mutation")
    nc = _netcdf_source(d)
    out = {}
    for name, src, opts in [
        ("nc-zstd", nc, dict(codec="zstd", chunk={"temp": (3, 16), "count": (4, 8)})),
        ("nc-raw", nc, dict(codec="raw", chunk={"temp": (5, 8), "count": (12, 4)})),
        ("h5", _hdf5_source(d), dict(codec="auto")),
        ("npy", _npy_source(d), dict(codec="zstd", chunk="a:15,40")),
    ]:
        dst = d / f"{name}.tet"
        tet.convert(src, dst, **opts)
        out[name] = dst
    return out


# -- what a read gives ---------------------------------------------------------------------------


def canon(v):
    """A value in a form ``==`` compares exactly (array bytes and types, NaN included)."""
    if isinstance(v, np.ndarray):
        if v.dtype == object:
            return ("O", v.shape, tuple(canon(x) for x in v.ravel().tolist()))
        return (v.dtype.str, v.shape, v.tobytes())
    if isinstance(v, np.generic):
        return (v.dtype.str, v.tobytes())
    if isinstance(v, dict):
        return tuple((k, canon(x)) for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return tuple(canon(x) for x in v)
    if dataclasses.is_dataclass(v):
        return canon(dataclasses.asdict(v))
    return v


def snapshot(path) -> tuple:
    """Everything ``tet.open`` gives: every dataset read whole, its metadata, the file's
    attributes, history, string variables."""
    with tet.open(path) as f:
        datasets = tuple(
            (
                name,
                str(ds.dtype),
                ds.shape,
                ds.dims,
                canon(ds.attrs),
                canon(ds.facts),
                ds.stored,
                canon(ds.coords),
                canon(ds.meta),
                canon(ds[...]),
            )
            for name, ds in f.datasets.items()
        )
        return (
            datasets,
            canon(f.attrs),
            canon(f.facts),
            canon(f.history),
            tuple(f.history_lines),
            canon(f.info),
            canon(f.skipped),
            canon(f.text_variables),
            f.footer_error,
            f.verified,
        )


def outcome(path, want) -> str:
    """``equal``, the name of the ``tet.TetError`` raised, or ``DIFFERENT``; any other exception
    propagates (a failure of the test)."""
    try:
        got = snapshot(path)
    except tet.TetError as e:
        return type(e).__name__
    return "equal" if got == want else "DIFFERENT"


# -- the mutants ---------------------------------------------------------------------------------


def regions(b: bytes) -> dict[str, tuple[int, int]]:
    """The byte ranges of a converted file's parts: superblock, dataset directory, chunk index,
    payloads (with any metadata spill), footer JSON, footer trailer."""
    n_ds, flags, ix_off, ix_len = struct.unpack_from("<IIQQ", b, 8)
    assert b[:4] == b"TETR" and flags & 1 and n_ds > 0
    (blob_len,) = struct.unpack_from("<Q", b, 32)
    (json_len,) = struct.unpack_from("<Q", b, len(b) - 16)
    json_off = len(b) - 16 - json_len
    return {
        "superblock": (0, 32),
        "directory": (32, 40 + blob_len),
        "index": (ix_off, ix_off + ix_len),
        "payloads": (ix_off + ix_len, json_off),
        "footer-json": (json_off, len(b) - 16),
        "trailer": (len(b) - 16, len(b)),
    }


def shape_offsets(b: bytes) -> list[int]:
    """File offsets of every dataset's shape[0] field in the directory."""
    (n_ds,) = struct.unpack_from("<I", b, 8)
    pos, out = 40, []
    for _ in range(n_ds):
        name_len, _, ndim, _ = struct.unpack_from("<IIII", b, pos)
        p = pos + ((16 + name_len + 7) & ~7)
        out.append(p)
        pos = p + 16 * ndim
    return out


def mutants(b: bytes, rng: random.Random):
    """``(region, kind, bytes)``: random flips, zeroed runs and cuts in every region, and the
    targeted cases of the issue's classes."""
    for region, (lo, hi) in regions(b).items():
        if hi <= lo:
            continue
        for _ in range(FLIPS):
            m = bytearray(b)
            m[rng.randrange(lo, hi)] ^= 1 << rng.randrange(8)
            yield region, "flip", bytes(m)
        for _ in range(ZERO_RUNS):
            at = rng.randrange(lo, hi)
            m = bytearray(b)
            end = min(hi, at + rng.randint(1, 32))
            m[at:end] = bytes(end - at)
            yield region, "zero", bytes(m)
        for _ in range(CUTS):
            yield region, "cut", b[: rng.randrange(lo, hi)]
    r = regions(b)
    # The footer flag cleared in a file that still ends with its footer: read as footer-less,
    # it would lose its attributes, history and checksums.
    m = bytearray(b)
    m[12] &= 0xFE
    yield "superblock", "flag-cleared", bytes(m)
    # The footer zeroed, cut off, the trailer alone cut off.
    lo, hi = r["footer-json"]
    yield "footer-json", "zeroed-whole", b[:lo] + bytes(hi - lo) + b[hi:]
    yield "footer-json", "cut-at-start", b[:lo]
    yield "trailer", "cut-whole", b[: r["trailer"][0]]
    # Shapes asking for exabytes (bit 40 and bit 62 of shape[0]).
    for off in shape_offsets(b):
        for bit in (40, 62):
            m = bytearray(b)
            m[off + bit // 8] ^= 1 << (bit % 8)
            yield "directory", f"shape-bit-{bit}", bytes(m)
    # A payload flip in a file whose footer is damaged too (never "no checksums").
    plo, phi = r["payloads"]
    for _ in range(4):
        m = bytearray(b)
        m[rng.randrange(plo, phi)] ^= 0x10
        at = rng.randrange(lo, hi)
        m[at : at + 8] = bytes(len(m[at : at + 8]))
        yield "payloads", "flip+footer-zeroed", bytes(m)


def test_every_mutant_reads_equal_or_raises(originals, tmp_path):
    rng = random.Random(SEED)
    tally: collections.Counter = collections.Counter()
    per_region: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    wrong: list[str] = []
    n = 0
    for name, path in originals.items():
        want = snapshot(path)
        with tet.open(path) as f:
            assert f.verified and f.footer_error is None and f.history
            assert f.attrs or name == "npy"  # what a damaged footer would lose
        b = path.read_bytes()
        for region, kind, m in mutants(b, rng):
            if m == b:
                continue
            p = tmp_path / f"m{n}.tet"
            n += 1
            p.write_bytes(m)
            try:
                got = outcome(p, want)
            except Exception as e:  # noqa: BLE001 - what the test exists to catch
                got = f"{type(e).__name__}"
                wrong.append(f"{name} {region} {kind}: {type(e).__name__}: {e}")
            else:
                if got == "DIFFERENT":
                    wrong.append(f"{name} {region} {kind}: read different values or metadata")
            tally[got] += 1
            per_region[region][got] += 1
            p.unlink()
    print(f"\n{n} mutants: {dict(tally)}")
    for region, c in per_region.items():
        print(f"  {region}: {dict(c)}")
    assert not wrong, "\n".join(wrong[:40])
    assert n >= 400
    # Each region's damage was met (the test can fail: a reader that ignored a region would
    # read its mutants "equal" only where the bytes do not matter).
    for region, c in per_region.items():
        assert c["CorruptError"] > 0, (region, dict(c))


def test_xarray_engine_reads_equal_or_raises(originals, tmp_path):
    xr = pytest.importorskip("xarray")
    rng = random.Random(SEED + 1)
    tally: collections.Counter = collections.Counter()
    n = 0
    for name in ("nc-zstd", "h5"):
        path = originals[name]
        with xr.open_dataset(path, engine="tet") as ds:
            want = ds.load()
        b = path.read_bytes()
        every = list(mutants(b, rng))
        for region, kind, m in every[::4]:
            if m == b:
                continue
            p = tmp_path / f"x{n}.tet"
            n += 1
            p.write_bytes(m)
            try:
                with xr.open_dataset(p, engine="tet") as ds:
                    got = ds.load()
                    # `identical`: values, dims, coordinates and every attribute.
                    assert got.identical(want), f"{name} {region} {kind}: xarray view differs"
                    tally["equal"] += 1
            except tet.TetError as e:
                tally[type(e).__name__] += 1
    print(f"\n{n} xarray mutants: {dict(tally)}")
    assert tally["CorruptError"] > 0 and n >= 50


# -- files without checksums ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "sample.tet",
        "multichunk_u8.tet",
        "multichunk_u32.tet",
        "multichunk_f16.tet",
        "large.tet",
        "converted_small_cf.tet",
        "converted_cf_3d.tet",
    ],
)
def test_reference_files_open_and_say_they_are_unverified(name):
    with tet.open(need(REFERENCE / name)) as f:
        assert f.verified is False and f.footer_error is None
        for ds in f.datasets.values():
            assert ds[...].shape == ds.shape


def test_a_damaged_footer_takes_the_opt_in(tmp_path):
    plan = need(REFERENCE / "plan.tet")
    with pytest.raises(tet.CorruptError, match="allow_damaged_footer"):
        tet.open(plan)
    with tet.open(plan, allow_damaged_footer=True) as f:
        assert f.footer_error and not f.verified
        assert f["a"][...].tolist() == [[1, 2, 3], [4, 5, 6]]
        assert f.attrs == {} and f.history == []


def test_a_cleared_footer_flag_is_a_contradiction(originals, tmp_path):
    b = bytearray(originals["npy"].read_bytes())
    b[12] &= 0xFE
    p = tmp_path / "flag.tet"
    p.write_bytes(bytes(b))
    with pytest.raises(tet.CorruptError, match="flag bit 0 is clear"):
        tet.open(p)
    # Read as footer-less on purpose, the values are still the stored ones.
    with tet.open(p, allow_damaged_footer=True) as f:
        assert "flag bit 0" in f.footer_error and not f.verified
        with tet.open(originals["npy"]) as g:
            np.testing.assert_array_equal(f["a"][...], g["a"][...])
        # The engine's verify says so too.
        assert not f.verify(deep=True)["ok"]
