#!/usr/bin/env bash
# Packs a Release build of alma with the shared libraries a machine without alma's Debian
# packages lacks (oneDNN, XNNPACK, protobuf-c, cJSON, ...) into .device/, so benchmarks can run on
# a lent machine of another kind (e.g. an AVX-512/AMX Xeon) from a copy of the working tree:
#   bench/device-bundle.sh                     # here: build + pack (about 50 MB)
#   source .device/env.sh && alma list         # there: put the bundle first on PATH/LD_LIBRARY_PATH
#   bench/device-bundle.sh --gpu               # the GPU checks' bundle (bench/gpu-check.sh): EAGER and
#                                              # CUDA only, with model_test and alma_conformance (~25 MB)
# Needs a glibc there at least as new as here (Debian 12: 2.36). cuBLAS and cuDNN are not packed:
# the CUDA runtime loads them at run time from the machine's CUDA or PyTorch's nvidia wheels.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--gpu" ]; then
  build=build-device-gpu
  # the CPU runtimes' libraries would not fit the 64 MiB a device call carries, and the GPU checks
  # compare CUDA with EAGER only
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DALMA_BUILD_TESTS=ON -DALMA_WITH_DNNL=OFF \
    -DALMA_WITH_XNNPACK=OFF -DALMA_BLAS=OFF -DALMA_WITH_ORT=OFF -DALMA_WITH_OPENVINO=OFF >/dev/null
  grep -q 'ALMA_HAVE_CUDA' "$build/build.ninja" || { echo "device-bundle: the CUDA runtime was not built (nvcc, cuBLAS, cuDNN headers?)" >&2; exit 1; }
  bins="alma model_test alma_conformance"
else
  build=build-device
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DALMA_BUILD_TESTS=OFF >/dev/null
  bins="alma sgemm_peak"
fi
# shellcheck disable=SC2086
cmake --build "$build" -j "$(nproc)" --target $bins
rm -rf .device && mkdir -p .device/bin .device/lib
for b in $bins; do
  f=$(find "$build" -maxdepth 3 -type f -name "$b" -perm -u+x | head -1)
  cp "$f" .device/bin/
  strip --strip-debug ".device/bin/$b"
  # Every library it links except glibc's own and the C++/GCC runtimes (present wherever gcc is).
  ldd "$f" | awk '$3 ~ /^\// {print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libstdc++.so*|libgcc_s.so*) ;;
      *) cp -L -n "$lib" .device/lib/ ;;
    esac
  done
done
cat > .device/env.sh <<'SH'
# source .device/env.sh: alma from the bundle
_d="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export PATH="$_d/bin:$PATH" LD_LIBRARY_PATH="$_d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
SH
du -sh .device
