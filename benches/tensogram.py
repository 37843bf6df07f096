#!/usr/bin/env python3
"""Tensogram → .tet peak memory on files of many 100 MiB messages: peak RSS should stay near one
message (it must not grow with the number of messages). Prints the Markdown table of
BENCHMARKS.md ("Tensogram").

    python3 benches/tensogram.py [--dir /work/bench] [--runs 1]

Needs `cargo build --release --bins -p tet` and `cargo build --release -p tet-tensogram --example
gen_tgm`, and GNU time. Inputs (generated on first use): f32 objects of 100 MiB, one per message,
zstd level 1 or uncompressed, 4 and 16 messages.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import REL, measure, sh  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="/work/bench")
    ap.add_argument("--runs", type=int, default=1)
    a = ap.parse_args()
    d = a.dir
    conv = os.path.join(REL, "tet-convert")
    rows = []
    for comp in ["zstd", "none"]:
        for n in [4, 16]:
            f = os.path.join(d, f"tgm_{comp}_{n}.tgm")
            if not os.path.exists(f):
                sh(f"{REL}/examples/gen_tgm {f} {n} 100 {comp}")
            size = os.path.getsize(f) / 2**20
            for jobs in [1, 2]:
                r = measure(f"{n} × 100 MiB, {comp}, --jobs {jobs} ({size:.0f} MiB file)",
                            f"SOURCE_DATE_EPOCH=1700000000 {conv} -q --jobs {jobs} {f} {d}/out.tgm.tet",
                            f"rm -f {d}/out.* && sync", a.runs)
                rows.append(r)
    sh(f"rm -f {d}/out.*")
    print("| input | wall s | peak RSS MiB | RSS / message |")
    print("|---|---:|---:|---:|")
    for r in rows:
        print(f"| {r['name']} | {r['wall']:.2f} | {r['rss_mib']:.0f} | {r['rss_mib'] / 100:.2f} |")


if __name__ == "__main__":
    sys.exit(main())
