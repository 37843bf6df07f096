#!/usr/bin/env python3
"""Issue 25: memory that does not grow with the cores, raw copies at copy speed. Each figure is
measured beside its comparison in the same run, the commands interleaved (A B A B …) and the best
of N kept, so drift of this shared machine hits both alike. Prints the Markdown tables of
BENCHMARKS.md ("Issue 25").

    python3 benches/budget.py [--dir /tmp/tet-bench] [--runs 5] [--base OLD_TET_CONVERT]
    python3 benches/budget.py --scaling        # 1, 2, 4, 8, 16 jobs beside zstd -T1..16
    python3 benches/budget.py --batch          # 20,000 NPY of 4 KiB at 1/4/8/16 workers

Needs a release build (`cargo build --release --bins --example gen_npy`), zstd and GNU time
(`bash .ci/setup`). The default tables:

- raw: 1 GiB f32 .npy → `--codec raw` against `cp` + `sync` (target ≤ 1.15×);
- zstd: `--codec zstd:3 --jobs 2` against `zstd -T2 -3` + `sync` (target ≤ 1.0×), and `--jobs 1`
  against `zstd -T1 -3` + `sync`;
- memory: peak RSS (GNU time %M) of `--codec zstd:3` at `--jobs 1, 2, 8, 64` with the default
  budget, and at `--jobs 64` with budgets of 1 byte and 32 MiB; the sha256 of every output
  must be the same (target: ≤ 256 MiB at `--jobs 64`, output bytes unchanged). With `--base`, the
  same runs of an older binary, for the before/after table.

`--scaling` and `--batch` are for a machine with 16 cores (the issue's figures came from one);
on 2 cores they only show oversubscription.
"""
import hashlib
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import ENV, sh  # noqa: E402

CONV = harness.CONV  # --conv replaces it (a copy that a rebuild cannot change mid-run)


def best_of(cases, prepare, runs):
    """Each (name, cmd) of `cases`, `runs` rounds interleaved (the order alternates), each run
    after `prepare`: best wall seconds, median wall seconds, largest peak RSS (MiB), least and
    median CPU seconds (user + system; steadier than wall time on a shared machine)."""
    res = {name: ([], [], []) for name, _ in cases}
    for i in range(runs):
        order = list(cases) if i % 2 == 0 else list(reversed(cases))
        for name, cmd in order:
            sh(prepare)
            w, rss, cpu = harness.timed(cmd)
            res[name][0].append(w)
            res[name][1].append(rss)
            res[name][2].append(cpu)
    rows = []
    for name, cmd in cases:
        w, r, c = res[name]
        rows.append({"name": name, "cmd": cmd, "best": min(w), "median": sorted(w)[len(w) // 2],
                     "rss_mib": max(r) / 1024, "walls": w, "cpu": min(c),
                     "cpu_median": sorted(c)[len(c) // 2]})
    return rows


def print_rows(rows, runs):
    print(f"| run | best wall s (of {runs}) | median wall s | least CPU s | median CPU s "
          "| peak RSS MiB |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['name']} | {r['best']:.2f} | {r['median']:.2f} | {r['cpu']:.2f} "
              f"| {r['cpu_median']:.2f} | {r['rss_mib']:.0f} |")
    print()
    for r in rows:
        print(f"{r['name']}: {r['walls']}", file=sys.stderr)


def sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                return h.hexdigest()[:16]
            h.update(b)


def speed(a):
    d = a.dir
    inp = harness.npy(d)
    prep = harness.prepare(f"{d}/out.*", inp)
    def base(name, args, out):
        # The same run of the older binary (--base), interleaved with the others.
        return [(f"base: {name}", f"{ENV} {a.base} -q {args} {inp} {d}/{out}")] if a.base else []

    raw = best_of([
        ("cp + sync", f"cp {inp} {d}/out.copy && sync"),
        ("tet-convert --codec raw", f"{ENV} {CONV} -q --codec raw {inp} {d}/out.raw.tet"),
    ] + base("tet-convert --codec raw", "--codec raw", "out.rawb.tet"), prep, a.runs)
    z2 = best_of([
        ("zstd -T2 -3 + sync", f"zstd -q -T2 -3 -f {inp} -o {d}/out.zst && sync"),
        ("tet-convert --codec zstd:3 --jobs 2",
         f"{ENV} {CONV} -q --codec zstd:3 --jobs 2 {inp} {d}/out.z2.tet"),
    ] + base("tet-convert --codec zstd:3 --jobs 2", "--codec zstd:3 --jobs 2", "out.z2b.tet"),
        prep, a.runs)
    z1 = best_of([
        ("zstd -T1 -3 + sync", f"zstd -q -T1 -3 -f {inp} -o {d}/out.zst && sync"),
        ("tet-convert --codec zstd:3 --jobs 1",
         f"{ENV} {CONV} -q --codec zstd:3 --jobs 1 {inp} {d}/out.z1.tet"),
    ] + base("tet-convert --codec zstd:3 --jobs 1", "--codec zstd:3 --jobs 1", "out.z1b.tet"),
        prep, max(1, a.runs - 2))
    # Sizes: the .tet of zstd:3 against zstd's own .zst (after the timed runs).
    sh(f"{ENV} {CONV} -q --codec zstd:3 --jobs 2 {inp} {d}/out.size.tet")
    sh(f"zstd -q -T2 -3 -f {inp} -o {d}/out.size.zst")
    tet_size, zst_size = os.path.getsize(f"{d}/out.size.tet"), os.path.getsize(f"{d}/out.size.zst")
    rows = raw + z2 + z1
    print_rows(rows, a.runs)
    b = {r["name"]: r for r in rows}
    harness.print_comparisons([
        ("raw / (cp + sync), best of each",
         b["tet-convert --codec raw"]["best"] / b["cp + sync"]["best"], "<= 1.15"),
        ("raw / (cp + sync), medians",
         b["tet-convert --codec raw"]["median"] / b["cp + sync"]["median"], "-"),
        ("zstd:3 --jobs 2 / (zstd -T2 -3 + sync), best of each",
         b["tet-convert --codec zstd:3 --jobs 2"]["best"] / b["zstd -T2 -3 + sync"]["best"],
         "<= 1.0"),
        ("zstd:3 --jobs 1 / (zstd -T1 -3 + sync), best of each",
         b["tet-convert --codec zstd:3 --jobs 1"]["best"] / b["zstd -T1 -3 + sync"]["best"],
         "<= 1.05 (16-core target)"),
        ("zstd:3 --jobs 2 / zstd -T2 -3, CPU (user + sys), medians",
         b["tet-convert --codec zstd:3 --jobs 2"]["cpu_median"]
         / b["zstd -T2 -3 + sync"]["cpu_median"], "-"),
        ("zstd:3 --jobs 1 / zstd -T1 -3, CPU (user + sys), medians",
         b["tet-convert --codec zstd:3 --jobs 1"]["cpu_median"]
         / b["zstd -T1 -3 + sync"]["cpu_median"], "-"),
        (".tet size / .zst size (zstd:3)",
         f"{tet_size / zst_size:.4f} ({tet_size:,} / {zst_size:,} bytes)", "<= 1.0 (issue 3)"),
    ] + ([
        ("raw: this build / base, best of each",
         b["tet-convert --codec raw"]["best"] / b["base: tet-convert --codec raw"]["best"], "-"),
        ("zstd:3 --jobs 2: this build / base, best of each",
         b["tet-convert --codec zstd:3 --jobs 2"]["best"]
         / b["base: tet-convert --codec zstd:3 --jobs 2"]["best"], "-"),
        ("zstd:3 --jobs 1: this build / base, best of each",
         b["tet-convert --codec zstd:3 --jobs 1"]["best"]
         / b["base: tet-convert --codec zstd:3 --jobs 1"]["best"], "-"),
    ] if a.base else []), head="ratio")
    print()
    sh(f"rm -f {d}/out.*")


def memory(a):
    d = a.dir
    inp = harness.npy(d)
    out = f"{d}/out.mem.tet"
    prep = harness.prepare(out, inp)
    bins = [("", CONV)] + ([("base: ", a.base)] if a.base else [])
    cases = []
    for label, conv in bins:
        for jobs, budget in [(1, None), (2, None), (8, None), (64, None), (64, "1"), (64, "32M")]:
            if budget and label:
                continue  # the old binary has no --memory-budget
            flag = f" --memory-budget {budget}" if budget else ""
            name = f"{label}--jobs {jobs}{flag}"
            cases.append((name, f"{ENV} {conv} -q --codec zstd:3 --jobs {jobs}{flag} {inp} {out}"))
    print("| run (1 GiB f32, --codec zstd:3) | wall s | peak RSS MiB | output sha256 |")
    print("|---|---:|---:|---|")
    digests = {}
    for name, cmd in cases:
        walls, rss = [], []
        for _ in range(max(1, a.runs // 2)):
            sh(prep)
            w, m, _cpu = harness.timed(cmd)
            walls.append(w)
            rss.append(m)
        digests[name] = sha(out)
        print(f"| {name} | {min(walls):.2f} | {max(rss) / 1024:.0f} | {digests[name]} |")
    print()
    # Per binary: the older one may encode differently (issue 25 changed level 3's chainLog).
    ours = {v for k, v in digests.items() if not k.startswith("base: ")}
    base = {v for k, v in digests.items() if k.startswith("base: ")}
    same = len(ours) == 1 and len(base) <= 1
    print(f"every output of this build identical: {'yes' if len(ours) == 1 else 'NO'}"
          + (f"; of the base build: {'yes' if len(base) == 1 else 'NO'}" if base else ""))
    sh(f"rm -f {out}")
    return same


def scaling(a):
    d = a.dir
    inp = harness.npy(d)
    prep = harness.prepare(f"{d}/out.*", inp)
    print("| jobs | tet-convert zstd:3 s | zstd -T<jobs> -3 + sync s | ratio | tet peak RSS MiB |")
    print("|---:|---:|---:|---:|---:|")
    for jobs in [1, 2, 4, 8, 16]:
        rows = best_of([
            ("zstd", f"zstd -q -T{jobs} -3 -f {inp} -o {d}/out.zst && sync"),
            ("tet", f"{ENV} {CONV} -q --codec zstd:3 --jobs {jobs} {inp} {d}/out.tet"),
        ], prep, a.runs)
        b = {r["name"]: r for r in rows}
        print(f"| {jobs} | {b['tet']['best']:.2f} | {b['zstd']['best']:.2f} | "
              f"{b['tet']['best'] / b['zstd']['best']:.2f} | {b['tet']['rss_mib']:.0f} |")
    sh(f"rm -f {d}/out.*")


def make_small(d, n=20000):
    """`n` different f32 .npy files of 4 KiB (a 128-byte header and 992 values)."""
    os.makedirs(d, exist_ok=True)
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (992,), }"
    pad = 128 - (10 + len(header) + 1)
    head = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header) + pad + 1)
    head += header.encode() + b" " * pad + b"\n"
    for i in range(n):
        body = struct.pack("<992f", *[(i * 992 + k) * 0.25 for k in range(992)])
        with open(os.path.join(d, f"s{i:05d}.npy"), "wb") as f:
            f.write(head + body)


def batch(a):
    d = a.dir
    src, out = os.path.join(d, "small"), os.path.join(d, "small.out")
    if not os.path.isdir(src):
        make_small(src)
    prep = harness.prepare(out, src, mkdir=True)
    cases = [("cp -r + sync", f"cp -r {src}/. {out}/ && sync")]
    for w in [1, 4, 8, 16]:
        cases.append((f"--workers {w} (--jobs 1)",
                      f"{ENV} {CONV} -q {src} --out-dir {out} --jobs 1 --workers {w}"))
    cases.append(("--isolation none --jobs 16",
                  f"{ENV} {CONV} -q {src} --out-dir {out} --isolation none --jobs 16"))
    rows = best_of(cases, prep, a.runs)
    print_rows(rows, a.runs)
    sh(f"rm -rf {out}")


def main():
    a = harness.args("/tmp/tet-bench", 5, extra=[
        ("--base", dict(default=None, help="an older tet-convert binary for the memory table")),
        ("--scaling", dict(action="store_true", help="the 1-16 jobs table")),
        ("--batch", dict(action="store_true", help="the 20,000-file batch")),
        ("--only", dict(default=None, choices=["speed", "memory"], help="one default table")),
        ("--conv", dict(default=harness.CONV, help="the tet-convert binary to measure")),
    ])
    global CONV
    CONV = a.conv
    if a.scaling:
        return scaling(a)
    if a.batch:
        return batch(a)
    if a.only in (None, "speed"):
        speed(a)
    if a.only in (None, "memory"):
        return 0 if memory(a) else 1


if __name__ == "__main__":
    sys.exit(main())
