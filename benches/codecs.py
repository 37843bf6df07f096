#!/usr/bin/env python3
"""Extension codecs (issue 34, "Size"): how big a `.tet` is beside the netCDF-4 file it replaces,
for every `--codec` choice, with encode time beside `nccopy -d1 -s`, decode throughput, and the
size of a Zarr store (Blosc zstd + shuffle) of the same values. Prints the Markdown tables of
BENCHMARKS.md ("Extension codecs").

    python/.venv/bin/python benches/codecs.py [--dir /work/bench/codecs] [--runs 3]

Needs the release binaries (`cargo build --release --bin tet-convert --bin tet`), nccopy
(`bash .ci/setup`), GNU time, and numpy, netCDF4 and zarr (python/.venv: `bash .ci/python-setup`).
Inputs, made on first use (deterministic, seed 34):

  field_z1s.nc   f32 t(time=96, lat=361, lon=720), 95 MiB of values: a smooth field (250–300 K,
                 large-scale waves moving with time) plus Gaussian noise of σ = 0.01 K, chunked by
                 time step (1, 361, 720), zlib level 1 + shuffle, written by netCDF4-python.
  packed_z1s.nc  the same values CF-packed into i16 (scale_factor 0.01, add_offset 275: the form
                 ERA5's netCDF files take), the same chunks and filters: a real integer field.
  field_nccopy.nc  `nccopy -d1 -s` of field_z1s.nc (timed: the encode-time comparison).

Then the public corpus's netCDF and HDF5 files (../shared/corpus/public/{netcdf,hdf5}), in total,
with each codec (files a codec cannot convert are listed and left out of both totals).
"""
import glob
import os
import shutil
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import CONV, ENV, TET, sh  # noqa: E402

CODECS = [
    "auto", "zstd:3", "zstd:19", "zstd-shuffle:3", "zstd-bitshuffle:3", "zstd-delta:3",
    "zstd-delta-bitshuffle:3", "smallest+ext:3",
]
CORPUS = os.path.join(harness.ROOT, "..", "shared", "corpus", "public")
SHAPE = (96, 361, 720)


def field():
    """The smooth f32 field plus 0.01 K noise (deterministic)."""
    import numpy as np

    rng = np.random.default_rng(34)
    t, lat, lon = SHAPE
    la = np.linspace(-90, 90, lat)[:, None]
    lo = np.linspace(0, 360, lon, endpoint=False)[None, :]
    out = np.empty(SHAPE, dtype=np.float32)
    for i in range(t):
        base = (275 + 25 * np.cos(np.radians(la))
                + 4 * np.sin(np.radians(3 * lo + 4 * i)) * np.cos(np.radians(2 * la))
                + 2 * np.cos(np.radians(5 * lo - 3 * i + la)))
        out[i] = base + rng.normal(0, 0.01, (lat, lon))
    return out


def make_inputs(d):
    import netCDF4
    import numpy as np

    f32, i16 = os.path.join(d, "field_z1s.nc"), os.path.join(d, "packed_z1s.nc")
    if os.path.exists(f32) and os.path.exists(i16):
        return f32, i16
    v = field()
    for path, packed in ((f32, False), (i16, True)):
        with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
            for name, n in zip(("time", "lat", "lon"), SHAPE):
                nc.createDimension(name, n)
            dt = "i2" if packed else "f4"
            var = nc.createVariable("t", dt, ("time", "lat", "lon"), zlib=True, complevel=1,
                                    shuffle=True, chunksizes=(1, SHAPE[1], SHAPE[2]))
            var.units = "K"
            if packed:
                var.scale_factor = np.float32(0.01)
                var.add_offset = np.float32(275.0)
            var[:] = v
    return f32, i16


def zarr_size(d, src):
    """Bytes of a Zarr v2 store of the same values, Blosc zstd level 3 + byte shuffle (Zarr's
    default compressor family), chunks (1, 361, 720)."""
    import netCDF4
    import numcodecs
    import zarr

    out = os.path.join(d, "out.zarr")
    shutil.rmtree(out, ignore_errors=True)
    with netCDF4.Dataset(src) as nc:
        nc.set_auto_maskandscale(False)
        values = nc["t"][:]
    comp = numcodecs.Blosc(cname="zstd", clevel=3, shuffle=numcodecs.Blosc.SHUFFLE)
    try:
        z = zarr.open_array(out, mode="w", shape=values.shape, dtype=values.dtype,
                            chunks=(1,) + values.shape[1:], compressor=comp, zarr_format=2)
    except TypeError:  # zarr 2
        z = zarr.open_array(out, mode="w", shape=values.shape, dtype=values.dtype,
                            chunks=(1,) + values.shape[1:], compressor=comp)
    z[:] = values
    size = sum(os.path.getsize(p) for p in glob.glob(f"{out}/**", recursive=True)
               if os.path.isfile(p))
    shutil.rmtree(out, ignore_errors=True)
    return size


def field_table(d, name, src, runs):
    """Rows of one field: the source, nccopy -d1 -s, Zarr, and every codec."""
    src_size = os.path.getsize(src)
    raw = 1
    for n in SHAPE:
        raw *= n
    raw *= 2 if "packed" in name else 4
    prep = harness.prepare(f"{d}/out.*", src)
    nccopy = f"nccopy -d1 -s {src} {d}/out.nccopy.nc && sync"
    ncw = []
    for _ in range(runs):
        sh(prep)
        ncw.append(harness.timed(nccopy)[0])
    nc_wall = statistics.median(ncw)
    rows = [(f"source (netCDF4-python zlib 1 + shuffle)", src_size, None, None),
            ("nccopy -d1 -s", os.path.getsize(f"{d}/out.nccopy.nc"), nc_wall, None),
            ("Zarr v2, Blosc zstd:3 + shuffle", zarr_size(d, src), None, None)]
    for codec in CODECS:
        out = f"{d}/out.tet"
        enc, dec = [], []
        for _ in range(runs):
            sh(prep)
            enc.append(harness.timed(f"{ENV} {CONV} -q --codec {codec} {src} {out}")[0])
            sh(f"rm -f {d}/out.npy && cat {out} > /dev/null")
            dec.append(harness.timed(f"{TET} export -q {out} {d}/out.npy")[0])
        rows.append((f"tet-convert --codec {codec}", os.path.getsize(out),
                     statistics.median(enc), statistics.median(dec)))
        print(f"  {name} {codec}: {rows[-1]}", file=sys.stderr)
    sh(f"rm -f {d}/out.*")
    print(f"\n### {name}: {os.path.basename(src)}, {raw:,} bytes of values, "
          f"{src_size:,} bytes\n")
    print("| file | bytes | / source | encode s | / nccopy -d1 -s | decode MB/s (tet export → .npy) |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, size, wall, dwall in rows:
        e = f"{wall:.2f}" if wall is not None else "–"
        r = f"{wall / nc_wall:.2f}" if wall is not None else "–"
        t = f"{raw / dwall / 1e6:.0f}" if dwall else "–"
        print(f"| {label} | {size:,} | {size / src_size:.3f} | {e} | {r} | {t} |")


def corpus_table(d):
    """The public corpus's netCDF and HDF5 files in total, per codec."""
    files = sorted(p for p in glob.glob(f"{CORPUS}/netcdf/*") + glob.glob(f"{CORPUS}/hdf5/*")
                   if not p.endswith(".json"))
    sizes = {c: {} for c in CODECS}
    failed = {}
    for c in CODECS:
        for f in files:
            out = f"{d}/corpus.tet"
            rc = os.system(f"{ENV} {CONV} -q --skip-unsupported --codec {c} {f} {out} "
                           f"> /dev/null 2>&1")
            if rc == 0:
                sizes[c][f] = os.path.getsize(out)
            else:
                failed.setdefault(os.path.basename(f), []).append(c)
            sh(f"rm -f {out}")
    ok = [f for f in files if all(f in sizes[c] for c in CODECS)]
    total = sum(os.path.getsize(f) for f in ok)
    print(f"\n### Public corpus: {len(ok)} netCDF and HDF5 files, {total:,} bytes\n")
    print("| codec | .tet bytes in total | / sources |")
    print("|---|---:|---:|")
    for c in CODECS:
        s = sum(sizes[c][f] for f in ok)
        print(f"| {c} | {s:,} | {s / total:.3f} |")
    if failed:
        print("\nNot converted (left out): " + ", ".join(f"{k} ({', '.join(v)})"
                                                     for k, v in sorted(failed.items())))


def main():
    global CONV, TET
    a = harness.args(dir="/work/bench/codecs", runs=3, extra=[
        ("--bin", {"default": harness.REL,
                   "help": "folder of tet-convert and tet (sizes only mean anything elsewhere)"})])
    CONV, TET = os.path.join(a.bin, "tet-convert"), os.path.join(a.bin, "tet")
    f32, i16 = make_inputs(a.dir)
    field_table(a.dir, "f32 field", f32, a.runs)
    field_table(a.dir, "i16 packed field", i16, a.runs)
    corpus_table(a.dir)


if __name__ == "__main__":
    main()
