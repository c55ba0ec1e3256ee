#!/usr/bin/env bash
# Installs everything alma needs to build, test and benchmark on Debian 12 (idempotent).
# Usage: scripts/setup.sh            (as root, or with sudo available)
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
PKGS=(
  # build
  build-essential cmake ninja-build pkg-config git
  libprotobuf-c-dev protobuf-c-compiler libonnx-dev libcjson-dev libssl-dev
  # optional runtimes (switch on when found)
  libdnnl-dev libxnnpack-dev libpthreadpool-dev libopenblas-dev libblis-dev
  # the ORT runtime embeds Python; its onnxruntime comes from PyPI (.venv-test, made by scripts/test.sh)
  python3-dev
  # optional: PCRE2 for RegexFullMatch (refused as unsupported without it)
  libpcre2-dev
  # tests: unit framework, sanitizers and libFuzzer (clang), model export and references
  libcmocka-dev clang libclang-rt-14-dev python3-pytest
  python3 python3-pip python3-venv python3-numpy python3-onnx python3-torch python3-torchvision python3-sklearn
  # tests/wild: its inputs are text rendered with Pillow in DejaVu Sans
  python3-pil fonts-dejavu-core
  # alma sweep on Slurm; tests/sweep starts a one-node cluster of its own (slurmctld + slurmd on
  # loopback, auth/none), leaving the system's Slurm configuration alone
  slurm-wlm
)
# headless Chromium (about 350 MB), which renders the HTML report in tests/report; to leave it out
# (report.chromium then reports SKIP): ALMA_SETUP_CHROMIUM=0 scripts/setup.sh
if [ "${ALMA_SETUP_CHROMIUM:-1}" = 1 ]; then PKGS+=(chromium); fi
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "setup: all build and test dependencies are installed"

# OpenVINO from PyPI for the OPENVINO runtime: alma builds against the wheel's C headers and loads
# its libopenvino_c at run time (src/runtimes/openvino/runtime.cmake finds .venv-openvino). An
# isolated venv: the wheel brings its own numpy. Offline, the runtime is not built and its tests
# report SKIP.
(
  cd "$(dirname "$0")/.."
  if [ -x .venv-openvino/bin/python ] && .venv-openvino/bin/python -c "import openvino" 2>/dev/null; then
    :
  elif { [ -x .venv-openvino/bin/python ] || /usr/bin/python3 -m venv .venv-openvino; } &&
       .venv-openvino/bin/python -m pip install -q --disable-pip-version-check --retries 1 --timeout 30 openvino; then
    echo "setup: OpenVINO $(.venv-openvino/bin/python -c 'import openvino; print(openvino.__version__)') in .venv-openvino"
  else
    echo "WARNING: could not install openvino into .venv-openvino (offline?): the OPENVINO runtime will not be built" >&2
  fi
)

# ONNX Runtime from PyPI for the ORT runtime (and the tests' references): a venv that also sees
# Debian's numpy, onnx and torch; the ORT runtime embeds its interpreter (it defaults to
# .venv-test when that exists at configure time). Offline, ORT is unavailable and says why.
(
  cd "$(dirname "$0")/.."
  if [ -x .venv-test/bin/python ] && .venv-test/bin/python -c "import onnxruntime" 2>/dev/null; then
    :
  elif { [ -x .venv-test/bin/python ] || /usr/bin/python3 -m venv --system-site-packages .venv-test; } &&
       .venv-test/bin/python -m pip install -q --disable-pip-version-check --retries 1 --timeout 30 onnxruntime; then
    echo "setup: onnxruntime $(.venv-test/bin/python -c 'import onnxruntime; print(onnxruntime.__version__)') in .venv-test"
  else
    echo "WARNING: could not install onnxruntime into .venv-test (offline?): the ORT runtime will be unavailable" >&2
  fi
)
