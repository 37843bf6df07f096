"""The xarray engine ``tet``: ``xr.open_dataset("out.tet")`` (found from the magic bytes) or
``xr.open_dataset(path, engine="tet")``.

Opening reads the footer and the chunk index only; every variable is a lazy
:class:`TetBackendArray` that reads just the chunks a selection touches (outer indexing).
The values come in the source's own types and with the source's attributes, and xarray's own
CF decoders turn them into what ``xr.open_dataset(source)`` gives: masking, scaling, times,
characters. The only addition to the attributes is the CF habit: the file's history rows are
appended as lines to the global ``history`` attribute. The structured rows, the input
digests, the facts and the source types go to ``encoding``.

Arrays and datasets pickle by path (a dask worker reopens the file) and reads are
thread-safe: the reader is shared, reads release the GIL.
"""

from __future__ import annotations

import os
from typing import Any, Iterable

import numpy as np
from xarray import Variable
from xarray.backends import BackendArray, BackendEntrypoint
from xarray.backends.common import AbstractDataStore
from xarray.backends.file_manager import CachingFileManager
from xarray.backends.store import StoreBackendEntrypoint
from xarray.core import indexing

from ._file import open as _open_file

MAGIC = b"TETR"


class TetBackendArray(BackendArray):
    """One array of a ``.tet`` file, read lazily through xarray's outer indexing."""

    def __init__(self, manager: CachingFileManager, name: str, shape, dtype):
        self._manager = manager
        self.name = name
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)

    def _raw(self, key: tuple) -> np.ndarray:
        return self._manager.acquire()[self.name][key]

    def __getitem__(self, key: indexing.ExplicitIndexer) -> np.ndarray:
        return indexing.explicit_indexing_adapter(
            key, self.shape, indexing.IndexingSupport.OUTER, self._raw
        )


def _char_array(values: np.ndarray, length: int, encoding: str) -> np.ndarray:
    """Strings as the netCDF character array they were read from (``S1``, one more axis)."""
    flat = [v.encode(encoding) for v in values.reshape(-1)]
    fixed = np.array(flat, dtype=f"S{max(length, 1)}")
    return fixed.view("S1").reshape(values.shape + (max(length, 1),))


def _phony_dims(shape, phony: list[tuple[str, int]]) -> tuple[str, ...]:
    """Dimension names for an array whose source names none, as netCDF-C names them in an
    HDF5 file without dimension scales: a group's ``phony_dim_N`` of the same length is
    reused unless the array already uses it, else a new one is made."""
    used: list[str] = []
    for n in shape:
        name = next((d for d, m in phony if m == n and d not in used), None)
        if name is None:
            name = f"phony_dim_{len(phony)}"
            phony.append((name, n))
        used.append(name)
    return tuple(used)


def _in_group(name: str, prefix: str) -> str | None:
    """The name relative to the group ``prefix`` (``""`` for the root), ``None`` when the
    item is not directly in that group."""
    if not name.startswith(prefix):
        return None
    rest = name[len(prefix):]
    return None if (not rest or "/" in rest) else rest


class TetStore(AbstractDataStore):
    """A ``.tet`` file (one group of it) as an xarray data store."""

    def __init__(self, manager: CachingFileManager, group: str | None = None, history=True):
        self._manager = manager
        self._group = (group or "").strip("/")
        self._history = history

    @classmethod
    def open(
        cls, filename, group=None, append_history=True, allow_damaged_footer=False
    ) -> "TetStore":
        """A store over ``filename`` whose file handle xarray's file manager opens, caches and
        reopens (after pickling) by path (``allow_damaged_footer``: see :func:`tet.open`)."""
        kwargs = {"allow_damaged_footer": True} if allow_damaged_footer else None
        manager = CachingFileManager(_open_file, os.fspath(filename), kwargs=kwargs)
        return cls(manager, group, append_history)

    @property
    def _prefix(self) -> str:
        return f"{self._group}/" if self._group else ""

    def _array_variables(self, f) -> dict[str, Variable]:
        out: dict[str, Variable] = {}
        phony: list[tuple[str, int]] = []
        for name, ds in f.datasets.items():
            short = _in_group(name, self._prefix)
            if short is None:
                continue
            dims = ds.dims if ds.dims is not None else _phony_dims(ds.shape, phony)
            data = indexing.LazilyIndexedArray(
                TetBackendArray(self._manager, name, ds.shape, ds.dtype)
            )
            encoding: dict[str, Any] = {
                "dtype": ds.dtype,
                "source": f.path,
                "tet_stored": ds.stored,
                "tet_source_dtype": ds.source_dtype,
                "tet_facts": ds.facts,
                "tet_meta": ds.meta,
            }
            if ds.chunks:
                encoding["preferred_chunks"] = dict(zip(dims, ds.chunks))
                encoding["chunksizes"] = ds.chunks
            out[short] = Variable(dims, data, dict(ds.attrs), encoding)
        return out

    def _text_variables(self, f) -> dict[str, Variable]:
        out: dict[str, Variable] = {}
        for name, tv in f.text_variables.items():
            short = _in_group(name, self._prefix)
            if short is None:
                continue
            dims = tv.dims if tv.dims is not None else tuple(f"{short}_dim_{i}" for i in range(len(tv.shape)))
            attrs = dict(tv.attrs)
            encoding = {"tet_facts": tv.facts, "source": f.path}
            if tv.char_dim is not None:
                enc = attrs.get("_Encoding", "utf-8")
                data = _char_array(tv.values, int(tv.char_dim[1]), enc)
                dims = tuple(dims) + (tv.char_dim[0],)
            else:
                data = tv.values
            out[short] = Variable(dims, data, attrs, encoding)
        return out

    def _attrs(self, f) -> dict[str, Any]:
        attrs = {}
        for k, v in f.attrs.items():
            short = _in_group(k, self._prefix)
            if short is not None:
                attrs[short] = v
        if self._history and not self._group and f.history_lines:
            lines = "\n".join(f.history_lines)
            old = attrs.get("history")
            attrs["history"] = f"{old}\n{lines}" if isinstance(old, str) and old else lines
        return attrs

    def load(self):
        """The variables (lazy arrays, text variables) and attributes of the store's group."""
        f = self._manager.acquire()
        if self._group and not any(
            _in_group(n, self._prefix) is not None or n.startswith(self._prefix)
            for n in list(f.datasets) + list(f.text_variables) + list(f.attrs)
        ):
            from .errors import NotFoundError

            raise NotFoundError(f"{f.path}: no group {self._group!r}")
        variables = self._array_variables(f)
        variables.update(self._text_variables(f))
        return variables, self._attrs(f)

    def get_encoding(self) -> dict[str, Any]:
        """The dataset-level encoding: unlimited dimensions and the file's provenance (history
        rows, facts)."""
        f = self._manager.acquire()
        unlimited = f.facts.get("unlimited_dims")
        enc: dict[str, Any] = {
            "source": f.path,
            "tet_history": [
                {
                    "op": h.op,
                    "source": h.source,
                    "at": h.at,
                    "time": h.time,
                    "parents": [p.digest for p in h.parents],
                    "params": dict(h.params),
                }
                for h in f.history
            ],
            "tet_input_digests": [p.digest for h in f.history for p in h.parents],
            "tet_facts": dict(f.facts),
            "tet_info": dict(f.info),
        }
        if unlimited is not None:
            enc["unlimited_dims"] = set([unlimited] if isinstance(unlimited, str) else unlimited)
        return enc

    def close(self, **kwargs) -> None:
        """Closes the cached file handle."""
        self._manager.close(**kwargs)


class TetBackendEntrypoint(BackendEntrypoint):
    """xarray's ``tet`` engine (see the module docs)."""

    description = "Open .tet files (tet-convert) lazily, with the source's types and attributes"
    url = "https://example.invalid/tet-convert#python"
    open_dataset_parameters = (
        "filename_or_obj",
        "mask_and_scale",
        "decode_times",
        "concat_characters",
        "decode_coords",
        "drop_variables",
        "use_cftime",
        "decode_timedelta",
        "group",
        "append_history",
        "allow_damaged_footer",
    )

    def guess_can_open(self, filename_or_obj) -> bool:
        """Whether ``filename_or_obj`` is a ``.tet`` file: its first bytes are the ``TETR``
        magic (the extension is not needed; only an unreadable path falls back to it)."""
        try:
            path = os.fspath(filename_or_obj)
        except TypeError:
            return False
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        try:
            with open(path, "rb") as fh:
                return fh.read(4) == MAGIC
        except OSError:
            return path.endswith(".tet")

    def open_dataset(
        self,
        filename_or_obj,
        *,
        mask_and_scale=True,
        decode_times=True,
        concat_characters=True,
        decode_coords=True,
        drop_variables: str | Iterable[str] | None = None,
        use_cftime=None,
        decode_timedelta=None,
        group: str | None = None,
        append_history: bool = True,
        allow_damaged_footer: bool = False,
    ):
        """Opens ``filename_or_obj`` (a path); ``group`` selects a group by its path;
        ``append_history=False`` leaves the ``history`` attribute exactly as the source's;
        ``allow_damaged_footer=True`` opens a file whose footer is unreadable (its arrays as
        stored, without attributes; see :func:`tet.open`). A damaged file raises
        :class:`tet.CorruptError`."""
        store = TetStore.open(
            filename_or_obj,
            group=group,
            append_history=append_history,
            allow_damaged_footer=allow_damaged_footer,
        )
        return StoreBackendEntrypoint().open_dataset(
            store,
            mask_and_scale=mask_and_scale,
            decode_times=decode_times,
            concat_characters=concat_characters,
            decode_coords=decode_coords,
            drop_variables=drop_variables,
            use_cftime=use_cftime,
            decode_timedelta=decode_timedelta,
        )
