"""The supervised conversion worker: ``python -m tet._worker``.

Reads one job (JSON) on stdin, runs the engine's conversion in this process and writes one
JSON line on stdout (after progress lines ``{"progress": event, "bytes": n}`` when the job
asks for them): ``{"ok": true, "report": {...}}`` or ``{"ok": false, "error": <class
name in tet.errors>, "message": ...}``. A crash of a C library kills only this process;
:func:`tet.convert` sees the signal and raises."""

from __future__ import annotations

import json
import sys


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


def main() -> int:
    """Runs one conversion job read as JSON from stdin and writes its events and outcome to
    stdout (the supervised child of :func:`tet.convert`)."""
    job = json.loads(sys.stdin.read())
    _emit(_run(job))
    return 0


if __name__ == "__main__":
    sys.exit(main())
