#!/usr/bin/env python3
"""Issue 24: `tet-convert --concat time` of a month of daily netCDF-4 files against converting
the 31 files one by one and against NCO's `ncrcat` + `sync` on the same inputs, in one go so the
ratios hold on a shared, noisy machine. Prints a Markdown table (BENCHMARKS.md "Issue 24").

    python/.venv/bin/python benches/concat.py [--dir /work/bench] [--runs 3]

Needs a release build (`cargo build --release -p tet-cli --bins`), NCO and GNU time
(`bash .ci/setup` installs them) and numpy + xarray + netCDF4 in the Python that runs it (the
package's virtual environment has them). The inputs are made on first use, by xarray as a
model's daily output is: day01.nc … day31.nc in `DIR/concat/`, each 24 hourly steps of `t2m`
(f32, 181 × 360, zlib level 1, chunks 1 × 181 × 360) and `tp` (i16 packed with scale_factor,
same chunks), CF time in hours since the month's start, lat/lon coordinates, `orography` (no
time dimension).
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import CONV, ENV  # noqa: E402

DAYS = 31
NLAT, NLON, STEPS = 181, 360, 24


def inputs(d):
    """The 31 daily files in `d`, written by xarray unless present."""
    names = [os.path.join(d, f"day{k:02}.nc") for k in range(1, DAYS + 1)]
    if all(os.path.exists(n) for n in names):
        return names
    import numpy as np
    import xarray as xr

    lat = np.linspace(90, -90, NLAT, dtype="f4")
    lon = np.arange(NLON, dtype="f4")
    oro = (np.cos(np.deg2rad(lat))[:, None] * np.sin(np.deg2rad(lon))[None, :] * 3000).astype("f4")
    for k, name in enumerate(names):
        rng = np.random.default_rng(k)
        hours = np.arange(STEPS * k, STEPS * (k + 1), dtype="f8")
        field = 280 + 20 * np.cos(np.deg2rad(lat))[None, :, None] + rng.normal(0, 1, (STEPS, NLAT, NLON))
        ds = xr.Dataset(
            {
                "t2m": (("time", "lat", "lon"), field.astype("f4"), {"units": "K"}),
                "tp": (("time", "lat", "lon"),
                       rng.integers(0, 5000, (STEPS, NLAT, NLON)).astype("i2"),
                       {"units": "m", "scale_factor": 1e-4, "add_offset": 0.0}),
                "orography": (("lat", "lon"), oro, {"units": "m"}),
            },
            coords={
                "time": ("time", hours, {"units": "hours since 2024-01-01 00:00:00",
                                         "calendar": "standard"}),
                "lat": ("lat", lat, {"units": "degrees_north"}),
                "lon": ("lon", lon, {"units": "degrees_east"}),
            },
        )
        chunks = (1, NLAT, NLON)
        enc = {
            "t2m": {"zlib": True, "complevel": 1, "chunksizes": chunks},
            "tp": {"zlib": True, "complevel": 1, "chunksizes": chunks},
        }
        ds.to_netcdf(name, format="NETCDF4", encoding=enc, unlimited_dims=["time"])
    return names


def main():
    a = harness.args(runs=3)
    d = os.path.join(a.dir, "concat")
    os.makedirs(d, exist_ok=True)
    days = inputs(d)
    listed = " ".join(days)
    prep = harness.prepare(f"{d}/out.* {d}/one", *days)
    cases = [
        ("tet-convert --concat time (31 inputs, one output)",
         f"{ENV} {CONV} -q --jobs 2 --concat time {listed} {d}/out.month.tet"),
        ("tet-convert one by one (31 outputs, --isolation none)",
         f"mkdir -p {d}/one && {ENV} {CONV} -q --jobs 2 --isolation none {listed} --out-dir {d}/one"),
        ("ncrcat + sync (31 inputs, one output)",
         f"ncrcat -O -h {listed} {d}/out.month.nc && sync"),
    ]
    rows = []
    # Interleaved rounds, so drift of the shared machine hits every command alike.
    runs = {name: ([], []) for name, _ in cases}
    for _ in range(a.runs):
        for name, cmd in cases:
            harness.sh(prep)
            w, rss, _cpu = harness.timed(cmd)
            runs[name][0].append(w)
            runs[name][1].append(rss)
    for name, cmd in cases:
        walls, rss = runs[name]
        rows.append({"name": name, "cmd": cmd, "wall": statistics.median(walls),
                     "walls": walls, "rss_mib": max(rss) / 1024})
    month = rows[0]["wall"]
    size_in = sum(os.path.getsize(x) for x in days)
    print(f"31 inputs, {size_in / 2**20:.1f} MiB on disk; {a.runs} interleaved runs, medians\n")
    print("| run | wall (s), each run | median | peak RSS (MiB) | combine ÷ this |")
    print("|---|---|---|---|---|")
    for r in rows:
        each = ", ".join(f"{w:.2f}" for w in r["walls"])
        print(f"| {r['name']} | {each} | {r['wall']:.2f} | {r['rss_mib']:.0f} | "
              f"{month / r['wall']:.2f} |")
    print()
    for r in rows:
        print(f"- {r['name']}: `{r['cmd'].replace(d, '$DIR')}`")


if __name__ == "__main__":
    main()
