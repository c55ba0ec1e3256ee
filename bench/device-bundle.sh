#!/usr/bin/env bash
# Packs a Release build of alma with the shared libraries a machine without alma's Debian
# packages lacks (oneDNN, XNNPACK, protobuf-c, cJSON, ...) into .device/, so benchmarks can run on
# a lent machine of another kind (e.g. an AVX-512/AMX Xeon) from a copy of the working tree:
#   bench/device-bundle.sh                     # here: build + pack (about 50 MB)
#   source .device/env.sh && alma list         # there: put the bundle first on PATH/LD_LIBRARY_PATH
# Needs a glibc there at least as new as here (Debian 12: 2.36).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DALMA_BUILD_TESTS=OFF >/dev/null
cmake --build build-device -j "$(nproc)" --target alma sgemm_peak
rm -rf .device && mkdir -p .device/bin .device/lib
cp build-device/alma .device/bin/
cp build-device/sgemm_peak .device/bin/
# Every library alma links except glibc's own and the C++/GCC runtimes (present wherever gcc is).
ldd build-device/alma | awk '$3 ~ /^\// {print $3}' | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libstdc++.so*|libgcc_s.so*) ;;
    *) cp -L "$lib" .device/lib/ ;;
  esac
done
cat > .device/env.sh <<'SH'
# source .device/env.sh: alma from the bundle
_d="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export PATH="$_d/bin:$PATH" LD_LIBRARY_PATH="$_d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
SH
du -sh .device
