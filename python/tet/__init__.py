"""``tet``: read, convert and audit ``.tet`` files (tet-convert) from Python.

- :func:`open` a file: ``.datasets`` (name, dtype, shape, chunks, dims, coords, attrs),
  ``.attrs``, ``.history``, ``.text_variables``; ``f["name"][0, ::2]`` reads only the chunks
  the selection touches and returns numpy values in the source's type.
- :func:`convert` any supported input to ``.tet`` in a supervised worker process,
  :func:`convert_many`, :func:`verify`, :func:`audit`.
- ``xr.open_dataset("out.tet")``: the xarray engine ``tet`` (:mod:`tet.xarray_backend`).
"""

from __future__ import annotations

from ._convert import (
    AuditEntry,
    ConvertReport,
    DatasetReport,
    audit,
    convert,
    convert_many,
    verify,
)
from ._file import Dataset, File, HistoryRow, Parent, TextVariable, open, read_stats
from ._tet import chunks_read_total
from .errors import (
    ConversionError,
    CorruptError,
    NotFoundError,
    TetError,
    UnsupportedError,
    WorkerCrashError,
)

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
