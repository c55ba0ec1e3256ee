#!/usr/bin/env bash
# The main job: install dependencies, build alma, and benchmark the bundled example model across
# every conversion option available on this machine (table on stdout, JSON/CSV in build/demo/).
# Usage: scripts/demo.sh [MODEL.onnx] [extra `alma bench` options...]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" --target alma
model="${1:-examples/models/mnist_cnn.onnx}"
shift || true
mkdir -p build/demo
./build/alma info "$model"
echo
exec ./build/alma bench "$model" --keep-going --json build/demo/results.json --csv build/demo/results.csv "$@"
