#!/usr/bin/env python3
"""NetCDF-4 → .tet benchmarks against nccopy, run in one go so the ratios hold on a shared, noisy
machine. Prints the Markdown tables of BENCHMARKS.md ("NetCDF").

    python3 benches/netcdf.py [--dir /work/bench] [--runs 3]

Needs a release build (`cargo build --release --bins -p tet-cli` and
`cargo build --release -p tet-netcdf --example gen_nc`), nccopy and GNU time (`bash .ci/setup`).
Inputs are generated on first use:
  nc4_contig.nc  f32 t(time=256, y=1024, x=1024), 1 GiB, netCDF-4, contiguous  (gen_nc)
  nc4_z1.nc      the same, chunked (1, 1024, 1024), zlib level 1              (nccopy -d 1 -c …)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import CONV, ENV, sh  # noqa: E402


def main():
    a = harness.args(runs=3)
    d = a.dir
    contig, z1 = harness.nc4(d), harness.nc4(d, "z1")
    tet = f"{ENV} {CONV} -q"
    rows = harness.measure_all([
        ("nccopy -k classic (contiguous) + sync",
         f"nccopy -k classic {contig} {d}/out.classic.nc && sync"),
        ("tet-convert --codec raw (contiguous)", f"{tet} --codec raw {contig} {d}/out.raw.tet"),
        ("nccopy -k classic (chunked zlib-1) + sync",
         f"nccopy -k classic {z1} {d}/out.classic.nc && sync"),
        ("tet-convert --jobs 1 (chunked zlib-1, codec auto)",
         f"{tet} --jobs 1 {z1} {d}/out.z1.tet"),
        ("tet-convert --jobs 2 (chunked zlib-1, codec auto)",
         f"{tet} --jobs 2 {z1} {d}/out.z2.tet"),
        ("tet-convert --codec raw --jobs 1 (chunked zlib-1)",
         f"{tet} --codec raw --jobs 1 {z1} {d}/out.r1.tet"),
        ("tet-convert --codec raw --jobs 2 (chunked zlib-1)",
         f"{tet} --codec raw --jobs 2 {z1} {d}/out.r2.tet"),
    ], harness.prepare(f"{d}/out.*", contig, z1), a.runs)
    sh(f"rm -f {d}/out.*")
    by = harness.walls(rows)
    harness.print_runs(rows, a.runs)
    auto2 = by["tet-convert --jobs 2 (chunked zlib-1, codec auto)"]
    harness.print_comparisons([
        ("contiguous: raw convert / nccopy -k classic",
         by["tet-convert --codec raw (contiguous)"] / by["nccopy -k classic (contiguous) + sync"],
         "<= 1.3"),
        ("chunked zlib-1: speed-up --jobs 2 vs --jobs 1 (codec auto = zstd)",
         by["tet-convert --jobs 1 (chunked zlib-1, codec auto)"] / auto2, ">= 1.8"),
        ("chunked zlib-1: speed-up --jobs 2 vs --jobs 1 (--codec raw)",
         by["tet-convert --codec raw --jobs 1 (chunked zlib-1)"]
         / by["tet-convert --codec raw --jobs 2 (chunked zlib-1)"], "-"),
        ("chunked zlib-1: nccopy -k classic / tet-convert --jobs 2",
         by["nccopy -k classic (chunked zlib-1) + sync"] / auto2, "-"),
        ("peak RSS of every tet-convert run", f"{harness.peak_rss(rows, 'tet'):.0f} MiB",
         "<= 256 MiB"),
    ])


if __name__ == "__main__":
    sys.exit(main())
