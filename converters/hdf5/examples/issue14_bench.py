#!/usr/bin/env python3
"""Issue 14 figures for chunked netCDF-4 → .tet (BENCHMARKS.md, "issue 14"): tet-convert against
nccopy, the zstd level trade-off, and optionally two tet-convert builds A/B, all interleaved
round by round so the machine's drift hits every run alike.

    python3 converters/hdf5/examples/issue14_bench.py [--dir /work/bench] [--runs 3]
        [--inputs nc4_z1.nc,nc4_z1s.nc] [--levels 1,2,3] [--jobs 2] [--out DIR]
        [--conv TET_CONVERT] [--ab OLD_TET_CONVERT] [--no-nccopy]

Inputs (in --dir; made on first use from nc4_contig.nc, see benches/netcdf.py):
  nc4_z1.nc   chunked (1, 1024, 1024), zlib level 1            nccopy -d 1 -c time/1,y/1024,x/1024
  nc4_z1s.nc  the same with shuffle (netCDF4-python zlib=True)  nccopy -d 1 -s -c time/1,y/1024,x/1024
Every run starts with its output removed, `sync`, and the input read into the page cache;
nccopy's output is synced as part of its run (tet-convert fsyncs its own). Each figure is the
median over --runs rounds: wall seconds, CPU seconds (user + system, GNU time), output MiB.
`--ab` adds `--codec raw` runs of another tet-convert binary next to the current one. `--out`
puts the outputs elsewhere than --dir (a tmpfs when the disk is full: then `sync` and fsync cost
nothing, and the figures are CPU-bound). An input named with a `/` is taken as a path.
"""
import argparse
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "benches"))
import harness  # noqa: E402
from harness import CONV, ENV, sh  # noqa: E402


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="/work/bench")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--inputs", default="nc4_z1.nc,nc4_z1s.nc")
    ap.add_argument("--levels", default="1,2,3")
    ap.add_argument("--jobs", default="2")
    ap.add_argument("--ab", default="")
    ap.add_argument("--no-nccopy", action="store_true")
    ap.add_argument("--out", default="")
    ap.add_argument("--conv", default=CONV, help="the tet-convert binary measured")
    a = ap.parse_args()
    d = a.dir
    contig = os.path.join(d, "nc4_contig.nc")
    makers = {
        "nc4_z1.nc": f"nccopy -d 1 -c time/1,y/1024,x/1024 {contig} {d}/nc4_z1.nc",
        "nc4_z1s.nc": f"nccopy -d 1 -s -c time/1,y/1024,x/1024 {contig} {d}/nc4_z1s.nc",
    }
    out = f"{a.out or d}/out14"
    cases = []  # (input, name, command, output file)
    for name in a.inputs.split(","):
        src = name if "/" in name else harness.make(os.path.join(d, name), makers[name])
        tet = f"{ENV} {a.conv} -q --jobs {a.jobs}"
        if not a.no_nccopy:
            cases.append((src, "nccopy -k classic + sync",
                          f"nccopy -k classic {src} {out}.nc && sync", f"{out}.nc"))
            cases.append((src, "nccopy -k nc4 -d 1 + sync",
                          f"nccopy -k nc4 -d 1 {src} {out}.nc && sync", f"{out}.nc"))
        cases.append((src, f"tet-convert --codec raw --jobs {a.jobs}",
                      f"{tet} --codec raw {src} {out}.tet", f"{out}.tet"))
        if a.ab:
            cases.append((src, f"tet-convert (A/B other build) --codec raw --jobs {a.jobs}",
                          f"{ENV} {a.ab} -q --jobs {a.jobs} --codec raw {src} {out}.tet",
                          f"{out}.tet"))
        for lvl in a.levels.split(","):
            if lvl:
                cases.append((src, f"tet-convert --codec zstd:{lvl} --jobs {a.jobs}",
                              f"{tet} --codec zstd:{lvl} {src} {out}.tet", f"{out}.tet"))
    res = {(c[0], c[1]): ([], [], []) for c in cases}
    print(f"load average before: {load()}", flush=True)
    for r in range(a.runs):
        order = cases if r % 2 == 0 else list(reversed(cases))
        for src, name, cmd, path in order:
            sh(harness.prepare(f"{out}.*", src))
            w, _rss, cpu = harness.timed(cmd)
            size = os.path.getsize(path) / (1 << 20)
            res[(src, name)][0].append(w)
            res[(src, name)][1].append(cpu)
            res[(src, name)][2].append(size)
            print(f"  round {r}: {os.path.basename(src)} | {name} | {w:.2f} s | {cpu:.2f} s CPU "
                  f"| load {load()}", flush=True)
    sh(f"rm -f {out}.*")
    print(f"load average after: {load()}\n")
    for name in a.inputs.split(","):
        src = name if "/" in name else os.path.join(d, name)
        print(f"{name}:\n")
        print("| run | wall s | CPU s | output MiB | walls |")
        print("|---|---:|---:|---:|---|")
        med = {}
        for s2, n, _cmd, _p in cases:
            if s2 != src:
                continue
            walls, cpus, sizes = res[(s2, n)]
            med[n] = (statistics.median(walls), statistics.median(cpus))
            print(f"| {n} | {med[n][0]:.2f} | {med[n][1]:.2f} | {statistics.median(sizes):.0f} | "
                  f"{', '.join(f'{x:.2f}' for x in walls)} |")
        raw = med.get(f"tet-convert --codec raw --jobs {a.jobs}")
        z3 = med.get(f"tet-convert --codec zstd:3 --jobs {a.jobs}")
        classic = med.get("nccopy -k classic + sync")
        nc4 = med.get("nccopy -k nc4 -d 1 + sync")
        print()
        if raw and classic:
            print(f"raw / nccopy -k classic: wall {raw[0] / classic[0]:.2f}, "
                  f"CPU {raw[1] / classic[1]:.2f}")
        if z3 and nc4:
            print(f"zstd:3 (default) / nccopy -k nc4 -d 1: wall {z3[0] / nc4[0]:.2f}, "
                  f"CPU {z3[1] / nc4[1]:.2f}")
        if nc4:
            for lvl in a.levels.split(","):
                z = med.get(f"tet-convert --codec zstd:{lvl} --jobs {a.jobs}")
                if z:
                    print(f"zstd:{lvl} / nccopy -k nc4 -d 1: wall {z[0] / nc4[0]:.2f}")
        print()


if __name__ == "__main__":
    sys.exit(main())
