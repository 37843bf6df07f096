"""Random basic indexing against numpy on the whole array, raw and zstd, edge chunks included."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, HealthCheck
from hypothesis import strategies as st

import tet
from conftest import save_npy

SHAPE = (11, 7, 13)
# Chunks that do not divide the shape: every axis has a clipped edge chunk.
CHUNK = "cube:4,3,5"
WANT = (np.arange(np.prod(SHAPE), dtype=np.int32) * 7919 - 500000).reshape(SHAPE)


@pytest.fixture(scope="module", params=["raw", "zstd"])
def cube(request, tmp_path_factory):
    d = tmp_path_factory.mktemp(f"prop-{request.param}")
    src = save_npy(d, "cube", WANT)
    out = d / "cube.tet"
    tet.convert(src, out, codec=request.param, chunk=CHUNK)
    f = tet.open(out)
    yield f["cube"]
    f.close()


def axis_key(n: int):
    bound = st.one_of(st.none(), st.integers(-n - 3, n + 3))
    step = st.one_of(st.none(), st.integers(-5, 5).filter(lambda s: s != 0))
    return st.one_of(
        st.integers(-n, n - 1),
        st.builds(slice, bound, bound, step),
    )


@st.composite
def keys(draw):
    parts = [draw(axis_key(n)) for n in SHAPE]
    k = draw(st.integers(0, len(SHAPE)))
    parts = parts[:k]
    if draw(st.booleans()) and k < len(SHAPE):
        at = draw(st.integers(0, len(parts)))
        parts.insert(at, Ellipsis)
    return tuple(parts)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=keys())
def test_basic_indexing_matches_numpy(cube, key):
    try:
        want = WANT[key]
    except IndexError:
        with pytest.raises(IndexError):
            cube[key]
        return
    got = cube[key]
    assert got.dtype == want.dtype
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)
