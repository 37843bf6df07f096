#!/usr/bin/env python3
"""Batch runs over many small files: what supervised worker processes cost against the
in-process batch, with a shell loop of cp + sync beside them, in one go so the ratios hold on a
shared, noisy machine. Prints the Markdown tables of BENCHMARKS.md ("Batch runs").

    python3 benches/etl.py [--dir /work/bench/etl] [--runs 3]

Needs a release build (`cargo build --release --bins`), ncgen and GNU time (`bash .ci/setup`).
Inputs are generated on first use:
  npy/   2,000 f32 .npy files of 4 KiB each (a 128-byte header and 992 values), all different
  nc4/   500 netCDF-4 files of about 10 KiB (ncgen -4: two variables, a dimension, attributes)
Every run starts from an empty output folder, after `sync`, with the inputs in the page cache.
tet-convert fsyncs each output and its folder; the cp loop syncs each copy (`sync FILE`).
"""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import CONV, ENV, sh  # noqa: E402

NPY_FILES = 2000
NC_FILES = 500


def make_npy(d):
    os.makedirs(d, exist_ok=True)
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (992,), }"
    pad = 128 - (10 + len(header) + 1)
    head = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header) + pad + 1)
    head += header.encode() + b" " * pad + b"\n"
    for i in range(NPY_FILES):
        body = struct.pack("<992f", *[(i * 992 + k) * 0.25 for k in range(992)])
        with open(os.path.join(d, f"s{i:04d}.npy"), "wb") as f:
            f.write(head + body)


def make_nc(d):
    os.makedirs(d, exist_ok=True)
    for i in range(NC_FILES):
        cdl = os.path.join(d, "x.cdl")
        values = ", ".join(str(i + k * 0.5) for k in range(256))
        with open(cdl, "w") as f:
            f.write(
                "netcdf x {\ndimensions:\n  t = 256 ;\nvariables:\n"
                "  double t(t) ;\n    t:units = \"days since 2000-01-01\" ;\n"
                "  float v(t) ;\n    v:long_name = \"value\" ;\n    v:_FillValue = -1.f ;\n"
                f"// global attributes:\n  :title = \"file {i}\" ;\n"
                f"data:\n  t = {values} ;\n  v = {values} ;\n}}\n"
            )
        sh(f"ncgen -4 -o {d}/n{i:03d}.nc {cdl}")
        os.remove(cdl)


def main():
    a = harness.args("/work/bench/etl", 3)
    d = a.dir
    npy, nc4, out = os.path.join(d, "npy"), os.path.join(d, "nc4"), os.path.join(d, "out")
    if not os.path.isdir(npy):
        make_npy(npy)
    if not os.path.isdir(nc4):
        make_nc(nc4)
    rows = []
    for name, src in [("2,000 NPY of 4 KiB", npy), ("500 netCDF-4 of ~10 KiB", nc4)]:
        prep = harness.prepare(out, src, mkdir=True)
        loop = (f"for f in {src}/*; do cp \"$f\" {out}/ && sync \"{out}/${{f##*/}}\"; done")
        batch = f"{ENV} {CONV} -q {src} --out-dir {out} --jobs 1"
        rows += harness.measure_all([
            (f"{name}: cp + sync loop", loop),
            (f"{name}: in-process batch (--isolation none)", f"{batch} --isolation none"),
            (f"{name}: isolated batch (1 worker, default)", batch),
            (f"{name}: isolated batch, --workers 2", f"{batch} --workers 2"),
        ], prep, a.runs)
        # Re-runs: everything up to date, trusting the stamp, and hashing every input.
        sh(f"{prep} && {batch}")
        rows += harness.measure_all([
            (f"{name}: re-run, all up to date", batch),
            (f"{name}: re-run, all up to date, --rehash", f"{batch} --rehash"),
        ], "sync", a.runs)
    sh(f"rm -rf {out}")
    by = harness.walls(rows)
    harness.print_runs(rows, a.runs)
    comparisons = []
    for name in ["2,000 NPY of 4 KiB", "500 netCDF-4 of ~10 KiB"]:
        iso = by[f"{name}: isolated batch (1 worker, default)"]
        comparisons += [
            (f"{name}: isolated / in-process",
             iso / by[f"{name}: in-process batch (--isolation none)"], "<= 1.3"),
            (f"{name}: isolated / cp + sync loop", iso / by[f"{name}: cp + sync loop"], "-"),
            (f"{name}: --workers 2 / 1 worker",
             by[f"{name}: isolated batch, --workers 2"] / iso, "-"),
        ]
    harness.print_comparisons(comparisons)


if __name__ == "__main__":
    sys.exit(main())
