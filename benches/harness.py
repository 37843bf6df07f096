"""The machinery every benchmark script in this folder shares: where the release binaries are, the
command line (`--dir`, `--runs`), inputs made on first use, preparing each run (outputs removed,
`sync`, inputs in the page cache), timing a shell command with GNU time (wall seconds, peak RSS,
CPU seconds), the median of N runs, a local S3 server (moto), and the Markdown tables the scripts
print. Each script keeps
only what it measures and imports this module from its own folder:

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import harness  # noqa: E402
"""
import argparse
import contextlib
import os
import socket
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REL = os.path.join(ROOT, "target", "release")
CONV = os.path.join(REL, "tet-convert")
TET = os.path.join(REL, "tet")
# Every tet-convert run is given a fixed timestamp, so its output does not depend on the clock.
ENV = "SOURCE_DATE_EPOCH=1700000000"


def args(dir="/work/bench", runs=3, extra=()):
    """The parsed command line: `--dir` (created if missing), `--runs`, then each (flag, keywords)
    of `extra` as given to `add_argument`."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=dir)
    ap.add_argument("--runs", type=int, default=runs)
    for flag, kw in extra:
        ap.add_argument(flag, **kw)
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    return a


@contextlib.contextmanager
def moto_server():
    """A moto S3 server on a free port of 127.0.0.1 for the `with` block: the test credentials,
    region, endpoint and plain HTTP are set in this process's environment (what tet-convert and
    boto3 read), the server is up before the block starts and killed after it."""
    port = socket.socket()
    port.bind(("127.0.0.1", 0))
    number = port.getsockname()[1]
    port.close()
    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench",
                      AWS_REGION="us-east-1", AWS_ENDPOINT_URL=f"http://127.0.0.1:{number}",
                      AWS_ALLOW_HTTP="true")
    moto = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                             str(number)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", number), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        yield
    finally:
        moto.kill()


def sh(cmd):
    subprocess.run(cmd, shell=True, check=True)


def make(path, cmd):
    """`path`, made by the shell command `cmd` unless it exists already."""
    if not os.path.exists(path):
        sh(cmd)
    return path


def npy(d, planes=256, name="f32_1g.npy"):
    """The f32 (planes, 1024, 1024) .npy input of benches/gen_npy.rs in `d` (256 planes: 1 GiB)."""
    path = os.path.join(d, name)
    return make(path, f"{REL}/examples/gen_npy {path} {planes} 1024 1024")


def nc4(d, chunked=None):
    """The netCDF-4 inputs made from gen_nc's 1 GiB f32 t(time=256, y=1024, x=1024) in `d`:
    `nc4_contig.nc` (contiguous), or with `chunked` the file `nc4_<chunked>.nc` that nccopy makes
    from it, chunks (1, 1024, 1024): "z1" zlib level 1, "z1s" shuffle + zlib level 1."""
    contig = make(os.path.join(d, "nc4_contig.nc"),
                  f"{REL}/examples/gen_nc {d}/nc4_contig.nc 256 1024 1024")
    if chunked is None:
        return contig
    flags = {"z1": "-d 1", "z1s": "-d 1 -s"}[chunked]
    path = os.path.join(d, f"nc4_{chunked}.nc")
    return make(path, f"nccopy {flags} -c time/1,y/1024,x/1024 {contig} {path}")


def prepare(remove, *warm, mkdir=False):
    """The shell command run before each timed run: `remove` (paths or globs; none if empty)
    deleted, recreated as a folder with `mkdir`, then `sync`, then every file of `warm` (files or
    folders) read so it is in the page cache."""
    steps = []
    if remove:
        steps.append(f"rm -rf {remove}")
        if mkdir:
            steps.append(f"mkdir -p {remove}")
        steps.append("sync")
    files = [w for w in warm if not os.path.isdir(w)]
    if files:
        steps.append(f"cat {' '.join(files)} > /dev/null")
    for w in warm:
        if os.path.isdir(w):
            steps.append(f"find {w} -type f -exec cat {{}} + > /dev/null")
    return " && ".join(steps)


def timed(cmd):
    """Wall seconds, peak RSS (KiB) and CPU seconds (user + system) of a shell command, via GNU
    time."""
    out = subprocess.run(
        ["/usr/bin/time", "-f", "%e %M %U %S", "bash", "-c", cmd],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, check=True,
    )
    wall, rss, user, system = out.stderr.strip().splitlines()[-1].split()
    return float(wall), int(rss), float(user) + float(system)


def measure(name, cmd, prepare, runs):
    """`runs` runs of `cmd`, each after `prepare`: median wall seconds, maximum peak RSS."""
    walls, rss = [], []
    for _ in range(runs):
        sh(prepare)
        w, m, _cpu = timed(cmd)
        walls.append(w)
        rss.append(m)
    return {"name": name, "cmd": cmd, "wall": statistics.median(walls), "rss_mib": max(rss) / 1024}


def measure_all(cases, prepare, runs):
    """`measure` of each (name, cmd) of `cases`, all with the same `prepare`."""
    return [measure(name, cmd, prepare, runs) for name, cmd in cases]


def with_without(name, cmd_with, cmd_without, prepare, runs):
    """`runs` rounds of the two commands, each after `prepare`, alternating which goes first so
    drift of the machine hits both alike: median wall and CPU seconds of each, and their ratios
    (with / without)."""
    res = {"with": ([], []), "without": ([], [])}
    for i in range(runs):
        order = [("with", cmd_with), ("without", cmd_without)]
        if i % 2:
            order.reverse()
        for key, cmd in order:
            sh(prepare)
            w, _rss, c = timed(cmd)
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


def by_name(rows):
    return {r["name"]: r for r in rows}


def walls(rows):
    """Median wall seconds by run name."""
    return {r["name"]: r["wall"] for r in rows}


def peak_rss(rows, *prefixes):
    """The largest peak RSS (MiB) of the rows whose name starts with one of `prefixes`."""
    return max(r["rss_mib"] for r in rows if r["name"].startswith(prefixes))


def print_runs(rows, runs):
    """The table of runs: name, median wall seconds, peak RSS."""
    print("| run | wall s (median of %d) | peak RSS MiB |" % runs)
    print("|---|---:|---:|")
    for r in rows:
        print(f"| {r['name']} | {r['wall']:.2f} | {r['rss_mib']:.0f} |")
    print()


def print_comparisons(rows, head="ratio"):
    """The table of comparisons: each (what, value, target) of `rows`; a number value is printed
    with two decimals, anything else as it is."""
    print(f"| comparison | {head} | target |")
    print("|---|---:|---|")
    for what, value, target in rows:
        if isinstance(value, (int, float)):
            value = f"{value:.2f}"
        print(f"| {what} | {value} | {target} |")
