"""Issue 22: a 1 GiB NPY object converted to a .tet object on a local S3 server (moto on
127.0.0.1), against downloading and uploading the same bytes with boto3 (the standard client) in
the same run; peak RSS of tet-convert and the largest input spool seen while the NPY object
converts (none: it is read by ranges); the largest spool folder seen while a 1 GiB NetCDF-4
object converts (polled every 50 ms).

    python/.venv/bin/python benches/object_store.py [--dir /work/bench] [--runs 3]

Needs target/release/tet-convert (cargo build --release) and moto[server] (.ci/s3-setup). With
--nc also a 1 GiB netCDF-4 object (made with netCDF4-python on first use; needs the netcdf
feature, on by default).
"""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

a = harness.args(extra=[("--nc", {"action": "store_true", "help": "also the NetCDF-4 spool"}),
                        ("--plain-only", {"action": "store_true",
                                          "help": "only against boto3 without checksums"}),
                        ("--nc-only", {"action": "store_true",
                                       "help": "only the NetCDF-4 object (implies --nc)"})])
with harness.moto_server():
    import boto3
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="inbox")
    s3.create_bucket(Bucket="outbox")
    if not a.nc_only:
        big = harness.npy(a.dir)
        s3.upload_file(big, "inbox", "big.npy")
    spool = os.path.join(a.dir, "s3spool")
    os.makedirs(spool, exist_ok=True)
    copy = os.path.join(a.dir, "s3copy.npy")
    py = sys.executable
    boto = (f"{py} -c \"import boto3; c = boto3.client('s3'); "
            f"c.download_file('inbox', 'big.npy', '{copy}'); "
            f"c.upload_file('{copy}', 'outbox', 'copy.npy')\" && rm -f {copy}")
    tet = (f"{harness.ENV} {harness.CONV} s3://inbox/big.npy s3://outbox/big.tet "
           f"--spool-dir {spool} --force -q")
    # boto3 >= 1.36 adds CRC32 checksums to every request by default, which moto verifies in
    # Python; the same transfer with checksums only where required, for a fairer baseline.
    boto_plain = (f"{py} -c \"import boto3, botocore.config as bc; c = boto3.client('s3', "
                  f"config=bc.Config(request_checksum_calculation='when_required', "
                  f"response_checksum_validation='when_required')); "
                  f"c.download_file('inbox', 'big.npy', '{copy}'); "
                  f"c.upload_file('{copy}', 'outbox', 'copy.npy')\" && rm -f {copy}")
    if a.plain_only:
        plain = harness.with_without("tet vs boto3 without default checksums", tet, boto_plain,
                                     "sync", a.runs)
        print(f"| boto3, checksums when required | {plain['without'][0]:.2f} | "
              f"{plain['without'][1]:.2f} |")
        print(f"| tet-convert (same rounds) | {plain['with'][0]:.2f} | {plain['with'][1]:.2f} |")
        print(f"ratio {plain['wall_ratio']:.2f}")
        sys.exit(0)
    def spool_peaks(run):
        """Runs `run()` while polling the spool folder every 50 ms: the peak bytes of the
        input's spool and of the staged output (the .tet, and the writer's temporary file
        `.NAME.tet.XXXXXX.tet-convert.tmp` before it)."""
        peak = {"input": 0, "output": 0}
        done = threading.Event()

        def poll():
            while not done.is_set():
                seen = {"input": 0, "output": 0}
                for root, _, files in os.walk(spool):
                    for f in files:
                        try:
                            n = os.path.getsize(os.path.join(root, f))
                        except OSError:
                            continue
                        # The staged output, and the writer's temporary file before it.
                        out = f.endswith((".tet", ".tet-convert.tmp"))
                        seen["output" if out else "input"] += n
                for k in seen:
                    peak[k] = max(peak[k], seen[k])
                time.sleep(0.05)
        t = threading.Thread(target=poll)
        t.start()
        try:
            out = run()
        finally:
            done.set()
            t.join()
        return out, peak

    rows = []
    if not a.nc_only:
        cmp = harness.with_without("1 GiB NPY object -> .tet object vs boto3 download + upload",
                                   tet, boto, "sync", a.runs)
        rss, npy_peak = spool_peaks(
            lambda: harness.measure("tet-convert s3 -> s3", tet, "sync", 1))
        print("| run | wall s (median of %d) | CPU s |" % a.runs)
        print("|---|---:|---:|")
        print(f"| tet-convert s3://inbox/big.npy s3://outbox/big.tet | {cmp['with'][0]:.2f} | "
              f"{cmp['with'][1]:.2f} |")
        print(f"| boto3 download_file + upload_file | {cmp['without'][0]:.2f} | "
              f"{cmp['without'][1]:.2f} |")
        print()
        rows = [("tet-convert / boto3 (wall)", cmp["wall_ratio"], "<= 1.3"),
                ("tet-convert peak RSS MiB", rss["rss_mib"], "<= 256"),
                ("NPY object: input spool peak bytes (read by ranges)", npy_peak["input"], "0")]
    if a.nc or a.nc_only:
        nc = os.path.join(a.dir, "s3_nc4_1g.nc")
        if not os.path.exists(nc):
            # A 1 GiB netCDF-4 file: f32 t(time=256, y=1024, x=1024), contiguous.
            import netCDF4
            import numpy as np
            with netCDF4.Dataset(nc, "w", format="NETCDF4") as ds:
                for name, n in (("time", 256), ("y", 1024), ("x", 1024)):
                    ds.createDimension(name, n)
                v = ds.createVariable("t", "f4", ("time", "y", "x"), contiguous=True)
                plane = np.arange(1024 * 1024, dtype="f4").reshape(1024, 1024)
                for i in range(256):
                    v[i] = plane + i
        s3.upload_file(nc, "inbox", "big.nc")
        # Peak bytes of the input's spool (the downloaded .nc) and of the staged output (.tet).
        # Against the same object downloaded and uploaded by boto3, after a `sync` each.
        copy_nc = os.path.join(a.dir, "s3copy.nc")
        boto_nc = (f"{py} -c \"import boto3; c = boto3.client('s3'); "
                   f"c.download_file('inbox', 'big.nc', '{copy_nc}'); "
                   f"c.upload_file('{copy_nc}', 'outbox', 'copy.nc')\" && rm -f {copy_nc}")
        harness.sh("sync")
        (nc_wall, nc_rss, nc_cpu), peak = spool_peaks(lambda: harness.timed(
            f"{harness.ENV} {harness.CONV} s3://inbox/big.nc s3://outbox/big_nc.tet "
            f"--spool-dir {spool} --force -q"))
        harness.sh("sync")
        b_wall, _b_rss, b_cpu = harness.timed(boto_nc)
        size = os.path.getsize(nc)
        print("| run | wall s | CPU s |")
        print("|---|---:|---:|")
        print(f"| tet-convert s3://inbox/big.nc s3://outbox/big_nc.tet | {nc_wall:.2f} | "
              f"{nc_cpu:.2f} |")
        print(f"| boto3 download_file + upload_file of big.nc | {b_wall:.2f} | {b_cpu:.2f} |")
        print(f"\ninput {size} bytes; peaks: input spool {peak['input']} bytes, staged output "
              f"{peak['output']} bytes; tet-convert peak RSS {nc_rss / 1024:.0f} MiB\n")
        rows.append(("NetCDF-4 object: tet-convert / boto3 (wall)", nc_wall / b_wall,
                     "(download, convert, upload vs download, upload)"))
        rows.append(("NetCDF-4 object: tet-convert peak RSS MiB", nc_rss / 1024, "<= 256"))
        rows.append(("NetCDF-4 object: input spool peak / input size", peak["input"] / size,
                     "<= 1"))
        rows.append(("NetCDF-4 object: staged output peak / input size", peak["output"] / size,
                     "(the .tet, uploaded after)"))
    harness.print_comparisons(rows)
