#!/usr/bin/env bash
# Starts a throw-away single-node Slurm cluster on this machine for tests.
#
#   tests/slurm/start.sh DIR
#
# Every file of the cluster (slurm.conf, state, spool, pid files, logs) lives under DIR.
# The daemons (slurmctld, slurmd) run as root on 127.0.0.1 with ports that do not clash
# with a default install; authentication uses the machine's MUNGE daemon, started here if
# it is not running (as the munge user).
#
# Output (stdout), exit code:
#   export SLURM_CONF=DIR/slurm.conf     exit 0: the node is idle and takes jobs
#   SKIP: <reason>                       exit 3: no cluster (nothing left running)
#   usage message on stderr              exit 2: bad arguments
#
# Environment (all optional):
#   SLURM_TEST_CTLD_PORT, SLURM_TEST_SLURMD_PORT  ports to use (default: the first free
#                         pair from a DIR-dependent base in 17000-17998, up to 18999)
#   SLURM_TEST_TIMEOUT    seconds to wait for the daemons and the idle node (default 60;
#                         with the bounded commands and the cleanup, start.sh ends within
#                         about SLURM_TEST_TIMEOUT + 60 s at worst)
#   SLURM_TEST_MIN_JOB_AGE  slurm.conf MinJobAge (default 300); 4 makes sbatch --wait
#                         poll every 2 s instead of 2 s, 10 s, 42 s after submission
#   SLURM_TEST_VERBOSE=1  progress messages on stderr
#
# Bounded in time: every external command runs under `timeout`, every wait has a deadline.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd -P)

if [ $# -ne 1 ] || [ -z "$1" ]; then
  echo "usage: $0 DIR" >&2
  exit 2
fi

log() { [ "${SLURM_TEST_VERBOSE:-0}" = 1 ] && echo "slurm/start: $*" >&2; return 0; }

# skip REASON: stop whatever was started for DIR, print the one SKIP line, exit 3.
dir=""
skip() {
  local reason
  reason=$(printf '%s' "$*" | tr '\n\t' '  ' | tr -s ' ' | cut -c1-600)
  if [ -n "$dir" ] && [ -d "$dir" ]; then
    "$here/stop.sh" "$dir" >/dev/null 2>&1
  fi
  echo "SKIP: $reason"
  exit 3
}

# tail_of FILE: the last error lines of a log (else its last lines), on one line, for a
# SKIP reason. Known harmless errors (PMIx missing, no state on a first start) are left out.
tail_of() {
  local lines
  [ -s "$1" ] || { echo "$(basename "$1") is empty or missing"; return 0; }
  lines=$(grep -E 'error|fatal|Error|Fatal' "$1" |
    grep -v -E 'pmix|MPI: Cannot create context|state file|Trying backup state' | tail -n 3)
  [ -n "$lines" ] || lines=$(tail -n 3 "$1")
  echo "$(basename "$1"): $(printf '%s\n' "$lines" | sed 's/^\[[^]]*\] //' | tr '\n' '|')"
}

# ---- prerequisites -------------------------------------------------------------------
missing=""
for b in slurmctld slurmd sinfo scontrol sbatch munged munge unmunge timeout setsid; do
  command -v "$b" >/dev/null 2>&1 || missing="$missing $b"
done
[ -z "$missing" ] || skip "not installed:$missing (.ci/setup installs them)"
[ "$(id -u)" -eq 0 ] || skip "must run as root (slurmd runs jobs as root here)"

mkdir -p "$1" 2>/dev/null || skip "cannot create $1"
dir=$(cd "$1" && pwd -P) || skip "cannot enter $1"
conf="$dir/slurm.conf"
timeout_s=${SLURM_TEST_TIMEOUT:-60}
deadline=$(($(date +%s) + timeout_s))

# A second start on the same DIR: stop the old daemons first, so we start from scratch.
"$here/stop.sh" "$dir" >/dev/null 2>&1

node=$(hostname -s 2>/dev/null)
[ -n "$node" ] || skip "hostname -s gave no name"

# slurmstepd puts a Unix socket <spool>/<node>_<job>.<step> in the spool dir; the path
# must fit in sun_path (108 bytes), so a deep DIR is refused here rather than failing later.
spool="$dir/spool"
if [ $((${#spool} + ${#node} + 22)) -ge 108 ]; then
  skip "DIR path too long for slurmstepd sockets (${#spool} chars): use a shorter temp dir"
fi

# ---- MUNGE ---------------------------------------------------------------------------
# Slurm authenticates every message with MUNGE; the key must exist and munged must answer.
munge_ok() { timeout 10 munge -n 2>/dev/null | timeout 10 unmunge >/dev/null 2>&1; }

if ! munge_ok; then
  key=/etc/munge/munge.key
  if [ ! -s "$key" ]; then
    log "creating $key"
    install -d -o munge -g munge -m 0700 /etc/munge || skip "cannot create /etc/munge"
    if command -v mungekey >/dev/null 2>&1; then
      timeout 20 mungekey --create --keyfile="$key" >/dev/null 2>&1
    elif command -v create-munge-key >/dev/null 2>&1; then
      timeout 20 create-munge-key -f >/dev/null 2>&1
    fi
    [ -s "$key" ] || timeout 20 dd if=/dev/urandom of="$key" bs=1 count=1024 2>/dev/null
    [ -s "$key" ] || skip "cannot create the munge key $key"
    { chown munge:munge "$key" && chmod 0400 "$key"; } || skip "cannot set owner/mode of $key"
  fi
  # munged refuses to start unless its directories exist and belong to munge.
  install -d -o munge -g munge -m 0755 /run/munge || skip "cannot create /run/munge"
  install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge 2>/dev/null
  log "starting munged"
  if command -v runuser >/dev/null 2>&1; then
    timeout 20 runuser -u munge -- /usr/sbin/munged </dev/null >"$dir/munged.start.log" 2>&1
  else
    timeout 20 su -s /bin/sh munge -c /usr/sbin/munged </dev/null >"$dir/munged.start.log" 2>&1
  fi
  # munged daemonizes; give it a few seconds to answer.
  for _ in $(seq 1 20); do munge_ok && break; sleep 0.5; done
  munge_ok || skip "munged does not answer: $(tail_of "$dir/munged.start.log"); $(tail_of /var/log/munge/munged.log)"
  # Recorded so that stop.sh may stop it (only with SLURM_TEST_STOP_MUNGED=1).
  cat /run/munge/munged.pid >"$dir/munged.started" 2>/dev/null || echo unknown >"$dir/munged.started"
fi

# ---- ports ---------------------------------------------------------------------------
# A port is taken when any socket (listening or not) uses it locally; read the kernel's
# tables so no extra tool is needed.
used_ports=$(cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | while read -r _ local _; do
  case $local in *:????) echo $((16#${local##*:})) ;; esac
done | sort -un)
port_free() { ! printf '%s\n' "$used_ports" | grep -qx "$1"; }

ctld_port=${SLURM_TEST_CTLD_PORT:-}
slurmd_port=${SLURM_TEST_SLURMD_PORT:-}
# Base depends on DIR so two clusters started at once are unlikely to race for a port;
# 17000-18999 is below the kernel's ephemeral range and away from Slurm's 6817/6818.
base=$((17000 + ($(printf '%s' "$dir" | cksum | cut -d' ' -f1) % 500) * 2))
p=$base
while [ -z "$ctld_port" ] || [ -z "$slurmd_port" ]; do
  [ "$p" -lt 19000 ] || skip "no free TCP port pair in 17000-18999"
  if port_free "$p" && port_free $((p + 1)); then
    ctld_port=${ctld_port:-$p}
    slurmd_port=${slurmd_port:-$((p + 1))}
  fi
  p=$((p + 2))
done
log "ports: slurmctld $ctld_port, slurmd $slurmd_port"

# ---- slurm.conf ----------------------------------------------------------------------
# Describe this machine as slurmd itself sees it, so the node is not drained for having
# fewer CPUs or less memory than configured.
hw=$(timeout 20 slurmd -C 2>/dev/null | head -n 1)
cpus=$(printf '%s\n' "$hw" | sed -n 's/.*CPUs=\([0-9]*\).*/\1/p')
mem=$(printf '%s\n' "$hw" | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')
[ -n "$cpus" ] || cpus=$(nproc)
[ -n "$mem" ] || mem=$(awk '/^MemTotal:/ { print int($2 / 1024) }' /proc/meminfo)
# Sockets/cores/threads as detected, when slurmd printed them.
topo=$(printf '%s\n' "$hw" | grep -o -E '(Boards|SocketsPerBoard|CoresPerSocket|ThreadsPerCore)=[0-9]+' | tr '\n' ' ')

mkdir -p "$dir/state" "$spool" "$dir/log" "$dir/run" || skip "cannot create directories under $dir"
: >"$dir/plugstack.conf"   # empty SPANK stack: never pick up the system's plugins

cat >"$conf" <<EOF
# Generated by tests/slurm/start.sh: a single-node test cluster, everything under $dir.
ClusterName=tetci
# Controller on this host, reached through the loopback address (no DNS needed).
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
# No mail on this machine (the default MailProg is missing and slurmctld complains).
MailProg=/bin/true
# No systemd or cgroup control here: track processes through /proc, no task binding.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
# Cores are consumable, memory is not: several small jobs share the node.
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# Schedule at once and every second (defaults: up to 3 s delay per batch job, 60 s loop):
# a 4-task array finishes in ~2 s instead of ~6 s, and sbatch --wait returns sooner.
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_interval=1
# No accounting database.
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
# A node that was down comes back as soon as its slurmd registers.
ReturnToService=2
# Short timers: tests want quick turnaround and quick shutdown.
SlurmdTimeout=60
SlurmctldTimeout=60
InactiveLimit=0
KillWait=5
# How long finished jobs stay visible to squeue/scontrol. sbatch --wait polls after 2 s,
# then 8 s later, ... unless MinJobAge <= 4, which keeps it polling every 2 s.
MinJobAge=${SLURM_TEST_MIN_JOB_AGE:-300}
Waittime=0
# Every file under DIR.
StateSaveLocation=$dir/state
SlurmdSpoolDir=$spool
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$dir/plugstack.conf
NodeName=$node NodeHostname=$node NodeAddr=127.0.0.1 CPUs=$cpus ${topo}RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF

export SLURM_CONF="$conf"

# ---- daemons -------------------------------------------------------------------------
# Each daemon runs in the foreground (-D) of its own session (setsid), with no tie to
# the caller's stdio (a test capturing our stdout must not wait on them). Our own pid
# record is kept next to the daemon's pid file, for stop.sh.
launch() { # NAME ARGS...
  local name=$1
  shift
  setsid "$name" -D -f "$conf" "$@" </dev/null >"$dir/log/$name.out" 2>&1 &
  echo $! >"$dir/run/$name.launch"
}

# alive NAME: the daemon we launched still runs (a zombie counts as dead).
alive() {
  local pid st
  pid=$(cat "$dir/run/$1.launch" 2>/dev/null)
  st=$(sed -n 's/^[0-9]* (.*) \([A-Za-z]\) .*/\1/p' "/proc/${pid:-0}/stat" 2>/dev/null)
  [ -n "$st" ] && [ "$st" != Z ]
}

die_daemon() { # NAME WHAT
  # The daemon's log file, or its stderr when it died before opening the log.
  if [ -s "$dir/log/$1.log" ]; then
    skip "$1 $2: $(tail_of "$dir/log/$1.log")"
  else
    skip "$1 $2: $(tail_of "$dir/log/$1.out")"
  fi
}

log "starting slurmctld"
launch slurmctld
# Wait until the controller answers (scontrol ping prints "... is UP").
until timeout 10 scontrol ping 2>/dev/null | grep -q 'is UP'; do
  alive slurmctld || die_daemon slurmctld "exited at startup"
  [ "$(date +%s)" -lt "$deadline" ] || die_daemon slurmctld "did not answer within ${timeout_s}s"
  sleep 0.5
done

log "starting slurmd"
launch slurmd -N "$node"
# Wait until the node is idle (sinfo state "idle"; down/drain/unknown are not ready).
state=""
until [ "$state" = idle ]; do
  alive slurmd || die_daemon slurmd "exited at startup"
  alive slurmctld || die_daemon slurmctld "exited after start"
  [ "$(date +%s)" -lt "$deadline" ] ||
    die_daemon slurmd "node $node not idle within ${timeout_s}s (state '${state:-none}')"
  sleep 0.5
  state=$(timeout 10 sinfo -h -N -n "$node" -o '%T' 2>/dev/null | head -n 1)
done

log "node $node idle"
echo "export SLURM_CONF=$conf"
exit 0
