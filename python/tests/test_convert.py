"""tet.convert in a supervised worker: reports, typed errors, crashing C libraries."""

from __future__ import annotations

import json
import os
import signal

import numpy as np
import pytest

import tet
from conftest import FIXTURES, need, save_npy


def test_report_is_typed(tmp_path):
    a = np.arange(1000, dtype=np.float32).reshape(10, 100)
    src = save_npy(tmp_path, "a", a)
    out = tmp_path / "a.tet"
    seen = []
    r = tet.convert(
        src, out, codec="zstd", chunk={"a": (5, 100)}, progress=lambda *e: seen.append(e)
    )
    assert isinstance(r, tet.ConvertReport)
    assert seen[0] == ("start", 0, a.nbytes)
    assert [e[0] for e in seen[1:-1]] == ["advance", "advance"]  # one per chunk
    assert seen[-1] == ("finish", a.nbytes, a.nbytes)
    assert r.format and r.output.endswith("a.tet")
    assert r.input_digest.startswith("sha256:")
    assert r.raw_bytes == a.nbytes
    (d,) = r.datasets
    assert (d.name, d.shape, d.chunk_shape, d.chunks) == ("a", (10, 100), (5, 100), 2)
    with tet.open(out) as f:
        np.testing.assert_array_equal(f["a"][...], a)


def test_errors_are_typed(tmp_path):
    with pytest.raises(tet.NotFoundError):
        tet.convert(tmp_path / "missing.nc", tmp_path / "x.tet")
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\x00\x01garbage" * 10)
    with pytest.raises(tet.UnsupportedError):
        tet.convert(junk, tmp_path / "y.tet")
    with pytest.raises(ValueError):
        tet.convert(junk, tmp_path / "y.tet", codec="lzma")


def test_in_process_conversion(tmp_path):
    src = save_npy(tmp_path, "b", np.arange(5, dtype=np.int8))
    seen = []
    r = tet.convert(src, tmp_path / "b.tet", isolate=False, progress=lambda *e: seen.append(e))
    assert r.datasets[0].source_dtype == "i8"
    assert seen[0] == ("start", 0, 10) and seen[-1] == ("finish", 10, 10)


@pytest.mark.parametrize("name,sig", [("segv.nc", signal.SIGSEGV), ("abort.nc", signal.SIGABRT)])
def test_crashing_input_raises_and_the_interpreter_lives(tmp_path, name, sig):
    src = need(FIXTURES / "crash" / name)
    out = tmp_path / "crash.tet"
    try:
        tet.convert(src, out, timeout=120)
    except tet.WorkerCrashError as e:
        assert e.signal == sig and not e.timed_out
        assert signal.Signals(sig).name in str(e)
    except tet.TetError:
        pytest.skip(f"this machine's libhdf5 refuses {name} cleanly instead of crashing")
    else:
        pytest.fail(f"{name} converted")
    assert not out.exists()
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tet-convert.tmp")]
    # Still alive, and still converting.
    src2 = save_npy(tmp_path, "after", np.arange(3, dtype=np.uint8))
    assert tet.convert(src2, tmp_path / "after.tet").datasets[0].shape == (3,)


def test_hanging_input_times_out(tmp_path):
    src = need(FIXTURES / "crash" / "hang.nc")
    try:
        tet.convert(src, tmp_path / "hang.tet", timeout=5)
    except tet.WorkerCrashError as e:
        assert e.timed_out and "timeout" in str(e)
    except tet.TetError:
        pytest.skip("this machine's libhdf5 refuses hang.nc cleanly instead of hanging")
    else:
        pytest.fail("hang.nc converted")


def _workers_of(parent: int) -> list[int]:
    """The pids of live conversion workers started by process ``parent`` (their environment
    names it)."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{d}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if f"TET_WORKER_PARENT={parent}".encode() in env and state != b"Z":
            found.append(int(d))
    return found


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc")
def test_a_hung_worker_dies_with_its_killed_caller(tmp_path):
    """A conversion hung inside a C library does not run on as an orphan when the Python
    process that called tet.convert is killed (the worker asks for PR_SET_PDEATHSIG)."""
    import subprocess
    import sys
    import time

    src = need(FIXTURES / "crash" / "hang.nc")
    code = (
        "import tet, sys; "
        f"tet.convert({str(src)!r}, {str(tmp_path / 'hang.tet')!r}, timeout=600)"
    )
    caller = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 60
        workers = []
        while time.monotonic() < deadline and not workers:
            if caller.poll() is not None:
                pytest.skip("hang.nc did not hang here (the caller ended by itself)")
            workers = _workers_of(caller.pid)
            time.sleep(0.2)
        assert workers, "no conversion worker appeared"
        time.sleep(1.0)  # the worker is inside the conversion now
        if caller.poll() is not None:
            pytest.skip("hang.nc did not hang here (the caller ended by itself)")
        caller.send_signal(signal.SIGKILL)
        caller.wait()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and _workers_of(caller.pid):
            time.sleep(0.2)
        left = _workers_of(caller.pid)
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        assert not left, f"worker(s) {left} outlived the killed caller"
    finally:
        if caller.poll() is None:
            caller.kill()
            caller.wait()


def test_convert_many_with_ledger(tmp_path):
    good = save_npy(tmp_path, "g", np.arange(4, dtype=np.float64))
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"nothing known")
    ledger = tmp_path / "ledger.jsonl"
    res = tet.convert_many([(good, tmp_path / "g.tet"), (bad, tmp_path / "b.tet")], ledger=ledger)
    assert isinstance(res[0], tet.ConvertReport)
    assert isinstance(res[1], tet.UnsupportedError)
    rows = [__import__("json").loads(line) for line in ledger.read_text().splitlines()]
    assert [r["ok"] for r in rows] == [True, False]
    assert rows[0]["digest"] == res[0].input_digest


def test_verify_and_audit(tmp_path):
    src = save_npy(tmp_path, "v", np.arange(100, dtype=np.int32))
    out = tmp_path / "v.tet"
    r = tet.convert(src, out)
    v = tet.verify(out, deep=True)
    assert v["ok"] and v["checksums"]["footer_digest"] == "ok" and v["failures"] == []
    (entry,) = tet.audit(out)["inputs"]
    assert entry["status"] == "unchanged" and entry["recorded_digest"] == r.input_digest
    np.save(src, np.arange(100, dtype=np.int32) + 1)
    (entry,) = tet.audit(out)["inputs"]
    assert entry["status"] == "changed" and entry["digest"] != entry["recorded_digest"]
    os.unlink(src)
    assert tet.audit(out)["inputs"][0]["status"] == "missing"


def test_verify_reports_a_damaged_file_instead_of_raising(tmp_path):
    src = save_npy(tmp_path, "v", np.arange(1000, dtype=np.int32))
    out = tmp_path / "v.tet"
    tet.convert(src, out, codec="raw")
    data = bytearray(out.read_bytes())
    # The last byte of the footer JSON, just before the THST trailer: the footer no longer parses.
    tail = data.rindex(b"THST")
    data[tail - 30] ^= 0xFF
    out.write_bytes(bytes(data))
    with pytest.raises(tet.CorruptError):
        tet.open(out)
    v = tet.verify(out, deep=True)
    assert not v["ok"] and v["failures"], v


def test_worker_imports_this_package_whatever_the_cwd(tmp_path, monkeypatch):
    """A folder named `tet` in the working directory (a source checkout) is not what the
    worker imports."""
    fake = tmp_path / "tet"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('the wrong tet')\n")
    src = save_npy(tmp_path, "w", np.arange(7, dtype=np.uint16))
    monkeypatch.chdir(tmp_path)
    r = tet.convert("w.npy", "w.tet")
    assert r.datasets[0].shape == (7,)
    assert (tmp_path / "w.tet").exists() and src.exists()


def test_keyword_arguments_are_exactly_the_engine_settings(tmp_path):
    """``tet.convert`` takes the fields of the engine's settings type (the manifest's keys),
    no more, no less: each is accepted, and a name that is none of them is refused with the
    closest names."""
    from tet import _convert, _tet

    fields = tuple(_tet.SETTINGS_FIELDS)
    assert _convert.settings_fields() == fields
    assert {"codec", "chunk", "chunk_bytes", "jobs", "memory_budget", "variables", "exclude",
            "no_coords", "isel", "sel", "concat", "concat_take_first"} <= set(fields)
    sample = {"codec": "zstd:2", "chunk": "x=1", "chunk_bytes": "1MiB", "jobs": 2,
              "memory_budget": "64MiB", "variables": "a", "exclude": ["b"], "isel": "x=0:1",
              "sel": "x=0:1", "concat": "x"}
    for f in fields:
        settings = json.loads(_convert._settings({f: sample.get(f, True)}))
        assert f in settings or f == "chunk", f
    src = save_npy(tmp_path, "k", np.arange(4, dtype=np.int16))
    with pytest.raises(TypeError, match=r"'chunks'.*closest: chunk"):
        tet.convert(src, tmp_path / "k.tet", chunks={"dim_0": 2})
    with pytest.raises(TypeError, match=r"'varables'.*closest: variables"):
        tet.convert(src, tmp_path / "k.tet", varables="a")
    assert not (tmp_path / "k.tet").exists()


@pytest.mark.parametrize("isolate", [True, False])
def test_chunk_names_are_checked_against_the_input(tmp_path, isolate):
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    src = save_npy(tmp_path, "a", a)
    out = tmp_path / "a.tet"
    with pytest.raises(ValueError, match=r"no dimension `dim_O` \(closest: dim_0, dim_1\)"):
        tet.convert(src, out, chunk={"dim_O": 1}, isolate=isolate)
    with pytest.raises(ValueError, match=r"no variable `b` \(closest: a\)"):
        tet.convert(src, out, chunk={"b": (1, 6)}, isolate=isolate)
    assert not out.exists()
    r = tet.convert(src, out, chunk={"dim_0": 1}, isolate=isolate)
    assert r.datasets[0].chunk_shape == (1, 6)


def test_selection_and_combine_keywords(tmp_path):
    a = np.arange(24, dtype=np.int32).reshape(4, 6)
    b = a + 100
    (tmp_path / "d1").mkdir()
    (tmp_path / "d2").mkdir()
    pa, pb = save_npy(tmp_path / "d1", "x", a), save_npy(tmp_path / "d2", "x", b)
    out = tmp_path / "cut.tet"
    r = tet.convert(pa, out, isel=["dim_0=1:3", "dim_1=::2"], memory_budget="64MiB", jobs=1)
    assert r.datasets[0].shape == (2, 3)
    with tet.open(out) as f:
        np.testing.assert_array_equal(f["x"][...], a[1:3, ::2])
    both = tmp_path / "both.tet"
    r = tet.convert([pa, pb], both, concat="dim_0")
    assert r.datasets[0].shape == (8, 6)
    # Every input counts: the report's bytes_in is the sum of the inputs' sizes.
    assert r.bytes_in == os.path.getsize(pa) + os.path.getsize(pb)
    with tet.open(both) as f:
        np.testing.assert_array_equal(f["x"][...], np.concatenate([a, b]))
    with pytest.raises(ValueError, match="concat"):
        tet.convert([pa, pb], tmp_path / "x.tet")


def test_report_codec_is_what_the_chunks_are_stored_with(tmp_path):
    # Under zstd a chunk zstd cannot shrink is stored raw: the report says which codecs the
    # chunks are stored with, as `tet info` counts them, not only the codec asked for.
    a = np.zeros((4, 4000), dtype=np.uint8)
    a[2:] = np.random.default_rng(0).integers(0, 256, size=(2, 4000), dtype=np.uint8)
    src = save_npy(tmp_path, "z", a)
    out = tmp_path / "z.tet"
    r = tet.convert(src, out, codec="zstd", chunk={"dim_0": 1})
    (d,) = r.datasets
    assert d.extra.get("codecs") == {"raw": 2, "zstd": 2}, d
    assert d.codec == "raw+zstd", d
    with tet.open(out) as f:
        np.testing.assert_array_equal(f["z"][...], a)
    # One codec for every chunk: the codec asked for, with its level.
    r = tet.convert(src, out, codec="raw", chunk={"dim_0": 1})
    assert (r.datasets[0].codec, r.datasets[0].extra["codecs"]) == ("raw", {"raw": 4})


def _write_nc(path, t0: int):
    """A small netCDF file: `time` (3 steps from `t0`), `lat` (4), `temp` and `rain` on them."""
    netCDF4 = pytest.importorskip("netCDF4")
    with netCDF4.Dataset(path, "w") as d:
        d.createDimension("time", 3)
        d.createDimension("lat", 4)
        t = d.createVariable("time", "f8", ("time",))
        t.units = "days since 2000-01-01"
        t[:] = np.arange(t0, t0 + 3)
        lat = d.createVariable("lat", "f4", ("lat",))
        lat[:] = [-30.0, -10.0, 10.0, 30.0]
        temp = d.createVariable("temp", "f4", ("time", "lat"))
        temp[:] = (np.arange(12, dtype="f4") + 100 * t0).reshape(3, 4)
        rain = d.createVariable("rain", "i2", ("time", "lat"))
        rain[:] = np.arange(12, dtype="i2").reshape(3, 4) * (t0 + 1)


def _nc(path, name):
    import netCDF4

    with netCDF4.Dataset(path) as d:
        return d[name][...].filled()


def test_selection_and_memory_keywords_take_what_the_cli_takes(tmp_path):
    src = tmp_path / "s.nc"
    _write_nc(src, 0)
    out = tmp_path / "s.tet"
    r = tet.convert(
        src,
        out,
        variables=["temp"],
        isel="time=1:3",
        sel=["lat=-10:30"],
        memory_budget="64MiB",
    )
    with tet.open(out) as f:
        # The chosen variable and its coordinates, cut; `rain` left out.
        assert sorted(f.keys()) == ["lat", "temp", "time"]
        np.testing.assert_array_equal(f["temp"][...], _nc(src, "temp")[1:3, 1:4])
        np.testing.assert_array_equal(f["time"][...], _nc(src, "time")[1:3])
        np.testing.assert_array_equal(f["lat"][...], _nc(src, "lat")[1:4])
    assert {d.name for d in r.datasets} == {"lat", "temp", "time"}
    bare = tmp_path / "bare.tet"
    tet.convert(src, bare, exclude="time,lat", no_coords=True, variables="rain,temp")
    with tet.open(bare) as f:
        assert sorted(f.keys()) == ["rain", "temp"]
        np.testing.assert_array_equal(f["rain"][...], _nc(src, "rain"))
    with pytest.raises(ValueError, match="closest"):
        tet.convert(src, tmp_path / "typo.tet", variables=["tmep"])


def test_a_list_of_netcdf_inputs_is_combined_along_concat(tmp_path):
    paths = []
    for k, t0 in enumerate((6, 0, 3)):
        p = tmp_path / f"part{k}.nc"
        _write_nc(p, t0)
        paths.append(p)
    out = tmp_path / "all.tet"
    r = tet.convert(paths, out, concat="time", variables="temp")
    assert r.input == str(paths[1])  # the first in the combined order (time 0..2)
    by_time = [paths[1], paths[2], paths[0]]
    with tet.open(out) as f:
        np.testing.assert_array_equal(
            f["temp"][...], np.concatenate([_nc(p, "temp") for p in by_time])
        )
        np.testing.assert_array_equal(f["time"][...], np.arange(9.0))


@pytest.fixture(scope="module")
def moto_s3():
    """moto's S3 server on a free port, and the storage options that reach it."""
    import socket
    import subprocess
    import sys
    import time

    boto3 = pytest.importorskip("boto3")
    pytest.importorskip("moto.server")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        t = time.monotonic()
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() - t > 30:
                    pytest.skip("moto's server did not listen within 30 s")
                time.sleep(0.1)
        endpoint = f"http://127.0.0.1:{port}"
        options = {
            "endpoint": endpoint,
            "access_key_id": "testing",
            "secret_access_key": "verysecretvalue",
            "region": "us-east-1",
            "allow_http": "true",
        }
        s3 = boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id="testing",
            aws_secret_access_key="verysecretvalue",
            region_name="us-east-1",
        )
        for b in ("inbox", "outbox"):
            s3.create_bucket(Bucket=b)
        yield s3, options
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("isolate", [True, False])
def test_object_urls_in_and_out_with_storage_options(tmp_path, moto_s3, isolate):
    s3, options = moto_s3
    a = (np.arange(600, dtype="<i4") * 7 - 50).reshape(20, 30)
    src = save_npy(tmp_path, "a", a)
    s3.upload_file(str(src), "inbox", "in/a.npy")
    key = f"out/{isolate}/a.tet"
    r = tet.convert(
        "s3://inbox/in/a.npy",
        f"s3://outbox/{key}",
        storage_options=options,
        isolate=isolate,
        isel="dim_0=2:12",
        spool_dir=tmp_path,
    )
    assert r.input == "s3://inbox/in/a.npy"
    assert r.output.startswith(str(tmp_path))  # staged, then uploaded
    got = tmp_path / "got.tet"
    s3.download_file("outbox", key, str(got))
    local = tmp_path / "local.tet"
    tet.convert(src, local, isel="dim_0=2:12")
    with tet.open(got) as f, tet.open(local) as g:
        np.testing.assert_array_equal(f["a"][...], a[2:12])
        np.testing.assert_array_equal(f["a"][...], g["a"][...])
        params = f.history[-1].params
        assert params["input"] == "s3://inbox/in/a.npy"
        assert params["input_object"].startswith("object:2528:")  # its stamp: size, ETag
        assert params["isel"] == "dim_0=2:12"
    # Nothing is left in the spool folder, and a wrong key is the caller's NotFoundError.
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".tet-spool-")]
    with pytest.raises(tet.NotFoundError):
        tet.convert("s3://inbox/in/none.npy", tmp_path / "n.tet", storage_options=options)
