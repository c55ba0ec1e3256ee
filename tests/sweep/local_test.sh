#!/bin/sh
# alma sweep without Slurm: the tasks run here one after another (--local), alma merge gathers
# them, and the merged rows are the same as those of a second local sweep (tests/sweep/compare.py);
# usage errors and a missing task result are reported with their exit codes.
# usage: local_test.sh ALMA PYTHON3 MODEL...
set -u
ALMA=$1
PY=$2
shift 2
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d "${TMPDIR:-/tmp}/alma-sweep-test-XXXXXX")
trap 'rm -rf "$T"' EXIT
FAILS=0
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
BENCH="--min-time 0.02 -n 5 --warmup 1 --warmup-time 0 --no-cache"
CONVS=EAGER,FOLD+EAGER
N=$(($# * 2))
# shellcheck disable=SC2086
"$ALMA" sweep "$@" -c $CONVS -o "$T/a" --local -- $BENCH >"$T/a.out" 2>&1 || { fail "sweep a exited $?"; cat "$T/a.out"; }
grep -q "$N of $N tasks have results" "$T/a.out" || { fail "sweep a: not $N results"; cat "$T/a.out"; }
[ -x "$T/a/sweep.sbatch" ] && grep -q "cpus-per-task=1" "$T/a/sweep.sbatch" || fail "no job script"
# shellcheck disable=SC2086
"$ALMA" sweep "$@" -c $CONVS -o "$T/b" --local -- $BENCH >/dev/null 2>&1 || fail "sweep b exited $?"
"$ALMA" merge "$T/a" -o "$T/a.json" --csv "$T/a.csv" --html "$T/a.html" >"$T/m.out" 2>&1 ||
  { fail "merge a exited $?"; cat "$T/m.out"; }
grep -q "<html" "$T/a.html" && grep -q "FOLD+EAGER" "$T/a.html" || fail "merge --html: no report"
grep -q "merged $N task results, $N rows" "$T/m.out" || { fail "merge a output"; cat "$T/m.out"; }
"$ALMA" merge "$T/b" -o "$T/b.json" >/dev/null 2>&1 || fail "merge b exited $?"
"$PY" "$HERE/compare.py" "$T/a.json" "$T/b.json" "$N" --csv "$T/a.csv" || FAILS=$((FAILS + 1))

expect() {  # expect CODE TEXT CMD...: exit status and a line of stderr
  want=$1 text=$2
  shift 2
  "$@" >"$T/o" 2>"$T/e"
  got=$?
  [ "$got" -eq "$want" ] || fail "exit $got, expected $want: $*"
  grep -q -F -- "$text" "$T/e" || { fail "stderr lacks '$text': $*"; cat "$T/e"; }
}
expect 2 "-c LIST is required" "$ALMA" sweep "$1" -o "$T/x"
expect 2 "-o DIR is required" "$ALMA" sweep "$1" -c EAGER
expect 2 "no model given" "$ALMA" sweep -c EAGER -o "$T/x"
expect 2 "holds a sweep already" "$ALMA" sweep "$1" -c EAGER -o "$T/a" --local
expect 3 "cannot read model" "$ALMA" sweep "$T/none.onnx" -c EAGER -o "$T/y" --local
expect 3 "no sweep directory" "$ALMA" merge "$T/nowhere"
rm "$T/a/results/task-1.json"
expect 1 "task 1 of $T/a has no result" "$ALMA" merge "$T/a" -o "$T/c.json"
[ $FAILS -eq 0 ] && echo "ok" || echo "FAILED: $FAILS"
exit $((FAILS > 0))
