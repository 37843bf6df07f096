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
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import CONV, ENV, TET, sh  # noqa: E402


def frames_kept(src, out):
    """Converts `src` with the default codec, checks the output, and returns what its history says
    of the zstd frames kept."""
    sh(f"{ENV} {CONV} -q {src} {out} && {TET} verify --deep -q {out}")
    return os.popen(f"{TET} info --history {out} | grep -o 'zstd_frames_kept[^,]*'").read()


def main():
    a = harness.args(runs=3)
    d = a.dir
    npy = harness.npy(d)
    store = harness.make(os.path.join(d, "f32_1g_zstd3.zarr"),
                         f"{CONV} -q --codec zstd:3 {npy} {d}/seed.tet && "
                         f"{TET} export {d}/seed.tet {d}/f32_1g_zstd3.zarr && rm -f {d}/seed.tet")
    # h5py + hdf5plugin (pip), as users write it: hdf5plugin's zstd filter, level 3.
    h5 = harness.make(os.path.join(d, "f32_1g_zstd3.h5"),
                      f"python3 -c \"import h5py, hdf5plugin, numpy as np; "
                      f"a = np.load('{npy}', mmap_mode='r'); "
                      f"f = h5py.File('{d}/f32_1g_zstd3.h5', 'w'); "
                      f"f.create_dataset('t', data=a, chunks=(1, 1024, 1024), "
                      f"**hdf5plugin.Zstd(clevel=3)); f.close()\"")
    tet = f"{ENV} {CONV} -q"
    rows = harness.measure_all([
        ("cp -r + sync (the store)", f"cp -r {store} {d}/out.copy && sync"),
        ("tet-convert (codec auto: frames kept)", f"{tet} {store} {d}/out.auto.tet"),
        ("tet-convert --codec zstd:3 --jobs 2 (decode + encode)",
         f"{tet} --codec zstd:3 --jobs 2 {store} {d}/out.z3.tet"),
    ], harness.prepare(f"{d}/out.*", store), a.runs)
    rows += harness.measure_all([
        ("HDF5 zstd: cp + sync", f"cp {h5} {d}/out.h5 && sync"),
        ("HDF5 zstd: tet-convert (codec auto: frames kept)", f"{tet} {h5} {d}/out.h5auto.tet"),
    ], harness.prepare(f"{d}/out.*", h5), a.runs)
    kept = frames_kept(store, f"{d}/out.auto.tet")
    hkept = frames_kept(h5, f"{d}/out.h5auto.tet")
    sh(f"rm -rf {d}/out.*")
    by = harness.by_name(rows)
    harness.print_runs(rows, a.runs)
    auto = by["tet-convert (codec auto: frames kept)"]
    hauto = by["HDF5 zstd: tet-convert (codec auto: frames kept)"]
    harness.print_comparisons([
        ("frames kept / cp -r + sync", auto["wall"] / by["cp -r + sync (the store)"]["wall"],
         "<= 1.5"),
        ("frames kept / decode + encode",
         auto["wall"] / by["tet-convert --codec zstd:3 --jobs 2 (decode + encode)"]["wall"], "-"),
        ("peak RSS, frames kept", f"{auto['rss_mib']:.0f} MiB", "<= 256 MiB"),
        ("HDF5 zstd: frames kept / cp + sync", hauto["wall"] / by["HDF5 zstd: cp + sync"]["wall"],
         "<= 1.5"),
        ("HDF5 zstd: peak RSS, frames kept", f"{hauto['rss_mib']:.0f} MiB", "-"),
    ])
    print(f"\nverify --deep of the outputs: ok; Zarr {kept.strip()}; HDF5 {hkept.strip()}")


if __name__ == "__main__":
    sys.exit(main())
