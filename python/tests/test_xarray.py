"""The xarray engine: identity with the sources, laziness, dask chunks, pickling, mfdataset."""

from __future__ import annotations

import pathlib
import pickle

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
    """The documented difference: the history rows appended as lines to ``history``."""
    lines = "\n".join(f.history_lines)
    old = src.attrs.get("history")
    want = f"{old}\n{lines}" if old else lines
    assert got.attrs.get("history") == want
    got.attrs.pop("history")
    if old is None:
        return
    got.attrs["history"] = old


@pytest.mark.parametrize("src", SOURCES, ids=lambda p: p.name)
def test_identical_to_the_source(src, converted):
    try:
        out = converted(src, skip_unsupported=True)
    except tet.TetError as e:
        pytest.skip(f"not convertible: {e}")
    with tet.open(out) as f:
        for group in _groups(src):
            kw = {"group": group} if group else {}
            try:
                want = _open_source(src, **kw)
            except Exception as e:  # noqa: BLE001 - the source library's own refusal
                pytest.skip(f"xarray cannot open the source: {e}")
            got = xr.open_dataset(out, engine="tet", **kw)
            skipped = {n.split("/")[-1] for n, _ in f.skipped}
            want = want.drop_vars([v for v in want.variables if v in skipped], errors="ignore")
            if group is None:
                _check_history_rule(want, got, f)
            xr.testing.assert_identical(want.load(), got.load())


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
    assert got["temp"].dtype == np.float32 and np.isnan(got["temp"].values[0, 0, 0])
    assert got.encoding["tet_history"][0]["op"] == "convert"
    assert got["temp"].encoding["tet_stored"] == ("temp",)


def test_opening_reads_no_chunk_and_isel_reads_only_its_chunks(cube):
    _, out = cube
    before = tet.chunks_read_total()
    ds = xr.open_dataset(out, engine="tet")
    assert tet.chunks_read_total() == before  # footer and index only (time is an index: read)
    ds = xr.open_dataset(out, engine="tet")
    start = tet.chunks_read_total()
    step = ds["temp"].isel(time=5).values
    assert step.shape == (90, 120)
    assert tet.chunks_read_total() - start == 3  # one time step: 3 chunks of 30 × 120


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
