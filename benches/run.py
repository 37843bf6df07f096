#!/usr/bin/env python3
"""Benchmarks of tet-convert against the tools a user would compare it with, run in one go so the
ratios hold on a shared, noisy machine. Prints a Markdown table (the figures in BENCHMARKS.md).

    python3 benches/run.py [--dir /work/bench] [--runs 3] [--big]

Needs a release build (`cargo build --release --bins --example gen_npy`), zstd and GNU time
(`bash .ci/setup` installs them). Inputs are generated on first use: a 1 GiB f32 .npy
(256 x 1024 x 1024) and, with --big, an 8 GiB one (2048 x 1024 x 1024).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import CONV, ENV, sh  # noqa: E402


def main():
    big_opt = ("--big", dict(action="store_true", help="also the 8 GiB input"))
    a = harness.args(runs=3, extra=[big_opt])
    d = a.dir
    inp = harness.npy(d)
    # Warm cache for every run, outputs removed and flushed first.
    prep = harness.prepare(f"{d}/out.*", inp)
    rows = harness.measure_all([
        ("cp + sync", f"cp {inp} {d}/out.copy && sync"),
        ("tet-convert --codec raw", f"{ENV} {CONV} -q --codec raw {inp} {d}/out.raw.tet"),
        ("zstd -T2 -3 + sync", f"zstd -q -T2 -3 -f {inp} -o {d}/out.zst && sync"),
        ("tet-convert --codec zstd:3 --jobs 2",
         f"{ENV} {CONV} -q --codec zstd:3 --jobs 2 {inp} {d}/out.z2.tet"),
    ], prep, a.runs)
    sizes = {}
    sh(f"zstd -q -T2 -3 -f {inp} -o {d}/out.zst")
    sizes["zstd"] = os.path.getsize(f"{d}/out.zst")
    sh(f"{ENV} {CONV} -q --codec zstd:3 --jobs 2 {inp} {d}/out.z2.tet")
    sizes["tet"] = os.path.getsize(f"{d}/out.z2.tet")
    rows += harness.measure_all([
        ("tet-convert --codec zstd:3 --jobs 1",
         f"{ENV} {CONV} -q --codec zstd:3 --jobs 1 {inp} {d}/out.z1.tet"),
        # The same scaling question asked of zstd itself, for context on this machine.
        ("zstd -T1 -3 + sync", f"zstd -q -T1 -3 -f {inp} -o {d}/out.zst && sync"),
    ], prep, a.runs)
    if a.big:
        big = harness.npy(d, 2048, "f32_8g.npy")
        rows += harness.measure_all([
            ("8 GiB: tet-convert --codec raw",
             f"{ENV} {CONV} -q --codec raw {big} {d}/out.big.tet"),
            ("8 GiB: tet-convert --codec zstd:3",
             f"{ENV} {CONV} -q --codec zstd:3 --jobs 2 {big} {d}/out.big.tet"),
        ], harness.prepare(f"{d}/out.*"), 1)
        sh(f"rm -f {d}/out.*")

    wall = harness.walls(rows)
    harness.print_runs(rows, a.runs)
    harness.print_comparisons([
        ("raw convert / (cp + sync)",
         wall["tet-convert --codec raw"] / wall["cp + sync"], "<= 1.5"),
        ("zstd:3 convert / (zstd -T2 -3 + sync)",
         wall["tet-convert --codec zstd:3 --jobs 2"] / wall["zstd -T2 -3 + sync"], "<= 1.1"),
        (".tet size / .zst size",
         f"{sizes['tet'] / sizes['zstd']:.3f} ({sizes['tet']} / {sizes['zstd']} bytes)", "<= 1.0"),
        ("speed-up --jobs 2 vs --jobs 1 (zstd:3)",
         wall["tet-convert --codec zstd:3 --jobs 1"] / wall["tet-convert --codec zstd:3 --jobs 2"],
         ">= 1.8"),
        ("for context: zstd CLI speed-up -T2 vs -T1",
         wall["zstd -T1 -3 + sync"] / wall["zstd -T2 -3 + sync"], "-"),
        ("peak RSS of every tet-convert run", f"{harness.peak_rss(rows, 'tet', '8 GiB'):.0f} MiB",
         "<= 256 MiB"),
    ])


if __name__ == "__main__":
    sys.exit(main())
