#!/usr/bin/env python3
"""Tensogram → .tet peak memory on files of many 100 MiB messages: peak RSS should stay near one
message (it must not grow with the number of messages). Prints the Markdown table of
BENCHMARKS.md ("Tensogram").

    python3 benches/tensogram.py [--dir /work/bench] [--runs 1]

Needs `cargo build --release --bins -p tet-cli` and `cargo build --release -p tet-tensogram --example
gen_tgm`, and GNU time. Inputs (generated on first use): f32 objects of 100 MiB, one per message,
zstd level 1 or uncompressed, 4 and 16 messages.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import CONV, ENV, REL, sh  # noqa: E402


def main():
    a = harness.args(runs=1)
    d = a.dir
    rows = []
    for comp in ["zstd", "none"]:
        for n in [4, 16]:
            f = os.path.join(d, f"tgm_{comp}_{n}.tgm")
            harness.make(f, f"{REL}/examples/gen_tgm {f} {n} 100 {comp}")
            size = os.path.getsize(f) / 2**20
            rows += harness.measure_all(
                [(f"{n} × 100 MiB, {comp}, --jobs {jobs} ({size:.0f} MiB file)",
                  f"{ENV} {CONV} -q --jobs {jobs} {f} {d}/out.tgm.tet") for jobs in [1, 2]],
                harness.prepare(f"{d}/out.*"), a.runs)
    sh(f"rm -f {d}/out.*")
    print("| input | wall s | peak RSS MiB | RSS / message |")
    print("|---|---:|---:|---:|")
    for r in rows:
        print(f"| {r['name']} | {r['wall']:.2f} | {r['rss_mib']:.0f} | {r['rss_mib'] / 100:.2f} |")


if __name__ == "__main__":
    sys.exit(main())
