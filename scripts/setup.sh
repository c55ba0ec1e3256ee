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
  # optional: PCRE2 for RegexFullMatch (refused as unsupported without it)
  libpcre2-dev
  # tests: unit framework, sanitizers and libFuzzer (clang), model export and references
  libcmocka-dev clang libclang-rt-14-dev
  python3 python3-pip python3-venv python3-numpy python3-onnx python3-torch python3-torchvision python3-sklearn
)
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
