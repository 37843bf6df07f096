#!/usr/bin/env bash
# Issue 34, acceptance 3: a batch of many small files against a plain copy, in the same run.
# 3,000 NPY files of 4 KiB (gen_small) in 30 folders → `tet-convert DIR --out-dir OUT --workers 2`
# (default isolation: supervised worker processes) beside `cp -r DIR/. OUT/ && sync`. Each round
# runs both, the order alternating; before each command the output is removed, everything synced
# and the inputs read into the page cache. Prints every time and the median of the per-round
# ratios (tet-convert / cp).
#
#     cargo build --release --bin tet-convert --example gen_small
#     bash benches/small_files.sh            # ROUNDS=7 NFILES=3000 FOLDERS=30 WORKERS=2
#
# Settings (environment): TET_BIN (target/release/tet-convert), GEN (target/release/examples/
# gen_small), BENCH_DIR (target/small-files-bench: put it on the disk you care about), ROUNDS,
# NFILES, FOLDERS, WORKERS, EXTRA (more tet-convert options, e.g. "--isolation none");
# TET_GROUP_SYNC=files (exported) makes the supervisor fsync each file instead of one syncfs.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${TET_BIN:-$ROOT/target/release/tet-convert}
GEN=${GEN:-$ROOT/target/release/examples/gen_small}
W=${BENCH_DIR:-$ROOT/target/small-files-bench}
ROUNDS=${ROUNDS:-7}
NFILES=${NFILES:-3000}
FOLDERS=${FOLDERS:-30}
WORKERS=${WORKERS:-2}
EXTRA=${EXTRA:-}
IN=$W/in_${NFILES}_${FOLDERS}
OUTD=$W/out
mkdir -p "$W"
[ -d "$IN" ] || "$GEN" "$IN" "$NFILES" "$FOLDERS"
export SOURCE_DATE_EPOCH=1700000000

now() { date +%s.%N; }
prep() {
    rm -rf "$OUTD"
    mkdir -p "$OUTD"
    sync
    find "$IN" -type f -exec cat {} + >/dev/null
}
# Seconds a command takes (its output discarded; a failure stops the script).
timed() {
    prep
    local t0 t1
    t0=$(now)
    sh -c "$1" >/dev/null
    t1=$(now)
    echo "$t1 - $t0" | bc -l
}
CP="cp -r $IN/. $OUTD/ && sync"
TET="$BIN -q $IN --out-dir $OUTD --workers $WORKERS $EXTRA"
echo "# $(date -u +%FT%TZ) $(uname -n) nproc=$(nproc) load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# files: $NFILES x 4 KiB in $FOLDERS folders; disk: $(df -hT "$W" | tail -1)"
echo "# cp:  $CP"
echo "# tet: $TET"
ratios=()
for r in $(seq 1 "$ROUNDS"); do
    if [ $((r % 2)) -eq 1 ]; then
        c=$(timed "$CP")
        t=$(timed "$TET")
        n=$(find "$OUTD" -name '*.tet' | wc -l)
    else
        t=$(timed "$TET")
        n=$(find "$OUTD" -name '*.tet' | wc -l)
        c=$(timed "$CP")
    fi
    [ "$n" -eq "$NFILES" ] || { echo "only $n outputs" >&2; exit 1; }
    ratio=$(echo "$t / $c" | bc -l)
    ratios+=("$ratio")
    printf 'round %d: cp+sync %.3f s  tet-convert %.3f s  ratio %.2f\n' "$r" "$c" "$t" "$ratio"
done
med=$(printf '%s\n' "${ratios[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
printf 'median ratio (tet-convert / cp -r + sync) over %d rounds: %.2f\n' "$ROUNDS" "$med"
rm -rf "$OUTD"
