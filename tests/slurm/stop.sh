#!/usr/bin/env bash
# Stops the test cluster that tests/slurm/start.sh started for DIR.
#
#   tests/slurm/stop.sh DIR
#
# Cancels its jobs, then stops slurmd and slurmctld (found by their pid files under DIR,
# and only if the process really is that daemon with DIR/slurm.conf), then any slurmstepd
# or job process of that cluster still around. Idempotent: nothing to stop is not an error.
# Exits 0 (2 for bad arguments); bounded in time (about 40 s at worst).
#
# munged is shared with anything else on the machine and is left running, unless
# SLURM_TEST_STOP_MUNGED=1 and start.sh recorded in DIR/munged.started that it started it.
set -uo pipefail

if [ $# -ne 1 ] || [ -z "$1" ]; then
  echo "usage: $0 DIR" >&2
  exit 2
fi
[ -d "$1" ] || exit 0
dir=$(cd "$1" && pwd -P) || exit 0
conf="$dir/slurm.conf"

# is_ours PID NAME: PID runs NAME with DIR/slurm.conf on its command line (guards against
# a recycled pid or a daemon of another cluster).
is_ours() {
  local cmd
  [ -n "$1" ] && [ -r "/proc/$1/cmdline" ] || return 1
  cmd=$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null)
  case $cmd in *"$2"*"$conf"*) return 0 ;; esac
  return 1
}

# pids_of NAME: distinct live pids recorded for NAME (daemon's pid file, our launch record).
pids_of() {
  local p
  cat "$dir/run/$1.pid" "$dir/run/$1.launch" 2>/dev/null | sort -u | while read -r p; do
    is_ours "$p" "$1" && echo "$p"
  done
}

# running PID: the process exists and is not a zombie (pid 1 here may reap late, and
# kill -0 succeeds on zombies).
running() {
  local st
  st=$(sed -n 's/^[0-9]* (.*) \([A-Za-z]\) .*/\1/p' "/proc/$1/stat" 2>/dev/null)
  [ -n "$st" ] && [ "$st" != Z ]
}

# stop_pids SECONDS PID...: SIGTERM, wait up to SECONDS, then SIGKILL what is left.
stop_pids() {
  local p left tries=$(($1 * 4))
  shift
  [ $# -gt 0 ] || return 0
  kill -TERM "$@" 2>/dev/null
  for _ in $(seq 1 "$tries"); do
    left=""
    for p in "$@"; do running "$p" && left="$left $p"; done
    [ -n "$left" ] || return 0
    sleep 0.25
  done
  # shellcheck disable=SC2086
  kill -KILL $left 2>/dev/null
  sleep 0.2
}

# Cancel running jobs while the controller still answers, so slurmstepd ends them.
if [ -f "$conf" ] && [ -n "$(pids_of slurmctld)" ] && command -v scancel >/dev/null 2>&1; then
  jobs=$(SLURM_CONF=$conf timeout 10 squeue -h -o '%A' 2>/dev/null | sort -u)
  if [ -n "$jobs" ]; then
    # shellcheck disable=SC2086
    SLURM_CONF=$conf timeout 10 scancel $jobs >/dev/null 2>&1
    for _ in $(seq 1 10); do
      [ -z "$(SLURM_CONF=$conf timeout 5 squeue -h -t R,CG -o '%A' 2>/dev/null)" ] && break
      sleep 0.5
    done
  fi
fi

# shellcheck disable=SC2046
stop_pids 10 $(pids_of slurmd)
# shellcheck disable=SC2046
stop_pids 10 $(pids_of slurmctld)

# Leftovers of this cluster (after a daemon crashed or ignored SIGTERM): slurmstepd and
# job processes inherit SLURM_CONF=DIR/slurm.conf; job processes also carry SLURM_JOB_ID.
# The caller (which may export the same SLURM_CONF) has no SLURM_JOB_ID and is skipped,
# as are this script and its ancestors.
protect=" $$ "
p=$$
while [ "$p" -gt 1 ] 2>/dev/null; do
  p=$(sed -n 's/^[0-9]* (.*) [A-Za-z] \([0-9]*\) .*/\1/p' "/proc/$p/stat" 2>/dev/null)
  [ -n "$p" ] || break
  protect="$protect$p "
done
strays=""
for e in /proc/[0-9]*/environ; do
  p=${e#/proc/}
  p=${p%/environ}
  case $protect in *" $p "*) continue ;; esac
  env_of=$(tr '\0' '\n' 2>/dev/null <"$e") || continue
  printf '%s\n' "$env_of" | grep -qFx "SLURM_CONF=$conf" || continue
  if [ "$(cat "/proc/$p/comm" 2>/dev/null)" = slurmstepd ] ||
    printf '%s\n' "$env_of" | grep -q '^SLURM_JOB_ID='; then
    running "$p" && strays="$strays $p"
  fi
done
# shellcheck disable=SC2086
stop_pids 5 $strays

if [ "${SLURM_TEST_STOP_MUNGED:-0}" = 1 ] && [ -f "$dir/munged.started" ]; then
  timeout 10 munged --stop >/dev/null 2>&1
  rm -f "$dir/munged.started"
fi

rm -f "$dir/run/slurmctld.launch" "$dir/run/slurmd.launch"
exit 0
