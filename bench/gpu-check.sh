#!/usr/bin/env bash
# The CUDA runtime's checks on a machine with an NVIDIA GPU, in one call of about 8 minutes:
#   here:  bench/device-bundle.sh --gpu              (alma, model_test, alma_conformance + libraries)
#   there: bash bench/gpu-check.sh                   (from the working tree, with .device carried)
# 1. the model zoo exported there by PyTorch, through CUDA and FOLD+CUDA against PyTorch's outputs
# 2. tests/runtimes/cuda/check_cuda.py: placement, the host/device split, each option
# 3. bench/gpu_peer.py: alma's CUDA rows beside PyTorch eager, TorchScript and torch.compile
# 4. every ONNX node test through CUDA (the node tests of the onnx package there)
# Logs and JSON go to $OUT (the device tool's folder) or ./gpu-check-out. Each step has its own time
# limit, so a hang in one still leaves the others' results.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-check-out}
mkdir -p "$out"
[ -f .device/env.sh ] || { echo "gpu-check: no .device bundle (run bench/device-bundle.sh --gpu first)" >&2; exit 2; }
# shellcheck disable=SC1091
source .device/env.sh
# cuBLAS and cuDNN: the machine's CUDA, else PyTorch's nvidia wheels
libs=$(python3 - <<'PY'
import importlib.util, os
dirs = []
for m in ("nvidia.cublas", "nvidia.cudnn", "nvidia.cu13", "nvidia.cuda_runtime"):
    try:
        s = importlib.util.find_spec(m)
    except Exception:
        s = None
    for d in (s.submodule_search_locations if s else []) or []:
        if os.path.isdir(os.path.join(d, "lib")):
            dirs.append(os.path.join(d, "lib"))
print(":".join(dirs))
PY
)
export LD_LIBRARY_PATH="$LD_LIBRARY_PATH${libs:+:$libs}"
{
  date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())"
  alma list | grep -E '^  CUDA |^ 8[01] '
} 2>&1 | tee "$out/system.txt"

models=/tmp/alma-gpu-models
names="mnist_cnn_op13 mnist_cnn_view_op13 mlp_op14 mlp_gelu_op13 conv1d_op13 transformer_op14 transformer_embed_op14 mobilenet_v2_op13 resnet18_op13"
timeout 150 python3 tests/models/export_models.py "$models" $names > "$out/export.log" 2>&1 || echo "export: exit $?" | tee -a "$out/system.txt"

{
  pass=0; fail=0
  for n in $names; do
    for c in CUDA FOLD+CUDA; do
      if timeout 60 model_test "$models" "$n" "$c" > /tmp/mt.log 2>&1; then pass=$((pass + 1)); echo "PASS $n $c"
      else fail=$((fail + 1)); echo "FAIL $n $c"; tail -5 /tmp/mt.log; fi
    done
  done
  echo "model tests: $pass passed, $fail failed"
} 2>&1 | tee "$out/models.log"

timeout 120 python3 tests/runtimes/cuda/check_cuda.py "$(command -v alma)" examples/models/mnist_cnn.onnx 2>&1 | tee "$out/check_cuda.log"

timeout 240 python3 bench/gpu_peer.py --alma "$(command -v alma)" --models "$models" --min-time 0.5 \
  --json "$out/gpu_peer.json" 2>&1 | tee "$out/gpu_peer.log"

node=$(python3 -c "import onnx, os; print(os.path.join(os.path.dirname(onnx.__file__), 'backend', 'test', 'data', 'node'))")
timeout 120 alma_conformance --conversion CUDA --known tests/ops/known_deviations.txt \
  --known tests/runtimes/cuda/known_cuda.txt "$node" > "$out/conformance.log" 2>&1
echo "conformance: exit $?" | tee -a "$out/system.txt"
tail -30 "$out/conformance.log"
