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

import json
import os
from typing import Any, Iterable

import numpy as np
from xarray import Variable
from xarray.backends import BackendArray, BackendEntrypoint
from xarray.backends.common import AbstractDataStore
from xarray.backends.file_manager import CachingFileManager
from xarray.backends.store import StoreBackendEntrypoint
from xarray.core import indexing

from . import _views
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


def _as_list(v) -> list[str]:
    if v is None:
        return []
    return [v] if isinstance(v, str) else list(v)


def _text_encoding(tv) -> str:
    """How a text variable's characters are turned back into the source's bytes: the
    recorded ``nc_text_encoding`` (``latin1`` for bytes that are not UTF-8), else the
    variable's ``_Encoding``, else UTF-8."""
    enc = tv.facts.get("nc_text_encoding") or tv.attrs.get("_Encoding") or "utf-8"
    return str(enc)


def _outer(a: np.ndarray, key: tuple) -> np.ndarray:
    """Outer indexing of a numpy array by a key of integers, slices and integer arrays."""
    out = a
    axis = 0
    for k in key:
        out = out[(slice(None),) * axis + (k,)]
        if not isinstance(k, (int, np.integer)):
            axis += 1
    return out


class VlenBackendArray(BackendArray):
    """A variable-length variable (stored as the CF contiguous ragged pair) as the object
    array of its sequences; read whole on first use (counts and values)."""

    def __init__(self, manager: CachingFileManager, values: str, count: str, shape, dtype):
        self._manager = manager
        self.values = values
        self.count = count
        self.shape = tuple(shape)
        # The element type, as xarray's netcdf4 backend declares a vlen variable (what it
        # returns is the object array of sequences).
        self.dtype = np.dtype(dtype)
        self._objs: np.ndarray | None = None

    def objects(self) -> np.ndarray:
        """The whole object array."""
        if self._objs is None:
            f = self._manager.acquire()
            self._objs = _views.ragged_objects(f[self.values][...], f[self.count][...])
        return self._objs

    def __getstate__(self):
        d = dict(self.__dict__)
        d["_objs"] = None
        return d

    def __getitem__(self, key: indexing.ExplicitIndexer) -> np.ndarray:
        return indexing.explicit_indexing_adapter(
            key, self.shape, indexing.IndexingSupport.OUTER, lambda k: _outer(self.objects(), k)
        )


class _Compound:
    """A compound variable of the source and the stored items that hold its fields."""

    def __init__(self, name: str, record: dict):
        self.name = name
        self.record = record
        self.dtype = _views.compound_dtype(record)
        # field path -> (kind, stored name, trailing field axes, count name for a vlen)
        self.leaves: dict[tuple[str, ...], tuple[str, str, int, str | None]] = {}
        self.shape: tuple[int, ...] | None = None
        self.dims: tuple[str, ...] = ()
        self.attrs: dict[str, Any] = {}
        self.facts: dict[str, Any] = {}


class _Layout:
    """How the stored items of a file map back to the source's variables and groups."""

    def __init__(self):
        self.compounds: dict[str, _Compound] = {}
        self.members: set[str] = set()  # stored items shown only through another variable
        self.vlens: dict[str, str] = {}  # values array -> its count array
        self.aliases: dict[str, str] = {}  # another name of an array (HDF5 link) -> array
        self.groups: set[str] = set()


def _count_name(f, values: str, count: str) -> str | None:
    if count in f.datasets:
        return count
    at = values.rfind("/")
    if at >= 0 and values[: at + 1] + count in f.datasets:
        return values[: at + 1] + count
    return None


def _layout(f) -> _Layout:
    lay = _Layout()
    items: list[tuple[str, Any, str]] = [(n, d, "array") for n, d in f.datasets.items()]
    items += [(n, t, "text") for n, t in f.text_variables.items()]
    # Variable-length values: the ragged pair.
    for name, ds, kind in items:
        count = ds.facts.get("ragged_count") if kind == "array" else None
        if isinstance(count, str):
            c = _count_name(f, name, count)
            if c is not None:
                lay.vlens[name] = c
                lay.members.add(c)
    # Compound records: one stored item per leaf field.
    for name, ds, kind in items:
        rec_text = ds.facts.get("nc_compound_type")
        src = ds.facts.get("source_dataset")
        if not (isinstance(rec_text, str) and isinstance(src, str)):
            continue
        cname = compound_name = _views.compound_name(name, src)
        if compound_name is None:
            continue
        comp = lay.compounds.get(cname)
        if comp is None:
            try:
                comp = _Compound(cname, json.loads(rec_text))
            except (ValueError, KeyError, TypeError):
                continue
            lay.compounds[cname] = comp
        path = tuple(name[len(cname) + 1:].split("/"))
        ftype = dict(_views.leaves(comp.record)).get(path)
        if ftype is None and path not in dict(_views.leaves(comp.record)):
            continue
        fld_dims = _field_dims(comp.record, path)
        count = lay.vlens.get(name)
        if kind == "array" and count is not None:
            comp.leaves[path] = ("vlen", name, len(fld_dims), count)
            shape_src = f.datasets[count]
        else:
            comp.leaves[path] = (kind, name, len(fld_dims), None)
            shape_src = ds
        lay.members.add(name)
        if comp.shape is None:
            extra = len(fld_dims) if not (kind == "text" and ds.char_dim is not None) else 0
            if kind == "text" and ds.char_dim is not None:
                extra = len(fld_dims) - 1 if fld_dims else 0
            n = len(shape_src.shape) - extra
            comp.shape = tuple(shape_src.shape[:n])
            dims = shape_src.dims
            comp.dims = tuple(dims[:n]) if dims is not None else tuple(
                f"{cname.rsplit('/', 1)[-1]}_dim_{i}" for i in range(n)
            )
            comp.attrs = _views.view_attrs(ds.attrs, ds.facts)
            comp.facts = {
                k: v for k, v in ds.facts.items() if k not in ("ragged_count", "ragged_type")
            }
    # A compound whose fields are not all stored stays as its stored items.
    for cname in list(lay.compounds):
        comp = lay.compounds[cname]
        if set(comp.leaves) != {p for p, _ in _views.leaves(comp.record)}:
            for _, stored, _, count in comp.leaves.values():
                lay.members.discard(stored)
            del lay.compounds[cname]
    for name, count in list(lay.vlens.items()):
        if name in lay.members:
            del lay.vlens[name]
    # HDF5 hard links to one dataset: stored once, shown under each name.
    for name, ds, kind in items:
        if kind == "array" and name not in lay.members:
            for a in _as_list(ds.facts.get("aliases")):
                if a not in f.datasets and a not in f.text_variables:
                    lay.aliases[a] = name
    # Groups: recorded by the source, or holding a shown item or an attribute.
    lay.groups.update(_as_list(f.facts.get("nc_groups")))
    shown = [n for n, _, _ in items if n not in lay.members] + list(lay.compounds) + list(f.attrs)
    shown += list(lay.aliases)
    for n in shown:
        parts = n.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            lay.groups.add("/".join(parts[:i]))
    return lay


def _field_dims(record: dict, path: tuple[str, ...]) -> tuple[int, ...]:
    """The array axes of the leaf field at ``path`` (its own ``dims``)."""
    t = record
    dims: tuple[int, ...] = ()
    for p in path:
        fld = next(x for x in t["fields"] if x["name"] == p)
        dims = tuple(int(d) for d in fld.get("dims") or ())
        t = fld["type"]
    return dims


class CompoundBackendArray(BackendArray):
    """A compound variable as one structured array, each field read from its stored item
    with the same selection."""

    def __init__(self, manager: CachingFileManager, comp: _Compound):
        self._manager = manager
        self.comp = comp
        self.shape = tuple(comp.shape or ())
        self.dtype = comp.dtype

    def _leaf(self, f, kind: str, stored: str, extra: int, count, key: tuple) -> np.ndarray:
        if kind == "array":
            return f[stored][key + (slice(None),) * extra]
        if kind == "vlen":
            objs = _views.ragged_objects(f[stored][...], f[count][...])
            return _outer(objs, key)
        tv = f.text_variables[stored]
        if tv.char_dim is not None:
            vals = _views.char_values(tv.values, int(tv.char_dim[1]), _text_encoding(tv))
        else:
            vals = tv.values
        return _outer(vals, key)

    def _raw(self, key: tuple) -> np.ndarray:
        f = self._manager.acquire()
        out = None
        for path, (kind, stored, extra, count) in self.comp.leaves.items():
            vals = np.asarray(self._leaf(f, kind, stored, extra, count, key))
            if out is None:
                n = vals.ndim - extra
                out = np.zeros(vals.shape[:n], dtype=self.dtype)
            sub = out
            for p in path[:-1]:
                sub = sub[p]
            sub[path[-1]] = vals
        if out is None:
            out = np.zeros(np.empty(self.shape, dtype=np.uint8)[key].shape, dtype=self.dtype)
        return out

    def __getitem__(self, key: indexing.ExplicitIndexer) -> np.ndarray:
        return indexing.explicit_indexing_adapter(
            key, self.shape, indexing.IndexingSupport.OUTER, self._raw
        )


class TetStore(AbstractDataStore):
    """A ``.tet`` file (one group of it) as an xarray data store."""

    def __init__(self, manager: CachingFileManager, group: str | None = None, history=True):
        self._manager = manager
        self._group = (group or "").strip("/")
        self._history = history

    @classmethod
    def open(
        cls, filename, group=None, append_history=True, allow_damaged_footer=False,
        storage_options=None,
    ) -> "TetStore":
        """A store over ``filename`` whose file handle xarray's file manager opens, caches and
        reopens (after pickling) by path (``allow_damaged_footer``, ``storage_options`` of an
        object URL: see :func:`tet.open`)."""
        kwargs = {"allow_damaged_footer": True} if allow_damaged_footer else {}
        if storage_options:  # as pairs: the file manager's key must hash
            kwargs["storage_options"] = tuple(sorted(dict(storage_options).items()))
        kwargs = kwargs or None
        manager = CachingFileManager(_open_file, os.fspath(filename), kwargs=kwargs)
        return cls(manager, group, append_history)

    @property
    def _prefix(self) -> str:
        return f"{self._group}/" if self._group else ""

    def _array_variables(self, f, lay: "_Layout") -> dict[str, Variable]:
        out: dict[str, Variable] = {}
        phony = self._phony
        shown = [(n, n, d) for n, d in f.datasets.items()]
        shown += [(a, n, f.datasets[n]) for a, n in lay.aliases.items()]
        for shown_as, name, ds in shown:
            short = _in_group(shown_as, self._prefix)
            if short is None or name in lay.members:
                continue
            dims = ds.dims if ds.dims is not None else _phony_dims(ds.shape, phony)
            encoding: dict[str, Any] = {
                "dtype": ds.dtype,
                "source": f.path,
                "tet_stored": ds.stored,
                "tet_source_dtype": ds.source_dtype,
                "tet_facts": ds.facts,
                "tet_meta": ds.meta,
            }
            attrs = _views.view_attrs(ds.attrs, ds.facts)
            count = lay.vlens.get(name)
            if count is not None:
                # A variable-length variable: the object array of sequences, over the count
                # variable's dimensions (the sample dimension is the .tet's own).
                cds = f.datasets[count]
                cdims = cds.dims if cds.dims is not None else _phony_dims(cds.shape, phony)
                arr = VlenBackendArray(self._manager, name, count, cds.shape, ds.dtype)
                if cds.shape == ():
                    data: Any = _views.vlen_scalar(arr.objects())
                else:
                    data = indexing.LazilyIndexedArray(arr)
                encoding["dtype"] = ds.dtype
                out[short] = Variable(cdims, data, attrs, encoding)
                continue
            data = indexing.LazilyIndexedArray(
                TetBackendArray(self._manager, name, ds.shape, ds.dtype)
            )
            if ds.chunks:
                encoding["preferred_chunks"] = dict(zip(dims, ds.chunks))
                encoding["chunksizes"] = ds.chunks
            out[short] = Variable(dims, data, attrs, encoding)
        for name, comp in lay.compounds.items():
            short = _in_group(name, self._prefix)
            if short is None:
                continue
            arr = CompoundBackendArray(self._manager, comp)
            encoding = {
                "dtype": arr.dtype,
                "source": f.path,
                "tet_stored": tuple(m[1] for m in comp.leaves.values()),
                "tet_facts": comp.facts,
            }
            out[short] = Variable(
                comp.dims, indexing.LazilyIndexedArray(arr), comp.attrs, encoding
            )
        return out

    def _text_variables(self, f, lay: "_Layout") -> dict[str, Variable]:
        out: dict[str, Variable] = {}
        for name, tv in f.text_variables.items():
            short = _in_group(name, self._prefix)
            if short is None or name in lay.members:
                continue
            dims = tv.dims if tv.dims is not None else _phony_dims(tv.shape, self._phony)
            attrs = _views.view_attrs(tv.attrs, tv.facts)
            encoding = {"tet_facts": tv.facts, "source": f.path}
            enc = _text_encoding(tv)
            if tv.char_dim is not None:
                data = _views.char_values(tv.values, int(tv.char_dim[1]), enc)
                dims = tuple(dims) + (tv.char_dim[0],)
            elif tv.facts.get("nc_type") == "char":
                data = _views.char_values(tv.values, None, enc)
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
        facts = {}
        for k, v in f.facts.items():
            kind, _, attr = k.partition(":")
            if kind in ("nc_attr_type", "attr_shape") and attr:
                short = _in_group(attr, self._prefix)
                if short is not None:
                    facts[f"{kind}:{short}"] = v
        strings = [
            s[len(self._prefix):]
            for s in _as_list(f.facts.get("nc_string_attrs"))
            if _in_group(s, self._prefix) is not None
        ]
        attrs = _views.view_attrs(attrs, facts, strings)
        if self._history and not self._group and f.history_lines:
            lines = "\n".join(f.history_lines)
            old = attrs.get("history")
            attrs["history"] = f"{old}\n{lines}" if isinstance(old, str) and old else lines
        return attrs

    def load(self):
        """The variables (lazy arrays, text variables) and attributes of the store's group."""
        f = self._manager.acquire()
        lay = _layout(f)
        if self._group and self._group not in lay.groups:
            from .errors import NotFoundError

            raise NotFoundError(f"{f.path}: no group {self._group!r}")
        self._phony: list[tuple[str, int]] = []
        variables = self._array_variables(f, lay)
        variables.update(self._text_variables(f, lay))
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
        "storage_options",
    )
    supports_groups = True

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
        storage_options=None,
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
            storage_options=storage_options,
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

    def open_groups_as_dict(
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
        storage_options=None,
    ) -> dict[str, Any]:
        """Every group of the file (the source's groups, empty ones included, and those
        holding an item or an attribute) as a dataset, by path (``/`` for the root, or for
        ``group`` when one is given), parents before their children: what
        ``xr.open_groups`` and ``xr.open_datatree`` build on. Options as
        :meth:`open_dataset`."""
        store = TetStore.open(
            filename_or_obj,
            group=group,
            append_history=append_history,
            allow_damaged_footer=allow_damaged_footer,
            storage_options=storage_options,
        )
        f = store._manager.acquire()
        lay = _layout(f)
        root = (group or "").strip("/")
        if root and root not in lay.groups:
            from .errors import NotFoundError

            raise NotFoundError(f"{f.path}: no group {root!r}")
        below = [
            g for g in lay.groups if g != root and (not root or g.startswith(root + "/"))
        ]
        order = {g: i for i, g in enumerate(_as_list(f.facts.get("nc_groups")))}
        below.sort(key=lambda g: (order.get(g, len(order)), g))
        out: dict[str, Any] = {}
        for g in [root] + below:
            sub = TetStore(store._manager, g or None, append_history)
            ds = StoreBackendEntrypoint().open_dataset(
                sub,
                mask_and_scale=mask_and_scale,
                decode_times=decode_times,
                concat_characters=concat_characters,
                decode_coords=decode_coords,
                drop_variables=drop_variables,
                use_cftime=use_cftime,
                decode_timedelta=decode_timedelta,
            )
            out["/" if g == root else "/" + g[len(root):].strip("/")] = ds
        return out

    def open_datatree(self, filename_or_obj, **kwargs):
        """The file's groups as an ``xarray.DataTree`` (see :meth:`open_groups_as_dict`)."""
        from xarray import DataTree

        return DataTree.from_dict(self.open_groups_as_dict(filename_or_obj, **kwargs))
