#!/usr/bin/env python3
"""Benchmarks of tet-convert against the tools a user would compare it with, run in one go so the
ratios hold on a shared, noisy machine. Prints a Markdown table (the figures in BENCHMARKS.md).

    python3 benches/run.py [--dir /work/bench] [--runs 3] [--big]

Needs a release build (`cargo build --release --bins --example gen_npy`), zstd and GNU time
(`bash .ci/setup` installs them). Inputs are generated on first use: a 1 GiB f32 .npy
(256 x 1024 x 1024) and, with --big, an 8 GiB one (2048 x 1024 x 1024).
"""
import argparse
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REL = os.path.join(ROOT, "target", "release")


def sh(cmd):
    subprocess.run(cmd, shell=True, check=True)


def timed(cmd):
    """Wall seconds and peak RSS (KiB) of a shell command, via GNU time."""
    out = subprocess.run(
        ["/usr/bin/time", "-f", "%e %M", "bash", "-c", cmd],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, check=True,
    )
    last = out.stderr.strip().splitlines()[-1].split()
    return float(last[0]), int(last[1])


def measure(name, cmd, prepare, runs):
    walls, rss = [], []
    for _ in range(runs):
        sh(prepare)
        w, m = timed(cmd)
        walls.append(w)
        rss.append(m)
    return {"name": name, "cmd": cmd, "wall": statistics.median(walls), "rss_mib": max(rss) / 1024}


def print_runs(rows, runs):
    """The table of runs: name, median wall seconds, peak RSS."""
    print("| run | wall s (median of %d) | peak RSS MiB |" % runs)
    print("|---|---:|---:|")
    for r in rows:
        print(f"| {r['name']} | {r['wall']:.2f} | {r['rss_mib']:.0f} |")
    print()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="/work/bench")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--big", action="store_true", help="also the 8 GiB input")
    a = ap.parse_args()
    d = a.dir
    os.makedirs(d, exist_ok=True)
    conv = os.path.join(REL, "tet-convert")
    inp = os.path.join(d, "f32_1g.npy")
    if not os.path.exists(inp):
        sh(f"{REL}/examples/gen_npy {inp} 256 1024 1024")
    env = "SOURCE_DATE_EPOCH=1700000000"
    # Warm cache for every run, outputs removed and flushed first.
    prep = f"rm -f {d}/out.* && sync && cat {inp} > /dev/null"
    rows = []
    rows.append(measure("cp + sync", f"cp {inp} {d}/out.copy && sync", prep, a.runs))
    rows.append(measure("tet-convert --codec raw", f"{env} {conv} -q --codec raw {inp} {d}/out.raw.tet", prep, a.runs))
    rows.append(measure("zstd -T2 -3 + sync", f"zstd -q -T2 -3 -f {inp} -o {d}/out.zst && sync", prep, a.runs))
    rows.append(measure("tet-convert --codec zstd:3 --jobs 2", f"{env} {conv} -q --codec zstd:3 --jobs 2 {inp} {d}/out.z2.tet", prep, a.runs))
    sizes = {}
    sh(f"zstd -q -T2 -3 -f {inp} -o {d}/out.zst")
    sizes["zstd"] = os.path.getsize(f"{d}/out.zst")
    sh(f"{env} {conv} -q --codec zstd:3 --jobs 2 {inp} {d}/out.z2.tet")
    sizes["tet"] = os.path.getsize(f"{d}/out.z2.tet")
    rows.append(measure("tet-convert --codec zstd:3 --jobs 1", f"{env} {conv} -q --codec zstd:3 --jobs 1 {inp} {d}/out.z1.tet", prep, a.runs))
    # The same scaling question asked of zstd itself, for context on this machine.
    rows.append(measure("zstd -T1 -3 + sync", f"zstd -q -T1 -3 -f {inp} -o {d}/out.zst && sync", prep, a.runs))
    if a.big:
        big = os.path.join(d, "f32_8g.npy")
        if not os.path.exists(big):
            sh(f"{REL}/examples/gen_npy {big} 2048 1024 1024")
        prep_big = f"rm -f {d}/out.* && sync"
        rows.append(measure("8 GiB: tet-convert --codec raw", f"{env} {conv} -q --codec raw {big} {d}/out.big.tet", prep_big, 1))
        rows.append(measure("8 GiB: tet-convert --codec zstd:3", f"{env} {conv} -q --codec zstd:3 --jobs 2 {big} {d}/out.big.tet", prep_big, 1))
        sh(f"rm -f {d}/out.*")

    by = {r["name"]: r for r in rows}
    print_runs(rows, a.runs)
    raw = by["tet-convert --codec raw"]["wall"] / by["cp + sync"]["wall"]
    z = by["tet-convert --codec zstd:3 --jobs 2"]["wall"] / by["zstd -T2 -3 + sync"]["wall"]
    sp = by["tet-convert --codec zstd:3 --jobs 1"]["wall"] / by["tet-convert --codec zstd:3 --jobs 2"]["wall"]
    print("| comparison | ratio | target |")
    print("|---|---:|---|")
    print(f"| raw convert / (cp + sync) | {raw:.2f} | <= 1.5 |")
    print(f"| zstd:3 convert / (zstd -T2 -3 + sync) | {z:.2f} | <= 1.1 |")
    print(f"| .tet size / .zst size | {sizes['tet'] / sizes['zstd']:.3f} ({sizes['tet']} / {sizes['zstd']} bytes) | <= 1.0 |")
    print(f"| speed-up --jobs 2 vs --jobs 1 (zstd:3) | {sp:.2f} | >= 1.8 |")
    zsp = by["zstd -T1 -3 + sync"]["wall"] / by["zstd -T2 -3 + sync"]["wall"]
    print(f"| for context: zstd CLI speed-up -T2 vs -T1 | {zsp:.2f} | - |")
    worst = max(r["rss_mib"] for r in rows if r["name"].startswith(("tet", "8 GiB")))
    print(f"| peak RSS of every tet-convert run | {worst:.0f} MiB | <= 256 MiB |")


if __name__ == "__main__":
    sys.exit(main())
