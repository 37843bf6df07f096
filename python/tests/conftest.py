"""Shared fixtures: paths of the repository, the shared corpus and converted files."""

from __future__ import annotations

import contextlib
import os
import sys
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


@contextlib.contextmanager
def moto_server():
    """moto's S3 server on a free port of 127.0.0.1 while the block runs: yields the port.
    Skips the test where moto[server] is missing or the server does not listen within 30 s."""
    import socket
    import subprocess
    import time

    try:
        import boto3  # noqa: F401
        import moto.server  # noqa: F401
    except ImportError as e:
        pytest.skip(f"no moto[server] in {sys.executable}: {e}")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        t = time.monotonic()
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() - t > 30:
                    pytest.skip("moto's server did not listen within 30 s")
                time.sleep(0.1)
        yield port
    finally:
        proc.kill()
        proc.wait()
