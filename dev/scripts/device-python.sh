#!/usr/bin/env bash
# Run THERE (the GPU machine), from the repository root: builds and installs the wheel (CUDA on,
# the CLI built beside it from the same compile), then the C++ kernel benchmark, the Python op
# benchmark against it, the GPU pytest suite and the Hugging Face decode benchmark, each under
# a time limit. Logs and JSON go to $OUT (default ./device-out). Header-only deps: MHC_DEPS_DIR.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-device-out}
mkdir -p "$out"
deps=${MHC_DEPS_DIR:-$PWD/.deps}
commit=${MHC_COMMIT:-unknown}
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)
date=$(date -u +%Y-%m-%d)
export NCCL_NVLS_ENABLE=0 MHC_COMMIT="$commit"
step() {  # step NAME SECONDS COMMAND...: runs, logs, records the exit code and the wall time
  local name=$1 limit=$2 t0=$SECONDS
  shift 2
  timeout "$limit" "$@" >"$out/$name.log" 2>&1
  echo "$name rc=$? ${SECONDS}s-$t0" | awk '{split($3,a,"s-"); print $1, $2, (a[1]-a[2]) "s"}' | tee -a "$out/steps.txt"
}
# The image has no scikit-build-core or nanobind: carried as wheels in .whl (pip download here).
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --find-links .whl nanobind scikit-build-core >"$out/setup.log" 2>&1
fi
# MHC_CUDA_ARCHS=90a: the Hopper image alone (a faster build).
step build 330 python3 -m pip install --no-build-isolation --no-deps -v . -C build-dir=build/wheel-device \
  -C cmake.define.MHC_CUDA=ON -C cmake.define.MHC_CLI=ON -C cmake.define.MHC_DEPS_DIR="$deps" \
  -C cmake.define.CMAKE_CXX_COMPILER=/usr/bin/g++ -C cmake.define.CMAKE_CUDA_HOST_COMPILER=/usr/bin/g++ \
  ${MHC_CUDA_ARCHS:+-C cmake.define.MHC_CUDA_ARCHS=$MHC_CUDA_ARCHS -C cmake.define.MHC_CUDA_PTX=}
step cpp_bench 60 build/wheel-device/mhc bench kernels --tokens 1,16,128,1024 \
  --json "$out/h200-$date-cpp-kernels.json"
step py_bench 90 python3 bench/python_ops.py --cpp-json "$out/h200-$date-cpp-kernels.json" \
  --out "$out/h200-$date-python-ops.json" --commit "$commit" --driver "$driver"
MHC_REQUIRE_GPU=1 step pytest_gpu 150 python3 -m pytest -q -ra tests/python/test_cuda.py \
  tests/python/test_c_cuda.py tests/python/test_parameters.py tests/python/test_configure.py \
  tests/python/test_workspace.py tests/python/test_errors.py tests/python/test_ops.py \
  tests/python/test_fakes.py tests/python/test_compile.py tests/python/test_transformers.py \
  -k "cuda or errors or configure"
step hf_decode 150 python3 bench/hf_decode.py --out "$out/h200-$date-hf-decode.json" \
  --commit "$commit" --driver "$driver" ${MHC_HF_VARIANTS:+--variants "$MHC_HF_VARIANTS"}
tail -3 "$out/pytest_gpu.log"
sed -n '/^op (no_grad)/,$p' "$out/py_bench.log"
grep -vE "Traceback|^ " "$out/hf_decode.log" | tail -6
cat "$out/steps.txt"
