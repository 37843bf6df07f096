"""``tet.reproduce``: a ``.tet`` file re-made from what its footer records and compared with it.

The engine's function (the one ``tet audit --reproduce`` runs) sets the process's working
directory and ``SOURCE_DATE_EPOCH`` to the recorded ones while it re-runs a row, so it runs
here in a child process (``python -m tet._reproduce``), as :func:`tet.convert` runs its
conversions: the caller's interpreter keeps its own, and a C library's crash costs only the
child."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from . import errors


def reproduce(
    path: str | os.PathLike,
    allow_version_drift: bool = False,
    storage_options: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Re-makes the ``.tet`` file at ``path`` from its footer (its ``.tet`` parents' steps
    first) and compares: the value ``tet audit --reproduce --json`` prints for the file.

    Returns ``{"schema": "tet-reproduce/1", "file", "verdict", "steps"}``: ``verdict`` is
    ``"reproduced"`` (byte for byte; with ``allow_version_drift``, the same values across
    tool versions), ``"differs"`` (``detail`` says where first: dataset and chunk, or footer
    key) or ``"not-tried"`` (``detail`` names the missing or changed input, or both tool
    versions); each step has ``file``, ``row``, ``verdict`` and ``detail``.
    ``storage_options``: settings for object inputs, as ``--storage-option KEY=VALUE``."""
    job = json.dumps(
        {
            "path": os.fspath(path),
            "allow_version_drift": bool(allow_version_drift),
            "storage_options": sorted((storage_options or {}).items()),
        }
    )
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    boot = (
        f"import sys; sys.path.insert(0, {pkg_parent!r}); "
        "from tet._reproduce import main; sys.exit(main())"
    )
    proc = subprocess.run(
        [sys.executable, "-c", boot], input=job.encode(), capture_output=True
    )
    if proc.returncode != 0 or not proc.stdout.strip():
        why = proc.stderr.decode(errors="replace").strip().splitlines()
        raise errors.WorkerCrashError(
            f"{os.fspath(path)}: the reproduction worker ended with status "
            f"{proc.returncode}: {why[-1] if why else 'no message'}"
        )
    return json.loads(proc.stdout)


def main() -> int:
    """Reads one job (JSON) on stdin, reproduces in this process and prints the report."""
    from . import _tet

    job = json.loads(sys.stdin.read())
    text = _tet.reproduce(
        job["path"],
        job["allow_version_drift"],
        [tuple(kv) for kv in job["storage_options"]],
    )
    sys.stdout.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
