#!/usr/bin/env bash
# Runs bench/peer_bench.py: alma's conversions beside ONNX Runtime and PyTorch on this machine.
# Makes .venv-bench (Debian's python3 with its torch, plus onnxruntime from PyPI) on first use.
# Usage: bench/run.sh [--quick] [--threads N] [--models a,b] [--markdown OUT.md] [--json OUT.json]
# Writes bench/results/peer-<UTC time>-<commit>.json (docs/performance.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
venv=.venv-bench
if [ ! -x "$venv/bin/python" ]; then
  /usr/bin/python3 -m venv --system-site-packages "$venv"
fi
"$venv/bin/python" -c "import onnxruntime" 2>/dev/null || "$venv/bin/pip" install -q onnxruntime
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)" --target alma
cmake --build build -j "$(nproc)" --target sgemm_peak 2>/dev/null || true
# A result file per run (machine, versions, commit inside); a --json given here wins.
out="bench/results/peer-$(date -u +%Y%m%dT%H%MZ)-$(git describe --always --dirty 2>/dev/null || echo unknown).json"
exec "$venv/bin/python" bench/peer_bench.py --alma build/alma --json "$out" "$@"
