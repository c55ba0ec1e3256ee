#!/bin/sh
# The ORT runtime without a usable Python environment: `alma list` gives the reason (naming the
# interpreter it looked for), and `alma bench -c ORT` reports the row unavailable (exit 1), while
# EAGER runs; a bad value of its ort.spinning option is a usage error (exit 2) naming it.
set -u
alma="$1"
model="$2"
out=$(ALMA_ORT_PYTHON=/nonexistent/venv/bin/python "$alma" list 2>&1)
echo "$out" | grep -q "ORT .*unavailable: no Python interpreter at /nonexistent/venv/bin/python" || {
  echo "FAIL: alma list does not say why ORT is unavailable:"; echo "$out"; exit 1; }
out=$(ALMA_ORT_PYTHON=/nonexistent/venv/bin/python "$alma" bench "$model" -c EAGER,ORT -n 8 --min-time 0 \
  --keep-going --no-cache 2>&1)
rc=$?
[ "$rc" = 1 ] || { echo "FAIL: alma bench exit status $rc, expected 1"; echo "$out"; exit 1; }
echo "$out" | grep -q "ORT: unavailable: .*no Python interpreter at /nonexistent" || {
  echo "FAIL: no unavailable ORT row:"; echo "$out"; exit 1; }
echo "$out" | grep -q "EAGER: ok" || { echo "FAIL: EAGER did not run:"; echo "$out"; exit 1; }
out=$("$alma" bench "$model" -c ORT -O ort.spinning=sometimes -n 8 --min-time 0 --no-cache 2>&1)
rc=$?
[ "$rc" = 2 ] || { echo "FAIL: a bad ort.spinning value: exit status $rc, expected 2"; echo "$out"; exit 1; }
echo "$out" | grep -q "runtime option 'ort.spinning=sometimes': the value must be one of run|on|off" || {
  echo "FAIL: a bad ort.spinning value is not named:"; echo "$out"; exit 1; }
echo "PASS"
