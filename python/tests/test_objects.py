"""The Python package reads ``.tet`` objects and reports on them as the command line does
(issue 31): ``tet.open("s3://…", storage_options=…)`` and ``xr.open_dataset(url,
engine="tet", storage_options=…)`` read by ranged GETs only the chunks a selection touches;
``tet.verify`` / ``tet.audit`` return what ``tet verify --json`` / ``tet audit --json`` print;
``tet.export`` writes what ``tet export`` writes.

The GETs are counted outside our code: the client talks to a small HTTP proxy of this test that
forwards every request to moto's S3 server and logs its method, path and ``Range`` header. The
count is checked against the chunk index as ``tet info --json --chunks`` lists it.

Needs moto's server in this Python and the ``tet`` / ``tet-convert`` binaries (target/debug, or
``TET_BIN_DIR``); skipped with the reason otherwise.
"""

from __future__ import annotations

import http.client
import http.server
import json
import os
import pathlib
import subprocess
import sys
import threading

import numpy as np
import pytest

import tet
from conftest import moto_server

REPO = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(os.environ.get("TET_BIN_DIR", REPO / "target" / "debug"))
BUCKET = "objects"


def _bin(name: str) -> str:
    p = BIN / name
    if not p.exists():
        pytest.skip(f"no {p} (cargo build -p tet-cli --bins, or set TET_BIN_DIR)")
    return str(p)



class _Log:
    def __init__(self):
        self.lock = threading.Lock()
        self.rows: list[tuple[str, str, str | None]] = []

    def add(self, row):
        with self.lock:
            self.rows.append(row)

    def since(self, n: int):
        with self.lock:
            return list(self.rows[n:])

    def __len__(self):
        with self.lock:
            return len(self.rows)


def _proxy(upstream_port: int, log: _Log):
    """A forwarding HTTP proxy to moto that logs each request (method, path, Range)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):  # quiet
            pass

        def _forward(self):
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n) if n else None
            log.add((self.command, self.path, self.headers.get("Range")))
            conn = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=60)
            conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            for k, v in self.headers.items():
                if k.lower() not in ("connection", "proxy-connection", "keep-alive"):
                    conn.putheader(k, v)
            conn.endheaders(body)
            resp = conn.getresponse()
            data = resp.read()
            self.send_response(resp.status, resp.reason)
            for k, v in resp.getheaders():
                if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                    self.send_header(k, v)
            if self.command != "HEAD":
                self.send_header("Content-Length", str(len(data)))
            else:
                cl = resp.getheader("Content-Length")
                if cl is not None:
                    self.send_header("Content-Length", cl)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
            conn.close()

        do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _forward

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


@pytest.fixture(scope="module")
def s3():
    """moto's S3 server behind the counting proxy: (proxy endpoint, moto endpoint, log)."""
    with moto_server() as port:
        log = _Log()
        proxy = _proxy(port, log)
        moto_url = f"http://127.0.0.1:{port}"
        client = _client(moto_url)
        client.create_bucket(Bucket=BUCKET)
        yield f"http://127.0.0.1:{proxy.server_address[1]}", moto_url, log
        proxy.shutdown()


def _client(endpoint):
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )


def _options(endpoint: str) -> dict:
    return {
        "endpoint": endpoint,
        "region": "us-east-1",
        "access_key_id": "testing",
        "secret_access_key": "testing",
        "allow_http": True,
    }


def _cli_options(endpoint: str) -> list[str]:
    out = []
    for k, v in _options(endpoint).items():
        out += ["--storage-option", f"{k}={'true' if v is True else v}"]
    return out


def _put(moto_url: str, path: pathlib.Path, key: str) -> str:
    _client(moto_url).upload_file(str(path), BUCKET, key)
    return f"s3://{BUCKET}/{key}"


def _field_nc(path: pathlib.Path, steps: int = 6) -> np.ndarray:
    """A netCDF-4 file whose `temp` (time, lat, lon) chunks are one time step, 1 MiB each:
    random values (incompressible), so every chunk is read by a ranged GET of its own, not from
    a block of the reader's cache (reads under 256 KiB go through it)."""
    import netCDF4

    rng = np.random.default_rng(7)
    temp = rng.standard_normal((steps, 512, 512)).astype("f4")
    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("time", None)
        ds.createDimension("lat", 512)
        ds.createDimension("lon", 512)
        t = ds.createVariable("time", "f8", ("time",))
        t.units = "days since 2024-01-01"
        t[:] = np.arange(steps)
        ds.createVariable("lat", "f4", ("lat",))[:] = np.linspace(-90, 90, 512)
        ds.createVariable("lon", "f4", ("lon",))[:] = np.linspace(0, 359, 512)
        v = ds.createVariable("temp", "f4", ("time", "lat", "lon"), chunksizes=(1, 512, 512))
        v.units = "K"
        v[:] = temp
    return temp


def _chunks(tet_bin: str, path: pathlib.Path) -> tuple[dict, list[dict]]:
    out = subprocess.run(
        [tet_bin, "info", "--json", "--chunks", "-n", "0", str(path)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    info = json.loads(out)
    return info, info["chunks"]


@pytest.fixture(scope="module")
def field(s3, tmp_path_factory):
    """A local `.tet` of the field (one chunk per time step), the same bytes as an object."""
    endpoint, moto_url, log = s3
    d = tmp_path_factory.mktemp("field")
    temp = _field_nc(d / "field.nc")
    out = d / "field.tet"
    subprocess.run(
        [_bin("tet-convert"), "--chunk", "temp:1,512,512", "--codec", "raw", str(d / "field.nc"), str(out)],
        check=True,
        capture_output=True,
    )
    url = _put(moto_url, out, "field.tet")
    return out, url, temp


def _dataset_id(info: dict, name: str) -> int:
    names = [d["name"] for d in info["datasets"]]
    return names.index(name)


def test_one_time_step_of_an_object_reads_only_its_chunks(s3, field):
    """Acceptance 5: `isel(time=3)` of an `s3://` `.tet` through xarray equals the local read
    and fetches exactly the chunk of that step (counted at the proxy), after the open's
    fetches of the head, the index and the footer (and the coordinates xarray loads)."""
    import xarray as xr

    endpoint, _, log = s3
    local, url, temp = field
    info, chunks = _chunks(_bin("tet"), local)
    tid = _dataset_id(info, "temp")
    step = [c for c in chunks if c["dataset_id"] == tid and c["coords"][0] == 3]
    assert len(step) == 1, step
    assert all(c["stored_bytes"] >= 256 << 10 for c in step)

    before_open = len(log)
    ds = xr.open_dataset(url, engine="tet", storage_options=_options(endpoint))
    opened = log.since(before_open)
    # The open: one HEAD and ranged GETs of the head, index and footer (and the coordinates
    # xarray loads), never the whole object.
    assert opened and all(m in ("HEAD", "GET") for m, _, _ in opened), opened
    assert all(r is not None for m, _, r in opened if m == "GET"), opened
    before = len(log)
    got = ds["temp"].isel(time=3).values
    fetched = log.since(before)
    gets = [r for m, _, r in fetched if m == "GET"]
    want = sorted(f"bytes={c['offset']}-{c['offset'] + c['stored_bytes'] - 1}" for c in step)
    assert sorted(gets) == want, (gets, want)
    assert len(fetched) == len(gets) == 1
    np.testing.assert_array_equal(got, temp[3])
    with xr.open_dataset(local, engine="tet") as loc:
        xr.testing.assert_identical(ds["temp"].isel(time=3), loc["temp"].isel(time=3))
    ds.close()
    print(f"GETs: open {len(opened)} ({opened}), one step {len(gets)}")


def test_tet_open_of_an_object_equals_the_local_read(s3, field):
    endpoint, _, log = s3
    local, url, temp = field
    with tet.open(url, storage_options=_options(endpoint)) as f, tet.open(local) as g:
        assert f.verified and f.keys() == g.keys()
        assert f.attrs == g.attrs and f.history == g.history
        before = len(log)
        np.testing.assert_array_equal(f["temp"][5, :10], g["temp"][5, :10])
        # lat 0:10 of step 5 is in one chunk: one ranged GET.
        assert [m for m, _, _ in log.since(before)] == ["GET"]
        np.testing.assert_array_equal(f["temp"][5, :10], temp[5, :10])


def test_storage_options_unknown_key_names_the_closest(s3, field):
    endpoint, _, _ = s3
    _, url, _ = field
    opts = dict(_options(endpoint), endpont="http://x")
    with pytest.raises(ValueError, match=r"unknown storage option endpont .*closest: endpoint"):
        tet.open(url, storage_options=opts)
    with pytest.raises(tet.NotFoundError):
        tet.open(f"s3://{BUCKET}/nothing.tet", storage_options=_options(endpoint))


def test_a_damaged_object_is_refused_as_a_local_file_is(s3, field, tmp_path):
    endpoint, moto_url, _ = s3
    local, _, _ = field
    data = bytearray(local.read_bytes())
    tail = data.rindex(b"THST")
    data[tail - 30] ^= 0xFF
    bad = tmp_path / "bad.tet"
    bad.write_bytes(bytes(data))
    url = _put(moto_url, bad, "bad.tet")
    with pytest.raises(tet.CorruptError) as local_err:
        tet.open(bad)
    with pytest.raises(tet.CorruptError) as object_err:
        tet.open(url, storage_options=_options(endpoint))
    assert str(object_err.value).replace(url, "X") == str(local_err.value).replace(str(bad), "X")
    with tet.open(url, storage_options=_options(endpoint), allow_damaged_footer=True) as f:
        assert f.footer_error and not f.verified


def _cli_json(args: list[str]) -> dict:
    p = subprocess.run(args, capture_output=True, text=True)
    assert p.stdout.strip(), p.stderr
    return json.loads(p.stdout)


def _days(folder: pathlib.Path, n: int) -> list[pathlib.Path]:
    import netCDF4

    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for d in range(n):
        p = folder / f"day{d + 1:02d}.nc"
        with netCDF4.Dataset(p, "w") as ds:
            ds.createDimension("time", None)
            ds.createDimension("x", 3)
            t = ds.createVariable("time", "f8", ("time",))
            t.units = "days since 2024-01-01"
            t[:] = [d]
            ds.createVariable("v", "f4", ("time", "x"))[:] = np.full((1, 3), d, "f4")
        out.append(p)
    return out


def test_audit_and_verify_equal_the_cli_for_31_combined_inputs(tmp_path):
    """Acceptance 5: `tet.audit` of a `--concat time` of 31 daily files equals `tet audit
    --json` (every parent re-hashed), and `tet.verify` equals `tet verify --deep --json`."""
    days = _days(tmp_path / "days", 31)
    out = tmp_path / "month.tet"
    subprocess.run(
        [_bin("tet-convert"), "--concat", "time", *map(str, days), str(out)],
        check=True,
        capture_output=True,
    )
    a = tet.audit(out)
    assert a == _cli_json([_bin("tet"), "audit", "--json", str(out)])
    assert a["verdict"] == "unchanged" and len(a["inputs"]) == 31
    assert all(i["status"] == "unchanged" for i in a["inputs"])
    v = tet.verify(out)
    assert v == _cli_json([_bin("tet"), "verify", "--deep", "--json", str(out)])
    assert v["ok"]
    # One input changed: both say so, the same way.
    with open(days[17], "r+b") as fh:
        fh.seek(-1, 2)
        fh.write(b"\x01")
    a = tet.audit(out)
    assert a == _cli_json([_bin("tet"), "audit", "--json", str(out)])
    assert a["verdict"] == "changed"
    assert [i["status"] for i in a["inputs"]].count("changed") == 1


def test_audit_and_verify_equal_the_cli_for_object_inputs(s3, tmp_path):
    """`tet.audit` of a file converted from `s3://` inputs re-reads every object parent, as
    `tet audit --json` does; `tet.verify` / `tet.audit` of the `.tet` as an object too."""
    endpoint, moto_url, _ = s3
    days = _days(tmp_path / "days", 3)
    urls = [_put(moto_url, p, f"in/{p.name}") for p in days]
    out = tmp_path / "three.tet"
    opts = _cli_options(endpoint)
    subprocess.run(
        [_bin("tet-convert"), *opts, "--concat", "time", *urls, str(out)],
        check=True,
        capture_output=True,
    )
    so = _options(endpoint)
    a = tet.audit(out, storage_options=so)
    assert a == _cli_json([_bin("tet"), "audit", "--json", *opts, str(out)])
    assert [i["status"] for i in a["inputs"]] == ["unchanged"] * 3, a["inputs"]
    assert [i["input"] for i in a["inputs"]] == urls
    url = _put(moto_url, out, "three.tet")
    a = tet.audit(url, storage_options=so)
    assert a == _cli_json([_bin("tet"), "audit", "--json", *opts, url])
    v = tet.verify(url, storage_options=so)
    assert v == _cli_json([_bin("tet"), "verify", "--deep", "--json", *opts, url])
    assert v["ok"]
    # --source of an object: the same answer.
    a = tet.audit(out, [urls[1]], storage_options=so)
    assert a == _cli_json([_bin("tet"), "audit", "--json", *opts, str(out), "--source", urls[1]])
    assert a["sources"][0]["ok"]


def test_export_of_an_object_equals_the_cli(s3, field, tmp_path):
    import xarray as xr

    endpoint, _, _ = s3
    local, url, temp = field
    r = tet.export(url, tmp_path / "back.nc", storage_options=_options(endpoint))
    assert r["format"] == "netcdf" and r["output"] == str(tmp_path / "back.nc")
    cli = _cli_json(
        [_bin("tet"), "export", "--json", *_cli_options(endpoint), url, str(tmp_path / "cli.nc")]
    )
    assert {k: v for k, v in r.items() if k not in ("output",)} == {
        k: v for k, v in cli.items() if k not in ("output",)
    }
    with xr.open_dataset(tmp_path / "back.nc") as a, xr.open_dataset(tmp_path / "cli.nc") as b:
        xr.testing.assert_identical(a, b)
        np.testing.assert_array_equal(a["temp"].values, temp)
    # The CLI's refusals, the same words.
    with pytest.raises(ValueError, match="exists"):
        tet.export(local, tmp_path / "back.nc")
    with pytest.raises(ValueError, match="unknown format"):
        tet.export(local, tmp_path / "x.out", to="nope")
