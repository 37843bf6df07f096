#!/usr/bin/env bash
# Issue 25 on a lent many-core machine, in one short self-contained run: needs only bash,
# coreutils and the prebuilt bundle that `benches/device-bundle.sh` makes here (tet-convert built
# without the C-library importers, the timeit / gen_npy / gen_small examples, and a zstd CLI with
# its libraries). No Python, no GNU time, no network. Measures, each beside its comparison in the
# same run, the commands interleaved:
#
#   - scaling: NPY f32 (2 GiB by default) → --codec zstd:3 at --jobs 1/2/4/8/16 beside
#     `zstd -T<n> -3` + sync of the same bytes (wall, CPU, peak RSS); --jobs 1 is the single-thread
#     comparison;
#   - batch: 20,000 NPY files of 4 KiB at --workers 1/4/8/16 and --isolation none --jobs 16 beside
#     `cp -r` + sync;
#   - the 2-core acceptance figures on a quiet machine: 1 GiB NPY → --codec raw beside cp + sync,
#     and zstd:3 --jobs 2 beside zstd -T2 -3 + sync, every process pinned to two CPUs (taskset);
#   - diagnostics: the zstd CLI at -T1 with this project's level-3 parameters (hlog 18, clog 15);
#     the compression engine alone on one thread (`zstd_chunks`: 4 MiB chunks with our context
#     and other hashLog/chainLog pairs) beside the zstd CLI's benchmark of 4 MiB blocks (-b3
#     -B4194304); the batch at 8/16 workers writing to /dev/shm (no disk, fsync is free there);
#     `strace -f -c -w` of the batch at 8 and 16 workers on 2,000 such files; `vmstat 1`
#     throughout; `perf` profiles when perf exists and time is left.
#
# Issue 34 (the default, TET_CASES="batch memory"): the batch of 20,000 NPY files of 4 KiB at
# --workers 16 (and 4) beside `cp -r` + sync, now that small outputs are committed as a group; and
# the memory promise: the 1 GiB NPY → --codec zstd:3 at --jobs 64 / 16 / 2 under the default
# 256 MiB budget and at --jobs 64 under 128 MiB, peak RSS of the process beside the budget, the
# outputs compared with `cmp` (the bytes must not depend on --jobs or the budget). Two rounds.
# The issue 25 sections run when named: TET_CASES="scaling batch twocpu diagnostics perf memory".
#
# Every measurement is appended to $OUT/device-results.tsv as it ends and the summary tables go to
# $OUT/device-results.md, so a run cut short still returns what it measured. A measurement is not
# started once TET_LIMIT_S seconds (default 330) have passed; the first round of every case comes
# before any repeat.
#
#     bash benches/device.sh          # on the lent machine, with target/device-bundle carried
#
# Settings (environment): TET_CASES (see above), OUT (default ./device-out), TET_BUNDLE (target/device-bundle),
# TET_BENCH_DIR (target/device-work: the disk the repository is on), TET_PLANES (512 planes of
# 4 MiB = 2 GiB), TET_PLANES2 (256: the 1 GiB input on two CPUs), TET_NFILES (20000), TET_JOBS
# ("1 2 4 8 16"), TET_WORKERS ("1 4 8 16"), TET_ROUNDS (3), TET_LIMIT_S (330).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${TET_BUNDLE:-$ROOT/target/device-bundle}
OUT=${OUT:-$ROOT/device-out}
W=${TET_BENCH_DIR:-$ROOT/target/device-work}
PLANES=${TET_PLANES:-512}
PLANES2=${TET_PLANES2:-256}
NFILES=${TET_NFILES:-20000}
JOBS=${TET_JOBS:-"1 2 4 8 16"}
WORKERS=${TET_WORKERS:-"4 16"}
ROUNDS=${TET_ROUNDS:-2}
CASES=${TET_CASES:-"batch memory"}
FOLDERS=${TET_FOLDERS:-0}
on() { [[ " $CASES " == *" $1 "* ]]; }
LIMIT=${TET_LIMIT_S:-330}
mkdir -p "$OUT" "$W"
RES=$OUT/device-results.tsv
LOG=$OUT/device-log.txt
MD=$OUT/device-results.md
: >"$RES"
: >"$LOG"
T0=$(date +%s)
elapsed() { echo $(($(date +%s) - T0)); }
log() { echo "[$(elapsed)s] $*" | tee -a "$LOG"; }

CONV=$B/bin/tet-convert
TIMEIT=$B/bin/timeit
# The bundle's libstdc++ / libgcc_s only where the machine has none that fits.
if ! "$CONV" --version >/dev/null 2>&1; then
    CONV="env LD_LIBRARY_PATH=$B/lib $CONV"
fi
export SOURCE_DATE_EPOCH=1700000000
# The zstd CLI: the bundle's copy (zstd 1.5.4, the one of the 2-core figures) with its libraries,
# else the machine's own.
ZSTD="env LD_LIBRARY_PATH=$B/lib $B/bin/zstd"
if ! $ZSTD -V >/dev/null 2>&1; then
    ZSTD=$(command -v zstd || echo "")
fi
STRACE=$(command -v strace || echo "env LD_LIBRARY_PATH=$B/lib $B/bin/strace")
$STRACE -V >/dev/null 2>&1 || STRACE=""

{
    echo "== machine"
    date -u
    uname -a
    nproc
    (lscpu 2>/dev/null || grep -m1 "model name" /proc/cpuinfo) | head -20
    free -m 2>/dev/null || head -3 /proc/meminfo
    df -hT "$W" /dev/shm 2>/dev/null
    echo "zstd CLI: ${ZSTD:-none} $($ZSTD -V 2>&1)"
    ldd "$B/bin/tet-convert" 2>&1
    cat "$B/COMMIT" 2>&1
    $CONV --version 2>&1
} >"$OUT/device-env.txt" 2>&1
if ! $CONV --version >/dev/null 2>&1 || [ ! -x "$TIMEIT" ]; then
    log "no bundle at $B (build it with benches/device-bundle.sh)"
    exit 2
fi
VMSTAT_PID=""
if command -v vmstat >/dev/null; then
    vmstat -t 1 >"$OUT/vmstat.txt" 2>&1 &
    VMSTAT_PID=$!
fi

# One timed run: name round command. Before it the outputs are removed (PREP_RM), an output
# folder made (PREP_MKDIR), everything synced and the inputs read into the page cache
# (PREP_WARM). Appends `name round wall user sys maxrss_kib rc` to the results.
PREP_RM=""
PREP_MKDIR=""
PREP_WARM=""
prep() {
    [ -n "$PREP_RM" ] && rm -rf $PREP_RM
    [ -n "$PREP_MKDIR" ] && mkdir -p "$PREP_MKDIR"
    sync
    [ -n "$PREP_WARM" ] && find $PREP_WARM -type f -exec cat {} + >/dev/null
}
measure() {
    local name=$1 round=$2 cmd=$3
    if [ "$(elapsed)" -ge "$LIMIT" ]; then
        log "skipped (time): $name round $round"
        return 1
    fi
    prep
    local line
    line=$("$TIMEIT" "$cmd" 2>>"$LOG")
    printf '%s\t%s\t%s\n' "$name" "$round" "$(echo "$line" | tr ' ' '\t')" >>"$RES"
    log "$name round $round: $line"
}

log "generating inputs in $W"
NPY=$W/f32_${PLANES}.npy
{ on scaling || on diagnostics || on perf; } && [ ! -f "$NPY" ] && log "gen_npy $PLANES planes: $("$TIMEIT" "$B/bin/gen_npy $NPY $PLANES 1024 1024")"
SMALL=$W/small
on batch && [ ! -d "$SMALL" ] &&
    log "gen_small $NFILES: $("$TIMEIT" "$B/bin/gen_small $SMALL $NFILES $FOLDERS")"
ls -l "$NPY" >>"$LOG" 2>&1

scaling_pair() { # jobs round: zstd and tet-convert, the order alternating with the round
    local j=$1 r=$2
    PREP_RM="$W/out.zst $W/out.tet"
    PREP_WARM=$NPY
    local z="$ZSTD -q -T$j -3 -f $NPY -o $W/out.zst && sync"
    local t="$CONV -q --codec zstd:3 --jobs $j $NPY $W/out.tet"
    if [ $((r % 2)) -eq 1 ]; then
        [ -n "$ZSTD" ] && measure "zstd -T$j -3 + sync" "$r" "$z"
        measure "tet-convert zstd:3 --jobs $j" "$r" "$t"
    else
        measure "tet-convert zstd:3 --jobs $j" "$r" "$t"
        [ -n "$ZSTD" ] && measure "zstd -T$j -3 + sync" "$r" "$z"
    fi
}
batch_round() { # round
    local r=$1 o=$W/small.out
    PREP_RM=$o
    PREP_MKDIR=$o
    PREP_WARM=$SMALL
    local cases=("cp -r + sync|cp -r $SMALL/. $o/ && sync")
    for w in $WORKERS; do
        cases+=("--workers $w (--jobs 1)|$CONV -q $SMALL --out-dir $o --jobs 1 --workers $w")
    done
    cases+=("--isolation none --jobs 16|$CONV -q $SMALL --out-dir $o --isolation none --jobs 16")
    local n=${#cases[@]} i k
    for ((k = 0; k < n; k++)); do
        i=$k
        [ $((r % 2)) -eq 0 ] && i=$((n - 1 - k))
        measure "batch: ${cases[$i]%%|*}" "$r" "${cases[$i]#*|}"
    done
    PREP_MKDIR=""
}

# Issue 34: peak RSS of one conversion of the 1 GiB input beside --memory-budget, and the
# outputs of every --jobs and budget compared byte for byte.
memory_round() { # round
    local r=$1 j
    local npy=$W/f32_${PLANES2}.npy
    [ -f "$npy" ] || "$B/bin/gen_npy" "$npy" "$PLANES2" 1024 1024
    PREP_RM=""
    PREP_WARM=$npy
    for j in 64 16 2; do
        rm -f "$W/mem.j$j.tet"
        measure "memory: zstd:3 --jobs $j (budget 256 MiB)" "$r" \
            "$CONV -q --codec zstd:3 --jobs $j $npy $W/mem.j$j.tet"
    done
    rm -f "$W/mem.b128.tet"
    measure "memory: zstd:3 --jobs 64 --memory-budget 128MiB" "$r" \
        "$CONV -q --codec zstd:3 --jobs 64 --memory-budget 128MiB $npy $W/mem.b128.tet"
    for f in "$W"/mem.j16.tet "$W"/mem.j2.tet "$W"/mem.b128.tet; do
        [ -f "$f" ] && [ -f "$W/mem.j64.tet" ] &&
            log "cmp $(basename "$f") mem.j64.tet: $(cmp "$f" "$W/mem.j64.tet" >/dev/null 2>&1 &&
                echo identical || echo DIFFERENT)"
    done
    rm -f "$W"/mem.*.tet
}

log "round 1"
if on scaling; then
    scaling_pair 1 1
    for j in $JOBS; do [ "$j" != 1 ] && scaling_pair "$j" 1; done
fi
on batch && batch_round 1
on memory && memory_round 1

# The 2-vCPU machine's acceptance figures, on two CPUs of this quiet one.
if on twocpu && command -v taskset >/dev/null && [ "$(elapsed)" -lt "$LIMIT" ]; then
    log "two CPUs (taskset -c 0,1)"
    NPY1=$W/f32_${PLANES2}.npy
    [ -f "$NPY1" ] || "$B/bin/gen_npy" "$NPY1" "$PLANES2" 1024 1024
    PREP_RM="$W/out.*"
    PREP_WARM=$NPY1
    P2="taskset -c 0,1"
    for r in 1 2; do
        measure "2 CPUs: cp + sync" "$r" "$P2 cp $NPY1 $W/out.copy && sync"
        measure "2 CPUs: tet-convert --codec raw" "$r" \
            "$P2 $CONV -q --codec raw $NPY1 $W/out.raw.tet"
        measure "2 CPUs: tet-convert zstd:3 --jobs 2" "$r" \
            "$P2 $CONV -q --codec zstd:3 --jobs 2 $NPY1 $W/out.z2.tet"
        [ -n "$ZSTD" ] && measure "2 CPUs: zstd -T2 -3 + sync" "$r" \
            "$P2 $ZSTD -q -T2 -3 -f $NPY1 -o $W/out.zst && sync"
    done
    rm -f "$W"/out.* "$NPY1"
fi

if on diagnostics; then
log "diagnostics"
PREP_RM="$W/out.zst"
PREP_WARM=$NPY
[ -n "$ZSTD" ] && measure "zstd -T1 -3 --zstd=hlog=18,clog=15 (our level-3 parameters) + sync" 1 \
    "$ZSTD -q -T1 -3 --zstd=hlog=18,clog=15 -f $NPY -o $W/out.zst && sync"
if [ -d /dev/shm ]; then
    PREP_RM=/dev/shm/tet-small.out
    PREP_MKDIR=$PREP_RM
    PREP_WARM=$SMALL
    for w in 8 16; do
        measure "batch to /dev/shm: --workers $w (--jobs 1)" 1 \
            "$CONV -q $SMALL --out-dir /dev/shm/tet-small.out --jobs 1 --workers $w"
    done
    measure "batch to /dev/shm: cp -r" 1 "cp -r $SMALL/. /dev/shm/tet-small.out/"
    rm -rf /dev/shm/tet-small.out
    PREP_MKDIR=""
fi
# The compression engine alone (one thread, 4 MiB chunks, 512 MiB of the input) with our context
# and other table sizes, beside the zstd CLI's own benchmark of independent 4 MiB blocks.
if [ "$(elapsed)" -lt "$LIMIT" ]; then
    head -c 536870912 "$NPY" >"$W/s512.bin"
    for p in "" "17 16" "18 14" "17 15"; do
        echo "zstd_chunks ${p:-(ours)}: $("$B/bin/zstd_chunks" "$W/s512.bin" 3 4 $p)" |
            tee -a "$OUT/engine.txt"
    done
    for z in "" "--zstd=hlog=18,clog=15"; do
        echo "zstd CLI -b3 -B4194304 $z: $($ZSTD -b3 -e3 -B4194304 -i2 $z "$W/s512.bin" 2>&1 |
            tr '\r' '\n' | grep -a 'MB/s' | tail -1)" | tee -a "$OUT/engine.txt"
    done
    rm -f "$W/s512.bin"
fi
# Where the batch's workers spend their system calls (wall time in each call, all processes).
if [ -n "$STRACE" ] && [ "$(elapsed)" -lt "$LIMIT" ]; then
    S4=$W/small2k
    [ -d "$S4" ] || "$B/bin/gen_small" "$S4" 2000
    for w in 8 16; do
        rm -rf "$W/s4.out" && mkdir -p "$W/s4.out" && sync
        $STRACE -f -c -w -S time -o "$OUT/strace-batch-w$w.txt" \
            $CONV -q "$S4" --out-dir "$W/s4.out" --jobs 1 --workers "$w" >>"$LOG" 2>&1
        log "strace of the batch at $w workers: $(head -3 "$OUT/strace-batch-w$w.txt" | tail -1)"
    done
    rm -rf "$W/s4.out"
fi
fi # diagnostics

for ((r = 2; r <= ROUNDS; r++)); do
    log "round $r"
    if on scaling; then
        for j in $JOBS; do [ "$j" != 1 ] && scaling_pair "$j" "$r"; done
    fi
    on batch && batch_round "$r"
    on memory && memory_round "$r"
    on scaling && scaling_pair 1 "$r"
done

if on perf && command -v perf >/dev/null && [ "$(elapsed)" -lt "$LIMIT" ]; then
    log "perf profiles (--jobs 1 and zstd -T1)"
    perf record -F 999 -g -o "$W/perf.tet" -- $CONV -q --codec zstd:3 --jobs 1 \
        "$NPY" "$W/out.tet" >>"$LOG" 2>&1
    perf report -i "$W/perf.tet" --stdio --no-children --percent-limit 0.5 2>/dev/null |
        head -300 >"$OUT/perf-tet-jobs1.txt"
    if [ -n "$ZSTD" ] && [ "$(elapsed)" -lt "$LIMIT" ]; then
        perf record -F 999 -g -o "$W/perf.zstd" -- $ZSTD -q -T1 -3 -f "$NPY" -o "$W/out.zst" \
            >>"$LOG" 2>&1
        perf report -i "$W/perf.zstd" --stdio --no-children --percent-limit 0.5 2>/dev/null |
            head -300 >"$OUT/perf-zstd-T1.txt"
    fi
fi
[ -n "$VMSTAT_PID" ] && kill "$VMSTAT_PID" 2>/dev/null

# The summary: per case the best and the median wall, the CPU of the best run, the largest RSS;
# then each tet-convert figure over its comparison (best of each).
awk -F'\t' -v planes="$PLANES" -v nfiles="$NFILES" '
    { n[$1]++; w[$1, n[$1]] = $3; if (!($1 in best) || $3 < best[$1]) { best[$1] = $3;
      cpu[$1] = $4 + $5 } if ($6 > rss[$1]) rss[$1] = $6; if ($7 != 0) bad[$1] = 1;
      if (!($1 in seen)) { seen[$1] = 1; order[++k] = $1 } }
    function median(c,   i, j, t, a) { for (i = 1; i <= n[c]; i++) a[i] = w[c, i];
      for (i = 1; i <= n[c]; i++) for (j = i + 1; j <= n[c]; j++) if (a[j] < a[i]) {
      t = a[i]; a[i] = a[j]; a[j] = t } return a[int((n[c] + 1) / 2)] }
    END {
      printf "Input: f32 (%d, 1024, 1024) .npy = %.2f GiB; batch: %d files of 4 KiB\n\n",
          planes, planes / 256, nfiles
      print "| run | runs | best wall s | median wall s | CPU s (best run) | peak RSS MiB | failed |"
      print "|---|---:|---:|---:|---:|---:|---|"
      for (i = 1; i <= k; i++) { c = order[i]
        printf "| %s | %d | %.2f | %.2f | %.2f | %.0f | %s |\n", c, n[c], best[c], median(c),
            cpu[c], rss[c] / 1024, (c in bad) ? "YES" : "" }
      print ""
      print "| comparison (best of each, same run) | ratio | target |"
      print "|---|---:|---|"
      for (i = 1; i <= k; i++) { c = order[i]
        if (c ~ /^tet-convert zstd:3 --jobs /) { j = c; sub(/.*--jobs /, "", j)
          z = "zstd -T" j " -3 + sync"
          if (z in best) printf "| --jobs %s / zstd -T%s -3 | %.3f | %s |\n", j, j,
              best[c] / best[z], (j == 1) ? "<= 1.05" : ((j == 2) ? "<= 1.0" : "-") } }
      t1 = "tet-convert zstd:3 --jobs 1"
      for (i = 1; i <= k; i++) { c = order[i]
        if (c ~ /^tet-convert zstd:3 --jobs / && c != t1 && (t1 in best))
          printf "| speed-up %s over --jobs 1 | %.2f | - |\n", substr(c, 20), best[t1] / best[c] }
      if (("2 CPUs: tet-convert --codec raw") in best && ("2 CPUs: cp + sync") in best)
        printf "| 2 CPUs: raw / (cp + sync) | %.3f | <= 1.15 |\n",
            best["2 CPUs: tet-convert --codec raw"] / best["2 CPUs: cp + sync"]
      if (("2 CPUs: tet-convert zstd:3 --jobs 2") in best && ("2 CPUs: zstd -T2 -3 + sync") in best)
        printf "| 2 CPUs: zstd:3 --jobs 2 / zstd -T2 -3 | %.3f | <= 1.0 |\n",
            best["2 CPUs: tet-convert zstd:3 --jobs 2"] / best["2 CPUs: zstd -T2 -3 + sync"]
      for (i = 1; i <= k; i++) { c = order[i]
        if (c ~ /^memory: /) { b = (c ~ /128MiB/) ? 128 : 256
          printf "| %s: peak RSS / budget | %.2f | <= 1.0 |\n", substr(c, 9), rss[c] / 1024 / b } }
      cp = "batch: cp -r + sync"
      for (i = 1; i <= k; i++) { c = order[i]
        if (c ~ /^batch: / && c != cp && (cp in best))
          printf "| %s / cp -r + sync | %.2f | - |\n", c, best[c] / best[cp] }
    }' "$RES" >"$MD"
log "done in $(elapsed) s"
cat "$MD"
