#!/usr/bin/env bash
# A short second run on the lent machine (issue 25), after benches/device.sh: peak RSS and wall of
# 2 GiB NPY → zstd:3 at --jobs 8/16/64 beside zstd -T16 -3 + sync, with the output digest of each
# run (the memory budget now covers the whole process); the 2-CPU raw pair (1 GiB → --codec raw
# beside cp + sync, taskset -c 0,1) three times; the 20,000-file batch in process
# (--isolation none --jobs 16, a thread pool per file before) beside cp -r + sync, twice; --jobs 1
# beside zstd -T1 -3 once more. Needs the same bundle (target/device-bundle); results in
# $OUT/recheck.txt. About 2 minutes on 16 cores.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${TET_BUNDLE:-$ROOT/target/device-bundle}
OUT=${OUT:-$ROOT/device-out}
W=${TET_BENCH_DIR:-$ROOT/target/device-work}
mkdir -p "$OUT" "$W"
export SOURCE_DATE_EPOCH=1700000000
T=$B/bin/timeit
C=$B/bin/tet-convert
"$C" --version >/dev/null 2>&1 || C="env LD_LIBRARY_PATH=$B/lib $C"
Z="env LD_LIBRARY_PATH=$B/lib $B/bin/zstd"
$Z -V >/dev/null 2>&1 || Z=zstd
R=$OUT/recheck.txt
{
    echo "# wall user sys maxrss_kib rc [output sha256]"
    head -1 "$B/COMMIT"
    nproc
} >"$R"
A=$W/f32_${TET_PLANES:-512}.npy
[ -f "$A" ] || "$B/bin/gen_npy" "$A" "${TET_PLANES:-512}" 1024 1024
P=$W/f32_${TET_PLANES2:-256}.npy
[ -f "$P" ] || "$B/bin/gen_npy" "$P" "${TET_PLANES2:-256}" 1024 1024
prep() { rm -f "$W"/o.*; sync; cat "$1" >/dev/null; }
for r in 1 2; do
    for j in 16 64 8; do
        prep "$A"
        line=$("$T" "$C -q --codec zstd:3 --jobs $j $A $W/o.tet")
        echo "r$r tet-convert zstd:3 --jobs $j: $line $(sha256sum "$W/o.tet" | cut -c1-16)" >>"$R"
    done
    prep "$A"
    echo "r$r zstd -T16 -3 + sync: $("$T" "$Z -q -T16 -3 -f $A -o $W/o.zst && sync")" >>"$R"
done
for r in 1 2 3; do
    prep "$P"
    echo "r$r 2 CPUs cp + sync: $("$T" "taskset -c 0,1 cp $P $W/o.copy && sync")" >>"$R"
    prep "$P"
    echo "r$r 2 CPUs raw: $("$T" "taskset -c 0,1 $C -q --codec raw $P $W/o.raw.tet")" >>"$R"
done
S=$W/small
[ -d "$S" ] || "$B/bin/gen_small" "$S" "${TET_NFILES:-20000}"
for r in 1 2; do
    rm -rf "$W/so" && mkdir -p "$W/so" && sync && find "$S" -type f -exec cat {} + >/dev/null
    echo "r$r batch --isolation none --jobs 16: $("$T" "$C -q $S --out-dir $W/so \
        --isolation none --jobs 16")" >>"$R"
    rm -rf "$W/so" && mkdir -p "$W/so" && sync
    echo "r$r batch cp -r + sync: $("$T" "cp -r $S/. $W/so/ && sync")" >>"$R"
done
rm -rf "$W/so"
prep "$A"
echo "zstd -T1 -3 + sync: $("$T" "$Z -q -T1 -3 -f $A -o $W/o.zst && sync")" >>"$R"
prep "$A"
echo "tet-convert zstd:3 --jobs 1: $("$T" "$C -q --codec zstd:3 --jobs 1 $A $W/o.tet")" >>"$R"
rm -f "$W"/o.*
cat "$R"
