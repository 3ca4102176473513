#!/usr/bin/env bash
# Run THERE (the GPU machine): configures and builds into build-device/ with all cores, against
# the headers carried in .deps/ (dev/scripts/device-deps.sh). The image's default c++ is a broken
# wrapper, so g++ is named for both the host and the CUDA host compiler. The GPU suites cover the
# n = 2 kernels too (MHC_KERNELS_N2, off in the default build), and the lab's probes can be built
# by naming them in MHC_TARGETS (MHC_LAB).
set -euo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0
build_dir=${MHC_BUILD_DIR:-build-device}
CXX=/usr/bin/g++ CC=/usr/bin/gcc cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER=/usr/bin/g++ -DCMAKE_CUDA_HOST_COMPILER=/usr/bin/g++ \
  -DMHC_CUDA=ON -DMHC_KERNELS_N2=ON -DMHC_LAB=ON "$@"
# -k 0: a half-finished file elsewhere must not stop the GPU targets from building.
cmake --build "$build_dir" -j "$(nproc)" --target ${MHC_TARGETS:-test_cuda mhc} -- -k 0
