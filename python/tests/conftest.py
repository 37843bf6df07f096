"""Shared fixtures: paths of the repository, the shared corpus and converted files."""

from __future__ import annotations

import os
import pathlib

import numpy as np
import pytest

import tet

REPO = pathlib.Path(__file__).resolve().parents[2]
SHARED = pathlib.Path(os.environ.get("TET_SHARED", REPO.parent / "shared"))
FIXTURES = REPO / "fixtures"
CORPUS = SHARED / "corpus" / "public"
REFERENCE = SHARED / "interop" / "reference-tet"


def need(path: pathlib.Path) -> pathlib.Path:
    if not path.exists():
        pytest.skip(f"{path} is not on this machine")
    return path


@pytest.fixture(scope="session")
def converted(tmp_path_factory):
    """``converted(src, **options)``: the ``.tet`` conversion of ``src`` (once per session and
    option set), made with ``tet.convert``."""
    cache: dict = {}
    root = tmp_path_factory.mktemp("converted")

    def make(src, **options) -> pathlib.Path:
        key = (str(src), tuple(sorted(options.items())))
        if key not in cache:
            out = root / f"{len(cache)}-{pathlib.Path(src).name}.tet"
            tet.convert(src, out, **options)
            cache[key] = out
        return cache[key]

    return make


def save_npy(tmp_path: pathlib.Path, name: str, a: np.ndarray) -> pathlib.Path:
    p = tmp_path / f"{name}.npy"
    np.save(p, a)
    return p
