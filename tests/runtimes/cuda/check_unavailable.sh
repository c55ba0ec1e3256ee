#!/bin/sh
# The CUDA runtime on a machine without a usable GPU: `alma list` says why, `alma bench -c CUDA`
# reports the row unavailable (exit 1) while EAGER runs, and a bad cuda.* option is a usage error
# (exit 2) naming it. On a machine with a device it reports SKIP (the gpu tests cover it there).
set -u
alma="$1"
model="$2"
out=$("$alma" list 2>&1)
line=$(echo "$out" | grep -E '^  CUDA ')
[ -n "$line" ] || { echo "FAIL: alma list has no CUDA runtime:"; echo "$out"; exit 1; }
echo "$line" | grep -q -- '-- unavailable: ' || { echo "SKIP: CUDA is available here"; exit 77; }
echo "$line" | grep -qE -- '-- unavailable: (no CUDA device|no usable CUDA device: .+|cuBLAS not found|cuDNN not found)' || {
  echo "FAIL: the reason does not say what is missing:"; echo "$line"; exit 1; }
out=$("$alma" bench "$model" -c EAGER,CUDA,FOLD+CUDA -n 8 --min-time 0 --keep-going --no-cache 2>&1)
rc=$?
[ "$rc" = 1 ] || { echo "FAIL: alma bench exit status $rc, expected 1"; echo "$out"; exit 1; }
echo "$out" | grep -q "CUDA: unavailable: " || { echo "FAIL: no unavailable CUDA row:"; echo "$out"; exit 1; }
echo "$out" | grep -q "FOLD+CUDA: unavailable: " || { echo "FAIL: no unavailable FOLD+CUDA row:"; echo "$out"; exit 1; }
echo "$out" | grep -q "EAGER: ok" || { echo "FAIL: EAGER did not run:"; echo "$out"; exit 1; }
out=$("$alma" bench "$model" -c CUDA -O cuda.host_memory=mapped -n 8 --min-time 0 --no-cache 2>&1)
rc=$?
[ "$rc" = 2 ] || { echo "FAIL: a bad cuda.host_memory value: exit status $rc, expected 2"; echo "$out"; exit 1; }
echo "$out" | grep -q "runtime option 'cuda.host_memory=mapped': the value must be one of pageable|pinned" || {
  echo "FAIL: a bad cuda.host_memory value is not named:"; echo "$out"; exit 1; }
echo "PASS"
