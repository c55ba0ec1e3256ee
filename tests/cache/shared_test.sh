#!/bin/sh
# The CLI and a program linked to libalma.so from the same build share cached builds: each finds
# the other's build a hit, never "stale" (the cache keys on the build id, not on the executable).
# usage: shared_test.sh ALMA_BINARY SHARED_BENCH DATA_DIR
set -u
ALMA=$1
SHARED=$2
DIR=$3
OUT=$(mktemp -d "${TMPDIR:-/tmp}/alma-cache-shared-XXXXXX")
trap 'rm -rf "$OUT"' EXIT
unset ALMA_CACHE_DIR
FAILS=0
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
FAST="--min-time 0 -n 2 --warmup 1 --warmup-time 0"

"$ALMA" bench "$DIR/linear.onnx" -c FOLD+EAGER $FAST --cache-dir "$OUT/c1" --json "$OUT/a.json" >"$OUT/out" 2>&1 ||
  fail "alma bench: $(tail -3 "$OUT/out")"
"$SHARED" "$DIR/linear.onnx" "$OUT/c1" FOLD+EAGER >"$OUT/s1" 2>&1 || fail "shared_bench: $(cat "$OUT/s1")"
grep -q "^FOLD+EAGER hit" "$OUT/s1" || fail "libalma.so program after the CLI: $(cat "$OUT/s1"), expected a hit"
# the other way round, on a fresh cache
"$SHARED" "$DIR/linear.onnx" "$OUT/c2" FOLD+EAGER >"$OUT/s2" 2>&1 || fail "shared_bench: $(cat "$OUT/s2")"
grep -q "^FOLD+EAGER built" "$OUT/s2" || fail "first run on an empty cache: $(cat "$OUT/s2"), expected built"
"$ALMA" bench "$DIR/linear.onnx" -c FOLD+EAGER $FAST --cache-dir "$OUT/c2" -q >"$OUT/out" 2>&1 ||
  fail "alma bench: $(tail -3 "$OUT/out")"
grep -q " hit" "$OUT/out" || fail "CLI after the libalma.so program: no hit"; grep -q "stale" "$OUT/out" && fail "CLI after the libalma.so program: stale"
"$SHARED" "$DIR/linear.onnx" "$OUT/c2" FOLD+EAGER >"$OUT/s3" 2>&1
grep -q "^FOLD+EAGER hit" "$OUT/s3" || fail "libalma.so program after the CLI rebuilt nothing: $(cat "$OUT/s3")"
[ "$FAILS" -eq 0 ] && echo "cache shared: ok"
exit "$FAILS"
