"""``tet.open``: a ``.tet`` file, its datasets and its provenance, as Python objects."""

from __future__ import annotations

import datetime as _dt
import json
import os
import threading
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

import numpy as np

from ._native import native as _tet  # loaded on first use (see _native)
from ._indexing import Selection
from ._storage import pairs
from .errors import CorruptError, NotFoundError, TetError

#: numpy dtypes of the engine's element types (little-endian, as the file stores them).
DTYPES = {
    "bool": np.dtype("?"),
    "i8": np.dtype("i1"),
    "u8": np.dtype("u1"),
    "i16": np.dtype("<i2"),
    "u16": np.dtype("<u2"),
    "i32": np.dtype("<i4"),
    "u32": np.dtype("<u4"),
    "i64": np.dtype("<i8"),
    "u64": np.dtype("<u8"),
    "f16": np.dtype("<f2"),
    "bf16": np.dtype("<f4"),
    "f32": np.dtype("<f4"),
    "f64": np.dtype("<f8"),
    "c64": np.dtype("<c8"),
    "c128": np.dtype("<c16"),
}


# Chunks read per (file path, dataset name) in this process (see `read_stats`).
_STATS: dict[tuple[str, str], int] = {}
_STATS_LOCK = threading.Lock()


def read_stats() -> dict[tuple[str, str], int]:
    """Chunks read so far in this process, per ``(file path, dataset name)``, through every
    open file (the xarray engine's included): what a laziness check counts."""
    with _STATS_LOCK:
        return dict(_STATS)


def attr_value(v: Any) -> Any:
    """An attribute as the netCDF4 and h5py libraries give it: text as ``str``, a list of
    strings as ``list``, one number as a numpy scalar of its type, several as a 1-d array."""
    if isinstance(v, np.ndarray) and v.ndim == 1 and v.size == 1:
        return v[0]
    return v


def attr_dict(pairs) -> dict[str, Any]:
    """Typed attribute pairs as a dict of Python/numpy values, in their order."""
    return {k: attr_value(v) for k, v in pairs}


@dataclass(frozen=True)
class Parent:
    """One input of a history step: its digest (``sha256:<hex>`` for a conversion input)."""

    digest: str

    @property
    def algorithm(self) -> str:
        """The digest's algorithm (``sha256``), or ``""`` when it names none."""
        return self.digest.split(":", 1)[0] if ":" in self.digest else ""

    @property
    def hexdigest(self) -> str:
        """The digest's hex value, without the algorithm prefix."""
        return self.digest.split(":", 1)[1] if ":" in self.digest else self.digest


@dataclass(frozen=True)
class HistoryRow:
    """One step of a file's provenance (a row of the footer's ``history``)."""

    #: What was done: ``convert``, ``rechunk``…
    op: str
    #: The source format id (``nc``, ``h5``, ``zarr``, ``npy``, ``tet``…).
    source: str
    #: When, as recorded (decimal Unix seconds).
    at: str
    #: The inputs, by digest.
    parents: tuple[Parent, ...]
    #: Every byte-affecting option and the recorded facts of the step (input path, cwd, tool…).
    params: dict[str, str] = field(default_factory=dict)

    @property
    def time(self) -> _dt.datetime | None:
        """``at`` as an aware UTC datetime (``None`` when it is not a number)."""
        try:
            return _dt.datetime.fromtimestamp(float(self.at), tz=_dt.timezone.utc)
        except (TypeError, ValueError, OverflowError):
            return None

    @property
    def tool(self) -> str | None:
        """The program that made the step, when recorded."""
        return self.params.get("tool")


class Dataset:
    """One array of a ``.tet`` file as the source held it (widening, complex splitting and the
    0-d storage undone). Index it like a numpy array: ``ds[0, ::2, -1]`` reads only the chunks
    the selection touches and returns a numpy array of :attr:`dtype`."""

    def __init__(self, file: "File", index: int, rec: dict):
        self._file = file
        self._index = index
        #: Full name: the group path joined with ``/`` and the array's own name.
        self.name: str = rec["name"]
        #: The element type the source held (``i8``, ``bool`` and complex included).
        self.dtype: np.dtype = DTYPES[rec["dtype"]]
        #: The source's element type name (``bf16`` arrays come as the ``float32`` they were
        #: widened to: exact).
        self.source_dtype: str = rec["dtype"]
        self.shape: tuple[int, ...] = tuple(int(n) for n in rec["shape"])
        #: The ``.tet`` chunk shape (empty for a 0-d array).
        self.chunks: tuple[int, ...] = tuple(int(n) for n in rec["chunk_shape"])
        self.dims: tuple[str, ...] | None = tuple(rec["dims"]) if rec["dims"] is not None else None
        #: The source's attributes, typed, in source order.
        self.attrs: dict[str, Any] = attr_dict(rec["attrs"])
        #: ``data`` or ``coordinate``.
        self.role: str = rec["role"]
        #: Recorded facts about the array (enum mappings, unlimited dims, packing…).
        self.facts: dict[str, Any] = attr_dict(rec["facts"])
        #: The ``.tet`` dataset names the values are stored in (real part first).
        self.stored: tuple[str, ...] = tuple(rec["stored"])
        #: Coordinate labels per dimension name, as the footer records them (≤ 64 positions).
        self.coords: dict[str, list[str]] = dict(rec["coords"])
        #: Other recorded metadata of the stored dataset (``source_dtype``, ``notes``…), JSON.
        self.meta: dict[str, Any] = {k: json.loads(v) for k, v in rec["meta"].items()}

    @property
    def ndim(self) -> int:
        """Number of axes (0 for a 0-d variable)."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """Number of elements."""
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        """Bytes of the whole array in its source type (what reading it all allocates)."""
        return self.size * self.dtype.itemsize

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d dataset")
        return self.shape[0]

    def __repr__(self) -> str:
        dims = ", ".join(self.dims) if self.dims else ""
        return (
            f"<tet.Dataset {self.name!r} {self.dtype} shape={self.shape} "
            f"chunks={self.chunks} dims=({dims})>"
        )

    def read_outer(self, positions) -> np.ndarray:
        """Reads an outer selection: per axis, a strictly increasing sequence of positions."""
        sel = [np.ascontiguousarray(p, dtype=np.uint64) for p in positions]
        reader = self._file._reader
        before = reader.chunks_read
        raw = reader.read(self._index, sel)
        with _STATS_LOCK:
            key = (self._file.path, self.name)
            _STATS[key] = _STATS.get(key, 0) + reader.chunks_read - before
        return raw.view(self.dtype).reshape(tuple(len(p) for p in sel))

    def __getitem__(self, key) -> np.ndarray:
        s = Selection(key, self.shape)
        if s.empty:
            return np.empty(s.shape, dtype=self.dtype)
        return s.finish(self.read_outer(s.read))

    def read(self) -> np.ndarray:
        """The whole array."""
        return self[...]

    def __array__(self, dtype=None, copy=None):
        a = self.read()
        return a if dtype is None else a.astype(dtype)


@dataclass
class TextVariable:
    """A string variable (kept in the footer): its values as a numpy array of ``str``."""

    name: str
    shape: tuple[int, ...]
    dims: tuple[str, ...] | None
    values: np.ndarray
    attrs: dict[str, Any]
    #: For a fixed-length character array: (the string-length dimension, characters).
    char_dim: tuple[str, int] | None
    facts: dict[str, Any]


def _text_variable(rec: dict) -> TextVariable:
    shape = tuple(int(n) for n in rec["shape"])
    values = np.empty(len(rec["values"]), dtype=object)
    values[:] = rec["values"]
    return TextVariable(
        name=rec["name"],
        shape=shape,
        dims=tuple(rec["dims"]) if rec["dims"] is not None else None,
        values=values.reshape(shape),
        attrs=attr_dict(rec["attrs"]),
        char_dim=tuple(rec["char_dim"]) if rec["char_dim"] is not None else None,
        facts=attr_dict(rec["facts"]),
    )


class File:
    """An open ``.tet`` file. Opening reads the directory, the chunk index and the footer, no
    chunk data, and checks what can be checked without reading the chunks (see :func:`open`).
    Use it as a context manager, or call :meth:`close`."""

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        allow_damaged_footer: bool = False,
        storage_options: Mapping[str, Any] | None = None,
    ):
        self.path = os.fspath(path)
        self._reader = _tet.Reader(self.path, allow_damaged_footer, pairs(storage_options))
        try:
            self._load(self._reader)
        except TetError:
            self._reader.close()
            raise
        except (KeyError, ValueError, TypeError, UnicodeError) as e:
            # A record the engine passed but this layer cannot take: the file's fault, never
            # another exception type.
            self._reader.close()
            raise CorruptError(f"{self.path}: unreadable metadata: {e!r}") from e

    def _load(self, r) -> None:
        #: Why the footer could not be read: set only when the file was opened with
        #: ``allow_damaged_footer=True`` (the datasets are then read as stored, without their
        #: attributes, history and checksums); ``None`` when it was read or there is none.
        self.footer_error: str | None = r.footer_error
        #: Whether the values are vouched for by checksums: the file records them, the footer
        #: digest matched the superblock, directory, index and footer at open, and every chunk
        #: read is checked against its digest. ``False`` for the files of the reference tools
        #: and older tet-convert versions, which record no checksums (their structure is
        #: checked, their values cannot be), and for a file opened over a damaged footer.
        self.verified: bool = bool(r.verified)
        #: The arrays, by name, in stored order.
        self.datasets: dict[str, Dataset] = {}
        for i, rec in enumerate(r.arrays()):
            self.datasets[rec["name"]] = Dataset(self, i, rec)
        #: The file-level attributes (a group's as ``group/path/name``).
        self.attrs: dict[str, Any] = attr_dict(r.global_attrs())
        #: The file-level facts.
        self.facts: dict[str, Any] = attr_dict(r.global_facts())
        #: The provenance, oldest step first.
        self.history: list[HistoryRow] = [
            HistoryRow(
                op=h["op"],
                source=h["source"],
                at=h["at"],
                parents=tuple(Parent(p) for p in h["parents"]),
                params=dict(h["params"]),
            )
            for h in r.history()
        ]
        #: The history as CF ``history`` lines (what the xarray engine appends).
        self.history_lines: list[str] = list(r.history_lines())
        #: ``metadata.file`` of the footer (tool, library version, creation time).
        self.info: dict[str, str] = dict(r.file_info())
        #: Source items without a ``.tet`` form: (name, reason).
        self.skipped: list[tuple[str, str]] = list(r.skipped())
        #: The string variables, by name.
        self.text_variables: dict[str, TextVariable] = {}
        for rec in r.text_variables():
            if rec["malformed"]:
                self.skipped.append((rec["name"], "malformed string-variable record in the footer"))
            else:
                self.text_variables[rec["name"]] = _text_variable(rec)

    # -- mapping of names ---------------------------------------------------------------------

    def __getitem__(self, name: str) -> Dataset:
        try:
            return self.datasets[name]
        except KeyError:
            raise NotFoundError(
                f"{self.path}: no dataset {name!r} (have: {', '.join(self.datasets)})"
            ) from None

    def __contains__(self, name: object) -> bool:
        return name in self.datasets

    def __iter__(self) -> Iterator[str]:
        return iter(self.datasets)

    def __len__(self) -> int:
        return len(self.datasets)

    def keys(self):
        """The dataset names, in file order."""
        return self.datasets.keys()

    # -- the rest -----------------------------------------------------------------------------

    @property
    def footer(self) -> dict | None:
        """The footer JSON as stored (``None`` without a footer)."""
        text = self._reader.footer_json()
        return None if text is None else json.loads(text)

    @property
    def chunks_read(self) -> int:
        """Chunks read through this file so far (what laziness tests count)."""
        return self._reader.chunks_read

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._reader.closed

    def verify(self, deep: bool = True) -> dict:
        """Checks every rule of the format and the checksums (``deep``: of every chunk)."""
        return self._reader.verify(deep)

    def close(self) -> None:
        """Unmaps the file. Datasets read after this raise ``ValueError``."""
        self._reader.close()

    def __enter__(self) -> "File":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{len(self.datasets)} datasets"
        return f"<tet.File {self.path!r} ({state})>"


def open(  # noqa: A001 - the package's entry point
    path: str | os.PathLike,
    *,
    allow_damaged_footer: bool = False,
    storage_options: Mapping[str, Any] | None = None,
) -> File:
    """Opens a ``.tet`` file (reads its directory, index and footer; no chunk data).

    ``path`` may be an object URL (``s3://bucket/key.tet``, ``gs://``, ``az://``,
    ``https://``): the object is read by ranged GETs — its head, chunk index and footer once at
    open, then only the chunks a selection touches — with the same checks as a local file.
    ``storage_options`` are the store's settings (``endpoint``, ``region``,
    ``access_key_id``, ``secret_access_key``, ``allow_http``…: see :mod:`tet._storage`); a
    key the store does not take raises ``ValueError`` naming the closest.

    Before it returns, the file's footer is read and, when the file records checksums, its
    digest is checked against the superblock, directory, chunk index and footer; the chunk
    index must cover every dataset's shape. Every chunk read later is checked against its
    digest. A damaged file raises :class:`tet.CorruptError`, never returns changed values or
    lost attributes. A file that records no checksums (the reference tools') opens with
    :attr:`File.verified` ``False``.

    ``allow_damaged_footer=True`` opens a file whose footer is present but unreadable (the
    reference implementation's ``plan.tet``): its datasets are read as stored, without
    attributes, history or checksums, and :attr:`File.footer_error` says why.

    Raises :class:`tet.NotFoundError` when there is no such file and
    :class:`tet.CorruptError` when it is damaged."""
    return File(path, allow_damaged_footer=allow_damaged_footer, storage_options=storage_options)
