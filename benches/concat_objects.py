"""Issue 22: peak RSS of a `--concat` of many NPY objects read by ranges (moto on 127.0.0.1).
Every input stays open until the end of a combination; each object read by ranges keeps its
windows and cache. With `--conv` and `--base` two builds are run alternately on the same
objects: the figure is the ratio of their peak RSS (and the output's digest must agree).

    python/.venv/bin/python benches/concat_objects.py [--dir /work/bench] [--runs 3] \
        [--inputs 31] [--mib 16] [--conv BIN] [--base BIN]

BIN is a `tet-convert` or a `tet` binary (`tet` is given `convert`). Needs moto[server]
(.ci/s3-setup) and numpy.
"""
import hashlib
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

a = harness.args(extra=[("--inputs", {"type": int, "default": 31}),
                        ("--mib", {"type": int, "default": 16}),
                        ("--conv", {"default": harness.CONV}),
                        ("--base", {"default": None})])
import numpy as np  # noqa: E402


def command(binary):
    sub = " convert" if os.path.basename(binary) == "tet" else ""
    return f"{harness.ENV} {binary}{sub}"


with harness.moto_server():
    import boto3
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="inbox")
    os.makedirs(a.dir, exist_ok=True)
    rows = a.mib * (1 << 20) // (8 * 1024)
    urls = []
    for i in range(a.inputs):
        path = os.path.join(a.dir, f"concat_part_{i}.npy")
        np.save(path, np.arange(i * rows * 1024, (i + 1) * rows * 1024, dtype="<f8")
                .reshape(rows, 1024))
        s3.upload_file(path, "inbox", f"c/p{i}/part.npy")
        os.remove(path)
        urls.append(f"s3://inbox/c/p{i}/part.npy")
    out = os.path.join(a.dir, "concat_objects.tet")
    builds = [("head", a.conv)] + ([("base", a.base)] if a.base else [])
    results = {name: {"rss": [], "wall": [], "digest": set()} for name, _ in builds}
    for _ in range(a.runs):
        for name, binary in builds:
            cmd = (f"{command(binary)} --concat dim_0 --chunk-bytes 1MiB -q --force "
                   f"{' '.join(urls)} {out}")
            wall, rss, _cpu = harness.timed(cmd)
            results[name]["rss"].append(rss / 1024)
            results[name]["wall"].append(wall)
            with open(out, "rb") as f:
                body = f.read()
            # The bytes before the footer (history rows carry times): the chunks and index.
            results[name]["digest"].add(hashlib.sha256(body[: len(body) // 2]).hexdigest()[:16])
            os.remove(out)
    print(f"{a.inputs} NPY objects of {a.mib} MiB, --concat dim_0 --chunk-bytes 1MiB, "
          f"{a.runs} runs each, alternating")
    for name, binary in builds:
        r = results[name]
        print(f"  {name:5} {binary}: peak RSS max {max(r['rss']):.0f} MiB "
              f"(runs {', '.join(f'{x:.0f}' for x in r['rss'])}), "
              f"wall median {statistics.median(r['wall']):.1f} s, data digest {sorted(r['digest'])}")
    if a.base:
        ratio = max(results["head"]["rss"]) / max(results["base"]["rss"])
        print(f"  peak RSS head / base: {ratio:.2f}")
