#!/usr/bin/env bash
# Run HERE: builds the GPU test binaries, the CLI and the Python extension for the GPU machine's
# Python 3.12 into build-dev/, and packs them into .carry/bin/bin.tar.xz (git-ignored) for
# dev/scripts/device-validate.sh, with the n = 2 kernels (MHC_KERNELS_N2) so that the GPU suites
# cover them. Needs a python3.12 with nanobind: MHC_PY312=/path/to/python3.12.
set -euo pipefail
cd "$(dirname "$0")/../.."
py=${MHC_PY312:-python3.12}
export CUDACXX=${CUDACXX:-/usr/local/cuda/bin/nvcc}
cmake -S . -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=Release -DMHC_CUDA=ON -DMHC_KERNELS_N2=ON \
  -DMHC_PYTHON=ON \
  -DPython_EXECUTABLE="$(command -v "$py")" "$@" >/dev/null
cmake --build build-dev -j "$(nproc)" --target test_cuda test_schedule test_schedule_dropped_join mhc _C
rm -rf /tmp/pk && mkdir -p /tmp/pk .carry/bin
cp build-dev/tests/test_cuda build-dev/tests/test_schedule build-dev/tests/test_schedule_dropped_join \
  build-dev/mhc build-dev/python/_C*.so /tmp/pk/
tar cJf .carry/bin/bin.tar.xz -C /tmp pk
du -h .carry/bin/bin.tar.xz
