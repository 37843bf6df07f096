"""``tet.verify``, ``tet.audit`` and ``tet.export``: what ``tet verify --json``, ``tet audit
--json`` and ``tet export --json`` print, as Python values. Each is built by the same engine
function the command line prints (``tet::provenance::report``, ``tet::export``), so a report
here equals the command's line parsed with ``json.loads``.

A ``.tet`` may be a local path or an object URL (``s3://``…, read by ranges), with
``storage_options`` (see :mod:`tet._storage`)."""

from __future__ import annotations

import json
import os
from typing import Any, Iterable, Mapping

from ._native import native as _tet
from ._storage import pairs


def _path(p) -> str:
    return os.fspath(p)


def verify(
    path: str | os.PathLike,
    deep: bool = True,
    *,
    signers: str | os.PathLike | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> dict:
    """Checks a ``.tet`` file (a path or an object URL): every rule of the format, the footer
    digest and the chunk checksums (``deep``: of every chunk, else a sample), and with
    ``signers`` (an ``allowed_signers`` file) its signatures. Returns the ``tet-verify/1``
    object ``tet verify --json [--deep]`` prints: ``ok``, ``depth``, ``chunks``, ``decoded``,
    ``checksums`` (``footer_digest``, ``chunks_with_checksum``, ``chunks_checked``),
    ``failures``, ``warnings``, ``notes`` (lists of ``{"code", "message"}``). A damaged file is
    a report with ``ok`` false, not an exception; a file that cannot be opened is one
    ``structure`` failure."""
    text = _tet.verify_json(
        _path(path),
        deep,
        None if signers is None else _path(signers),
        pairs(storage_options),
    )
    return json.loads(text)


def audit(
    path: str | os.PathLike,
    sources: Iterable[str | os.PathLike] | None = None,
    *,
    signers: str | os.PathLike | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> dict:
    """The provenance of a ``.tet`` file (a path or an object URL) and whether its inputs are
    unchanged: the ``tet-audit/1`` object ``tet audit --json`` prints. ``history`` (every row:
    op, source, time, params, parents); with ``sources`` each is re-hashed and looked up among
    the recorded parents (``sources``), else every recorded input of every ``convert`` row — a
    combined file's every parent, object inputs read with ``storage_options`` — is re-hashed
    (``inputs``, each ``unchanged``, ``changed``, ``missing``, ``unreadable`` or
    ``not-recorded``); ``signatures``; ``verdict`` (``unchanged``, ``changed``,
    ``unchecked``) and ``ok``. Raises :class:`tet.NotFoundError` / :class:`tet.CorruptError`
    when the file or its history cannot be read (where the command prints one failure line)."""
    given = [_path(s) for s in sources] if sources is not None else []
    text = _tet.audit_json(
        _path(path),
        given,
        None if signers is None else _path(signers),
        pairs(storage_options),
    )
    return json.loads(text)


def export(
    src: str | os.PathLike,
    dst: str | os.PathLike,
    *,
    to: str | None = None,
    datasets: Iterable[str] | None = None,
    compress: str | None = None,
    force: bool = False,
    storage_options: Mapping[str, Any] | None = None,
) -> dict:
    """Exports the ``.tet`` ``src`` (a path or an object URL, read by ranges) to ``dst``: what
    ``tet export SRC DST`` writes (NetCDF-4 ``.nc``, Zarr v3 ``.zarr``, ``.npy``/``.npz``;
    ``to`` names the format when the extension does not), with the same checks and errors.
    ``datasets``: only these (exact names, complex base names or group prefixes);
    ``compress``: ``--compress``'s codec (``none``, ``zlib:4``…); ``force`` replaces an
    existing output. Returns the object ``tet export --json`` prints (``input``, ``output``,
    ``format``, ``arrays``, ``reused_chunks``, ``warnings``). A failure leaves nothing at
    ``dst``."""
    text = _tet.export(
        _path(src),
        _path(dst),
        to,
        list(datasets) if datasets is not None else [],
        compress,
        force,
        pairs(storage_options),
    )
    return json.loads(text)
