"""`tet audit --prov` writes W3C PROV-JSON that the `prov` package reads back: a three-step
lineage (an NPY input converted, re-chunked, then a selection) with the last file signed gives
the expected entities (with their SHA-256 digests), activities (time, tool, parameters),
derivations and the signer as an agent the signed file is attributed to.

Runs the `tet` and `tet-convert` binaries of the workspace (target/debug, built by `cargo build
-p tet-cli --bins`); skipped where they are not built."""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import pathlib
import shutil
import subprocess

import numpy as np
import pytest
from prov.model import (
    ProvActivity,
    ProvAgent,
    ProvAttribution,
    ProvDerivation,
    ProvDocument,
    ProvEntity,
    ProvGeneration,
    ProvUsage,
)

REPO = pathlib.Path(__file__).resolve().parents[2]
BIN = REPO / "target" / "debug"


def run(*args, cwd):
    env = dict(os.environ, SOURCE_DATE_EPOCH="1700000000")
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True)


def sha256(path: pathlib.Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def attr(record, name):
    (value,) = record.get_attribute(name)
    return value


@pytest.fixture
def lineage(tmp_path):
    tet, convert = BIN / "tet", BIN / "tet-convert"
    if not (tet.exists() and convert.exists()):
        pytest.skip(f"{tet} and {convert} are not built (cargo build -p tet-cli --bins)")
    np.save(tmp_path / "x.npy", np.arange(24, dtype="<f4").reshape(6, 4))
    for args in (
        ("x.npy", "a.tet"),
        ("a.tet", "b.tet", "--chunk-bytes", "16", "--codec", "raw"),
        ("b.tet", "c.tet", "--isel", "dim_0=0:2"),
    ):
        r = run(str(convert), "-q", *args, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
    signed = shutil.which("ssh-keygen") is not None
    if signed:
        r = run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "alice", "-f", "alice", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        pub = (tmp_path / "alice.pub").read_text().strip()
        (tmp_path / "allowed").write_text(f"alice@example.org {pub}\n")
        r = run(str(tet), "sign", "--key", "alice", "c.tet", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
    args = ["audit", "--prov", "a.tet", "b.tet", "c.tet"] + (["--signers", "allowed"] if signed else [])
    r = run(str(tet), *args, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    (tmp_path / "lineage.json").write_text(r.stdout)
    doc = ProvDocument.deserialize(str(tmp_path / "lineage.json"), format="json")
    return tmp_path, doc, signed


def test_entities_activities_and_derivations(lineage):
    d, doc, signed = lineage
    entities = {attr(e, "tet:digest"): e for e in doc.get_records(ProvEntity)}
    files = {name: sha256(d / name) for name in ("x.npy", "a.tet", "b.tet", "c.tet")}
    assert set(entities) == set(files.values())
    kinds = {name: attr(entities[digest], "tet:kind") for name, digest in files.items()}
    assert kinds == {"x.npy": "input", "a.tet": "intermediate", "b.tet": "intermediate", "c.tet": "output"}
    assert attr(entities[files["x.npy"]], "prov:label") == "x.npy"
    assert attr(entities[files["x.npy"]], "tet:status") == "unchanged"

    acts = list(doc.get_records(ProvActivity))
    assert len(acts) == 3
    when = datetime.datetime(2023, 11, 14, 22, 13, 20, tzinfo=datetime.timezone.utc)
    for a in acts:
        assert a.get_startTime() == when
        assert attr(a, "tet:tool").startswith("tet-convert ")
        assert attr(a, "tet:op") == "convert"
    by_kind = {attr(a, "tet:kind"): a for a in acts}
    assert set(by_kind) == {"convert", "select"}
    assert attr(by_kind["select"], "tet:param-isel") == "dim_0=0:2"
    sources = sorted(attr(a, "tet:source") for a in acts)
    assert sources == ["npy", "tet", "tet"]

    ident = {e.identifier: attr(e, "tet:digest") for e in doc.get_records(ProvEntity)}
    derived = {
        (ident[r.args[0]], ident[r.args[1]]) for r in doc.get_records(ProvDerivation)
    }
    assert derived == {
        (files["a.tet"], files["x.npy"]),
        (files["b.tet"], files["a.tet"]),
        (files["c.tet"], files["b.tet"]),
    }
    assert len(list(doc.get_records(ProvUsage))) == 3
    assert len(list(doc.get_records(ProvGeneration))) == 3

    agents = list(doc.get_records(ProvAgent))
    tools = [a for a in agents if a.get_attribute("prov:type")]
    assert len(tools) == 1
    if not signed:
        pytest.skip("ssh-keygen is not installed: the signer part is not checked")
    (signer,) = [a for a in agents if not a.get_attribute("prov:type")]
    assert attr(signer, "tet:principal") == "alice@example.org"
    assert attr(signer, "tet:fingerprint").startswith("SHA256:")
    (attribution,) = doc.get_records(ProvAttribution)
    assert ident[attribution.args[0]] == files["c.tet"]
    assert attribution.args[1] == signer.identifier


def audit_reproduce_json(tet, path, cwd):
    r = run(str(tet), "audit", "--reproduce", "--json", str(path), cwd=cwd)
    return r.returncode, json.loads(r.stdout)


def test_reproduce_is_what_tet_audit_reproduce_says(lineage):
    """`tet.reproduce` returns the value `tet audit --reproduce --json` prints (the same engine
    function): the three-step lineage reproduced byte for byte step by step, then, with its
    NPY input changed, not tried with the input named."""
    import tet as tetpkg

    d, _, signed = lineage
    tet = BIN / "tet"
    code, cli = audit_reproduce_json(tet, d / "c.tet", cwd=d)
    assert code == 0, cli
    py = tetpkg.reproduce(d / "c.tet")
    assert py == cli
    assert py["schema"] == "tet-reproduce/1"
    assert py["verdict"] == "reproduced"
    assert [pathlib.Path(s["file"]).name for s in py["steps"]] == ["a.tet", "b.tet", "c.tet"]
    for s in py["steps"]:
        assert s["verdict"] == "reproduced"
    assert [s["detail"] for s in py["steps"][:2]] == ["reproduced: byte for byte"] * 2
    # A signed c.tet: the same but for its signature (the re-made file is not signed).
    assert py["steps"][2]["detail"] == (
        "reproduced: every chunk's stored bytes and the footer are the same, but for the parts "
        "expected to differ (tet_signatures, tet_footer_digest)"
        if signed
        else "reproduced: byte for byte"
    )
    # The caller's working directory and SOURCE_DATE_EPOCH are its own after the call.
    assert os.getcwd() != str(d)
    assert "SOURCE_DATE_EPOCH" not in os.environ or os.environ["SOURCE_DATE_EPOCH"] != "1700000000"
    assert tetpkg.reproduce(str(d / "c.tet"), allow_version_drift=True) == cli

    x = d / "x.npy"
    x.write_bytes(x.read_bytes()[:-4] + b"\0\0\0\0")
    code, cli = audit_reproduce_json(tet, d / "c.tet", cwd=d)
    assert code == 2, cli
    py = tetpkg.reproduce(d / "c.tet")
    assert py == cli
    assert py["verdict"] == "not-tried"
    first = py["steps"][0]
    assert first["verdict"] == "not-tried"
    assert "input x.npy" in first["detail"] and "changed since conversion" in first["detail"]
