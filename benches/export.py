#!/usr/bin/env python3
"""`tet export` benchmarks: wall time and peak RSS of exporting a 1 GiB f32 .tet file to each
target, with the copies a user would compare them with, run in one go so the ratios hold on a
shared, noisy machine. Prints the Markdown tables of BENCHMARKS.md ("Export").

    python3 benches/export.py [--dir /work/bench] [--runs 3]

Needs a release build (`cargo build --release --bins -p tet-cli --example gen_npy`), nccopy and GNU
time (`bash .ci/setup`). Inputs are generated on first use:
  f32_1g.npy       f32 (256, 1024, 1024) = 1 GiB (gen_npy, as benches/run.py)
  f32_1g.tet       that file converted with --codec zstd:3 (4 MiB chunks, [1, 1024, 1024])
  f32_1g.nc        exported once uncompressed (the input of the nccopy comparison)
Every run starts with its outputs removed, `sync` and the input in the page cache; every command
includes making its output durable (`sync`).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import CONV, ENV, TET, sh  # noqa: E402


def main():
    a = harness.args(runs=3)
    d = a.dir
    npy = harness.npy(d)
    src = harness.make(os.path.join(d, "f32_1g.tet"),
                       f"{ENV} {CONV} -q --codec zstd:3 {npy} {d}/f32_1g.tet")
    nc = harness.make(os.path.join(d, "f32_1g.nc"),
                      f"{TET} export -q --compress none {src} {d}/f32_1g.nc")
    out = os.path.join(d, "xout")
    prep = harness.prepare(f"{out}.*", src, nc)
    ex = f"{TET} export -q"
    dims = "f32_1g_dim0/1,f32_1g_dim1/1024,f32_1g_dim2/1024"
    rows = [
        harness.measure("cp .tet + sync", f"cp {src} {out}.tet && sync", prep, a.runs),
        harness.measure("cp 1 GiB .npy + sync", f"cp {npy} {out}.cp.npy && sync",
                        harness.prepare(f"{out}.*", src, nc, npy), a.runs),
    ]
    rows += harness.measure_all([
        ("tet export → .npy", f"{ex} {src} {out}.npy && sync"),
        ("tet export → .npz (stored)", f"{ex} {src} {out}.npz && sync"),
        ("tet export → .zarr (zstd, frames reused)", f"{ex} {src} {out}.zarr && sync"),
        ("tet export → .nc --compress none", f"{ex} --compress none {src} {out}.nc && sync"),
        ("tet export → .nc (zlib 4 + shuffle)", f"{ex} {src} {out}.nc && sync"),
        ("nccopy -d 4 -s (uncompressed .nc → zlib 4 + shuffle)",
         f"nccopy -d 4 -s -c {dims} {nc} {out}.nc && sync"),
    ], prep, a.runs)
    sh(f"rm -rf {out}.*")
    wall = harness.walls(rows)
    harness.print_runs(rows, a.runs)
    harness.print_comparisons([
        ("peak RSS of every tet export run (1 GiB dataset)",
         f"{harness.peak_rss(rows, 'tet export'):.0f} MiB", "<= 256 MiB"),
        (".npy export / cp of the same 1 GiB .npy",
         wall["tet export → .npy"] / wall["cp 1 GiB .npy + sync"], "-"),
        (".zarr export (frames reused) / cp of the .tet",
         wall["tet export → .zarr (zstd, frames reused)"] / wall["cp .tet + sync"], "-"),
        (".nc zlib export / nccopy doing the same compression",
         wall["tet export → .nc (zlib 4 + shuffle)"]
         / wall["nccopy -d 4 -s (uncompressed .nc → zlib 4 + shuffle)"], "-"),
    ], head="measured")
    for r in rows:
        print(f"\n    {r['name']}: {r['cmd']}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
