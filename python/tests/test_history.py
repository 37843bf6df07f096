"""History rows past the reference reader's 16 parents and 32 params (issue 24): a `--concat`
of 31 daily files (tests/fixtures/concat/month_orography.tet, made in
tests/fixtures/concat/month by ``tet-convert --concat time --variables orography day*.nc
../month_orography.tet``) keeps its complete lists in the footer's history extension, and
``Dataset.history`` shows the whole row."""

from __future__ import annotations

import hashlib
import json

import tet
from conftest import REPO

CONCAT = REPO / "tests" / "fixtures" / "concat"


def test_a_month_row_has_every_parent():
    days = [CONCAT / "month" / f"day{d:02}.nc" for d in range(1, 32)]
    with tet.open(CONCAT / "month_orography.tet") as f:
        assert len(f.history) == 1
        row = f.history[0]
        digests = ["sha256:" + hashlib.sha256(p.read_bytes()).hexdigest() for p in days]
        assert [p.digest for p in row.parents] == digests
        assert row.params["concat"] == "time"
        assert row.params["input"] == "day01.nc"
        assert [row.params[f"input.{k}"] for k in range(1, 31)] == [p.name for p in days[1:]]
        assert "tet_ext" not in row.params


def test_the_written_row_stays_within_the_reference_limits():
    # The footer JSON as written: what the reference reader sees.
    text = (CONCAT / "month_orography.tet").read_bytes()
    start = text.index(b'{"history"')
    footer = json.JSONDecoder().raw_decode(text[start:].decode("utf-8", "replace"))[0]
    row = footer["history"][0]
    assert len(row["parents"]) == 16 and len(row["params"]) == 32
    assert row["params"]["tet_ext"].endswith("all 31 parents and 41 params")
    full = footer["metadata"]["tet_ext"]["history"][0]
    assert full["row"] == 0 and len(full["parents"]) == 31 and len(full["params"]) == 41
