#!/bin/bash
# Issue 23 (payload alignment): the writer before (base) and after (new), 1 GiB f32 NPY →
# --codec raw and --codec zstd:3 at --jobs 16/2/1, beside cp + sync and zstd -T<n> -3 + sync, in
# interleaved rounds (the order reversed every other round), on a lent machine with nothing but
# a bundle carried in B (default: this script's folder):
#   B/bin/{tet-convert-new,tet-convert-base,timeit,gen_npy,zstd}, B/lib/ (their shared libraries)
# Built here: `cargo build --release --locked -p tet-cli --no-default-features --bin
# tet-convert --example timeit --example gen_npy` in a `git archive` of each commit (the shared
# target/), binaries stripped, zstd's and libstdc++'s libraries copied (see device-bundle.sh).
# Output: $OUT/results.tsv (name round wall user sys maxrss_kib rc) and $OUT/log.txt (machine,
# input, the sha256 of both builds' outputs). Stops starting measurements after LIMIT seconds.
set -u
B=${B:-$(cd "$(dirname "$0")" && pwd)}
export LD_LIBRARY_PATH=$B/lib SOURCE_DATE_EPOCH=1700000000
OUT=${OUT:-$PWD/b23-out}; W=$PWD/target/b23-work; mkdir -p "$W" "$OUT"
RES=$OUT/results.tsv; LOG=$OUT/log.txt
START=$(date +%s); LIMIT=${LIMIT:-270}
T=$B/bin/timeit; Z=$B/bin/zstd; NEW=$B/bin/tet-convert-new; BASE=$B/bin/tet-convert-base
{ nproc; uptime; df -h "$W" | tail -1; } >>"$LOG"
IN=$W/in.npy
"$T" "$B/bin/gen_npy $IN ${PLANES:-256} 1024 1024" >>"$LOG" 2>&1
ls -l "$IN" >>"$LOG"
# Same bytes from both builds?
for c in "--codec raw" "--codec zstd:3 --jobs 16"; do
  $NEW -q $c "$IN" "$W/id.new.tet"; $BASE -q $c "$IN" "$W/id.base.tet"
  echo "identity $c: $(sha256sum "$W/id.new.tet" | cut -c1-16) $(sha256sum "$W/id.base.tet" | cut -c1-16)" >>"$LOG"
  rm -f "$W"/id.*
done
m() {
  local name=$1 r=$2 cmd=$3
  [ $(( $(date +%s) - START )) -ge "$LIMIT" ] && return 1
  rm -f "$W"/out.*; sync; cat "$IN" >/dev/null
  local line; line=$("$T" "$cmd" 2>>"$LOG")
  printf '%s\t%s\t%s\n' "$name" "$r" "$(echo "$line" | tr ' ' '\t')" >>"$RES"
}
cases=(
  "cp + sync|cp $IN $W/out.copy && sync"
  "new: --codec raw|$NEW -q --codec raw $IN $W/out.tet"
  "base: --codec raw|$BASE -q --codec raw $IN $W/out.tet"
  "zstd -T16 -3 + sync|$Z -q -T16 -3 -f $IN -o $W/out.zst && sync"
  "new: zstd:3 --jobs 16|$NEW -q --codec zstd:3 --jobs 16 $IN $W/out.tet"
  "base: zstd:3 --jobs 16|$BASE -q --codec zstd:3 --jobs 16 $IN $W/out.tet"
  "zstd -T2 -3 + sync|$Z -q -T2 -3 -f $IN -o $W/out.zst && sync"
  "new: zstd:3 --jobs 2|$NEW -q --codec zstd:3 --jobs 2 $IN $W/out.tet"
  "base: zstd:3 --jobs 2|$BASE -q --codec zstd:3 --jobs 2 $IN $W/out.tet"
  "zstd -T1 -3 + sync|$Z -q -T1 -3 -f $IN -o $W/out.zst && sync"
  "new: zstd:3 --jobs 1|$NEW -q --codec zstd:3 --jobs 1 $IN $W/out.tet"
  "base: zstd:3 --jobs 1|$BASE -q --codec zstd:3 --jobs 1 $IN $W/out.tet"
)
for r in 1 2 3 4 5 6; do
  if [ $((r % 2)) = 1 ]; then order=$(seq 0 $((${#cases[@]} - 1))); else order=$(seq $((${#cases[@]} - 1)) -1 0); fi
  for i in $order; do
    m "${cases[$i]%%|*}" "$r" "${cases[$i]#*|}" || break 2
  done
done
echo "done after $(( $(date +%s) - START )) s" >>"$LOG"
rm -rf "$W"
