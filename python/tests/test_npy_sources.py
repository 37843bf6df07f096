"""Every NPY/NPZ input of fixtures/ and the shared corpus reads back through tet with the
values and types numpy reads (byte order aside: values come back little-endian)."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

import tet
from conftest import CORPUS, FIXTURES


def _sources():
    out = []
    for root in (FIXTURES, CORPUS):
        if root.exists():
            out += sorted(p for p in root.rglob("*") if p.suffix in (".npy", ".npz") and p.is_file())
    return out


def _arrays(src: pathlib.Path) -> dict[str, np.ndarray]:
    if src.suffix == ".npz":
        with np.load(src) as z:
            return {k: z[k] for k in z.files}
    return {src.stem: np.load(src)}


def _check(ds: tet.Dataset, want: np.ndarray) -> None:
    got = ds[...]
    assert got.shape == want.shape, ds.name
    assert got.dtype == want.dtype.newbyteorder("<"), ds.name
    np.testing.assert_array_equal(got, want, err_msg=ds.name)


@pytest.mark.parametrize("src", _sources(), ids=lambda p: p.name)
def test_npy_values(src, converted):
    try:
        arrays = _arrays(src)
    except (ValueError, OSError, EOFError):
        # numpy refuses it (truncated, damaged): so does the conversion, with a typed error.
        with pytest.raises(tet.CorruptError):
            converted(src, skip_unsupported=True)
        return
    try:
        out = converted(src, skip_unsupported=True)
    except tet.UnsupportedError as e:
        pytest.skip(f"not convertible: {e}")
    with tet.open(out) as f:
        skipped = {n for n, _ in f.skipped}
        for name, want in arrays.items():
            if want.dtype.names:
                # A record array: one dataset per numeric field, `<name>/<field>`.
                for field in want.dtype.names:
                    key = next((k for k in f if k.split("/")[-1] == field), None)
                    if key is None:
                        assert any(field in s for s in skipped), field
                        continue
                    _check(f[key], want[field])
                continue
            if name not in f:
                assert name in skipped or f"{src.stem}" in skipped, (name, list(f), skipped)
                continue
            _check(f[name], want)
