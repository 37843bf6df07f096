#!/usr/bin/env python3
"""Chunked, deflated netCDF-4 → .tet (issue 14): tet-convert against nccopy, and the `--jobs`
speed-up beside the zstd CLI's own `-T1`/`-T2` speed-up. Every case runs once per round, round
after round, so the machine's drift hits all of them alike. Prints the Markdown tables of
BENCHMARKS.md ("Chunked netCDF-4 (zlib)").

    python3 benches/compressed.py [--dir /work/bench] [--runs 3]

Needs a release build (`cargo build --release --bins -p tet-cli` and
`cargo build --release -p tet-netcdf --example gen_nc`), nccopy, zstd and GNU time
(`bash .ci/setup`). Inputs are made on first use:
  nc4_contig.nc  f32 t(time=256, y=1024, x=1024), 1 GiB, contiguous      (gen_nc)
  nc4_z1s.nc     the same, chunked (1, 1024, 1024), shuffle + zlib level 1, as netCDF4-python's
                 `zlib=True` writes it                                    (nccopy -d 1 -s -c …)
The zstd CLI compresses nc4_contig.nc (the same values, uncompressed) at the level `--codec
auto` uses, in 4 MiB blocks like the `.tet` chunks, once with one thread and once with two.
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import CONV, ENV, sh  # noqa: E402

AUTO_LEVEL = 2  # converters/engine/src/pipeline.rs AUTO_ZSTD_LEVEL


def cases(d, contig, z1s):
    tet = f"{ENV} {CONV} -q"
    zstd = f"zstd -q -f -{AUTO_LEVEL} -B4194304 {contig} -o {d}/out.zst"
    return [
        ("nccopy -k classic + sync", f"nccopy -k classic {z1s} {d}/out.classic.nc && sync"),
        ("nccopy -k nc4 -d 1 + sync", f"nccopy -k nc4 -d 1 {z1s} {d}/out.nc4.nc && sync"),
        ("tet-convert --codec raw --jobs 1", f"{tet} --codec raw --jobs 1 {z1s} {d}/out.r1.tet"),
        ("tet-convert --codec raw --jobs 2", f"{tet} --codec raw --jobs 2 {z1s} {d}/out.r2.tet"),
        ("tet-convert --jobs 1 (codec auto)", f"{tet} --jobs 1 {z1s} {d}/out.a1.tet"),
        ("tet-convert --jobs 2 (codec auto)", f"{tet} --jobs 2 {z1s} {d}/out.a2.tet"),
        (f"zstd -{AUTO_LEVEL} -T1 + sync", f"{zstd} -T1 && sync"),
        (f"zstd -{AUTO_LEVEL} -T2 + sync", f"{zstd} -T2 && sync"),
    ]


def main():
    a = harness.args(runs=3)
    d = a.dir
    contig, z1s = harness.nc4(d), harness.nc4(d, "z1s")
    runs = cases(d, contig, z1s)
    prepare = harness.prepare(f"{d}/out.*", contig, z1s)
    got = {name: ([], [], []) for name, _ in runs}
    for r in range(a.runs):
        for name, cmd in runs:
            sh(prepare)
            wall, rss, cpu = harness.timed(cmd)
            got[name][0].append(wall)
            got[name][1].append(cpu)
            got[name][2].append(rss / 1024)
            print(f"  round {r + 1}: {name} | {wall:.2f} s | {cpu:.2f} s CPU", file=sys.stderr)
    sh(f"rm -f {d}/out.*")
    wall = {n: statistics.median(v[0]) for n, v in got.items()}
    print(f"| run | wall s (median of {a.runs}) | CPU s | peak RSS MiB |")
    print("|---|---:|---:|---:|")
    for n, v in got.items():
        print(f"| {n} | {wall[n]:.2f} | {statistics.median(v[1]):.2f} | {max(v[2]):.0f} |")
    print()
    harness.print_comparisons([
        ("--codec raw --jobs 2 / nccopy -k classic + sync",
         wall["tet-convert --codec raw --jobs 2"] / wall["nccopy -k classic + sync"], "<= 0.35"),
        ("codec auto --jobs 2 / nccopy -k nc4 -d 1 + sync",
         wall["tet-convert --jobs 2 (codec auto)"] / wall["nccopy -k nc4 -d 1 + sync"], "<= 0.25"),
        ("speed-up --jobs 2 vs 1, codec auto",
         wall["tet-convert --jobs 1 (codec auto)"] / wall["tet-convert --jobs 2 (codec auto)"],
         "the zstd CLI's"),
        ("speed-up --jobs 2 vs 1, --codec raw",
         wall["tet-convert --codec raw --jobs 1"] / wall["tet-convert --codec raw --jobs 2"],
         "-"),
        (f"speed-up zstd -{AUTO_LEVEL} -T2 vs -T1 (the ceiling here)",
         wall[f"zstd -{AUTO_LEVEL} -T1 + sync"] / wall[f"zstd -{AUTO_LEVEL} -T2 + sync"], "-"),
    ])


if __name__ == "__main__":
    sys.exit(main())
