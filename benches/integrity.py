#!/usr/bin/env python3
"""What the checksums of issue 13 cost: conversion of the 1 GiB f32 .npy with and without them
(zstd:3 --jobs 2, and raw), and `tet verify --deep` of the 1 GiB zstd output with and without
them. "Without" is `--no-checksums` (an explicit setting, recorded in the history row; no
environment variable changes what tet-convert writes): no zstd content checksum, no chunk
digests, no footer digest, i.e. the files tet-convert wrote before. Prints the Markdown table of
BENCHMARKS.md ("Integrity").

    python3 benches/integrity.py [--dir /work/bench] [--runs 5]

Needs a release build (`cargo build --release --bins --example gen_npy`) and GNU time. The
with/without runs alternate (ABAB…) so drift of this shared machine hits both alike; each run
starts with its output removed, `sync` and the input in the page cache; conversions fsync their
output. Reported: median wall seconds and median CPU seconds (user + system), and their ratios.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import CONV, ENV, TET, sh  # noqa: E402


def main():
    a = harness.args(runs=5)
    d = a.dir
    inp = harness.npy(d)
    w = os.path.join(d, "integrity.with.tet")
    wo = os.path.join(d, "integrity.without.tet")
    prep = harness.prepare(f"{w} {wo}", inp)
    zstd = f"{CONV} -q --codec zstd:3 --jobs 2"
    raw = f"{CONV} -q --codec raw"
    off = "--no-checksums"
    rows = [
        harness.with_without("convert --codec zstd:3 --jobs 2", f"{ENV} {zstd} {inp} {w}",
                             f"{ENV} {zstd} {off} {inp} {wo}", prep, a.runs),
        harness.with_without("convert --codec raw", f"{ENV} {raw} {inp} {w}",
                             f"{ENV} {raw} {off} {inp} {wo}", prep, a.runs),
    ]
    # The zstd outputs, once, then verify --deep of each with both in the page cache.
    sh(f"rm -f {w} {wo}")
    sh(f"{ENV} {zstd} {inp} {w}")
    sh(f"{ENV} {zstd} {off} {inp} {wo}")
    sizes = (os.path.getsize(w), os.path.getsize(wo))
    rows.append(harness.with_without("verify --deep (1 GiB zstd:3 output)",
                                     f"{TET} verify --deep -q {w}", f"{TET} verify --deep -q {wo}",
                                     harness.prepare("", w, wo), a.runs))
    sh(f"rm -f {w} {wo}")

    print("| run | with checksums: wall s / CPU s | without: wall s / CPU s | wall ratio | CPU ratio |")
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['name']} | {r['with'][0]:.2f} / {r['with'][1]:.2f} | "
              f"{r['without'][0]:.2f} / {r['without'][1]:.2f} | {r['wall_ratio']:.3f} | {r['cpu_ratio']:.3f} |")
    print()
    print(f"zstd output size with / without checksums: {sizes[0]:,} / {sizes[1]:,} bytes "
          f"(+{sizes[0] - sizes[1]:,})")
    for r in rows:
        print(f"{r['name']}: walls with {r['walls']['with'][0]} without {r['walls']['without'][0]}",
              file=sys.stderr)


if __name__ == "__main__":
    main()
