#!/usr/bin/env bash
# Builds alma and runs the test suite: the normal build (warnings as errors) with every fast test,
# then an ASan+UBSan build running the unit, conformance and bad-input tests, then a bounded fuzz run.
# Usage: scripts/test.sh [--quick]   (--quick: normal build and fast tests only)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
JOBS="${JOBS:-$(nproc)}"
export ALMA_ONNX_TESTS_DIR="${ALMA_ONNX_TESTS_DIR:-$PWD/build-cache/onnx-tests}"
bash scripts/fetch-onnx-tests.sh "$ALMA_ONNX_TESTS_DIR"

echo "== build (release, -Werror)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DALMA_WERROR=ON \
  -DALMA_ONNX_TESTS_DIR="$ALMA_ONNX_TESTS_DIR" >/dev/null
cmake --build build -j "$JOBS"
echo "== tests (label fast)"
ctest --test-dir build -L fast -j "$JOBS" --output-on-failure --timeout 900

if [ "${1:-}" = "--quick" ]; then exit 0; fi

echo "== sanitizer build (ASan+UBSan)"
CC=clang cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DALMA_SANITIZE=ON -DALMA_WERROR=ON \
  -DALMA_FUZZ=ON -DALMA_ONNX_TESTS_DIR="$ALMA_ONNX_TESTS_DIR" >/dev/null
cmake --build build-asan -j "$JOBS"
echo "== tests under sanitizers (labels fast, sanitize, fuzz)"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan -L 'fast|fuzz' -LE 'nosan' -j "$JOBS" --output-on-failure --timeout 1200
