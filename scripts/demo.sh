#!/usr/bin/env bash
# The main job: install dependencies, build alma, and benchmark the bundled example model across
# every conversion option available on this machine (table on stdout, JSON/CSV in build/demo/).
# Usage: scripts/demo.sh [MODEL.onnx] [extra `alma bench` options...]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
# alma, its libraries (what `cmake --install build` installs) and the example programs
cmake --build build -j "$(nproc)" --target alma alma_shared alma_static linear_bench mnist_bench
model="${1:-examples/models/mnist_cnn.onnx}"
shift || true
mkdir -p build/demo
./build/alma info "$model"
echo
rc=0
./build/alma bench "$model" --keep-going --json build/demo/results.json --csv build/demo/results.csv "$@" || rc=$?
echo
echo "demo: results saved as build/demo/results.json and build/demo/results.csv (formats: docs/json.md)"
echo "demo: the alma binary is build/alma; to run it as 'alma': export PATH=\"$PWD/build:\$PATH\""
echo "      (or install it: cmake --install build --prefix ~/.local, with ~/.local/bin on PATH)"
exit "$rc"
