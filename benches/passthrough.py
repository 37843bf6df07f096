#!/usr/bin/env python3
"""Compressed sources: a 1 GiB f32 Zarr v3 store with zstd level-3 chunks (1, 1024, 1024), and
the same data as HDF5 with hdf5plugin's zstd filter (h5py + hdf5plugin from pip write it),
converted with the default codec, whose frames are kept as they are, against `cp -r` + `sync` of
the store and against the decode/re-encode path (`--codec zstd:3`), in one go so the ratios hold
on a shared, noisy machine. Prints the Markdown tables of BENCHMARKS.md ("Compressed sources").

    python3 benches/passthrough.py [--dir /work/bench] [--runs 3]

Needs a release build (`cargo build --release --bins --example gen_npy`) and GNU time. The store
is made once from `f32_1g.npy` (benches/gen_npy.rs: a smooth field plus noise, quantised to
0.01): converted to `.tet` with `--codec zstd:3` (the planner's 4 MiB chunks are (1, 1024, 1024)), then `tet export` to Zarr
v3 (bytes + zstd), which writes those zstd frames into the store's chunk files.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import REL, measure, print_runs, sh  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="/work/bench")
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    d = a.dir
    os.makedirs(d, exist_ok=True)
    conv, tet = os.path.join(REL, "tet-convert"), os.path.join(REL, "tet")
    npy = os.path.join(d, "f32_1g.npy")
    store = os.path.join(d, "f32_1g_zstd3.zarr")
    if not os.path.exists(npy):
        sh(f"{REL}/examples/gen_npy {npy} 256 1024 1024")
    if not os.path.exists(store):
        sh(f"{conv} -q --codec zstd:3 {npy} {d}/seed.tet")
        sh(f"{tet} export {d}/seed.tet {store} && rm -f {d}/seed.tet")
    h5 = os.path.join(d, "f32_1g_zstd3.h5")
    if not os.path.exists(h5):
        # h5py + hdf5plugin (pip), as users write it: hdf5plugin's zstd filter, level 3.
        sh(f"python3 -c \"import h5py, hdf5plugin, numpy as np; a = np.load('{npy}', mmap_mode='r'); "
           f"f = h5py.File('{h5}', 'w'); f.create_dataset('t', data=a, chunks=(1, 1024, 1024), "
           f"**hdf5plugin.Zstd(clevel=3)); f.close()\"")
    env = "SOURCE_DATE_EPOCH=1700000000"
    prep = f"rm -rf {d}/out.* && sync && find {store} -type f -exec cat {{}} + > /dev/null"
    hprep = f"rm -rf {d}/out.* && sync && cat {h5} > /dev/null"
    rows = [
        measure("cp -r + sync (the store)", f"cp -r {store} {d}/out.copy && sync", prep, a.runs),
        measure("tet-convert (codec auto: frames kept)",
                f"{env} {conv} -q {store} {d}/out.auto.tet", prep, a.runs),
        measure("tet-convert --codec zstd:3 --jobs 2 (decode + encode)",
                f"{env} {conv} -q --codec zstd:3 --jobs 2 {store} {d}/out.z3.tet", prep, a.runs),
        measure("HDF5 zstd: cp + sync", f"cp {h5} {d}/out.h5 && sync", hprep, a.runs),
        measure("HDF5 zstd: tet-convert (codec auto: frames kept)",
                f"{env} {conv} -q {h5} {d}/out.h5auto.tet", hprep, a.runs),
    ]
    sh(f"{env} {conv} -q {store} {d}/out.auto.tet && {tet} verify --deep -q {d}/out.auto.tet")
    kept = os.popen(f"{tet} info --history {d}/out.auto.tet | grep -o 'zstd_frames_kept[^,]*'").read()
    sh(f"{env} {conv} -q {h5} {d}/out.h5auto.tet && {tet} verify --deep -q {d}/out.h5auto.tet")
    hkept = os.popen(f"{tet} info --history {d}/out.h5auto.tet | grep -o 'zstd_frames_kept[^,]*'").read()
    sh(f"rm -rf {d}/out.*")
    by = {r["name"]: r for r in rows}
    print_runs(rows, a.runs)
    cp = by["cp -r + sync (the store)"]["wall"]
    auto = by["tet-convert (codec auto: frames kept)"]
    z3 = by["tet-convert --codec zstd:3 --jobs 2 (decode + encode)"]["wall"]
    print("| comparison | ratio | target |")
    print("|---|---:|---|")
    print(f"| frames kept / cp -r + sync | {auto['wall'] / cp:.2f} | <= 1.5 |")
    print(f"| frames kept / decode + encode | {auto['wall'] / z3:.2f} | - |")
    print(f"| peak RSS, frames kept | {auto['rss_mib']:.0f} MiB | <= 256 MiB |")
    hcp = by["HDF5 zstd: cp + sync"]["wall"]
    hauto = by["HDF5 zstd: tet-convert (codec auto: frames kept)"]
    print(f"| HDF5 zstd: frames kept / cp + sync | {hauto['wall'] / hcp:.2f} | <= 1.5 |")
    print(f"| HDF5 zstd: peak RSS, frames kept | {hauto['rss_mib']:.0f} MiB | - |")
    print(f"\nverify --deep of the outputs: ok; Zarr {kept.strip()}; HDF5 {hkept.strip()}")


if __name__ == "__main__":
    sys.exit(main())
