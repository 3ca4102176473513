#!/usr/bin/env bash
# Run THERE (the GPU machine), from the repository root, in about 4 minutes: the torch ops' host
# cost and graph GPU time. Builds the CLI and both Python extensions for sm_90a in build-check
# (incrementally where dev/scripts/device-check.sh built it before), then `mhc bench kernels`,
# bench/python_ops.py against it (host cost per call: the stable ops, their no-grad twins, the
# bound ops of docs/sites.md, the former DLPack ops, bare mhc._C, torch.add; the per-phase host
# profile; graph GPU time timed by the C++ benchmark's own loop and by the former Python loop,
# with each graph's nodes), the eager Hugging Face decode step (unpatched, patched, patched
# through the former ops) and the CUDA tests of the Python suite (the bound sites' included).
# Carry .deps and .whl. JSON and logs go to $OUT; a table is printed last. MHC_DEVICE_SECONDS:
# the whole run's deadline (default 235).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-device-out}
logs=/tmp/mhc-ops-logs  # at most 8 files come back: the JSON, steps.txt and four logs
mkdir -p "$out" "$logs"
commit=${MHC_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/python
deadline=$((SECONDS + ${MHC_DEVICE_SECONDS:-235}))
step() {  # step NAME MAX_SECONDS RESERVE COMMAND...: logs to $logs/NAME.log, never past the deadline
  local name=$1 limit=$2 reserve=$3 t0=$SECONDS
  shift 3
  local left=$((deadline - SECONDS - reserve))
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -lt 5 ]; then echo "$name skipped (no time left)" >>"$out/steps.txt"; return; fi
  timeout "$limit" "$@" >"$logs/$name.log" 2>&1
  echo "$name rc=$? $((SECONDS - t0))s (limit ${limit}s)" >>"$out/steps.txt"
}
b=build-check
echo "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), driver $driver," \
  "torch $(python3 -c 'import torch; print(torch.__version__)'), commit $commit" >"$out/steps.txt"
python3 -m pip install -q --no-index --find-links .whl nanobind scikit-build-core >/dev/null 2>&1
step build 150 80 bash -c "cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER=/usr/bin/g++ -DCMAKE_CUDA_HOST_COMPILER=/usr/bin/g++ -DMHC_CUDA=ON \
  -DMHC_CUDA_ARCHS=90a -DMHC_CUDA_PTX= -DMHC_PYTHON=ON -DMHC_TORCH_OPS=ON \
  -DMHC_DEPS_DIR=$PWD/.deps -DPython_EXECUTABLE=$(command -v python3) && \
  cmake --build $b -j $(nproc) --target mhc _C mhc_torch_ops && \
  cp $b/python/_C*.so $b/python/_torch_ops*.so python/mhc/"
step cpp_bench 35 45 $b/mhc bench kernels --tokens 1,16,128 --json "$out/cpp-kernels.json"
step py_bench 95 0 python3 bench/python_ops.py --cpp-json "$out/cpp-kernels.json" \
  --out "$out/python-ops.json" --commit "$commit" --driver "$driver" --tokens 1,16,128 \
  --rounds 3 --calls 1000 --modes no_grad
step hf_eager 40 0 python3 bench/hf_decode.py --out "$out/hf-eager.json" --commit "$commit" \
  --driver "$driver" --variants eager_unpatched,eager_patched,eager_patched_dlpack
MHC_REQUIRE_GPU=1 step pytest_cuda 60 0 python3 -m pytest -q -x -p no:cacheprovider \
  tests/python/test_launches.py tests/python/test_cuda.py tests/python/test_c_cuda.py \
  tests/python/test_site.py tests/python/test_site_fakes.py
for f in build py_bench hf_eager pytest_cuda; do cp "$logs/$f.log" "$out/" 2>/dev/null; done
grep -E "error:|FAILED:" "$out/build.log" | head -5
tail -2 "$out/pytest_cuda.log" 2>/dev/null
grep -E "^(eager_|\{)" "$out/hf_eager.log" 2>/dev/null | cut -c1-200
grep -E "^profile " "$out/py_bench.log" 2>/dev/null
sed -n '/^op (no_grad)/,$p' "$out/py_bench.log" 2>/dev/null
cat "$out/steps.txt"
