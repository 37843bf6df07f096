"""The xarray engine: identity with the sources, laziness, dask chunks, pickling, mfdataset."""

from __future__ import annotations

import json
import pathlib
import pickle
import subprocess
import sys

import numpy as np
import pytest

xr = pytest.importorskip("xarray")

import tet  # noqa: E402
from conftest import CORPUS, FIXTURES, save_npy  # noqa: E402


def _sources():
    out = []
    for root in (FIXTURES, CORPUS):
        if not root.exists():
            continue
        for p in sorted(root.rglob("*")):
            if "crash" in p.parts:
                continue
            if p.suffix in (".nc", ".h5") and p.is_file():
                out.append(p)
            elif p.suffix == ".zarr" and p.is_dir():
                out.append(p)
    return out


SOURCES = _sources()


def _engine(p: pathlib.Path) -> str:
    return "zarr" if p.suffix == ".zarr" else "netcdf4"


def _open_source(p: pathlib.Path, **kw):
    kw = dict(kw)
    if p.suffix == ".zarr":
        kw.setdefault("consolidated", False)
    return xr.open_dataset(p, engine=_engine(p), **kw)


def _groups(p: pathlib.Path) -> list[str | None]:
    if p.suffix != ".nc":
        return [None]
    import netCDF4

    groups: list[str | None] = [None]
    with netCDF4.Dataset(p) as nc:
        stack = list(nc.groups.values())
        while stack:
            g = stack.pop(0)
            groups.append(g.path.lstrip("/"))
            stack.extend(g.groups.values())
    return groups


def _check_history_rule(src: xr.Dataset, got: xr.Dataset, f: tet.File) -> None:
    """Rule 1 (README, "The xarray engine"): the history rows are appended as lines to the
    global ``history`` attribute."""
    lines = "\n".join(f.history_lines)
    old = src.attrs.get("history")
    want = f"{old}\n{lines}" if old else lines
    assert got.attrs.get("history") == want
    got.attrs.pop("history")
    if old is not None:
        got.attrs["history"] = old


def _json_attrs(attrs: dict) -> dict:
    """Rule 2: a Zarr attribute holding a JSON object or a list of non-strings has no typed
    ``.tet`` form and is kept as its compact JSON text."""
    out = {}
    for k, v in attrs.items():
        if isinstance(v, dict) or (isinstance(v, list) and not all(isinstance(x, str) for x in v)):
            v = json.dumps(v, separators=(",", ":"))
        out[k] = v
    return out


def _apply_rules(src: pathlib.Path, want: xr.Dataset, f: tet.File, group: str | None) -> xr.Dataset:
    # Rule 3: items of the source with no .tet form (listed in File.skipped) are not there;
    # string variables are (the footer keeps them).
    prefix = f"{group}/" if group else ""
    gone = {
        n[len(prefix):]
        for n, _ in f.skipped
        if n.startswith(prefix) and n not in f.text_variables
    }
    want = want.drop_vars([v for v in want.variables if v in gone], errors="ignore")
    # Rule 4: an HDF5 compound of two floats named r and i (h5py's and numpy's complex
    # layout) is read as the complex number it holds; netCDF-C shows the compound.
    for name, v in list(want.variables.items()):
        if v.dtype.names == ("r", "i"):
            vals = v.values
            ctype = np.result_type(vals["r"].dtype, np.complex64)
            want[name] = v.copy(data=(vals["r"] + 1j * vals["i"]).astype(ctype))
    if src.suffix == ".zarr":
        want.attrs = _json_attrs(want.attrs)
        for v in want.variables.values():
            v.attrs = _json_attrs(v.attrs)
    return want


def _source_opens(src: pathlib.Path, group: str | None) -> bool:
    """Whether xarray's own engine can read the source without crashing (netCDF-C in the
    netCDF4 wheel crashes on HDF5 plugin filters it lacks): tried in a child process."""
    code = (
        "import sys, xarray as xr; kw = {'group': sys.argv[2]} if sys.argv[2] else {};"
        "eng = 'zarr' if sys.argv[1].endswith('.zarr') else 'netcdf4';"
        "xr.open_dataset(sys.argv[1], engine=eng, **kw).load()"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, str(src), group or ""], capture_output=True, timeout=120
    )
    return r.returncode == 0


@pytest.mark.parametrize("src", [p for p in SOURCES if p.suffix == ".zarr"], ids=lambda p: p.name)
def test_identical_to_the_source(src, converted):
    """Zarr sources (netCDF and HDF5 ones: test_identity.py, with every allowed difference
    listed there)."""
    try:
        out = converted(src, skip_unsupported=True)
    except tet.TetError as e:
        pytest.skip(f"not convertible: {e}")
    with tet.open(out) as f:
        for group in _groups(src):
            kw = {"group": group} if group else {}
            if src.suffix == ".h5" and not _source_opens(src, group):
                pytest.skip("xarray's netcdf4 engine cannot read this HDF5 file (see test_hdf5_values)")
            try:
                want = _open_source(src, **kw)
            except KeyError:
                # xarray's zarr engine needs dimension names the store lacks: the values and
                # types are compared with what the zarr library reads instead.
                assert src.suffix == ".zarr"
                _compare_values(_zarr_arrays(src), f)
                continue
            got = xr.open_dataset(out, engine="tet", **kw)
            want = _apply_rules(src, want, f, group)
            if group is None:
                _check_history_rule(want, got, f)
            xr.testing.assert_identical(want.load(), got.load())


def _h5_datasets(src: pathlib.Path):
    h5py = pytest.importorskip("h5py")
    out = {}
    with h5py.File(src, "r") as h:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset) and obj.dtype.kind in "biufc" and obj.dtype.names is None:
                try:
                    out[name] = obj[()]
                except (OSError, ValueError, TypeError):
                    pass  # a filter h5py lacks, an external file out of reach
        h.visititems(visit)
    return out


@pytest.mark.parametrize("src", [p for p in SOURCES if p.suffix == ".h5"], ids=lambda p: p.name)
def test_hdf5_values(src, converted):
    """Every numeric HDF5 dataset h5py can read has the same values and type through tet."""
    out = converted(src, skip_unsupported=True)
    want = _h5_datasets(src)
    assert want, "h5py read nothing"
    with tet.open(out) as f:
        _compare_values(want, f)


def _compare_values(want: dict, f: tet.File) -> None:
    """Each source array is in the file with the same values and type (byte order aside:
    values come back little-endian), or is listed in ``File.skipped``."""
    skipped = {n for n, _ in f.skipped}
    for name, values in want.items():
        if name not in f:
            assert name in skipped, f"{name} is neither converted nor listed as skipped"
            continue
        got = f[name][...]
        assert got.dtype == values.dtype.newbyteorder("<"), name
        np.testing.assert_array_equal(got, values, err_msg=name)


def _zarr_arrays(src: pathlib.Path) -> dict:
    zarr = pytest.importorskip("zarr")
    out = {}
    root = zarr.open_group(str(src), mode="r")
    for path, arr in root.members(max_depth=None):
        if isinstance(arr, zarr.Array) and arr.dtype.kind in "biufc":
            out[path] = arr[...]
    return out


def test_engine_is_found_from_the_magic(tmp_path, converted):
    src = save_npy(tmp_path, "m", np.arange(6, dtype=np.float32).reshape(2, 3))
    out = converted(src)
    plain = tmp_path / "no_extension"
    plain.write_bytes(out.read_bytes())
    ds = xr.open_dataset(plain)
    np.testing.assert_array_equal(ds["m"].values, np.arange(6, dtype=np.float32).reshape(2, 3))


@pytest.fixture(scope="module")
def cube(tmp_path_factory):
    """A netCDF-4 file of 24 time steps × 90 × 120 f32 (zlib), converted with one time step
    per chunk and 3 chunks across each step."""
    import netCDF4

    d = tmp_path_factory.mktemp("cube")
    src = d / "cube.nc"
    with netCDF4.Dataset(src, "w") as nc:
        nc.createDimension("time", None)
        nc.createDimension("lat", 90)
        nc.createDimension("lon", 120)
        t = nc.createVariable("time", "f8", ("time",))
        t.units = "days since 2000-01-01"
        t.calendar = "noleap"
        t[:] = np.arange(24)
        v = nc.createVariable("temp", "i2", ("time", "lat", "lon"), zlib=True, fill_value=-999)
        v.scale_factor = 0.01
        v.add_offset = 273.15
        v.units = "K"
        v.set_auto_maskandscale(False)
        raw = (np.arange(24 * 90 * 120) % 5000).astype(np.int16).reshape(24, 90, 120)
        raw[0, 0, :5] = -999
        v[:] = raw
        nc.title = "cube"
    out = d / "cube.tet"
    tet.convert(src, out, codec="zstd", chunk={"temp": (1, 30, 120)})
    return src, out


def test_cube_decodes_like_netcdf4(cube):
    src, out = cube
    want = xr.open_dataset(src, engine="netcdf4")
    got = xr.open_dataset(out, append_history=False)
    xr.testing.assert_identical(want, got)
    assert got["temp"].dtype == want["temp"].dtype and np.isnan(got["temp"].values[0, 0, 0])
    assert got.encoding["tet_history"][0]["op"] == "convert"
    assert got["temp"].encoding["tet_stored"] == ("temp",)


def test_opening_reads_no_chunk_and_isel_reads_only_its_chunks(cube):
    _, out = cube
    key = (str(out), "temp")

    def temp_reads():
        return tet.read_stats().get(key, 0)

    before = temp_reads()
    ds = xr.open_dataset(out, engine="tet")
    # The footer and the index (and the index coordinate `time`, which xarray loads to build
    # its index): no chunk of `temp`.
    assert temp_reads() == before
    step = ds["temp"].isel(time=5).values
    assert step.shape == (90, 120)
    assert temp_reads() - before == 3  # one time step: 3 chunks of 30 × 120
    ds["temp"].isel(time=7, lat=slice(0, 10)).values
    assert temp_reads() - before == 4


def test_dask_chunks_follow_the_tet_chunks(cube):
    _, out = cube
    ds = xr.open_dataset(out, engine="tet", chunks={})
    assert ds["temp"].data.chunksize == (1, 30, 120)
    assert ds["temp"].encoding["preferred_chunks"] == {"time": 1, "lat": 30, "lon": 120}
    want = xr.open_dataset(out, engine="tet")
    xr.testing.assert_identical(ds.compute(), want.load())


def test_lazy_dataset_pickles(cube):
    _, out = cube
    ds = xr.open_dataset(out, engine="tet")
    again = pickle.loads(pickle.dumps(ds))
    xr.testing.assert_identical(again.load(), ds.load())
    dsk = xr.open_dataset(out, engine="tet", chunks={})
    again = pickle.loads(pickle.dumps(dsk))
    np.testing.assert_array_equal(again["temp"][3].values, dsk["temp"][3].values)


def test_threads_read_concurrently(cube):
    _, out = cube
    ds = xr.open_dataset(out, engine="tet", chunks={"time": 1})
    import dask

    with dask.config.set(scheduler="threads", num_workers=4):
        got = ds["temp"].mean(("lat", "lon")).values
    want = xr.open_dataset(out, engine="tet")["temp"].mean(("lat", "lon")).values
    np.testing.assert_allclose(got, want)


def test_open_mfdataset(tmp_path):
    import netCDF4

    outs = []
    for k in range(3):
        src = tmp_path / f"part{k}.nc"
        with netCDF4.Dataset(src, "w") as nc:
            nc.createDimension("time", 4)
            nc.createDimension("x", 5)
            t = nc.createVariable("time", "i4", ("time",))
            t[:] = np.arange(4) + 4 * k
            v = nc.createVariable("v", "f4", ("time", "x"))
            v[:] = np.arange(20, dtype=np.float32).reshape(4, 5) + 100 * k
        out = tmp_path / f"part{k}.tet"
        tet.convert(src, out)
        outs.append(out)
    ds = xr.open_mfdataset(outs, engine="tet", combine="by_coords")
    assert ds["v"].shape == (12, 5)
    assert ds["time"].values.tolist() == list(range(12))
    assert float(ds["v"].isel(time=9, x=2).values) == 100 * 2 + 1 * 5 + 2


def test_group_and_drop_variables(tmp_path):
    import netCDF4

    src = tmp_path / "g.nc"
    with netCDF4.Dataset(src, "w") as nc:
        nc.createDimension("x", 3)
        a = nc.createVariable("a", "f8", ("x",))
        a[:] = [1, 2, 3]
        g = nc.createGroup("inner")
        g.createDimension("y", 2)
        b = g.createVariable("b", "i4", ("y",))
        b[:] = [7, 8]
        b.note = "in a group"
        g.kind = "group attribute"
        s = nc.createVariable("names", str, ("x",))
        s[:] = np.array(["alpha", "be", "c"], dtype=object)
    out = tmp_path / "g.tet"
    tet.convert(src, out)
    root = xr.open_dataset(out, engine="tet")
    assert sorted(root.variables) == ["a", "names"]
    assert root["names"].values.tolist() == ["alpha", "be", "c"]
    inner = xr.open_dataset(out, engine="tet", group="inner")
    assert inner["b"].values.tolist() == [7, 8]
    assert inner["b"].attrs == {"note": "in a group"}
    assert inner.attrs == {"kind": "group attribute"}
    xr.testing.assert_identical(inner, xr.open_dataset(src, engine="netcdf4", group="inner"))
    dropped = xr.open_dataset(out, engine="tet", drop_variables=["a"])
    assert "a" not in dropped.variables


def test_several_gib_file_opens_from_its_index(tmp_path):
    """A 4 GiB variable: opening reads no chunk, one step along the first axis reads one."""
    shape = (1024, 1024, 1024)
    src = tmp_path / "big.npy"
    a = np.lib.format.open_memmap(src, mode="w+", dtype=np.float32, shape=shape)
    a[700, 3, 5] = 42.0  # the rest stays a sparse hole of zeros
    a.flush()
    del a
    out = tmp_path / "big.tet"
    r = tet.convert(src, out, codec="zstd")
    assert r.raw_bytes == 4 * 2**30
    assert out.stat().st_size < 64 * 2**20
    key = (str(out), "big")
    before = tet.read_stats().get(key, 0)
    ds = xr.open_dataset(out, engine="tet")
    assert ds["big"].shape == shape
    assert tet.read_stats().get(key, 0) == before
    step = ds["big"].isel(phony_dim_0=700).values
    assert step[3, 5] == 42.0 and float(step.sum()) == 42.0
    with tet.open(out) as f:
        per_step = f["big"].chunks
    touched = (1024 // per_step[1]) * (1024 // per_step[2]) if per_step[0] == 1 else None
    assert tet.read_stats()[key] - before == (touched or 1)


def test_damaged_chunk_raises_on_first_read(tmp_path):
    src = tmp_path / "d.npy"
    np.save(src, np.arange(4000, dtype=np.float64).reshape(40, 100))
    out = tmp_path / "d.tet"
    tet.convert(src, out, codec="raw", chunk="d:10,100")
    b = bytearray(out.read_bytes())
    at = bytes(b).find(np.float64(2500.0).tobytes())
    b[at + 3] ^= 0x10
    out.write_bytes(bytes(b))
    ds = xr.open_dataset(out, engine="tet")
    np.testing.assert_array_equal(ds["d"][:20].values, np.arange(2000.0).reshape(20, 100))
    with pytest.raises(tet.CorruptError, match=r"chunk \[2, 0\].*bytes"):
        ds["d"][25].values
