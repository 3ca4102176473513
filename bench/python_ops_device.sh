#!/usr/bin/env bash
# Run THERE (the GPU machine), from the repository root, inside about 6 minutes: the torch ops'
# check on CUDA. Builds the wheel for the Hopper image alone (sm_90a, with the CLI for
# `mhc bench kernels`), runs the CUDA tests of the Python suite with MHC_REQUIRE_GPU=1, the C++
# kernel benchmark and bench/python_ops.py against it (host cost per call, graph GPU time).
# Carry .deps (dev/scripts/device-deps.sh) and .whl (nanobind and scikit-build-core wheels:
# pip download -d .whl --only-binary=:all: --python-version 3.12 nanobind scikit-build-core).
# Logs and JSON go to $OUT; the last lines printed are the summary.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-device-out}
mkdir -p "$out"
commit=${MHC_COMMIT:-unknown}
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
export NCCL_NVLS_ENABLE=0 MHC_COMMIT="$commit"
# Every step ends by the deadline (MHC_DEVICE_SECONDS from the start, default 345), each keeping
# `reserve` seconds for the steps after it.
deadline=$((SECONDS + ${MHC_DEVICE_SECONDS:-345}))
step() {  # step NAME MAX_SECONDS RESERVE COMMAND...: runs, logs, records exit code and wall time
  local name=$1 limit=$2 reserve=$3 t0=$SECONDS
  shift 3
  local left=$((deadline - SECONDS - reserve))
  [ "$left" -lt "$limit" ] && limit=$left
  [ "$limit" -lt 5 ] && limit=5
  timeout "$limit" "$@" >"$out/$name.log" 2>&1
  echo "$name rc=$? $((SECONDS - t0))s (limit ${limit}s)" | tee -a "$out/steps.txt"
}
echo "$gpu, driver $driver, $(python3 -c 'import torch; print(torch.__version__)')" | tee "$out/steps.txt"
python3 -m pip install -q --no-index --find-links .whl nanobind scikit-build-core >"$out/setup.log" 2>&1
step build 240 150 python3 -m pip install --no-build-isolation --no-deps . \
  -C build-dir=build/wheel-ops -C cmake.define.MHC_CUDA=ON -C cmake.define.MHC_CLI=ON \
  -C cmake.define.MHC_CUDA_ARCHS=90a -C cmake.define.MHC_CUDA_PTX= \
  -C cmake.define.MHC_DEPS_DIR="$PWD/.deps" -C cmake.define.CMAKE_CXX_COMPILER=/usr/bin/g++ \
  -C cmake.define.CMAKE_CUDA_HOST_COMPILER=/usr/bin/g++
step cpp_bench 40 130 build/wheel-ops/mhc bench kernels --tokens 1,16,128 --json "$out/cpp-kernels.json"
MHC_REQUIRE_GPU=1 step pytest_gpu 90 70 python3 -m pytest -q -ra tests/python/test_cuda.py \
  tests/python/test_c_cuda.py tests/python/test_parameters.py tests/python/test_configure.py \
  tests/python/test_workspace.py -k "cuda or configure"
step py_bench 120 2 python3 bench/python_ops.py --cpp-json "$out/cpp-kernels.json" \
  --out "$out/python-ops.json" --commit "$commit" --driver "$driver" --tokens 1,16,128 \
  --rounds 3 --modes no_grad,inference_mode
tail -4 "$out/pytest_gpu.log"
sed -n '/^op (no_grad)/,$p' "$out/py_bench.log"
cat "$out/steps.txt"
