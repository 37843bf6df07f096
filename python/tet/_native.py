"""The extension module ``tet._tet``: loaded on first use, in a symbol scope of its own.

Importing the package (and xarray's engine discovery, which imports
:mod:`tet.xarray_backend` for every ``xr.open_dataset``) maps no native library: the extension
and the C libraries it links (HDF5, netCDF-C and their codecs, bundled in the wheel as private
copies under renamed sonames) are loaded only when a ``.tet`` is opened, a conversion runs or
a native function is called. Modules that call the extension import :data:`native` and use it
as they would the module.

On Linux the extension is loaded with ``RTLD_DEEPBIND``: the symbols its libraries need are
looked up in its own dependencies before the process's global scope. Other wheels put their
libraries there — ecCodes' Python bindings load ``eccodeslib``'s ``libaec`` and ``eckitlib``'s
libcurl, Kerberos, LDAP… with ``RTLD_GLOBAL`` — and without it those definitions would
override the ones of the same names in our copies (the renamed sonames alone stop only the
loader from taking an already-loaded ``libaec.so.0`` for ours)."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import os
import sys
import threading
from typing import Any

_NAME = "tet._tet"
_LOCK = threading.Lock()


class _DeepBindLoader(importlib.machinery.ExtensionFileLoader):
    """The extension's loader, with ``RTLD_DEEPBIND`` added to the interpreter's dlopen flags
    while the extension (and with it its libraries) is mapped."""

    def create_module(self, spec):
        with _LOCK:
            old = sys.getdlopenflags()
            sys.setdlopenflags(old | os.RTLD_DEEPBIND)
            try:
                return super().create_module(spec)
            finally:
                sys.setdlopenflags(old)


class _DeepBindFinder(importlib.abc.MetaPathFinder):
    """Finds ``tet._tet`` as the path finder does and gives it :class:`_DeepBindLoader`, so
    every way of importing it (``from . import _tet`` in the conversion worker too) binds
    deep."""

    def find_spec(self, fullname, path, target=None):
        if fullname != _NAME:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is not None and type(spec.loader) is importlib.machinery.ExtensionFileLoader:
            spec.loader = _DeepBindLoader(spec.loader.name, spec.loader.path)
        return spec


# TET_NO_DEEPBIND=1 loads the extension as any other (for AddressSanitizer, which refuses
# RTLD_DEEPBIND, or an allocator put in with LD_PRELOAD that our libraries must share).
if (
    hasattr(os, "RTLD_DEEPBIND")
    and hasattr(sys, "setdlopenflags")
    and os.environ.get("TET_NO_DEEPBIND", "") in ("", "0")
    and not any(isinstance(f, _DeepBindFinder) for f in sys.meta_path)
):
    sys.meta_path.insert(0, _DeepBindFinder())


class _LazyModule:
    """Stands for ``tet._tet``: the first attribute looked up imports it."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        return getattr(importlib.import_module(_NAME), name)

    def __repr__(self) -> str:
        return "<lazy module 'tet._tet'>"


#: The extension module, imported on first attribute access.
native = _LazyModule()
