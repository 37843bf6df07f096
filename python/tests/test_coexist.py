"""The package beside other readers' wheels: cfgrib/eccodes (whose ``eccodeslib`` wheel brings
its own ``libaec.so.0``), netCDF4, h5py and zarr, in one environment.

Every scenario runs in a fresh interpreter (``sys.executable``), because what is tested is
what happens when libraries are loaded — and unloaded at exit — in one process: each run must
exit 0 with no "double free"/"corruption" report, and read the right values. Nothing is
installed here; the module is skipped, with its reason, where cfgrib/eccodes are absent
(.ci/python-setup installs them, so it runs under CI).

Also: importing ``tet`` and xarray's engine discovery load no native code of the package,
and the extension's C libraries are the package's own copies, not libraries another wheel
could have loaded first under the same name."""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

_MISSING = [m for m in ("cfgrib", "eccodes", "xarray", "netCDF4") if importlib.util.find_spec(m) is None]
if _MISSING:
    _REASON = (
        f"{', '.join(_MISSING)} not installed: the coexistence test needs cfgrib, eccodes "
        "(with eccodeslib), xarray and netCDF4 (.ci/python-setup installs them)"
    )
    print(f"test_coexist: skipped: {_REASON}", file=sys.stderr)
    pytest.skip(_REASON, allow_module_level=True)

import tet  # noqa: E402

#: What a run must never print (glibc's heap checks; the loader's complaints).
BAD = ("double free", "corruption", "Segmentation fault", "munmap_chunk", "free():")

WANT = (np.arange(12, dtype="f4").reshape(3, 4) * 0.5).tolist()

# Run first in every scenario: the paths, the expected values and the readers.
PRELUDE = """
import json, os, sys
import numpy as np
NC, TET, GRIB, GRIB_VALUES = sys.argv[1:5]
WANT = np.arange(12, dtype="f4").reshape(3, 4) * 0.5

def read_nc(engine=None):
    import xarray as xr
    with xr.open_dataset(NC, engine=engine) as ds:
        np.testing.assert_array_equal(ds["temp"].values, WANT)
        assert ds["temp"].attrs["units"] == "K", ds["temp"].attrs

def read_tet(engine=None, chunks=None):
    import xarray as xr
    with xr.open_dataset(TET, engine=engine, chunks=chunks) as ds:
        v = ds["temp"]
        assert (v.chunks is not None) == (chunks is not None), v.chunks
        np.testing.assert_array_equal(v.values, WANT)
        assert v.attrs["units"] == "K", v.attrs
    assert "tet._tet" in sys.modules

def read_tet_api():
    import tet
    with tet.open(TET) as f:
        np.testing.assert_array_equal(f["temp"][...], WANT)
        np.testing.assert_array_equal(f["temp"][1, ::2], WANT[1, ::2])

def read_grib_eccodes():
    import eccodes
    with open(GRIB, "rb") as fh:
        h = eccodes.codes_grib_new_from_file(fh)
        try:
            got = eccodes.codes_get_values(h)
        finally:
            eccodes.codes_release(h)
    np.testing.assert_array_equal(got, np.load(GRIB_VALUES))

def read_grib_cfgrib():
    import xarray as xr
    with xr.open_dataset(GRIB, engine="cfgrib", backend_kwargs={"indexpath": ""}) as ds:
        (name,) = ds.data_vars
        got = ds[name].values  # cfgrib's float32 of eccodes' doubles
        np.testing.assert_array_equal(got.reshape(-1), np.load(GRIB_VALUES).astype(got.dtype))

def no_native():
    assert "tet._tet" not in sys.modules, "tet._tet was imported"
"""

SCENARIOS = {
    # A user who never opens a .tet: tet's engine is discovered and asked guess_can_open.
    "netcdf_engine_guessed": "read_nc(); no_native()",
    "netcdf_engine_named": "read_nc('netcdf4'); no_native()",
    "netcdf_after_eccodes": "import eccodes; read_nc(); no_native()",
    "netcdf_after_cfgrib_read": "read_grib_cfgrib(); read_nc(); no_native()",
    "tet_engine_guessed": "read_tet(); read_nc()",
    "tet_engine_named": "read_tet('tet'); read_nc('netcdf4')",
    "tet_dask_guessed": "read_tet(chunks={})",
    "tet_dask_named": "read_tet('tet', chunks={})",
    "eccodes_then_tet": "import eccodes, tet; read_grib_eccodes(); read_tet_api(); read_tet(); read_nc()",
    "tet_then_eccodes": "import tet, eccodes; read_tet_api(); read_tet('tet'); read_grib_eccodes(); read_nc()",
    "cfgrib_then_tet": "read_grib_cfgrib(); read_tet(); read_tet('tet', chunks={}); read_nc()",
    "tet_then_cfgrib": "read_tet(); read_grib_cfgrib(); read_tet_api()",
    "all_readers": (
        "import h5py, zarr, netCDF4, eccodes, tet;"
        "read_tet(chunks={}); read_grib_cfgrib(); read_nc('netcdf4');"
        "import xarray as xr;"
        "xr.Dataset({'a': ('x', WANT[0])}).to_zarr(os.path.join(os.path.dirname(TET), 'z%d.zarr' % os.getpid()), mode='w');"
        "f = h5py.File(NC, 'r'); np.testing.assert_array_equal(f['temp'][...], WANT); f.close()"
    ),
}


def _run(code: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def _assert_clean(proc: subprocess.CompletedProcess, what: str) -> None:
    err = proc.stderr
    assert proc.returncode == 0, f"{what}: exit {proc.returncode}\n{err[-3000:]}"
    bad = [b for b in BAD if b in err]
    assert not bad, f"{what}: {bad} in stderr\n{err[-3000:]}"
    assert proc.stdout.strip().endswith("ok"), f"{what}: did not finish\n{proc.stdout[-2000:]}"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A netCDF-4 file written by netCDF4 (zlib), its ``.tet`` conversion, and a GRIB 2 message
    made from eccodes' samples with its values as eccodes reads them (in a child process, so
    this interpreter loads no eccodes)."""
    import netCDF4

    d = tmp_path_factory.mktemp("coexist")
    nc_path = d / "small.nc"
    with netCDF4.Dataset(nc_path, "w") as nc:
        nc.createDimension("y", 3)
        nc.createDimension("x", 4)
        v = nc.createVariable("temp", "f4", ("y", "x"), zlib=True)
        v.units = "K"
        v[:] = np.array(WANT, dtype="f4")
    tet_path = d / "small.tet"
    tet.convert(nc_path, tet_path)
    grib, values = d / "sample.grib2", d / "sample-values.npy"
    make = textwrap.dedent(
        """
        import sys, numpy as np, eccodes
        h = eccodes.codes_grib_new_from_samples("GRIB2")
        n = eccodes.codes_get(h, "numberOfValues")
        eccodes.codes_set_values(h, np.linspace(250.0, 300.0, n))
        with open(sys.argv[1], "wb") as fh:
            eccodes.codes_write(h, fh)
        eccodes.codes_release(h)
        with open(sys.argv[1], "rb") as fh:
            h = eccodes.codes_grib_new_from_file(fh)
            np.save(sys.argv[2], eccodes.codes_get_values(h))
            eccodes.codes_release(h)
        print("ok")
        """
    )
    _assert_clean(_run(make, str(grib), str(values)), "writing the GRIB sample")
    return [str(p) for p in (nc_path, tet_path, grib, values)]


@pytest.fixture(scope="module")
def scenario_runs(files):
    """Every scenario's finished run, started side by side (each is mostly interpreter and
    library start-up; one at a time they take minutes)."""
    from concurrent.futures import ThreadPoolExecutor

    def run(name):
        return _run(PRELUDE + "\n" + SCENARIOS[name] + "\nprint('ok')\n", *files)

    with ThreadPoolExecutor(max_workers=min(4, (os.cpu_count() or 1) + 1)) as pool:
        return dict(zip(SCENARIOS, pool.map(run, SCENARIOS)))


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_fresh_interpreter_exits_cleanly(scenario_runs, name):
    _assert_clean(scenario_runs[name], name)


def _extension_path() -> str:
    spec = importlib.util.find_spec("tet._tet")
    assert spec is not None and spec.origin, "tet._tet is not installed"
    return os.path.realpath(spec.origin)


MAPPED = """
import sys
def mapped():
    out = set()
    with open("/proc/self/maps") as fh:
        for line in fh:
            parts = line.split(None, 5)
            if len(parts) == 6 and parts[5].startswith("/"):
                out.add(parts[5].strip())
    return out
"""


@pytest.mark.skipif(not pathlib.Path("/proc/self/maps").exists(), reason="needs /proc/self/maps")
def test_import_and_engine_discovery_load_no_native_code(files):
    ext = _extension_path()
    code = MAPPED + textwrap.dedent(
        """
        import os
        import tet, tet.xarray_backend
        import xarray as xr
        engines = xr.backends.list_engines()
        assert "tet" in engines, sorted(engines)
        assert engines["tet"].guess_can_open(sys.argv[2])
        assert not engines["tet"].guess_can_open(sys.argv[1])
        tet_dir = os.path.dirname(os.path.realpath(tet.__file__))
        ours = [p for p in mapped() if p == sys.argv[3] or p.startswith(tet_dir + ".libs")]
        assert not ours, ours
        assert "tet._tet" not in sys.modules, "tet._tet imported"
        assert callable(tet.chunks_read_total) and "tet._tet" in sys.modules
        assert sys.argv[3] in mapped()
        print("ok")
        """
    )
    _assert_clean(_run(code, files[0], files[1], ext), "import + list_engines")


# Libraries every Linux wheel may take from the system (the manylinux policies' list, which
# auditwheel does not copy).
_SYSTEM = (
    "linux-vdso", "ld-linux", "libc.so", "libm.so", "libdl.so", "librt.so", "libpthread.so",
    "libgcc_s.so", "libutil.so", "libresolv.so", "libstdc++.so", "libz.so", "libexpat.so",
    "libnsl.so", "libcrypt.so",
)


@pytest.mark.skipif(not pathlib.Path("/proc/self/maps").exists(), reason="needs /proc/self/maps")
def test_extension_brings_its_own_libraries(files):
    """Loading the extension maps, besides the core system libraries, only files of the
    package itself: no shared library another wheel could load first under the same name
    (eccodeslib's ``libaec.so.0``) stands in for one of ours."""
    code = MAPPED + textwrap.dedent(
        """
        import os, json
        import tet  # the package's Python side (and what it imports) first
        before = mapped()
        import tet._tet
        new = sorted(mapped() - before)
        print(json.dumps(new))
        print("ok")
        """
    )
    proc = _run(code)
    _assert_clean(proc, "import tet._tet")
    new = [pathlib.Path(p) for p in json.loads(proc.stdout.strip().splitlines()[-2])]
    foreign = [str(p) for p in new if not _ours(p) and not p.name.startswith(_SYSTEM)]
    assert not foreign, (
        "the extension loads shared libraries from outside the package, which another wheel's "
        f"copy can displace (install the repaired wheel .ci/python-setup builds): {foreign}"
    )


def _ours(path: pathlib.Path) -> bool:
    """Whether ``path`` is a file of the installed package (the extension, ``tet.libs/``)."""
    pkg = pathlib.Path(_extension_path()).parent
    return path.is_relative_to(pkg) or str(path).startswith(str(pkg) + ".libs")


@pytest.mark.skipif(not pathlib.Path("/proc/self/maps").exists(), reason="needs glibc's loader")
def test_extension_binds_to_its_own_libraries_beside_eccodes(files, tmp_path):
    """With ecCodes loaded first (its bindings load eccodeslib's and eckitlib's libraries with
    ``RTLD_GLOBAL``), every symbol the extension and its libraries bind — as the loader
    reports with ``LD_DEBUG=bindings`` — comes from the package itself or a core system
    library, none from another wheel's copy of the same library."""
    code = textwrap.dedent(
        """
        import sys
        import numpy as np
        import eccodes, tet
        with tet.open(sys.argv[1]) as f:
            assert f["temp"][...].shape == (3, 4)
        print("ok")
        """
    )
    log = tmp_path / "ld"
    env = dict(os.environ, LD_DEBUG="bindings", LD_DEBUG_OUTPUT=str(log))
    _assert_clean(_run(code, files[1], env=env), "eccodes + tet under LD_DEBUG")
    foreign: dict[str, int] = {}
    for out in tmp_path.glob("ld.*"):
        for line in out.read_text(errors="replace").splitlines():
            parts = line.split()
            # "<pid>: binding file <from> [0] to <to> [0]: normal symbol `name'"
            if len(parts) < 7 or parts[1:3] != ["binding", "file"]:
                continue
            src, dst = pathlib.Path(parts[3]), pathlib.Path(parts[6])
            if _ours(src.resolve()) and not _ours(dst.resolve()):
                if not dst.name.startswith(_SYSTEM + ("libpython",)):
                    key = f"{src.name} -> {dst}"
                    foreign[key] = foreign.get(key, 0) + 1
    assert not foreign, f"symbols of ours bound to other libraries: {foreign}"
