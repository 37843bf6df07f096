"""The source's own form of items a ``.tet`` stores in another shape, rebuilt from the facts the
footer records about them, for the xarray engine (what the netCDF4 library shows):

- a compound variable (one stored array per field, each with the ``nc_compound_type`` and
  ``source_dataset`` facts) as one structured array, nested compounds and array fields
  included; variable-length fields come as object fields, string fields as ``str`` objects;
- a variable-length variable (the CF contiguous ragged pair: the values along a sample
  dimension, and the count variable named by the ``ragged_count`` fact) as the object array
  of sequences, a 0-d one as its one value when it holds exactly one, as netCDF4-python gives;
- a ``char`` variable (``nc_type`` / ``nc_text_encoding`` facts) as its ``S1`` bytes;
- a text attribute as netCDF4-python returns it (a ``char`` attribute without its NUL bytes);
  an attribute of a complex compound type (``nc_attr_type:<name>`` fact, fields ``r``/``i``)
  as the complex number(s) it holds; a multi-dimensional HDF5 attribute
  (``attr_shape:<name>`` fact) in its shape.

Nothing here changes what :mod:`tet._file` returns: these are views over it.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from ._file import DTYPES


def _type_of(t: Any) -> np.dtype:
    """The numpy type of one recorded netCDF type (a name or a class record)."""
    if isinstance(t, str):
        if t in DTYPES:
            return DTYPES[t]
        if t == "char":
            return np.dtype("S1")
        return np.dtype(object)  # string
    cls = t.get("class")
    if cls == "compound":
        return compound_dtype(t)
    if cls == "enum":
        return _type_of(t["base"])
    if cls == "opaque":
        return np.dtype(f"V{int(t['size'])}")
    return np.dtype(object)  # vlen


def compound_dtype(t: dict) -> np.dtype:
    """The structured type of a recorded compound: the file's offsets and size, aligned, as
    netCDF4-python builds it."""
    names, formats, offsets = [], [], []
    for fld in t["fields"]:
        base = _type_of(fld["type"])
        dims = tuple(int(d) for d in fld.get("dims") or ())
        names.append(fld["name"])
        formats.append((base, dims) if dims else base)
        offsets.append(int(fld["offset"]))
    return np.dtype(
        {
            "names": names,
            "formats": formats,
            "offsets": offsets,
            "itemsize": int(t["size"]),
            "aligned": True,
        }
    )


def leaves(t: dict, prefix: tuple[str, ...] = ()):
    """The leaf fields of a recorded compound: (path of field names, field type record)."""
    for fld in t["fields"]:
        path = prefix + (fld["name"],)
        ft = fld["type"]
        if isinstance(ft, dict) and ft.get("class") == "compound":
            yield from leaves(ft, path)
        else:
            yield path, ft


def has_pointer_members(t: dict) -> bool:
    """Whether a compound holds a variable-length, string or opaque member anywhere (a type
    netCDF4-python does not read: it skips such a variable)."""
    for _, ft in leaves(t):
        if isinstance(ft, str):
            if ft == "string":
                return True
        elif ft.get("class") in ("vlen", "opaque"):
            return True
    return False


def compound_name(member: str, source_dataset: str) -> str | None:
    """The full name of the compound variable a stored member belongs to."""
    if member.startswith(source_dataset + "/"):
        return source_dataset
    at = member.find("/" + source_dataset + "/")
    if at < 0:
        return None
    return member[: at + 1 + len(source_dataset)]


def ragged_objects(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The object array (of ``counts``' shape) of the sequences a contiguous ragged pair holds:
    each element's values one after the other in ``values``."""
    counts = np.asarray(counts, dtype=np.int64)
    flat = counts.reshape(-1)
    if flat.size and (flat.min() < 0 or int(flat.sum()) != len(values)):
        from .errors import CorruptError

        raise CorruptError(
            f"ragged counts add up to {int(flat.sum())}, the values hold {len(values)}"
        )
    out = np.empty(flat.size, dtype=object)
    ends = np.cumsum(flat)
    starts = ends - flat
    for i, (a, b) in enumerate(zip(starts, ends)):
        out[i] = np.array(values[a:b])
    return out.reshape(counts.shape)


def vlen_scalar(objs: np.ndarray) -> np.ndarray:
    """A 0-d sequence variable as netCDF4-python reads it: the one value when it holds one."""
    if objs.shape == () and np.asarray(objs[()]).size == 1:
        return np.asarray(objs[()]).reshape(())
    return objs


def char_values(values: np.ndarray, length: int | None, encoding: str) -> np.ndarray:
    """Strings as the netCDF ``char`` array they were read from: ``S1`` elements, with one more
    axis of ``length`` characters (none for a scalar ``char``)."""
    flat = [v.encode(encoding) for v in values.reshape(-1)]
    if length is None:
        return np.array(flat[0] if flat else b"", dtype="S1").reshape(values.shape)
    n = max(length, 1)
    fixed = np.array(flat, dtype=f"S{n}")
    return fixed.view("S1").reshape(values.shape + (n,))


def _complex_attr(text: str, record: str) -> Any:
    """A complex attribute's JSON text (``{"r":..,"i":..}`` or a list of them) as complex
    number(s) of the recorded field type, or ``None`` when it is not one."""
    try:
        rec = json.loads(record)
        t = rec["type"]
        names = [f["name"] for f in t["fields"]]
        if t.get("class") != "compound" or names != ["r", "i"]:
            return None
        part = _type_of(t["fields"][0]["type"])
        ctype = np.result_type(part, np.complex64)
        v = json.loads(text)
        items = v if isinstance(v, list) else [v]
        arr = np.array([complex(x["r"], x["i"]) for x in items], dtype=ctype)
    except (ValueError, KeyError, TypeError, IndexError):
        return None
    return arr[0] if int(rec.get("count", len(arr))) == 1 and arr.size == 1 else arr


def view_attrs(attrs: dict, facts: dict, string_attrs=()) -> dict:
    """Attributes as netCDF4-python returns them: complex ones (``nc_attr_type:<name>``) as
    complex numbers; a ``char`` attribute without its NUL bytes; a ``string`` one up to its
    first NUL (netCDF-C's strings end there)."""
    out = {}
    for k, v in attrs.items():
        rec = facts.get(f"nc_attr_type:{k}")
        if isinstance(v, str) and isinstance(rec, str):
            c = _complex_attr(v, rec)
            if c is not None:
                v = c
        shape = facts.get(f"attr_shape:{k}")
        if isinstance(v, np.ndarray) and shape is not None:
            try:
                v = v.reshape(tuple(int(n) for n in np.atleast_1d(shape)))
            except ValueError:
                pass  # a recorded shape that does not fit: the values as stored
        if isinstance(v, str) and "\x00" in v:
            v = v.split("\x00", 1)[0] if k in string_attrs else v.replace("\x00", "")
        out[k] = v
    return out
