#!/usr/bin/env bash
# Configures and builds into build/ (Release). CUDA is used when nvcc is found.
# Extra arguments go to the CMake configure step, e.g. -DMHC_CUDA=OFF; MHC_TARGETS (space-separated)
# builds only those targets (default: all).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${CUDACXX:-}" ] && ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export CUDACXX=/usr/local/cuda/bin/nvcc
fi
build_dir=${MHC_BUILD_DIR:-build}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
# shellcheck disable=SC2086  # MHC_TARGETS is a list
cmake --build "$build_dir" -j "$(nproc)" ${MHC_TARGETS:+--target $MHC_TARGETS}
