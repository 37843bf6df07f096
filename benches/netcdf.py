#!/usr/bin/env python3
"""NetCDF-4 → .tet benchmarks against nccopy, run in one go so the ratios hold on a shared, noisy
machine. Prints the Markdown tables of BENCHMARKS.md ("NetCDF").

    python3 benches/netcdf.py [--dir /work/bench] [--runs 3]

Needs a release build (`cargo build --release --bins -p tet` and
`cargo build --release -p tet-netcdf --example gen_nc`), nccopy and GNU time (`bash .ci/setup`).
Inputs are generated on first use:
  nc4_contig.nc  f32 t(time=256, y=1024, x=1024), 1 GiB, netCDF-4, contiguous  (gen_nc)
  nc4_z1.nc      the same, chunked (1, 1024, 1024), zlib level 1              (nccopy -d 1 -c …)
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
    contig = os.path.join(d, "nc4_contig.nc")
    z1 = os.path.join(d, "nc4_z1.nc")
    if not os.path.exists(contig):
        sh(f"{REL}/examples/gen_nc {contig} 256 1024 1024")
    if not os.path.exists(z1):
        sh(f"nccopy -d 1 -c time/1,y/1024,x/1024 {contig} {z1}")
    env = "SOURCE_DATE_EPOCH=1700000000"
    prep = f"rm -f {d}/out.* && sync && cat {contig} {z1} > /dev/null"
    rows = [
        measure("nccopy -k classic (contiguous) + sync",
                f"nccopy -k classic {contig} {d}/out.classic.nc && sync", prep, a.runs),
        measure("tet-convert --codec raw (contiguous)",
                f"{env} {conv} -q --codec raw {contig} {d}/out.raw.tet", prep, a.runs),
        measure("nccopy -k classic (chunked zlib-1) + sync",
                f"nccopy -k classic {z1} {d}/out.classic.nc && sync", prep, a.runs),
        measure("tet-convert --jobs 1 (chunked zlib-1, codec auto)",
                f"{env} {conv} -q --jobs 1 {z1} {d}/out.z1.tet", prep, a.runs),
        measure("tet-convert --jobs 2 (chunked zlib-1, codec auto)",
                f"{env} {conv} -q --jobs 2 {z1} {d}/out.z2.tet", prep, a.runs),
        measure("tet-convert --codec raw --jobs 1 (chunked zlib-1)",
                f"{env} {conv} -q --codec raw --jobs 1 {z1} {d}/out.r1.tet", prep, a.runs),
        measure("tet-convert --codec raw --jobs 2 (chunked zlib-1)",
                f"{env} {conv} -q --codec raw --jobs 2 {z1} {d}/out.r2.tet", prep, a.runs),
    ]
    sh(f"rm -f {d}/out.*")
    by = {r["name"]: r["wall"] for r in rows}
    print_runs(rows, a.runs)
    contig_ratio = by["tet-convert --codec raw (contiguous)"] / by["nccopy -k classic (contiguous) + sync"]
    sp = by["tet-convert --jobs 1 (chunked zlib-1, codec auto)"] / by["tet-convert --jobs 2 (chunked zlib-1, codec auto)"]
    spr = by["tet-convert --codec raw --jobs 1 (chunked zlib-1)"] / by["tet-convert --codec raw --jobs 2 (chunked zlib-1)"]
    ref = by["nccopy -k classic (chunked zlib-1) + sync"] / by["tet-convert --jobs 2 (chunked zlib-1, codec auto)"]
    worst = max(r["rss_mib"] for r in rows if r["name"].startswith("tet"))
    print("| comparison | ratio | target |")
    print("|---|---:|---|")
    print(f"| contiguous: raw convert / nccopy -k classic | {contig_ratio:.2f} | <= 1.3 |")
    print(f"| chunked zlib-1: speed-up --jobs 2 vs --jobs 1 (codec auto = zstd) | {sp:.2f} | >= 1.8 |")
    print(f"| chunked zlib-1: speed-up --jobs 2 vs --jobs 1 (--codec raw) | {spr:.2f} | - |")
    print(f"| chunked zlib-1: nccopy -k classic / tet-convert --jobs 2 | {ref:.2f} | - |")
    print(f"| peak RSS of every tet-convert run | {worst:.0f} MiB | <= 256 MiB |")


if __name__ == "__main__":
    sys.exit(main())
