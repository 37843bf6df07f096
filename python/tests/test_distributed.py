"""tet.convert as a task on a dask.distributed LocalCluster of processes."""

from __future__ import annotations

import numpy as np
import pytest

import tet

distributed = pytest.importorskip("distributed")


def test_local_cluster_converts_50_inputs(tmp_path):
    srcs, dsts = [], []
    for k in range(50):
        p = tmp_path / f"in{k:02d}.npy"
        np.save(p, np.arange(k, k + 100, dtype=np.int32).reshape(10, 10))
        srcs.append(str(p))
        dsts.append(str(tmp_path / f"out{k:02d}.tet"))
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster, distributed.Client(cluster) as client:
        futures = client.map(tet.convert, srcs, dsts, codec="zstd")
        reports = client.gather(futures)
    assert len(reports) == 50
    assert all(isinstance(r, tet.ConvertReport) for r in reports)
    for k in (0, 17, 49):
        assert reports[k].output.endswith(f"out{k:02d}.tet")
        with tet.open(dsts[k]) as f:
            (ds,) = f.datasets.values()
            np.testing.assert_array_equal(ds[...], np.arange(k, k + 100, dtype=np.int32).reshape(10, 10))
