"""``tet``: read, convert and audit ``.tet`` files (tet-convert) from Python.

- :func:`open` a file: ``.datasets`` (name, dtype, shape, chunks, dims, coords, attrs),
  ``.attrs``, ``.history``, ``.text_variables``; ``f["name"][0, ::2]`` reads only the chunks
  the selection touches and returns numpy values in the source's type.
- :func:`convert` any supported input to ``.tet`` in a supervised worker process,
  :func:`convert_many`, :func:`verify`, :func:`audit` (what ``tet verify --json`` and ``tet
  audit --json`` print), :func:`export` (``tet export``).
- A ``.tet`` may be an object URL (``s3://``, ``gs://``, ``az://``, ``https://``) wherever a
  path is, with ``storage_options`` (:mod:`tet._storage`): read by ranged GETs, only the chunks
  a selection touches.
- ``xr.open_dataset("out.tet")``: the xarray engine ``tet`` (:mod:`tet.xarray_backend`).

Importing the package loads no native code: the extension module ``tet._tet`` (and the C
libraries it links) is loaded when a file is opened or converted, or a native function such
as :func:`chunks_read_total` is first looked up, so installing ``tet`` costs the other
readers of an environment nothing (xarray imports every engine's backend on each open).
"""

from __future__ import annotations

from . import _native  # noqa: F401 - installs the extension's loader (see _native)
from ._convert import (
    AuditEntry,
    ConvertReport,
    DatasetReport,
    convert,
    convert_many,
)
from ._reports import audit, export, verify
from ._reproduce import reproduce
from ._file import Dataset, File, HistoryRow, Parent, TextVariable, open, read_stats
from .errors import (
    ConversionError,
    CorruptError,
    NotFoundError,
    TetError,
    UnsupportedError,
    WorkerCrashError,
)


def __getattr__(name: str):
    # The extension's own functions, looked up (and the extension loaded) on first use.
    if name == "chunks_read_total":
        from ._native import native

        return native.chunks_read_total
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "open",
    "File",
    "Dataset",
    "TextVariable",
    "HistoryRow",
    "Parent",
    "chunks_read_total",
    "read_stats",
    "convert",
    "convert_many",
    "verify",
    "audit",
    "export",
    "reproduce",
    "ConvertReport",
    "DatasetReport",
    "AuditEntry",
    "TetError",
    "CorruptError",
    "UnsupportedError",
    "NotFoundError",
    "ConversionError",
    "WorkerCrashError",
]
