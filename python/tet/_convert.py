"""``tet.convert``, ``tet.convert_many``, ``tet.verify`` and ``tet.audit``."""

from __future__ import annotations

import glob
import json
import os
import signal as _signal
import selectors
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from . import errors


@dataclass(frozen=True)
class DatasetReport:
    """What a conversion did with one dataset."""

    name: str
    dtype: str
    source_dtype: str
    shape: tuple[int, ...]
    chunk_shape: tuple[int, ...]
    chunks: int
    raw_bytes: int
    stored_bytes: int
    codec: str
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ConvertReport:
    """The report of one conversion (the CLI's ``--json`` report)."""

    input: str
    output: str
    format: str
    input_digest: str
    bytes_in: int
    bytes_out: int
    raw_bytes: int
    stored_bytes: int
    ratio: float
    elapsed_s: float
    jobs: int
    datasets: tuple[DatasetReport, ...]
    skipped: tuple[tuple[str, str], ...]
    warnings: tuple[str, ...]

    @classmethod
    def from_json(cls, d: dict) -> "ConvertReport":
        """The report from the JSON the engine prints (``tet-convert --json``); a dataset's
        unknown keys are kept in its ``extra``."""
        known = {f for f in DatasetReport.__dataclass_fields__ if f != "extra"}
        datasets = tuple(
            DatasetReport(
                **{k: (tuple(v) if isinstance(v, list) else v) for k, v in x.items() if k in known},
                extra={k: v for k, v in x.items() if k not in known},
            )
            for x in d.get("datasets", [])
        )
        return cls(
            input=d["input"],
            output=d["output"],
            format=d["format"],
            input_digest=d["input_digest"],
            bytes_in=d["bytes_in"],
            bytes_out=d["bytes_out"],
            raw_bytes=d["raw_bytes"],
            stored_bytes=d["stored_bytes"],
            ratio=d["ratio"],
            elapsed_s=d["elapsed_s"],
            jobs=d["jobs"],
            datasets=datasets,
            skipped=tuple((s["name"], s["reason"]) for s in d.get("skipped", [])),
            warnings=tuple(d.get("warnings", [])),
        )


def _chunk_specs(chunk) -> list[str]:
    """``chunk`` as ``--chunk`` specs: a dict ``{"time": 1, "temp": (1, 721, 1440)}``, a spec
    string, or a list of them."""
    if chunk is None:
        return []
    if isinstance(chunk, dict):
        return [
            f"{k}:{','.join(str(int(n)) for n in v)}"
            if isinstance(v, (list, tuple))
            else f"{k}={int(v)}"
            for k, v in chunk.items()
        ]
    if isinstance(chunk, (str, int)):
        return [str(chunk)]
    return [str(c) for c in chunk]


def _is_size(spec: str) -> bool:
    """A ``chunk`` entry that is a byte target (``"4MiB"``, ``1000000``), not a spec."""
    return not any(c in spec for c in "=:")


def settings_fields() -> tuple[str, ...]:
    """The settings :func:`convert` takes as keyword arguments: the fields of the engine's
    settings type (``tet._tet.SETTINGS_FIELDS``), the keys of a ``tet-convert`` manifest."""
    from . import _tet

    return tuple(_tet.SETTINGS_FIELDS)


def _settings(options: dict) -> str:
    """The keyword arguments of :func:`convert` as the engine's settings (JSON text): every
    name is checked against the settings type's fields (an unknown one is a ``TypeError``
    naming the closest), Python values are given their serde form."""
    import difflib

    fields = settings_fields()
    for k in options:
        if k not in fields:
            close = difflib.get_close_matches(k, fields, n=3, cutoff=0.5)
            hint = f" (closest: {', '.join(close)})" if close else f" (settings: {', '.join(fields)})"
            raise TypeError(f"tet.convert() got an unexpected keyword argument {k!r}{hint}")
    out = {k: v for k, v in options.items() if v is not None}
    if "chunk" in out:
        specs = _chunk_specs(out.pop("chunk"))
        sizes = [c for c in specs if _is_size(c)]
        if sizes:
            # ``chunk="4MiB"``: a byte target (``chunk_bytes``), as the CLI's --chunk-bytes.
            out.setdefault("chunk_bytes", sizes[-1])
        if len(sizes) < len(specs):
            out["chunk"] = [c for c in specs if not _is_size(c)]
    for k in ("chunk_bytes", "memory_budget"):
        if isinstance(out.get(k), str) and out[k].strip().isdigit():
            out[k] = int(out[k])
    if out.get("jobs") == 0:
        del out["jobs"]  # 0: one thread per core
    for k in ("variables", "exclude", "isel", "sel"):
        if isinstance(out.get(k), (list, tuple)):
            out[k] = [str(x) for x in out[k]]
    if "codec" in out:
        out["codec"] = str(out["codec"])
    return json.dumps(out)


def _remove_temp_files(dst: str) -> None:
    """Removes what a killed worker left beside ``dst`` (the writer's temporary files)."""
    d, base = os.path.split(os.path.abspath(dst))
    for p in glob.glob(os.path.join(glob.escape(d), f".{glob.escape(base)}.*.tet-convert.tmp")):
        try:
            os.unlink(p)
        except OSError:
            pass


def _signal_name(sig: int) -> str:
    try:
        return _signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def _raise(name: str, message: str):
    if name == "ValueError":
        raise ValueError(message)
    cls = getattr(errors, name, errors.ConversionError)
    raise cls(message)


def convert(
    src: str | os.PathLike | Iterable[str | os.PathLike],
    dst: str | os.PathLike,
    *,
    timeout: float | None = None,
    isolate: bool = True,
    progress: Callable[[str, int, int], None] | bool | None = None,
    storage_options: dict[str, str] | None = None,
    spool_dir: str | os.PathLike | None = None,
    **settings,
) -> ConvertReport:
    """Converts ``src`` (NetCDF, HDF5, NPY/NPZ, TeaFile, Tensogram, Zarr or ``.tet``) into
    the ``.tet`` file ``dst`` and returns the report; a list of inputs with ``concat="DIM"``
    is combined along that dimension (as ``tet-convert --concat``).

    The keyword arguments are the conversion's settings, those of the CLI and of a manifest
    (:func:`settings_fields` lists them): ``codec`` (``auto``, ``raw``, ``zstd``, ``zstd:N``…),
    ``chunk`` (specs like ``"time=1"`` / ``"temp:1,721,1440"``, a list of them, or a dict
    ``{"time": 1, "temp": (1, 721, 1440)}``; a byte target like ``"4MiB"`` is
    ``chunk_bytes``), ``chunk_bytes``, ``jobs`` (threads; 0: one per core),
    ``memory_budget``, ``skip_unsupported``, ``unpack``, ``follow_external``, ``variables``,
    ``exclude``, ``no_coords``, ``isel``, ``sel``, ``concat``, ``concat_take_first``…
    An unknown keyword is a ``TypeError`` naming the closest settings; a name that matches
    nothing in the input (a ``chunk`` dimension, a variable) a ``ValueError`` naming the
    closest names the input has.

    The conversion runs in a child process (``isolate=True``), as the CLI's batch runner does:
    a crash of a C library (a signal) or a run past ``timeout`` seconds raises
    :class:`tet.WorkerCrashError`, leaves no temporary file behind and never harms this
    interpreter. ``progress`` is called as ``progress(event, done_bytes, total_bytes)`` with
    the events ``start``, ``advance`` (one per chunk written) and ``finish``;
    ``progress=True`` draws a tqdm bar when tqdm is installed.
    Safe to use as a Dask task (``client.map(tet.convert, srcs, dsts)``).

    ``src`` and ``dst`` may be object URLs (``s3://``, ``gs://``, ``az://``, ``https://``; a
    prefix ending in ``/`` is a Zarr store read in place), as with the CLI:
    ``storage_options`` are the stores' credentials and options (the CLI's
    ``--storage-option KEY=VALUE``: ``endpoint``, ``region``, ``access_key_id``…; the
    ``AWS_*``/``GOOGLE_*``/``AZURE_*`` environment is read too), ``spool_dir`` where inputs
    that need a local file are downloaded and outputs are staged before their upload."""
    if isinstance(src, (str, os.PathLike)):
        src = os.fspath(src)
    else:
        src = [os.fspath(s) for s in src]
    dst = os.fspath(dst)
    opts: dict[str, Any] = {"settings": _settings(settings)}
    if storage_options:
        opts["storage_options"] = {str(k): str(v) for k, v in storage_options.items()}
    if spool_dir is not None:
        opts["spool_dir"] = os.fspath(spool_dir)
    shown = src if isinstance(src, str) else src[0]
    if not isolate:
        from . import _tet

        if progress is not None:
            opts["progress"] = _Progress(progress, shown)
        return ConvertReport.from_json(json.loads(_tet.convert(src, dst, **opts)))
    return _convert_in_worker(src, dst, opts, timeout, progress)


class _Progress:
    """Turns the engine's progress events into calls of the user's callback (or a tqdm bar)."""

    def __init__(self, progress, src: str):
        self.cb = progress if callable(progress) else None
        self.bar = None
        self.src = src
        self.done = 0
        self.total = 0
        self.want_tqdm = progress is True

    def __call__(self, event: str, nbytes: int) -> None:
        if event == "start":
            self.total = nbytes
            if self.want_tqdm:
                try:
                    from tqdm.auto import tqdm
                except ImportError:
                    self.want_tqdm = False
                else:
                    self.bar = tqdm(total=nbytes, unit="B", unit_scale=True, desc=os.path.basename(self.src))
        elif event == "advance":
            self.done += nbytes
            if self.bar is not None:
                self.bar.update(nbytes)
        elif event == "finish" and self.bar is not None:
            self.bar.close()
        if self.cb is not None:
            self.cb(event, self.done, self.total)


def _read_worker(proc, on_progress, timeout: float | None) -> list[bytes]:
    """The worker's stdout lines, progress lines passed on as they come; ``None`` on timeout."""
    deadline = None if timeout is None else time.monotonic() + timeout
    lines: list[bytes] = []
    buf = b""
    fd = proc.stdout.fileno()
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            if not sel.select(left):
                continue
            data = os.read(fd, 1 << 16)
            if not data:
                break
            buf += data
            *done, buf = buf.split(b"\n")
            for line in done:
                if line.startswith(b'{"progress"'):
                    if on_progress is not None:
                        p = json.loads(line)
                        on_progress(p["progress"], p["bytes"])
                elif line.strip():
                    lines.append(line)
    if buf.strip():
        lines.append(buf)
    return lines


def _convert_in_worker(src, dst, opts, timeout, progress=None) -> ConvertReport:
    shown = src if isinstance(src, str) else src[0]
    on_progress = _Progress(progress, shown) if progress is not None else None
    job = json.dumps({"src": src, "dst": dst, "options": opts, "progress": on_progress is not None})
    # The worker imports this very package, wherever it was imported from (first on its path,
    # before the working directory, which may hold a source checkout of another build).
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    boot = (
        f"import sys; sys.path.insert(0, {pkg_parent!r}); "
        "from tet._worker import main; sys.exit(main())"
    )
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", boot],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            start_new_session=True,
            env={**os.environ, "TET_WORKER_PARENT": str(os.getpid())},
        )
        try:
            proc.stdin.write(job.encode())
            proc.stdin.close()
            lines = _read_worker(proc, on_progress, timeout)
            if lines is None:
                proc.kill()
                proc.wait()
                _remove_temp_files(dst)
                raise errors.WorkerCrashError(
                    f"{shown}: the conversion worker ran past its timeout of {timeout} s and was killed",
                    signal=_signal.SIGKILL,
                    timed_out=True,
                )
            proc.wait()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()
        err.seek(0)
        stderr = err.read().decode(errors="replace").strip()
    if proc.returncode < 0:
        sig = -proc.returncode
        _remove_temp_files(dst)
        tail = stderr.splitlines()[-3:]
        raise errors.WorkerCrashError(
            f"{shown}: the conversion worker crashed: {_signal_name(sig)}"
            + (f" ({' / '.join(tail)})" if tail else ""),
            signal=sig,
        )
    if proc.returncode != 0 or not lines:
        _remove_temp_files(dst)
        raise errors.ConversionError(
            f"{shown}: the conversion worker exited with status {proc.returncode}: {stderr[-2000:]}"
        )
    res = json.loads(lines[-1])
    if not res["ok"]:
        _raise(res["error"], res["message"])
    return ConvertReport.from_json(res["report"])


def convert_many(
    pairs: Iterable[tuple[str | os.PathLike, str | os.PathLike]],
    *,
    ledger: str | os.PathLike | None = None,
    **options,
) -> list[ConvertReport | errors.TetError]:
    """Converts each ``(src, dst)`` pair with :func:`convert` (one supervised worker each) and
    returns, per pair in order, its report or the exception it raised. With ``ledger``, one
    JSON line per input is appended to that file (``input``, ``output``, ``ok``, ``digest`` or
    ``error``)."""
    results: list[ConvertReport | errors.TetError] = []
    for src, dst in pairs:
        try:
            r: ConvertReport | errors.TetError = convert(src, dst, **options)
        except errors.TetError as e:
            r = e
        results.append(r)
        if ledger is not None:
            row: dict[str, Any] = {"input": os.fspath(src), "output": os.fspath(dst)}
            if isinstance(r, ConvertReport):
                row.update(ok=True, digest=r.input_digest)
            else:
                row.update(ok=False, error=f"{type(r).__name__}: {r}")
            with open(ledger, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(row) + "\n")
    return results


def verify(path: str | os.PathLike, deep: bool = True) -> dict:
    """Checks a ``.tet`` file: every rule of the format, the footer digest and the chunk
    checksums (``deep``: of every chunk, else a sample). Returns a dict with ``ok``,
    ``failures``, ``warnings``, ``notes`` (lists of ``(code, message)``) and counts. A damaged
    file is a report with ``ok`` false and its failures (what ``tet verify`` says), not an
    exception: only a file that cannot be opened at all raises."""
    from . import _tet

    return _tet.verify_file(os.fspath(path), deep)


@dataclass(frozen=True)
class AuditEntry:
    """One ``convert`` step of a file's history, checked against its input."""

    #: The input as recorded (absolute when the row recorded a working directory).
    input: str | None
    #: The digest the history recorded.
    recorded: str
    #: The digest of the input now (``None`` when it could not be read).
    current: str | None
    #: ``unchanged``, ``changed`` or ``missing``.
    status: str


def _recorded_input(params: dict) -> str | None:
    p = params.get("input")
    if not p:
        return None
    cwd = params.get("cwd")
    return p if os.path.isabs(p) or not cwd else os.path.join(cwd, p)


def audit(path: str | os.PathLike, sources: Iterable[str | os.PathLike] | None = None):
    """Answers "is the input unchanged?" for every ``convert`` step in a file's history: each
    recorded input (or each of ``sources``, in order) is hashed again with the digest the
    history rows use and compared. Returns a list of :class:`AuditEntry`."""
    from . import _tet
    from ._file import open as _open

    with _open(path) as f:
        rows = [h for h in f.history if h.op == "convert"]
    given = [os.fspath(s) for s in sources] if sources is not None else None
    out = []
    for i, row in enumerate(rows):
        recorded = row.parents[0].digest if row.parents else ""
        inp = given[i] if given is not None and i < len(given) else _recorded_input(row.params)
        current = None
        if inp is not None:
            try:
                current = _tet.digest_file(inp)[0]
            except errors.TetError:
                current = None
        status = "missing" if current is None else ("unchanged" if current == recorded else "changed")
        out.append(AuditEntry(input=inp, recorded=recorded, current=current, status=status))
    return out
