"""One conversion request under every front end (issue 31, acceptance 2): a composition matrix of
front ends × input kinds × operations, each cell run twice — once on local files, once against a
real S3 server (moto's, started once per session) — and the two results compared.

Front ends (how the request is made):

- ``cli``: ``tet-convert [SETTINGS] IN… OUT`` and ``tet info/verify/audit/export``;
- ``manifest``: ``tet-convert --manifest jobs.toml`` (one ``[[job]]``, the settings as its keys);
- ``batch``: ``tet-convert [SETTINGS] IN… --out-dir DIR`` (``--files-from`` for the object row),
  then ``tet verify`` / ``tet audit`` over all its outputs at once;
- ``python``: ``tet.convert`` (settings as keyword arguments, a list with ``concat=``),
  ``tet.open``, ``tet.export``, ``tet.verify``, ``tet.audit``.

Input kinds, each with a local form and an S3 form (the same bytes, uploaded):

- ``file``: a daily netCDF-4 file (netCDF4); in S3 an object read through a spool;
- ``store``: a Zarr v3 store folder (zarr); in S3 the store under a prefix ``s3://…/sa.zarr/``;
- ``object``: an NPY file (numpy); in S3 an object read in place by ranged GETs;
- ``prefix``: several daily files — a folder locally, ``s3://inbox/days/`` in S3;
- ``tet``: a ``.tet`` file (the CLI's conversion of the daily file) used as input;
- ``list``: the three daily files combined with ``concat="time"``.

Operations: ``convert``; ``select`` (``variables`` + ``isel``); ``combine`` (``concat`` of
several inputs of the kind); ``export`` (to NetCDF-4); ``info``; ``verify`` (deep); ``audit``.
``export``/``info``/``verify``/``audit`` read the ``.tet`` the same front end's ``convert`` cell
made (local, resp. in S3: read there in place); the Python ones read the CLI's, so that they
test the Python readers alone. In S3 every output is written to S3 where the front end can
(``s3://outbox/…``) and fetched for the comparison (``tet.export`` takes no object URL
output: its S3 run reads the ``.tet`` object and writes locally).

What is compared:

- conversions: every byte before the footer (superblock, directory, chunk index, chunks) is
  identical; the rest, as ``tet info --json`` reads it (datasets, attributes, facts, metadata,
  history), is equal once the keys in :data:`LOCATION_KEYS` are removed. Those keys say where
  the input was and must differ: the history row records a local input as ``input`` (the path
  as given) + ``cwd`` + ``input_mtime``, an object as ``input`` (its URL) + ``input_object``
  (size, ETag, last-modified; for a combine a digest of all of them), ``input.N`` for the
  further inputs of a combine; so the footer's bytes and the file's length (``file_bytes``)
  differ too. Every value read back (``tet.open``) equals what the source library reads
  (netCDF4, zarr, numpy), with the selection or concatenation applied by numpy;
- ``export``: the NetCDF files read by netCDF4 have the same dimensions, variables, values and
  attributes; the global ``history`` attribute (the ``.tet`` history as text) equal minus the
  location tokens (``input=…``, ``cwd=…``, …); values equal the source library's;
- ``info``/``verify``/``audit``: the parsed JSON (Python: the returned objects) equal minus
  the location keys (and ``file``); verify ``ok``, audit verdict ``unchanged`` in both.

Cells that cannot apply are listed in :data:`NOT_APPLICABLE` with their reason (skipped, and
shown in the matrix that ``test_matrix`` prints). Python cells that wait for work in progress are
in :data:`PENDING` (strict xfail: one that starts passing fails until it is unmarked).

Needs the ``tet`` and ``tet-convert`` binaries (target/debug, or ``TET_BIN_DIR``) and moto's
server in this Python; skipped with the reason otherwise.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

import tet
from conftest import moto_server

REPO = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(os.environ.get("TET_BIN_DIR", REPO / "target" / "debug"))
EPOCH = "1700000000"

FRONTS = ("cli", "manifest", "batch", "python")
KINDS = ("file", "store", "object", "prefix", "tet", "list")
OPS = ("convert", "select", "combine", "export", "info", "verify", "audit")

#: Keys that say where an input or a file is, and so differ between the local run and the S3
#: run (a ``.N`` suffix — the further inputs of a combine — is taken off before the lookup).
LOCATION_KEYS = {
    "file": "the .tet file's path or URL (info, verify, audit)",
    "file_bytes": "its length: the footer records a URL instead of a path",
    "input": "the input as given: a path or a URL (history row; audit rows; AuditEntry)",
    "cwd": "the working directory of a local input (history row)",
    "input_mtime": "a local input's modification time (history row)",
    "input_object": "an object input's size, ETag and last-modified (history row)",
    "path": "where audit looked for the input",
    "resolved_against": "how audit found it: the recorded cwd or the URL",
    "mtime": "the input's modification time now (audit; none for an object)",
    "recorded_mtime": "the recorded modification time (audit; none for an object)",
}

_CONVERSIONS = ("convert", "select", "combine")
_READERS = ("export", "info", "verify", "audit")

#: Cells that cannot apply, with the reason: ``(front, kind, op)`` patterns (``*`` matches
#: anything), the first match wins.
NOT_APPLICABLE: list[tuple[str, str, str, str]] = [
    # Front ends that only convert.
    *[
        ("manifest", "*", op, "a manifest lists conversions ([[job]] input → output); "
         "it has no export, info, verify or audit job")
        for op in _READERS
    ],
    ("batch", "*", "export", "tet export writes one file from one .tet (see the cli row)"),
    ("batch", "*", "info", "tet info reads one file (see the cli row)"),
    # Combines that cannot be made.
    ("*", "file", "combine", "one file: a combine takes two or more inputs (the list row is "
     "the combine of the daily files)"),
    ("*", "list", "combine", "the list's conversion is itself the combine (its convert cell)"),
    ("*", "object", "combine", "an NPY file's one array is named after the file (a, b): two "
     "NPY files share no variable to concatenate ('variable b is missing from a.npy')"),
    ("batch", "*", "combine", "--concat cannot be used with --out-dir: a batch writes one output "
     "per input"),
    ("batch", "list", "*", "--concat cannot be used with --out-dir: a batch writes one output "
     "per input"),
    # Prefixes: many inputs, which only the batch runner expands.
    ("cli", "prefix", "*", "a prefix is many inputs: the CLI's IN OUT form takes one and --concat "
     "a listed two or more (a folder or prefix is refused: 'takes two or more inputs'); "
     "converting a prefix is the batch row"),
    ("manifest", "prefix", "*", "a [[job]] maps one input (a file, a store, an object) to one "
     "output; a prefix of several objects is read as a Zarr store and refused "
     "('not a Zarr store')"),
    ("python", "prefix", "*", "tet.convert takes one input or a list (with concat); a prefix "
     "is expanded only by the CLI's batch runner"),
]

#: Cells waiting for work in progress (issue 31, helpers PY and REQ): strict xfail.
PENDING: dict[tuple[str, str, str], str] = {}
# (helpers PY and REQ landed tet.convert with URLs, tet.open/verify/audit of objects: none left.)

#: Cells that fail because of a defect found by this matrix, described (strict xfail: fixed,
#: the cell fails until it is unmarked). The one found (a Zarr store prefix named as a batch
#: argument found 0 inputs) is fixed in batch::remote::walk.
DEFECTS: dict[tuple[str, str, str], str] = {}
MARKED = {**PENDING, **DEFECTS}


def not_applicable(front: str, kind: str, op: str) -> str | None:
    for f, k, o, why in NOT_APPLICABLE:
        if f in ("*", front) and k in ("*", kind) and o in ("*", op):
            return why
    return None


#: What each cell did, for the matrix ``test_matrix`` prints.
RESULTS: dict[tuple[str, str, str], str] = {}


# -- the world: inputs, the S3 server, the binaries ------------------------------------------



@pytest.fixture(scope="session")
def moto_endpoint():
    """moto's S3 server on a free port of 127.0.0.1, for the session."""
    with moto_server() as port:
        yield f"http://127.0.0.1:{port}"


def _s3_env(endpoint: str) -> dict[str, str]:
    return {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "verysecretvalue",
        "AWS_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ALLOW_HTTP": "true",
        "SOURCE_DATE_EPOCH": EPOCH,
    }


def _write_days(folder: pathlib.Path) -> None:
    import netCDF4

    folder.mkdir(parents=True)
    for d in range(3):
        with netCDF4.Dataset(folder / f"day{d + 1:02d}.nc", "w") as ds:
            ds.createDimension("time", None)
            ds.createDimension("lat", 4)
            ds.createDimension("lon", 5)
            t = ds.createVariable("time", "f8", ("time",))
            t.units = "days since 2024-01-01"
            t.calendar = "standard"
            t[:] = [2 * d, 2 * d + 1]
            la = ds.createVariable("lat", "f4", ("lat",))
            la.units = "degrees_north"
            la[:] = np.linspace(-45, 45, 4)
            lo = ds.createVariable("lon", "f4", ("lon",))
            lo.units = "degrees_east"
            lo[:] = np.linspace(0, 288, 5)
            v = ds.createVariable("temp", "f4", ("time", "lat", "lon"), zlib=True)
            v.units = "K"
            v[:] = (np.arange(40).reshape(2, 4, 5) * 0.5 + 270 + 10 * d).astype("f4")
            o = ds.createVariable("orog", "i2", ("lat", "lon"))
            o.units = "m"
            o[:] = np.arange(20).reshape(4, 5) * 7
            ds.title = "composition test, day %d" % (d + 1)


def _write_store(path: pathlib.Path, offset: int) -> None:
    import zarr

    g = zarr.open_group(str(path), mode="w")
    y = g.create_array("y", shape=(3,), chunks=(3,), dtype="f8", dimension_names=["y"])
    y[:] = np.arange(3.0) + offset
    y.attrs["units"] = "m"
    u = g.create_array("u", shape=(3, 4), chunks=(2, 4), dtype="f4", dimension_names=["y", "x"])
    u[:] = np.arange(12, dtype="f4").reshape(3, 4) + 100 * offset
    u.attrs["long_name"] = "u wind"


class World:
    """The inputs (local and uploaded), the S3 client and the runs' caches."""

    def __init__(self, root: pathlib.Path, endpoint: str):
        import boto3

        self.root = root
        self.src = root / "src"
        self.endpoint = endpoint
        self.env = dict(os.environ, **_s3_env(endpoint))
        for k in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_REGION", "AWS_ENDPOINT"):
            self.env.pop(k, None)
        self.s3 = boto3.client(
            "s3",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="verysecretvalue",
        )
        self.cache: dict = {}
        self.serial = 0

    # The tools.
    def run(self, *args: str, ok=(0,), cwd=None) -> subprocess.CompletedProcess:
        r = subprocess.run(
            [str(a) for a in args],
            cwd=cwd or self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        if r.returncode not in ok:
            raise AssertionError(
                f"{' '.join(map(str, args))}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
            )
        return r

    def tet(self, *args, ok=(0,)):
        return self.run(BIN / "tet", *args, ok=ok)

    def convert_cli(self, *args):
        return self.run(BIN / "tet-convert", "-q", *args)

    # S3.
    def upload(self, path: pathlib.Path, key: str) -> None:
        if path.is_dir():
            for p in sorted(path.rglob("*")):
                if p.is_file():
                    self.s3.upload_file(str(p), "inbox", f"{key}/{p.relative_to(path).as_posix()}")
        else:
            self.s3.upload_file(str(path), "inbox", key)

    def fetch(self, url: str, to: pathlib.Path) -> pathlib.Path:
        bucket, key = url[len("s3://"):].split("/", 1)
        to.parent.mkdir(parents=True, exist_ok=True)
        self.s3.download_file(bucket, key, str(to))
        return to

    def fetch_prefix(self, url: str, to: pathlib.Path) -> dict[str, pathlib.Path]:
        """Every object under the prefix, downloaded: relative key → path."""
        bucket, prefix = url[len("s3://"):].split("/", 1)
        out = {}
        pages = self.s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        for page in pages:
            for o in page.get("Contents", []):
                rel = o["Key"][len(prefix):]
                out[rel] = self.fetch(f"s3://{bucket}/{o['Key']}", to / rel)
        return out

    def fresh(self, where: str, name: str) -> tuple[str, pathlib.Path]:
        """A new output location: (as the front end is given it, a local folder for fetching)."""
        self.serial += 1
        local = self.root / "out" / f"{self.serial:03d}-{where}"
        local.mkdir(parents=True)
        if where == "local":
            return str(local / name), local
        return f"s3://outbox/{self.serial:03d}/{name}", local


@pytest.fixture(scope="module")
def world(moto_endpoint, tmp_path_factory):
    for b in ("tet", "tet-convert"):
        if not (BIN / b).exists():
            pytest.skip(f"{BIN / b} is not built (cargo build -p tet-cli --bins)")
    saved = {k: os.environ.get(k) for k in (*_s3_env(moto_endpoint), "AWS_SESSION_TOKEN")}
    # The Python front end reads the same environment (credentials, endpoint, the epoch).
    os.environ.update(_s3_env(moto_endpoint))
    os.environ.pop("AWS_SESSION_TOKEN", None)
    try:
        w = World(tmp_path_factory.mktemp("composition"), moto_endpoint)
        _write_days(w.src / "days")
        _write_store(w.src / "sa.zarr", 0)
        _write_store(w.src / "sb.zarr", 3)
        np.save(w.src / "a.npy", (np.arange(24, dtype="<i4") * 3 - 20).reshape(6, 4))
        (w.src / "tets").mkdir()
        for d in (1, 2, 3):
            w.convert_cli(w.src / "days" / f"day{d:02d}.nc", w.src / "tets" / f"day{d:02d}.tet")
        for b in ("inbox", "outbox"):
            w.s3.create_bucket(Bucket=b)
        for name in ("days", "sa.zarr", "sb.zarr", "a.npy", "tets"):
            w.upload(w.src / name, name)
        yield w
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# -- the cells' inputs, settings and expected values -------------------------------------------


def inputs(w: World, kind: str, op: str, where: str) -> list[str]:
    """The inputs of a conversion: local paths or URLs."""
    days = [f"days/day{d:02d}.nc" for d in (1, 2, 3)]
    rels = {
        "file": days[:1],
        "store": ["sa.zarr", "sb.zarr"] if op == "combine" else ["sa.zarr"],
        "object": ["a.npy"],
        "prefix": ["days"],
        "tet": [f"tets/day{d:02d}.tet" for d in (1, 2, 3)] if op == "combine" else
        ["tets/day01.tet"],
        "list": days,
    }[kind]
    if where == "local":
        return [str(w.src / r) for r in rels]
    # A store and a prefix are prefixes: their URL ends in '/'.
    return [f"s3://inbox/{r}/" if kind in ("store", "prefix") else f"s3://inbox/{r}"
            for r in rels]


def settings(kind: str, op: str) -> dict[str, str]:
    """The request's settings, one form for every front end."""
    s: dict[str, str] = {}
    if kind == "list" or op == "combine":
        s["concat"] = "y" if kind == "store" else "time"
    if op == "select":
        s.update({
            "store": {"variables": "u", "isel": "y=1:3"},
            "object": {"isel": "dim_0=1:5:2"},
            "list": {"variables": "temp", "isel": "time=1:4"},
        }.get(kind, {"variables": "temp", "isel": "time=1:2"}))
    return s


def cli_flags(s: dict[str, str]) -> list[str]:
    return [a for k, v in s.items() for a in (f"--{k}", v)]


def _nc_source(path: pathlib.Path) -> dict[str, tuple[tuple[str, ...], np.ndarray]]:
    import netCDF4

    with netCDF4.Dataset(path) as ds:
        ds.set_auto_maskandscale(False)
        return {n: (tuple(v.dimensions), np.asarray(v[:])) for n, v in ds.variables.items()}


def _zarr_source(path: pathlib.Path) -> dict[str, tuple[tuple[str, ...], np.ndarray]]:
    import zarr

    g = zarr.open_group(str(path), mode="r")
    return {n: (tuple(a.metadata.dimension_names), a[:]) for n, a in g.arrays()}


def _concat(parts, dim):
    first = parts[0]
    out = {}
    for n, (dims, a) in first.items():
        if dim in dims:
            ax = dims.index(dim)
            out[n] = (dims, np.concatenate([p[n][1] for p in parts], axis=ax))
        else:
            out[n] = (dims, a)
    return out


def _select(vs, s):
    if "variables" in s:
        keep = s["variables"]
        dims = vs[keep][0]
        vs = {n: v for n, v in vs.items() if n == keep or (v[0] == (n,) and n in dims)}
    if "isel" in s:
        dim, rng = s["isel"].split("=")
        sl = slice(*[int(x) for x in rng.split(":")])
        vs = {
            n: (d, a[tuple(sl if x == dim else slice(None) for x in d)]) for n, (d, a) in vs.items()
        }
    return vs


def expected(w: World, kind: str, op: str) -> dict[str, dict[str, np.ndarray]]:
    """What each output holds, from the source libraries: output name → dataset → values.
    One output is named ``out``; a batch's by their file name."""
    s = settings(kind, op)

    def one(rel: str):
        p = w.src / rel
        if rel.endswith(".nc"):
            return _nc_source(p)
        if rel.endswith(".zarr"):
            return _zarr_source(p)
        a = np.load(p)
        return {p.stem: (tuple(f"dim_{i}" for i in range(a.ndim)), a)}

    day = {d: one(f"days/day{d:02d}.nc") for d in (1, 2, 3)}
    if kind in ("file", "tet") and op != "combine":
        outs = {"day01": day[1]}
    elif kind in ("list", "tet"):
        outs = {"day01": _concat([day[1], day[2], day[3]], "time")}
    elif kind == "store":
        outs = {"sa": _concat([one("sa.zarr"), one("sb.zarr")], "y") if op == "combine"
                else one("sa.zarr")}
    elif kind == "object":
        outs = {"a": one("a.npy")}
    else:  # prefix
        outs = {f"day{d:02d}": day[d] for d in (1, 2, 3)}
    return {k: {n: a for n, (_, a) in _select(v, s).items()} for k, v in outs.items()}


# -- running a conversion under each front end ------------------------------------------------


def _out_name(kind: str) -> str:
    return {"store": "sa", "object": "a"}.get(kind, "day01")


def run_conversion(w: World, front: str, kind: str, op: str, where: str) -> dict[str, pathlib.Path]:
    """Runs the cell's conversion; its outputs (fetched when in S3) by name (no extension)."""
    key = (front, kind, op, where)
    if key in w.cache:
        return w.cache[key]
    ins = inputs(w, kind, op, where)
    s = settings(kind, op)
    if front == "batch":
        dest, local = w.fresh(where, "batch/")
        flags = cli_flags(s)
        if kind == "object":
            listing = local / "inputs.txt"
            listing.write_text("".join(f"{i}\n" for i in ins))
            w.convert_cli(*flags, "--files-from", listing, "--out-dir", dest)
        else:
            w.convert_cli(*flags, *ins, "--out-dir", dest)
        if where == "local":
            got = {p.relative_to(dest).as_posix(): p for p in pathlib.Path(dest).rglob("*.tet")}
        else:
            got = w.fetch_prefix(dest, local / "fetched")
        out = {rel[: -len(".tet")]: p for rel, p in got.items()}
    else:
        dest, local = w.fresh(where, f"{_out_name(kind)}.tet")
        if front == "cli":
            w.convert_cli(*cli_flags(s), *ins, dest)
        elif front == "manifest":
            job: dict = dict(s)
            if "concat" in job:
                job["inputs"] = ins
            else:
                (job["input"],) = ins
            job["output"] = dest
            text = "[[job]]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in job.items())
            manifest = local / "jobs.toml"
            manifest.write_text(text)
            w.convert_cli("--manifest", manifest)
        else:  # python
            src = ins if "concat" in s else ins[0]
            tet.convert(src, dest, **s)
        path = pathlib.Path(dest) if where == "local" else w.fetch(dest, local / "fetched.tet")
        out = {_out_name(kind): path}
    w.cache[key] = (out, dest)
    return w.cache[key]


# -- comparisons --------------------------------------------------------------------------------


def strip_locations(x):
    """``x`` (JSON-like, dataclasses included) without the keys of :data:`LOCATION_KEYS`."""
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        x = dataclasses.asdict(x)
    if isinstance(x, dict):
        return {
            k: strip_locations(v)
            for k, v in x.items()
            if k.split(".", 1)[0] not in LOCATION_KEYS
        }
    if isinstance(x, (list, tuple)):
        return [strip_locations(v) for v in x]
    return x


def info_json(w: World, path) -> dict:
    return json.loads(w.tet("info", "--json", "--chunks", "-n", "0", path).stdout)


def first_difference(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def compare_tet(w: World, local: pathlib.Path, remote: pathlib.Path) -> str:
    """The S3 run's .tet against the local run's (see the module's docstring)."""
    lb, rb = local.read_bytes(), remote.read_bytes()
    li, ri = info_json(w, local), info_json(w, remote)
    end = max((c["offset"] + c["stored_bytes"] for c in li["chunks"]), default=0)
    assert end > 0
    assert lb[:end] == rb[:end], (
        f"{local} and {remote} differ before their footers, at byte {first_difference(lb, rb)}"
    )
    assert strip_locations(li) == strip_locations(ri)
    return "identical bytes" if lb == rb else "identical up to the footer's locations"


def assert_values(path: pathlib.Path, want: dict[str, np.ndarray]) -> None:
    with tet.open(path) as f:
        assert sorted(f.keys()) == sorted(want), path
        for name, a in want.items():
            got = f[name].read()
            assert got.dtype == a.dtype, (path, name, got.dtype, a.dtype)
            np.testing.assert_array_equal(got, a, err_msg=f"{path}: {name}")


def _history_tokens(text: str) -> list[str]:
    return [
        t for t in text.split()
        if "=" not in t or t.split("=", 1)[0].split(".", 1)[0] not in LOCATION_KEYS
    ]


def nc_content(path: pathlib.Path) -> dict:
    import netCDF4

    with netCDF4.Dataset(path) as ds:
        ds.set_auto_maskandscale(False)
        attrs = {k: ds.getncattr(k) for k in ds.ncattrs()}
        if "history" in attrs:
            attrs["history"] = _history_tokens(attrs["history"])
        return {
            "dims": {n: len(d) for n, d in ds.dimensions.items()},
            "attrs": attrs,
            "vars": {
                n: (v.dimensions, str(v.dtype), {k: v.getncattr(k) for k in v.ncattrs()},
                    np.asarray(v[:]).tolist())
                for n, v in ds.variables.items()
            },
        }


def py_info(path: str) -> dict:
    """What ``tet.open`` tells about a file (its values compared apart)."""
    with tet.open(path) as f:
        return strip_locations({
            "datasets": {
                n: {
                    "dtype": d.source_dtype, "shape": d.shape, "chunks": d.chunks,
                    "dims": d.dims, "attrs": d.attrs, "role": d.role, "facts": d.facts,
                    "coords": d.coords, "meta": d.meta,
                }
                for n, d in f.datasets.items()
            },
            "attrs": f.attrs,
            "facts": f.facts,
            "history": [dataclasses.asdict(h) for h in f.history],
            "info": f.info,
            "skipped": f.skipped,
        })


# -- one cell -------------------------------------------------------------------------------------


class Stage:
    """How far a cell got (for the matrix): ``local`` passes, then ``s3``."""

    def __init__(self):
        self.at = "local"


def _conversion_cell(w: World, front: str, kind: str, op: str, stage: Stage) -> str:
    want = expected(w, kind, op)
    lo, _ = run_conversion(w, front, kind, op, "local")
    assert sorted(lo) == sorted(want), (sorted(lo), sorted(want))
    for name in sorted(want):
        assert_values(lo[name], want[name])
    same = ""
    if front != "cli" and not not_applicable("cli", kind, op):
        # The same request under another front end: the CLI's conversion, but for locations.
        co, _ = run_conversion(w, "cli", kind, op, "local")
        for name in sorted(want):
            compare_tet(w, co[name], lo[name])
        same = "; local = cli's"
    stage.at = "s3"
    ro, _ = run_conversion(w, front, kind, op, "s3")
    assert sorted(ro) == sorted(want), (sorted(ro), sorted(want))
    how = set()
    for name in sorted(want):
        how.add(compare_tet(w, lo[name], ro[name]))
        assert_values(ro[name], want[name])
    return ", ".join(sorted(how)) + same


def _reader_cell(w: World, front: str, kind: str, op: str, stage: Stage) -> str:
    """export/info/verify/audit of the .tet the same front end converted (Python: the CLI's)."""
    maker = "cli" if front == "python" else front
    lo, _ = run_conversion(w, maker, kind, "convert", "local")
    names = sorted(lo)
    local_files = [str(lo[n]) for n in names]

    def remote_urls():
        _, rdest = run_conversion(w, maker, kind, "convert", "s3")
        return [f"{rdest}{n}.tet" for n in names] if maker == "batch" else [rdest]

    if op == "info":
        if front == "python":
            a = [py_info(p) for p in local_files]
            stage.at = "s3"
            b = [py_info(u) for u in remote_urls()]
        else:
            def info(x):
                return strip_locations(json.loads(w.tet("info", "--json", x).stdout))

            a = [info(p) for p in local_files]
            stage.at = "s3"
            b = [info(u) for u in remote_urls()]
        assert a == b
        return "equal minus locations"
    if op in ("verify", "audit"):
        if front == "python":
            fn = tet.verify if op == "verify" else tet.audit
            a = [strip_locations(fn(p)) for p in local_files]
            stage.at = "s3"
            b = [strip_locations(fn(u)) for u in remote_urls()]
        else:
            flags = ["--json", "--deep"] if op == "verify" else ["--json"]

            def lines(files):
                out = w.tet(op, *flags, *files).stdout.splitlines()
                rows = [json.loads(line) for line in out]
                for r in rows:
                    assert r["ok"] is True, r
                    if op == "audit":
                        assert r["verdict"] == "unchanged", r
                return [strip_locations(r) for r in rows]

            a = lines(local_files)
            stage.at = "s3"
            b = lines(remote_urls())
        assert len(a) == len(names) and a == b, (a, b)
        return "equal minus locations"
    # export
    (name,) = names
    ldst, _ = w.fresh("local", f"{name}.nc")
    if front == "python":
        tet.export(local_files[0], ldst)
    else:
        w.tet("export", "-q", local_files[0], ldst)
    a = nc_content(pathlib.Path(ldst))
    want = expected(w, kind, "convert")[name]
    assert sorted(a["vars"]) == sorted(want)
    for n, v in want.items():
        np.testing.assert_array_equal(np.asarray(a["vars"][n][3]), v, err_msg=n)
    stage.at = "s3"
    (url,) = remote_urls()
    if front == "python":
        # tet.export refuses an object URL output ("not supported yet"; tet export takes
        # one): the .tet object is read in S3, the export written locally.
        rdst, _ = w.fresh("local", f"{name}.nc")
        tet.export(url, rdst)
        b = nc_content(pathlib.Path(rdst))
        assert a == b
        return "equal minus history locations; output local: no object URL output in tet.export"
    rdst, rlocal = w.fresh("s3", f"{name}.nc")
    w.tet("export", "-q", url, rdst)
    b = nc_content(w.fetch(rdst, rlocal / "fetched.nc"))
    assert a == b
    return "equal minus history locations"


def _cells():
    for front in FRONTS:
        for kind in KINDS:
            for op in OPS:
                why = not_applicable(front, kind, op)
                marks = []
                if why:
                    marks.append(pytest.mark.skip(reason=f"n/a: {why}"))
                elif (front, kind, op) in MARKED:
                    marks.append(pytest.mark.xfail(strict=True, reason=MARKED[(front, kind, op)]))
                yield pytest.param(front, kind, op, id=f"{front}-{kind}-{op}", marks=marks)


@pytest.mark.parametrize("front,kind,op", list(_cells()))
def test_cell(world, front, kind, op):
    key = (front, kind, op)
    stage = Stage()
    cell = _conversion_cell if op in _CONVERSIONS else _reader_cell
    try:
        how = cell(world, front, kind, op, stage)
    except BaseException as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:160]
        got = f"{stage.at} run: {type(e).__name__}: {first}"
        if stage.at == "s3":
            got = "local run passes; " + got
        if key in MARKED:
            RESULTS[key] = f"xfail: {MARKED[key]} [{got}]"
        else:
            RESULTS[key] = f"FAIL: {got}"
        raise
    RESULTS[key] = f"pass ({how})"


def test_matrix(capsys):
    """Every cell is either run or listed as not applicable with its reason; every
    not-applicable rule and every mark names a cell that exists; the matrix is printed."""
    used = set()
    lines = []
    counts: dict[str, int] = {}
    for front in FRONTS:
        for kind in KINDS:
            for op in OPS:
                why = not_applicable(front, kind, op)
                for i, (f, k, o, _) in enumerate(NOT_APPLICABLE):
                    if f in ("*", front) and k in ("*", kind) and o in ("*", op):
                        used.add(i)
                        break
                key = (front, kind, op)
                state = f"n/a: {why}" if why else RESULTS.get(key, "not run in this session")
                counts[state.split(":")[0].split(" ")[0]] = (
                    counts.get(state.split(":")[0].split(" ")[0], 0) + 1
                )
                lines.append(f"{front:<8} {kind:<7} {op:<8} {state}")
    assert used == set(range(len(NOT_APPLICABLE))), "a NOT_APPLICABLE rule matches no cell"
    assert not [k for k in MARKED if not_applicable(*k)], "a marked cell is also n/a"
    with capsys.disabled():
        print("\ncomposition matrix (front end, input kind, operation): local run vs S3 run")
        print("\n".join(lines))
        print(", ".join(f"{n} {k}" for k, n in sorted(counts.items())))
