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

# ONNX Runtime from PyPI, for the tests that run alma's saved converted models with it
# (tests/passes_quant, e2e.save_converted_ort): a venv that also sees Debian's numpy, onnx and
# torch. Offline, the tests that need it report SKIP (in ctest's output) and the rest run.
ORT_PYTHON=""
echo "== ONNX Runtime for the saved-model checks (.venv-test)"
if { [ -x .venv-test/bin/python ] || /usr/bin/python3 -m venv --system-site-packages .venv-test; } &&
   { .venv-test/bin/python -c "import onnxruntime" 2>/dev/null ||
     .venv-test/bin/python -m pip install -q --disable-pip-version-check --retries 1 --timeout 30 onnxruntime; } &&
   .venv-test/bin/python -c "import onnxruntime, numpy, onnx"; then
  ORT_PYTHON="$PWD/.venv-test/bin/python"
  echo "onnxruntime $("$ORT_PYTHON" -c 'import onnxruntime; print(onnxruntime.__version__)') in $ORT_PYTHON"
else
  echo "WARNING: could not install onnxruntime into .venv-test (offline?): the ONNX Runtime checks of saved" >&2
  echo "WARNING: converted models will be SKIPPED (e2e.save_converted_ort shows as Skipped in ctest)" >&2
fi

# ONNX Runtime's quantizer (tests/quant_ort: models it quantizes, run through alma and compared with
# it) needs onnx >= 1.16 and ml_dtypes, which Debian's onnx 1.12 and numpy cannot share a venv with:
# an isolated venv. Offline, those tests report SKIP.
ORT_QUANT_PYTHON=""
echo "== ONNX Runtime's quantizer (.venv-ort)"
if { [ -x .venv-ort/bin/python ] || /usr/bin/python3 -m venv .venv-ort; } &&
   { .venv-ort/bin/python -c "import onnxruntime.quantization" 2>/dev/null ||
     .venv-ort/bin/python -m pip install -q --disable-pip-version-check --retries 1 --timeout 30 onnxruntime onnx onnx-ir; } &&
   .venv-ort/bin/python -c "import onnxruntime.quantization" 2>/dev/null; then
  ORT_QUANT_PYTHON="$PWD/.venv-ort/bin/python"
  # its MatMulNBitsQuantizer (tests/ops_nbits) imports onnx_ir, which older venvs lack
  .venv-ort/bin/python -c "import onnx_ir" 2>/dev/null ||
    .venv-ort/bin/python -m pip install -q --disable-pip-version-check --retries 1 --timeout 30 onnx-ir ||
    echo "WARNING: could not install onnx-ir into .venv-ort (offline?): tests/ops_nbits will be SKIPPED" >&2
else
  echo "WARNING: could not install onnxruntime and onnx into .venv-ort (offline?): tests/quant_ort will be SKIPPED" >&2
fi

echo "== build (release, -Werror)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DALMA_WERROR=ON \
  -DALMA_ONNX_TESTS_DIR="$ALMA_ONNX_TESTS_DIR" -DALMA_ORT_PYTHON="$ORT_PYTHON" \
  -DALMA_ORT_QUANT_PYTHON="$ORT_QUANT_PYTHON" >/dev/null
cmake --build build -j "$JOBS"
echo "== tests (label fast)"
ctest --test-dir build -L fast -j "$JOBS" --output-on-failure --timeout 900

if [ "${1:-}" = "--quick" ]; then exit 0; fi

echo "== sanitizer build (ASan+UBSan)"
CC=clang cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DALMA_SANITIZE=ON -DALMA_WERROR=ON \
  -DALMA_FUZZ=ON -DALMA_ONNX_TESTS_DIR="$ALMA_ONNX_TESTS_DIR" -DALMA_ORT_PYTHON="$ORT_PYTHON" \
  -DALMA_ORT_QUANT_PYTHON="$ORT_QUANT_PYTHON" >/dev/null
cmake --build build-asan -j "$JOBS"
echo "== tests under sanitizers (labels fast, sanitize, fuzz)"
# LSAN_OPTIONS: leaks whose stack passes through the uninstrumented libraries that the ORT and
# OPENVINO runtimes load are theirs (the list says which and why).
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  LSAN_OPTIONS="suppressions=$PWD/tests/runtimes/lsan-foreign.supp:print_suppressions=0" \
  ctest --test-dir build-asan -L 'fast|fuzz' -LE 'nosan' -j "$JOBS" --output-on-failure --timeout 1200
