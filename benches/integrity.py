#!/usr/bin/env python3
"""What the checksums of issue 13 cost: conversion of the 1 GiB f32 .npy with and without them
(zstd:3 --jobs 2, and raw), and `tet verify --deep` of the 1 GiB zstd output with and without
them. "Without" is `TET_BENCH_NO_CHECKSUMS=1`: no zstd content checksum, no chunk digests, no
footer digest, i.e. the files tet-convert wrote before. Prints the Markdown table of
BENCHMARKS.md ("Integrity").

    python3 benches/integrity.py [--dir /work/bench] [--runs 5]

Needs a release build (`cargo build --release --bins --example gen_npy`) and GNU time. The
with/without runs alternate (ABAB…) so drift of this shared machine hits both alike; each run
starts with its output removed, `sync` and the input in the page cache; conversions fsync their
output. Reported: median wall seconds and median CPU seconds (user + system), and their ratios.
"""
import argparse
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import REL, sh  # noqa: E402


def timed(cmd):
    """Wall and CPU (user + sys) seconds of a shell command, via GNU time."""
    out = subprocess.run(
        ["/usr/bin/time", "-f", "%e %U %S", "bash", "-c", cmd],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, check=True,
    )
    w, u, s = out.stderr.strip().splitlines()[-1].split()
    return float(w), float(u) + float(s)


def pair(name, cmd_with, cmd_without, prep, runs):
    """Alternating runs of the two commands; medians and ratios."""
    res = {"with": ([], []), "without": ([], [])}
    for i in range(runs):
        order = [("with", cmd_with), ("without", cmd_without)]
        if i % 2:
            order.reverse()
        for key, cmd in order:
            sh(prep)
            w, c = timed(cmd)
            res[key][0].append(w)
            res[key][1].append(c)
    med = {k: (statistics.median(v[0]), statistics.median(v[1])) for k, v in res.items()}
    return {
        "name": name,
        "with": med["with"],
        "without": med["without"],
        "wall_ratio": med["with"][0] / med["without"][0],
        "cpu_ratio": med["with"][1] / med["without"][1],
        "walls": res,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="/work/bench")
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    d = a.dir
    os.makedirs(d, exist_ok=True)
    conv = os.path.join(REL, "tet-convert")
    tet = os.path.join(REL, "tet")
    inp = os.path.join(d, "f32_1g.npy")
    if not os.path.exists(inp):
        sh(f"{REL}/examples/gen_npy {inp} 256 1024 1024")
    env = "SOURCE_DATE_EPOCH=1700000000"
    off = "TET_BENCH_NO_CHECKSUMS=1"
    w = os.path.join(d, "integrity.with.tet")
    wo = os.path.join(d, "integrity.without.tet")
    prep = f"rm -f {w} {wo} && sync && cat {inp} > /dev/null"
    rows = [
        pair(
            "convert --codec zstd:3 --jobs 2",
            f"{env} {conv} -q --codec zstd:3 --jobs 2 {inp} {w}",
            f"{env} {off} {conv} -q --codec zstd:3 --jobs 2 {inp} {wo}",
            prep, a.runs,
        ),
        pair(
            "convert --codec raw",
            f"{env} {conv} -q --codec raw {inp} {w}",
            f"{env} {off} {conv} -q --codec raw {inp} {wo}",
            prep, a.runs,
        ),
    ]
    # The zstd outputs, once, then verify --deep of each with both in the page cache.
    sh(f"rm -f {w} {wo}")
    sh(f"{env} {conv} -q --codec zstd:3 --jobs 2 {inp} {w}")
    sh(f"{env} {off} {conv} -q --codec zstd:3 --jobs 2 {inp} {wo}")
    sizes = (os.path.getsize(w), os.path.getsize(wo))
    warm = f"cat {w} {wo} > /dev/null"
    rows.append(pair("verify --deep (1 GiB zstd:3 output)", f"{tet} verify --deep -q {w}",
                     f"{tet} verify --deep -q {wo}", warm, a.runs))
    sh(f"rm -f {w} {wo}")

    print(f"| run | with checksums: wall s / CPU s | without: wall s / CPU s | wall ratio | CPU ratio |")
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
