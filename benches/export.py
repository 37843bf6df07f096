#!/usr/bin/env python3
"""`tet export` benchmarks: wall time and peak RSS of exporting a 1 GiB f32 .tet file to each
target, with the copies a user would compare them with, run in one go so the ratios hold on a
shared, noisy machine. Prints the Markdown tables of BENCHMARKS.md ("Export").

    python3 benches/export.py [--dir /work/bench] [--runs 3]

Needs a release build (`cargo build --release --bins -p tet --example gen_npy`), nccopy and GNU
time (`bash .ci/setup`). Inputs are generated on first use:
  f32_1g.npy       f32 (256, 1024, 1024) = 1 GiB (gen_npy, as benches/run.py)
  f32_1g.tet       that file converted with --codec zstd:3 (4 MiB chunks, [1, 1024, 1024])
  f32_1g.nc        exported once uncompressed (the input of the nccopy comparison)
Every run starts with its outputs removed, `sync` and the input in the page cache; every command
includes making its output durable (`sync`).
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
    conv = os.path.join(REL, "tet-convert")
    tet = os.path.join(REL, "tet")
    npy = os.path.join(d, "f32_1g.npy")
    src = os.path.join(d, "f32_1g.tet")
    nc = os.path.join(d, "f32_1g.nc")
    if not os.path.exists(npy):
        sh(f"{REL}/examples/gen_npy {npy} 256 1024 1024")
    if not os.path.exists(src):
        sh(f"SOURCE_DATE_EPOCH=1700000000 {conv} -q --codec zstd:3 {npy} {src}")
    if not os.path.exists(nc):
        sh(f"{tet} export -q --compress none {src} {nc}")
    out = os.path.join(d, "xout")
    prep = f"rm -rf {out}.* && sync && cat {src} {nc} > /dev/null"
    ex = f"{tet} export -q"
    rows = [
        measure("cp .tet + sync", f"cp {src} {out}.tet && sync", prep, a.runs),
        measure("cp 1 GiB .npy + sync", f"cp {npy} {out}.cp.npy && sync",
                f"{prep} && cat {npy} > /dev/null", a.runs),
        measure("tet export → .npy", f"{ex} {src} {out}.npy && sync", prep, a.runs),
        measure("tet export → .npz (stored)", f"{ex} {src} {out}.npz && sync", prep, a.runs),
        measure("tet export → .zarr (zstd, frames reused)",
                f"{ex} {src} {out}.zarr && sync", prep, a.runs),
        measure("tet export → .nc --compress none",
                f"{ex} --compress none {src} {out}.nc && sync", prep, a.runs),
        measure("tet export → .nc (zlib 4 + shuffle)",
                f"{ex} {src} {out}.nc && sync", prep, a.runs),
        measure("nccopy -d 4 -s (uncompressed .nc → zlib 4 + shuffle)",
                f"nccopy -d 4 -s -c f32_1g_dim0/1,f32_1g_dim1/1024,f32_1g_dim2/1024 {nc} {out}.nc && sync", prep, a.runs),
    ]
    sh(f"rm -rf {out}.*")
    by = {r["name"]: r for r in rows}
    print_runs(rows, a.runs)
    worst = max(r["rss_mib"] for r in rows if r["name"].startswith("tet export"))
    cp = by["cp .tet + sync"]["wall"]
    print("| comparison | measured | target |")
    print("|---|---:|---|")
    print(f"| peak RSS of every tet export run (1 GiB dataset) | {worst:.0f} MiB | <= 256 MiB |")
    cpn = by["cp 1 GiB .npy + sync"]["wall"]
    print(f"| .npy export / cp of the same 1 GiB .npy | {by['tet export → .npy']['wall'] / cpn:.2f} | - |")
    print(f"| .zarr export (frames reused) / cp of the .tet | "
          f"{by['tet export → .zarr (zstd, frames reused)']['wall'] / cp:.2f} | - |")
    z = by["tet export → .nc (zlib 4 + shuffle)"]["wall"]
    n = by["nccopy -d 4 -s (uncompressed .nc → zlib 4 + shuffle)"]["wall"]
    print(f"| .nc zlib export / nccopy doing the same compression | {z / n:.2f} | - |")
    for r in rows:
        print(f"\n    {r['name']}: {r['cmd']}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
