"""The supervised conversion worker: ``python -m tet._worker``.

Reads one job (JSON) on stdin, runs the engine's conversion in this process and writes one
JSON line on stdout (after progress lines ``{"progress": event, "bytes": n}`` when the job
asks for them): ``{"ok": true, "report": {...}}`` or ``{"ok": false, "error": <class
name in tet.errors>, "message": ...}``. A crash of a C library kills only this process;
:func:`tet.convert` sees the signal and raises. The worker dies with the process that started
it (``PR_SET_PDEATHSIG`` on Linux): a conversion hung inside a C library whose caller was
killed does not run on as an orphan."""

from __future__ import annotations

import ctypes
import json
import os
import sys

#: prctl(2) option: the signal this process gets when its parent dies (Linux).
_PR_SET_PDEATHSIG = 1


def _emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _progress(event: str, nbytes: int) -> None:
    _emit({"progress": event, "bytes": nbytes})


def _run(job: dict) -> dict:
    from . import _tet
    from . import errors

    options = dict(job.get("options", {}))
    if job.get("progress"):
        options["progress"] = _progress
    try:
        text = _tet.convert(job["src"], job["dst"], **options)
    except errors.TetError as e:
        return {"ok": False, "error": type(e).__name__, "message": str(e)}
    except (ValueError, TypeError) as e:
        return {"ok": False, "error": "ValueError", "message": str(e)}
    return {"ok": True, "report": json.loads(text)}


def _die_with_parent() -> None:
    """Asks the kernel for SIGKILL when the parent dies; exits at once if it already has (the
    parent died between the fork and this call: the worker was handed to init)."""
    if not sys.platform.startswith("linux"):
        return
    parent = os.environ.get("TET_WORKER_PARENT")
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, 9, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if parent is not None and str(os.getppid()) != parent:
        sys.exit(1)


def main() -> int:
    """Runs one conversion job read as JSON from stdin and writes its events and outcome to
    stdout (the supervised child of :func:`tet.convert`)."""
    _die_with_parent()
    job = json.loads(sys.stdin.read())
    _emit(_run(job))
    return 0


if __name__ == "__main__":
    sys.exit(main())
