"""Issue 32, acceptance 1: every netCDF and HDF5 file of fixtures/, the shared corpus and the
CDL cases, opened with xarray's own engine and with ``engine="tet"`` after conversion, is
identical — datasets group by group, and the whole tree through ``xr.open_datatree`` for
files with groups. The source's engine is netCDF4 (netCDF-C), for netCDF and for the HDF5
files it reads; h5netcdf for the HDF5 files netCDF-C cannot open.

The one difference of the engine itself is the ``history`` addition (the conversion's rows,
appended as lines). The other allowed differences are all listed in ``ALLOWED`` below, each
with its reason; anything else fails. Besides, the value classes of the issue each have a
test built from files netCDF4-python and h5py wrote (``test_class_*``).
"""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess
import sys
import warnings

import numpy as np
import pytest

xr = pytest.importorskip("xarray")
netCDF4 = pytest.importorskip("netCDF4")
h5py = pytest.importorskip("h5py")

import tet  # noqa: E402
from conftest import CORPUS, FIXTURES, REPO  # noqa: E402

#: Every difference the comparison allows besides the history addition, with its reason.
ALLOWED = {
    "netcdf4-cannot-show": (
        "a variable of a type netCDF4-python skips ('unsupported datatype': opaque, a vlen "
        "of enums, of strings or of compounds, a compound with vlen, string or opaque "
        "members) is in the tet view only; the tet view shows it (uint8 bytes along a "
        "trailing axis for opaque values, object arrays for sequences)"
    ),
    "undefined-values": (
        "the values of a variable the CDL declares without fill (_NoFill) and gives no "
        "data are undefined: netCDF-C returns whatever storage holds; everything else "
        "about such a variable is compared"
    ),
    "accepted-refusal": (
        "an item the converter refuses by design (rank > 8, long double, references, "
        "external links not followed, field-name collisions, libver-latest layouts, VDS) "
        "is listed in File.skipped with its reason and is not in the tet view"
    ),
    "h5netcdf-phony-names": (
        "for the HDF5 files only h5netcdf reads, dimensions the file does not name are "
        "matched one to one by position: the engine names them as netCDF-C does "
        "(phony_dim_N per group), h5netcdf numbers them across the file by size"
    ),
    "no-xarray-engine-reads-it": (
        "a group of an HDF5 file that neither netCDF-C nor h5netcdf can open (a dimension "
        "scale attached from another group): its datasets are compared with what h5py "
        "reads — values, types and attributes of each numeric one, the text of string ones"
    ),
    "h5netcdf-strings": (
        "for the HDF5 files only h5netcdf reads, string datasets are compared as their "
        "text: h5netcdf gives fixed-length ones as bytes and variable-length ones as "
        "numpy unicode, netCDF-C (and the engine) both as str objects; h5netcdf shows "
        "HDF5's DIMENSION_LABELS attribute, which netCDF-C (and the engine) hide as a "
        "reserved attribute (the labels name the dimensions)"
    ),
}

#: Differences still open (not allowed by the issue: to be fixed), each checked to still
#: differ and its values compared another way, so that a fix shows here.
KNOWN_OPEN = {
    "hdf5-compound-record": (
        "an HDF5 compound dataset (h5py, PyTables) is stored one array per field, but the "
        "HDF5 importer records no type of the record (field order, offsets, string field "
        "sizes: the nc_compound_type fact the netCDF importer writes), so the engine cannot "
        "rebuild the structured array h5netcdf shows; its fields are compared with h5py's"
    ),
}

ACCEPTED_REFUSALS = re.compile(
    r"rank \d+ > tet maximum rank|long double|reference|external link|"
    r"field-name collision|libver|virtual dataset|VDS"
)

CDL_DIRS = [FIXTURES, REPO / "tests" / "fixtures" / "cdl"]


def _files():
    out = []
    for root in (FIXTURES, CORPUS):
        if not root.exists():
            continue
        for p in sorted(root.rglob("*")):
            if "crash" in p.parts or not p.is_file():
                continue
            if p.suffix in (".nc", ".h5", ".hdf5", ".nc4", ".he5"):
                out.append(("file", p))
    for d in CDL_DIRS:
        for p in sorted(d.rglob("*.cdl")):
            if "crash" not in p.parts:
                out.append(("cdl", p))
    return out


INPUTS = _files()


def _id(item) -> str:
    kind, p = item
    return f"{kind}:{p.parent.name}/{p.name}"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("identity")


def _source(item, workdir: pathlib.Path) -> pathlib.Path:
    kind, p = item
    if kind == "file":
        return p
    if shutil.which("ncgen") is None:
        pytest.fail("ncgen (netCDF-C's) is needed for the CDL cases")
    out = workdir / f"{p.parent.name}-{p.stem}.nc"
    if not out.exists():
        subprocess.run(["ncgen", "-4", "-o", str(out), str(p)], check=True)
    return out


def _netcdf4_opens(src: pathlib.Path) -> bool:
    """Whether xarray's netcdf4 engine reads the whole file, every group (tried in a child
    process: netCDF-C crashes on some HDF5 files)."""
    code = (
        "import sys, warnings, xarray as xr; warnings.simplefilter('ignore');"
        "t = xr.open_datatree(sys.argv[1], engine='netcdf4'); t.load()"
    )
    r = subprocess.run([sys.executable, "-c", code, str(src)], capture_output=True, timeout=300)
    return r.returncode == 0


def _engine(src: pathlib.Path) -> str:
    if src.suffix == ".nc" or _netcdf4_opens(src):
        return "netcdf4"
    import h5netcdf  # noqa: F401 - installed by .ci/python-setup: a missing one fails here

    return "h5netcdf"


def _groups(src: pathlib.Path) -> list[str]:
    out = [""]
    if src.suffix == ".nc":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nc = netCDF4.Dataset(src)
        with nc:
            stack = list(nc.groups.values())
            while stack:
                g = stack.pop(0)
                out.append(g.path.lstrip("/"))
                stack.extend(g.groups.values())
    else:
        with h5py.File(src, "r") as h:
            h.visititems(lambda n, o: out.append(n) if isinstance(o, h5py.Group) else None)
    return out


def _undefined(item) -> set[str]:
    """Variables a CDL case declares ``_NoFill = "true"`` and gives no data."""
    kind, p = item
    if kind != "cdl":
        return set()
    text = p.read_text()
    out = set()
    for line in text.splitlines():
        m = re.match(r"\s*(\w+):_NoFill\s*=\s*\"true\"", line)
        if m and not re.search(rf"^\s*{m.group(1)}\s*=", text, re.M):
            out.add(m.group(1))
    return out


def _open(src: pathlib.Path, engine: str, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # netCDF4-python's "unsupported datatype, skipping"
        if engine == "h5netcdf":
            kw["phony_dims"] = "sort"
        if engine == "netcdf4":
            kw["auto_complex"] = True
        return xr.open_dataset(src, engine=engine, **kw).load()


def _is_vlen(v) -> bool:
    return v.dtype == object and v.size > 0 and isinstance(
        v.values.reshape(-1)[0], np.ndarray
    )


def _compare_vlens(want: xr.Dataset, got: xr.Dataset) -> tuple[xr.Dataset, xr.Dataset]:
    """Sequence (vlen) variables element by element — type and values — (xarray cannot
    compare arrays of arrays); then both sides hold the same placeholder."""
    for name in list(want.variables):
        w = want.variables[name]
        if not _is_vlen(w):
            continue
        assert name in got.variables, f"vlen {name} missing"
        g = got.variables[name]
        assert g.dims == w.dims and g.attrs == w.attrs and g.shape == w.shape, name
        for a, b in zip(w.values.reshape(-1), g.values.reshape(-1)):
            assert np.asarray(b).dtype == np.asarray(a).dtype, name
            np.testing.assert_array_equal(b, a, err_msg=name)
        placeholder = np.zeros(w.shape, dtype=np.int8)
        want[name] = w.copy(data=placeholder)
        got[name] = g.copy(data=placeholder)
    return want, got


def _cannot_show(var: xr.Variable) -> bool:
    """Whether a tet-view variable has a type netCDF4-python skips (ALLOWED
    "netcdf4-cannot-show"), from the facts the engine passes in ``encoding``."""
    from tet._views import has_pointer_members

    facts = var.encoding.get("tet_facts") or {}
    if "opaque_type" in facts:
        return True
    if "ragged_type" in facts and "enum_type" in facts:
        return True
    rec = facts.get("nc_compound_type")
    if isinstance(rec, str):
        import json

        return has_pointer_members(json.loads(rec))
    return False


def _rename_phony(want: xr.Dataset, got: xr.Dataset) -> xr.Dataset:
    """ALLOWED "h5netcdf-phony-names": want's phony dimensions renamed to got's, by
    position, one to one."""
    mapping: dict[str, str] = {}
    for name, w in want.variables.items():
        if name not in got.variables:
            continue
        for a, b in zip(w.dims, got.variables[name].dims):
            if a.startswith("phony_dim_"):
                assert mapping.setdefault(a, b) == b, f"{a} maps to {mapping[a]} and {b}"
    assert len(set(mapping.values())) == len(mapping), mapping
    mapping = {a: b for a, b in mapping.items() if a != b}
    if not mapping:
        return want
    want = want.rename_dims({a: f"__tmp_{a}" for a in mapping})
    return want.rename_dims({f"__tmp_{a}": b for a, b in mapping.items()})


def _as_text(ds: xr.Dataset) -> xr.Dataset:
    """ALLOWED "h5netcdf-strings": string variables as str objects, no DIMENSION_LABELS."""
    for name, v in list(ds.variables.items()):
        v.attrs.pop("DIMENSION_LABELS", None)
        if v.dtype.kind in "SU" and v.dtype != np.dtype("S1"):
            vals = np.vectorize(
                lambda x: x.decode() if isinstance(x, bytes) else str(x), otypes=[object]
            )(v.values)
            ds[name] = v.copy(data=vals)
    return ds


def _compare(item, src, out, engine, group: str) -> list[str]:
    """Compares one group; returns the allowed differences it used."""
    used = []
    kw = {"group": group} if group else {}
    got = xr.open_dataset(out, engine="tet", **kw).load()
    try:
        want = _open(src, engine, **kw)
    except (KeyError, ValueError, OSError):
        if src.suffix == ".nc":
            raise
        _compare_with_h5py(src, out, group, got)
        return ["no-xarray-engine-reads-it"]
    with tet.open(out) as f:
        if not group:
            lines = "\n".join(f.history_lines)
            old = want.attrs.get("history")
            assert got.attrs["history"] == (f"{old}\n{lines}" if old else lines)
            if old is None:
                del got.attrs["history"]
            else:
                got.attrs["history"] = old
        prefix = f"{group}/" if group else ""
        for name, why in f.skipped:
            short = name[len(prefix):] if name.startswith(prefix) else None
            if short is None or "/" in short or "values kept in the footer" in why:
                continue
            assert ACCEPTED_REFUSALS.search(why), f"{name} refused: {why}"
            assert short not in got.variables
            want = want.drop_vars([short], errors="ignore")
            want = want.drop_dims([d for d in want.dims if d not in _used_dims(want)])
            used.append("accepted-refusal")
    for name in list(got.variables):
        if name not in want.variables and _cannot_show(got.variables[name]):
            got = got.drop_vars(name)
            used.append("netcdf4-cannot-show")
    got = got.drop_dims([d for d in got.dims if d not in _used_dims(got)])
    for name in _undefined(item):
        if name in want.variables and name in got.variables:
            w, g = want.variables[name], got.variables[name]
            assert (w.dims, w.dtype, w.attrs) == (g.dims, g.dtype, g.attrs), name
            got[name] = g.copy(data=w.values)
            used.append("undefined-values")
    for name in list(want.variables):
        w = want.variables[name]
        if w.dtype.names is not None and name not in got.variables and src.suffix != ".nc":
            _compare_record_fields(src, out, f"{prefix}{name}", w)
            want = want.drop_vars(name)
            used.append("hdf5-compound-record")
    want = want.drop_dims([d for d in want.dims if d not in _used_dims(want)])
    if engine == "h5netcdf":
        want = _as_text(_rename_phony(want, got))
        got = _as_text(got)
        used += ["h5netcdf-phony-names", "h5netcdf-strings"]
    want, got = _compare_vlens(want, got)
    xr.testing.assert_identical(want, got)
    return used


def _compare_record_fields(src, out, full: str, w: xr.Variable) -> None:
    """KNOWN_OPEN "hdf5-compound-record": each field of the record, as stored, equals h5py's."""
    with h5py.File(src, "r") as h, tet.open(out) as f:
        rec = h[full][()]
        for field in rec.dtype.names:
            name = f"{full}/{field}"
            if name in f.text_variables:
                got = [str(x) for x in f.text_variables[name].values.reshape(-1)]
                assert got == [x.decode() for x in rec[field].reshape(-1)], name
            else:
                np.testing.assert_array_equal(f[name][...], rec[field], err_msg=name)
                assert f[name].dtype == rec[field].dtype.newbyteorder("="), name


def _compare_with_h5py(src, out, group: str, got: xr.Dataset) -> None:
    """ALLOWED "no-xarray-engine-reads-it": the datasets directly in ``group`` as h5py reads
    them."""
    with h5py.File(src, "r") as h, tet.open(out) as f:
        g = h[group] if group else h
        skipped = dict(f.skipped)
        seen = 0
        for name, obj in g.items():
            full = f"{group}/{name}" if group else name
            if not isinstance(obj, h5py.Dataset):
                continue
            if full in skipped and "values kept in the footer" not in skipped[full]:
                assert ACCEPTED_REFUSALS.search(skipped[full]), (full, skipped[full])
                continue
            if obj.dtype.names is not None:
                continue  # records: compared by test_xarray.test_hdf5_values' h5py reads
            assert name in got.variables, f"{full} is not in the tet view"
            v = got.variables[name]
            want = obj[()]
            if obj.dtype.kind in "SOU":
                text = np.vectorize(
                    lambda x: x.decode() if isinstance(x, bytes) else str(x), otypes=[object]
                )
                assert text(np.asarray(want)).reshape(-1).tolist() == text(
                    np.asarray(v.values)
                ).reshape(-1).tolist(), full
            else:
                assert v.dtype == want.dtype.newbyteorder("="), full
                np.testing.assert_array_equal(v.values, want, err_msg=full)
            for k, a in obj.attrs.items():
                if k in ("DIMENSION_LIST", "DIMENSION_LABELS", "REFERENCE_LIST", "CLASS", "NAME"):
                    continue
                b = v.attrs.get(k, v.encoding.get(k))
                if isinstance(a, bytes):
                    a = a.decode()
                np.testing.assert_array_equal(np.asarray(b), np.asarray(a), err_msg=f"{full}@{k}")
            seen += 1
        assert seen or not [o for o in g.values() if isinstance(o, h5py.Dataset)]


def _used_dims(ds: xr.Dataset) -> set[str]:
    return {d for v in ds.variables.values() for d in v.dims}


@pytest.mark.parametrize("item", INPUTS, ids=_id)
def test_identical_through_xarray(item, workdir):
    src = _source(item, workdir)
    out = workdir / f"{_id(item).replace('/', '-').replace(':', '-')}.tet"
    if not out.exists():
        tet.convert(src, out, skip_unsupported=True)
    engine = _engine(src)
    used = set()
    for group in _groups(src):
        used.update(_compare(item, src, out, engine, group))
    assert used <= set(ALLOWED) | set(KNOWN_OPEN)
    groups = _groups(src)
    if len(groups) > 1 and engine == "netcdf4" and not used & {"accepted-refusal"}:
        _compare_trees(src, out, used)


def _compare_trees(src, out, used) -> None:
    """The same through ``open_datatree`` (each node as :func:`_compare` checks it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = xr.open_datatree(src, engine="netcdf4", auto_complex=True).load()
    got = xr.open_datatree(out, engine="tet", append_history=False).load()
    vlens = any(_is_vlen(v) for n in want.subtree for v in n.to_dataset().variables.values())
    if not used and not vlens:  # (xarray cannot compare arrays of arrays: node by node below)
        xr.testing.assert_identical(want, got)
    assert [n.path for n in want.subtree] == [n.path for n in got.subtree]
    for w, g in zip(want.subtree, got.subtree):
        a = w.to_dataset(inherit=False)
        b = g.to_dataset(inherit=False)
        for name in list(b.variables):
            if name not in a.variables and _cannot_show(b.variables[name]):
                b = b.drop_vars(name)
        b = b.drop_dims([d for d in b.dims if d not in _used_dims(b) and d not in a.dims])
        a, b = _compare_vlens(a, b)
        xr.testing.assert_identical(a, b)


def test_every_kind_of_input_is_covered():
    kinds = {(k, p.suffix) for k, p in INPUTS}
    assert ("cdl", ".cdl") in kinds and ("file", ".nc") in kinds
    assert any(p.suffix == ".h5" for _, p in INPUTS)


# -- the value classes of the issue, each from files the format's own library wrote --------


def _roundtrip(tmp_path, src: pathlib.Path, engine: str | None = None) -> pathlib.Path:
    """``src`` converted and compared group by group (and as a tree) like the inputs above."""
    item = ("file", src)
    out = tmp_path / f"{src.stem}.tet"
    tet.convert(src, out)
    engine = engine or _engine(src)
    used = set()
    groups = _groups(src)
    for group in groups:
        used.update(_compare(item, src, out, engine, group))
    assert used <= set(ALLOWED), used
    if len(groups) > 1 and engine == "netcdf4":
        _compare_trees(src, out, used)
    return out


def test_class_char_variables_keep_their_bytes(tmp_path):
    """A scalar ``char`` is ``|S1`` bytes; ``char`` arrays holding bytes that are not UTF-8
    keep them, byte for byte and to their full length."""
    src = tmp_path / "chars.nc"
    with netCDF4.Dataset(src, "w") as nc:
        nc.createDimension("n", 3)
        nc.createDimension("len", 4)
        c0 = nc.createVariable("c0", "S1", ())
        c0[...] = np.array(b"z", dtype="S1")
        c1 = nc.createVariable("c1", "S1", ("len",))
        c1[:] = np.array([b"a", b"\xc0", b"b", b"\xff"], dtype="S1")
        c2 = nc.createVariable("c2", "S1", ("n", "len"))
        c2.set_auto_chartostring(False)
        c2[:] = np.array(
            [[b"a", b"b", b"", b""], [b"\xe9", b"x", b"y", b"z"], [b"q", b"", b"", b""]],
            dtype="S1",
        )
    out = _roundtrip(tmp_path, src)
    got = xr.open_dataset(out, engine="tet")
    assert got["c0"].dtype == np.dtype("S1") and got["c0"].values[()] == b"z"
    assert got["c1"].values[()] == b"a\xc0b\xff"
    assert got["c2"].values.tolist() == [b"ab", b"\xe9xyz", b"q"]


def test_class_text_attributes_with_nul_bytes(tmp_path):
    """Text attributes holding NUL bytes read as netCDF4-python reads them."""
    src = tmp_path / "nul.nc"
    with netCDF4.Dataset(src, "w") as nc:
        nc.setncattr_string("nul_str", "a\x00b")
        nc.setncattr("nul_char", np.bytes_(b"x\x00y\x00"))
        nc.setncattr("tail_nul", "abc\x00")
        nc.createDimension("n", 1)
        v = nc.createVariable("v", "i4", ("n",))
        v.setncattr("inner_nul", np.bytes_(b"p\x00q"))
    out = _roundtrip(tmp_path, src)
    got = xr.open_dataset(out, engine="tet")
    with netCDF4.Dataset(src) as nc:
        assert got.attrs["nul_char"] == nc.getncattr("nul_char")
        assert got["v"].attrs["inner_nul"] == nc["v"].getncattr("inner_nul")


def test_class_vlen_variables_are_sequences(tmp_path):
    """netCDF-4 vlen variables (in the root and in a group, and a 0-d one) are the object
    arrays of sequences the netcdf4 engine gives, not the ragged pair they are stored as."""
    src = tmp_path / "vlen.nc"
    with netCDF4.Dataset(src, "w") as nc:
        nc.createDimension("n", 3)
        vt = nc.createVLType(np.int16, "v_t")
        v = nc.createVariable("v", vt, ("n",))
        v[0] = np.array([1, 2], np.int16)
        v[1] = np.array([], np.int16)
        v[2] = np.array([7, 8, 9], np.int16)
        v.units = "m"
        one = nc.createVariable("one", vt, ())
        one[...] = np.array([5], np.int16)
        g = nc.createGroup("g")
        g.createDimension("m", 2)
        w = g.createVariable("w", nc.createVLType(np.float64, "vf_t"), ("m",))
        w[0] = np.array([1.5])
        w[1] = np.array([2.5, 3.5])
    out = _roundtrip(tmp_path, src)
    got = xr.open_dataset(out, engine="tet")
    assert [list(x) for x in got["v"].values] == [[1, 2], [], [7, 8, 9]]
    assert got["v"].values[2].dtype == np.int16 and "v_count" not in got.variables
    assert got["v"].isel(n=[2, 0]).values[0].tolist() == [7, 8, 9]
    assert got["one"].values[()] == 5
    # The same class from h5py (an HDF5 vlen dataset without dimension scales).
    h5 = tmp_path / "vlen_h5py.h5"
    with h5py.File(h5, "w") as h:
        d = h.create_dataset("v", (3,), dtype=h5py.vlen_dtype(np.int32))
        d[0], d[1], d[2] = [1, 2], [], [5, 6, 7]
    got = xr.open_dataset(_roundtrip(tmp_path, h5), engine="tet")
    assert [list(x) for x in got["v"].values] == [[1, 2], [], [5, 6, 7]]


def test_class_compounds_are_structured(tmp_path):
    """Compound variables (nested, with an array field, and a 0-d one) come back as one
    structured variable, as the netcdf4 engine gives them; a selection reads only its rows."""
    src = tmp_path / "cmpd.nc"
    inner = np.dtype([("a", "<i2"), ("b", "<f8")], align=True)
    outer = np.dtype([("x", "<f4"), ("y", inner), ("z", "<i4", (3,))], align=True)
    with netCDF4.Dataset(src, "w") as nc:
        nc.createDimension("n", 4)
        it = nc.createCompoundType(inner, "inner_t")
        ot = nc.createCompoundType(outer, "outer_t")
        v = nc.createVariable("rec", ot, ("n",))
        d = np.zeros(4, outer)
        d["x"] = [1.5, 2.5, -1, 0]
        d["y"]["a"] = [3, 4, 5, 6]
        d["y"]["b"] = [5.5, 6.5, 7.5, 1e300]
        d["z"] = np.arange(12).reshape(4, 3)
        v[:] = d
        v.note = "nested"
        s = nc.createVariable("one", it, ())
        s[...] = np.array((7, 8.25), inner)
    out = _roundtrip(tmp_path, src)
    got = xr.open_dataset(out, engine="tet")
    assert got["rec"].dtype == outer
    assert got["rec"].isel(n=[3, 1]).values["y"]["b"].tolist() == [1e300, 6.5]
    assert got["one"].values[()]["b"] == 8.25


def test_class_complex_attributes_are_complex(tmp_path):
    """Complex attributes (h5py's complex compound types) read as complex numbers, not their
    JSON text, as h5netcdf reads them (netCDF-C drops these attributes)."""
    src = tmp_path / "cplx.h5"
    with h5py.File(src, "w") as h:
        h["c"] = np.arange(3.0)
        h["c"].attrs["za"] = np.complex128(4.3)
        h["c"].attrs["zb"] = np.array([1 + 2j, 3 - 1j], np.complex64)
        h.attrs["zg"] = np.complex64(2 - 1j)
    out = _roundtrip(tmp_path, src, engine="h5netcdf")
    got = xr.open_dataset(out, engine="tet")
    assert got["c"].attrs["za"] == 4.3 + 0j and got["c"].attrs["za"].dtype == np.complex128
    assert got["c"].attrs["zb"].tolist() == [1 + 2j, 3 - 1j]
    assert got.attrs["zg"] == np.complex64(2 - 1j)


def test_class_open_datatree(tmp_path):
    """``xr.open_datatree(engine="tet")`` gives the tree the netcdf4 engine gives: groups
    (an empty one too), their attributes and variables; ``xr.open_groups`` the same
    groups."""
    src = tmp_path / "tree.nc"
    with netCDF4.Dataset(src, "w") as nc:
        nc.createDimension("x", 2)
        nc.createVariable("a", "f8", ("x",))[:] = [1, 2]
        nc.title = "root"
        nc.createGroup("empty")
        g = nc.createGroup("obs")
        g.kind = "observations"
        g.createDimension("t", 3)
        g.createVariable("v", "i4", ("t", "x"))[:] = np.arange(6).reshape(3, 2)
        g.createGroup("deeper").createVariable("s", "f4", ())[...] = 2.5
    out = _roundtrip(tmp_path, src)
    want = xr.open_datatree(src, engine="netcdf4")
    got = xr.open_datatree(out, engine="tet", append_history=False)
    xr.testing.assert_identical(want, got)
    assert set(xr.open_groups(out, engine="tet")) == set(xr.open_groups(src, engine="netcdf4"))


@pytest.mark.xfail(
    strict=True,
    reason="open: the HDF5 importer stores a 0-d string dataset as shape [1] "
    "(converters/hdf5/src/walk/mod.rs add_text), so the engine invents a dimension",
)
def test_class_zero_d_hdf5_string(tmp_path):
    src = tmp_path / "s0.h5"
    with h5py.File(src, "w") as h:
        h["s0"] = np.array("hello", dtype=h5py.string_dtype())
    out = tmp_path / "s0.tet"
    tet.convert(src, out)
    got = xr.open_dataset(out, engine="tet")
    assert got["s0"].shape == ()
