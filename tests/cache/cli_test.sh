#!/bin/sh
# CLI end to end for the build cache: alma bench --cache-dir/--rebuild/--build-only/--lean-cache,
# alma cache list/print/delete/clean/report, two alma processes on one cache at once.
# usage: cli_test.sh ALMA_BINARY DATA_DIR PYTHON3
set -u
ALMA=$1
DIR=$2
PY=$3
OUT=$(mktemp -d "${TMPDIR:-/tmp}/alma-cache-cli-XXXXXX")
trap 'rm -rf "$OUT"' EXIT
unset ALMA_CACHE_DIR
C="$OUT/cache"
FAILS=0
FAST="--min-time 0 -n 2 --warmup 1 --warmup-time 0"

fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
expect() {
  want=$1
  shift
  "$@" >"$OUT/out" 2>"$OUT/err"
  got=$?
  if [ "$got" -ne "$want" ]; then
    fail "exit $got, expected $want: $*"
    sed 's/^/  | /' "$OUT/err" | tail -20
  fi
}
contains() {  # contains FILE TEXT
  grep -q -F -- "$2" "$1" || { fail "$1 lacks '$2'"; sed 's/^/  | /' "$1" | tail -20; }
}

# --- built, then a hit: in the table and the JSON
expect 0 "$ALMA" bench "$DIR/linear.onnx" -c FOLD+EAGER,EAGER $FAST --cache-dir "$C" --json "$OUT/a.json"
contains "$OUT/out" "cache      built (no build in the cache), stored as linear-FOLD+EAGER-"
contains "$OUT/out" "check    cache"
expect 0 "$ALMA" bench "$DIR/linear.onnx" -c FOLD+EAGER,EAGER $FAST --cache-dir "$C" --json "$OUT/b.json" -q
contains "$OUT/out" " hit"
"$PY" - "$OUT/a.json" "$OUT/b.json" <<'PYEOF' || fail "cache field in the JSON"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert [r["cache"]["status"] for r in a["results"]] == ["built", "built"], a["results"]
assert [r["cache"]["status"] for r in b["results"]] == ["hit", "hit"]
for r in b["results"]:
    assert r["cache"]["build"].startswith("linear-") and len(r["cache"]["key"]) == 64
    assert r["check"]["passed"] is True and r["mode"] == "latency"
PYEOF

# --- the environment variable, rebuild policies
ALMA_CACHE_DIR="$C" expect 0 "$ALMA" bench "$DIR/linear.onnx" -c FOLD+EAGER $FAST -q
contains "$OUT/out" " hit"
expect 0 "$ALMA" bench "$DIR/linear.onnx" -c FOLD+EAGER $FAST --cache-dir "$C" --rebuild always -q
contains "$OUT/out" " built"
expect 2 "$ALMA" bench "$DIR/linear.onnx" --cache-dir "$C" --rebuild sometimes
contains "$OUT/err" "rebuild"
expect 0 "$ALMA" bench "$DIR/linear.onnx" -c 1 --cache-dir "$C" --build-only
contains "$OUT/out" "built (not timed: build_only)"
expect 0 "$ALMA" bench "$DIR/linear.onnx" -c FOLD+EAGER $FAST --no-cache -q
if grep -q "cache" "$OUT/out"; then fail "--no-cache still reports a cache"; fi

# --- alma cache
expect 0 "$ALMA" cache --cache-dir "$C" list
contains "$OUT/out" "2 builds"
contains "$OUT/out" "linear-FOLD+EAGER-"
B=$(grep -o 'linear-FOLD+EAGER-[0-9a-f]*' "$OUT/out" | head -1)
expect 0 "$ALMA" cache print "$B" --cache-dir "$C"
contains "$OUT/out" "status      ok"
contains "$OUT/out" "x:float32:[1,16]"
contains "$OUT/out" "(cache hit)"
expect 0 "$ALMA" cache --cache-dir "$C" report -o "$OUT/report.csv"
"$PY" - "$OUT/report.csv" "$B" <<'PYEOF' || fail "cache report CSV"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
fold = [r for r in rows if r["build"] == sys.argv[2]]
assert len(fold) == 5, len(fold)          # built, hit, env hit, always, build-only
assert [r["cache"] for r in fold] == ["built", "hit", "hit", "built", "hit"], [r["cache"] for r in fold]
assert fold[-1]["mode"] == "build" and all(r["mode"] == "latency" for r in fold[:-1])
assert all(float(r["throughput_samples_per_s"]) > 0 for r in fold[:-1])
assert all(r["build_status"] == "ok" and r["conversion"] == "FOLD+EAGER" for r in fold)
PYEOF
expect 3 "$ALMA" cache --cache-dir "$C" print no-such-build
expect 2 "$ALMA" cache --cache-dir "$C" print
expect 2 "$ALMA" cache --cache-dir "$C" frobnicate
expect 0 "$ALMA" cache --cache-dir "$C" clean
contains "$OUT/out" "removed 2 graph files"
expect 0 "$ALMA" bench "$DIR/linear.onnx" -c FOLD+EAGER $FAST --cache-dir "$C"
contains "$OUT/out" "built (no graph stored (cleaned at"
expect 0 "$ALMA" cache --cache-dir "$C" delete "$B"
contains "$OUT/out" "deleted $B"
expect 0 "$ALMA" cache --cache-dir "$C" delete --all
contains "$OUT/out" "deleted 1 build"

# --- two alma processes on one cache at once
"$ALMA" bench "$DIR/linear.onnx" -c FOLD+EAGER,EAGER,INT8_STATIC+EAGER $FAST --cache-dir "$C" --rebuild always -q >"$OUT/p1" 2>&1 &
P1=$!
"$ALMA" bench "$DIR/linear.onnx" -c FOLD+EAGER,EAGER,INT8_STATIC+EAGER $FAST --cache-dir "$C" --rebuild always -q >"$OUT/p2" 2>&1 &
P2=$!
wait $P1 || fail "first concurrent alma bench"
wait $P2 || fail "second concurrent alma bench"
expect 0 "$ALMA" bench "$DIR/linear.onnx" -c FOLD+EAGER,EAGER,INT8_STATIC+EAGER $FAST --cache-dir "$C" --json "$OUT/c.json" -q
"$PY" - "$OUT/c.json" "$C" <<'PYEOF' || fail "cache after concurrent writers"
import glob, hashlib, json, os, sys
d = json.load(open(sys.argv[1]))
assert [r["cache"]["status"] for r in d["results"]] == ["hit"] * 3, [r["cache"] for r in d["results"]]
states = glob.glob(os.path.join(sys.argv[2], "builds", "*", "state.json"))
assert len(states) == 3
for s in states:
    st = json.load(open(s))
    g = open(os.path.join(os.path.dirname(s), "graph.onnx"), "rb").read()
    assert hashlib.sha256(g).hexdigest() == st["graph"]["sha256"] and len(g) == st["graph"]["bytes"]
    assert len(glob.glob(os.path.join(os.path.dirname(s), "bench", "*.json"))) == 3
assert not glob.glob(os.path.join(sys.argv[2], "builds", "*", "*.tmp.*"))
PYEOF

if [ "$FAILS" -ne 0 ]; then
  echo "$FAILS check(s) failed"
  exit 1
fi
echo "all cache CLI checks passed"
