"""``storage_options``: the object store settings of ``s3://``, ``gs://``, ``az://`` and
``https://`` URLs, as :func:`tet.open`, :func:`tet.verify`, :func:`tet.audit`,
:func:`tet.export` and ``xr.open_dataset(url, engine="tet", storage_options=…)`` take them.

They are the keys of the ``object_store`` crate, the same as ``tet``'s ``--storage-option
KEY=VALUE`` (case-insensitive), read over the environment's ``AWS_*``, ``GOOGLE_*`` and
``AZURE_*`` variables. The usual ones:

- ``s3://``: ``endpoint`` (``aws_endpoint_url``), ``region``, ``access_key_id``,
  ``secret_access_key``, ``session_token``, ``skip_signature``,
  ``virtual_hosted_style_request``;
- ``gs://``: ``service_account``, ``service_account_key``, ``application_credentials``;
- ``az://``: ``account_name``, ``access_key``, ``sas_token``, ``use_emulator``, ``endpoint``;
- every store: ``allow_http`` (a plain-HTTP endpoint such as a local test server),
  ``timeout``, ``connect_timeout``, ``proxy_url``; and tet's own ``max_retries`` and
  ``retry_timeout`` (seconds).

A key the store does not take raises ``ValueError`` naming the closest keys it takes. Values
may be ``str``, ``bool`` (``True`` is ``"true"``) or numbers. No value is ever shown in an
error.
"""

from __future__ import annotations

from typing import Any, Mapping


def pairs(storage_options: Mapping[str, Any] | None) -> list[tuple[str, str]] | None:
    """``storage_options`` as the engine's ``(key, value)`` pairs (``None`` for none)."""
    if storage_options is None:
        return None
    if not isinstance(storage_options, Mapping):
        try:  # (key, value) pairs, as the xarray engine keeps them (hashable)
            storage_options = dict(storage_options)
        except (TypeError, ValueError):
            raise TypeError(
                "storage_options must be a dict of str to str, not "
                f"{type(storage_options).__name__}"
            ) from None
    out = []
    for k, v in storage_options.items():
        if not isinstance(k, str):
            raise TypeError(f"storage_options: key {k!r} is not a str")
        if v is None:
            continue
        if isinstance(v, bool):
            v = "true" if v else "false"
        out.append((k, str(v)))
    return out
