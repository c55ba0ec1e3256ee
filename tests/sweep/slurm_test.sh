#!/bin/sh
# alma sweep on a real one-node Slurm cluster: slurmctld and slurmd started here on loopback from a
# configuration written to a temporary directory (auth/none: nothing leaves the machine), a
# 3 models x 4 conversions sweep submitted as a job array and waited for, merged, and its 12 rows
# compared with the same sweep run locally (tests/sweep/compare.py: identical apart from timings
# and node names). Skips (exit 77) with the reason when Slurm is not installed or will not start.
# usage: slurm_test.sh ALMA PYTHON3 MODEL...
set -u
ALMA=$1
PY=$2
shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d "${TMPDIR:-/tmp}/alma-slurm-test-XXXXXX")
chmod 755 "$T"
CTLD_PID=""
SLURMD_PID=""
cleanup() {
  [ -n "$SLURMD_PID" ] && kill "$SLURMD_PID" 2>/dev/null
  [ -n "$CTLD_PID" ] && kill "$CTLD_PID" 2>/dev/null
  [ -n "$SLURMD_PID" ] && wait "$SLURMD_PID" 2>/dev/null
  [ -n "$CTLD_PID" ] && wait "$CTLD_PID" 2>/dev/null
  rm -rf "$T"
}
trap cleanup EXIT
skip() {
  echo "SKIP: $*"
  exit 77
}
for p in slurmctld slurmd sbatch squeue sinfo; do
  command -v $p >/dev/null 2>&1 || [ -x /usr/sbin/$p ] || skip "$p not installed (scripts/setup.sh installs slurm-wlm)"
done
SLURMCTLD=$(command -v slurmctld || echo /usr/sbin/slurmctld)
SLURMD=$(command -v slurmd || echo /usr/sbin/slurmd)
[ "$(id -u)" -eq 0 ] || skip "slurmd runs jobs as their owner and needs root here"

HOST=$(hostname -s)
CPUS=$(nproc)
USER_NAME=$(id -un)
# two free loopback ports
PORTS=$("$PY" -c "
import socket
s=[socket.socket() for _ in range(2)]
[x.bind(('127.0.0.1', 0)) for x in s]
print(' '.join(str(x.getsockname()[1]) for x in s))")
CTLD_PORT=${PORTS% *}
SLURMD_PORT=${PORTS#* }
mkdir -p "$T/state" "$T/spool" "$T/log"
cat >"$T/slurm.conf" <<EOF
ClusterName=almatest
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
AuthType=auth/none
CredType=cred/none
SlurmUser=$USER_NAME
SlurmdUser=root
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/log/slurmctld.log
SlurmdLogFile=$T/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$T/slurm.conf"
"$SLURMCTLD" -D -i -f "$SLURM_CONF" >"$T/log/slurmctld.out" 2>&1 &
CTLD_PID=$!
"$SLURMD" -D -f "$SLURM_CONF" -N "$HOST" >"$T/log/slurmd.out" 2>&1 &
SLURMD_PID=$!
up=0
for i in $(seq 1 60); do
  state=$(sinfo -h -n "$HOST" -o %T 2>/dev/null | head -1)
  case "$state" in idle*|mix*|alloc*) up=1; break ;; esac
  kill -0 "$CTLD_PID" 2>/dev/null || break
  kill -0 "$SLURMD_PID" 2>/dev/null || break
  sleep 0.5
done
if [ $up -ne 1 ]; then
  echo "--- slurmctld log"; tail -20 "$T/log/slurmctld.log" "$T/log/slurmctld.out" 2>/dev/null
  echo "--- slurmd log"; tail -20 "$T/log/slurmd.log" "$T/log/slurmd.out" 2>/dev/null
  skip "the one-node Slurm cluster did not come up (node state '${state:-none}')"
fi
echo "cluster up: node $HOST, $CPUS CPUs, partition debug"

BENCH="--min-time 0.05 -n 10 --warmup 2 --warmup-time 0 --no-cache"
CONVS=EAGER,FOLD+EAGER,FUSE+EAGER,FOLD+FUSE+EAGER
FAILS=0
# shellcheck disable=SC2086
"$ALMA" sweep "$@" -c $CONVS -o "$T/slurm" --cpus 1 --time-limit 10 -- $BENCH >"$T/slurm.out" 2>&1
rc=$?
cat "$T/slurm.out"
if [ $rc -ne 0 ]; then
  echo "FAIL: alma sweep on Slurm exited $rc"
  for f in "$T"/slurm/logs/*.out; do echo "--- $f"; tail -5 "$f"; done
  tail -20 "$T/log/slurmctld.log" "$T/log/slurmd.log"
  FAILS=$((FAILS + 1))
fi
grep -q "submitted job" "$T/slurm.out" || { echo "FAIL: no job was submitted"; FAILS=$((FAILS + 1)); }
"$ALMA" merge "$T/slurm" -o "$T/slurm.json" --csv "$T/slurm.csv" >"$T/merge.out" 2>&1 || {
  echo "FAIL: alma merge (Slurm) exited $?"; cat "$T/merge.out"; FAILS=$((FAILS + 1)); }
# shellcheck disable=SC2086
"$ALMA" sweep "$@" -c $CONVS -o "$T/local" --cpus 1 --local -- $BENCH >"$T/local.out" 2>&1 || {
  echo "FAIL: alma sweep --local exited $?"; cat "$T/local.out"; FAILS=$((FAILS + 1)); }
"$ALMA" merge "$T/local" -o "$T/local.json" >/dev/null 2>&1 || { echo "FAIL: alma merge (local)"; FAILS=$((FAILS + 1)); }
"$PY" "$HERE/compare.py" "$T/slurm.json" "$T/local.json" 12 --slurm "$HOST" debug --csv "$T/slurm.csv" ||
  FAILS=$((FAILS + 1))
[ $FAILS -eq 0 ] && echo "ok" || echo "FAILED: $FAILS"
exit $((FAILS > 0))
