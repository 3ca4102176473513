#!/usr/bin/env bash
# Run THERE (the GPU machine), from the repository root, in one call: builds the GPU test
# programs, the CLI and both Python extensions (mhc._C and the torch ops library) in one CMake
# build for sm_90a alone, then runs the GPU suites side by side, the sanitizers on the Sanitize*
# cases, `mhc plan` / `mhc run`, the Python suite on CUDA and the torch ops' benchmarks. Carry
# .deps (dev/scripts/device-deps.sh) and .whl (nanobind and scikit-build-core wheels).
#
# MHC_CHECK_STEPS picks steps (default: all): build cuda matrix schedule pytest sanitize run bench
# hf (the Hugging Face decode step, last, where time is left).
# MHC_CHECK_N2=ON builds the n = 2 kernels too (default: the default build, without them).
# MHC_CHECK_FILTER: an extra --gtest_filter for test_cuda (default: everything but the matrix).
# Logs go to $OUT/logs.tar.gz; the summary is printed last.
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1 MHC_REQUIRE_GPU=1
OUT=${OUT:-/tmp/mhc-out}
logs=/tmp/mhc-logs
mkdir -p "$OUT" "$logs"
steps=" ${MHC_CHECK_STEPS:-build cuda matrix schedule pytest sanitize run bench hf} "
want() { [[ "$steps" == *" $1 "* ]]; }
commit=${MHC_COMMIT:-unknown}
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)
# Every step ends by the deadline (MHC_CHECK_SECONDS from the start, default 520), keeping
# MHC_CHECK_RESERVE seconds (default 15) for the summary.
deadline=$((SECONDS + ${MHC_CHECK_SECONDS:-520} - ${MHC_CHECK_RESERVE:-15}))
step() {  # step NAME SECONDS COMMAND...: at most SECONDS, and never past the deadline
  local name=$1 limit=$2 t0=$SECONDS
  shift 2
  local left=$((deadline - SECONDS))
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -lt 5 ]; then
    echo "$name skipped (no time left)" >>"$logs/steps.txt"
    return
  fi
  timeout "$limit" "$@" >"$logs/$name.log" 2>&1
  echo "$name rc=$? $((SECONDS - t0))s (limit ${limit}s)" >>"$logs/steps.txt"
}
echo "$gpu, driver $driver, torch $(python3 -c 'import torch; print(torch.__version__)')" \
  >"$logs/info.log"
b=build-check
# With the peers' kernels carried (.peers, dev/peers/README.md) the same build links the side-by-side
# benchmark too, which dev/scripts/device-bench.sh then runs without compiling mhc's kernels again.
peers=()
if [ -f .peers/build/libpeers.a ]; then peers=(-DMHC_LAB=ON -DMHC_PEERS_DIR="$PWD/.peers"); fi
if want build; then
  python3 -m pip install -q --no-index --find-links .whl nanobind scikit-build-core \
    >"$logs/setup.log" 2>&1
  step configure 60 env CXX=/usr/bin/g++ CC=/usr/bin/gcc cmake -S . -B $b -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=/usr/bin/g++ \
    -DCMAKE_CUDA_HOST_COMPILER=/usr/bin/g++ -DMHC_CUDA=ON -DMHC_CUDA_ARCHS=90a -DMHC_CUDA_PTX= \
    -DMHC_KERNELS_N2=${MHC_CHECK_N2:-OFF} -DMHC_PYTHON=ON -DMHC_TORCH_OPS=ON -DMHC_DEPS_DIR="$PWD/.deps" \
    -DPython_EXECUTABLE="$(command -v python3)" "${peers[@]}"
  step build 300 cmake --build $b -j "$(nproc)" --target test_cuda test_schedule \
    test_schedule_dropped_join mhc _C mhc_torch_ops ${peers:+mhc_bench_peers} -- -k 0
  cp $b/python/_C*.so $b/python/_torch_ops*.so python/mhc/ 2>>"$logs/setup.log"
fi
t=$b/tests
# The timings first, on an idle GPU; then the suites side by side until the deadline.
if want run; then
  step plan 30 $b/mhc plan --tokens 1,16,1024 --hidden 5120 --hc 4
  step run 90 $b/mhc run
  [ "${MHC_CHECK_N2:-OFF}" = ON ] && step run_n2 60 $b/mhc run --hc 2 --tokens 16
fi
if want bench; then
  step cpp_bench 60 $b/mhc bench kernels --tokens 1,16,128 --json "$OUT/cpp-kernels.json"
  PYTHONPATH=$PWD/python step py_bench 150 python3 bench/python_ops.py \
    --cpp-json "$OUT/cpp-kernels.json" --out "$OUT/python-ops.json" --commit "$commit" \
    --driver "$driver" --tokens 1,16,128 --rounds 3 --modes no_grad,inference_mode
fi
new='*ThirtyTwoColumnStages*:*HalfTiles*:*WholeTiles*:*WideStages*'
# test_cuda in MHC_CHECK_SHARDS processes side by side (gtest's sharding; default 8): the float64
# host references, not the GPU, bound the suite, and a 16-core machine runs it in about a fifth of
# the time. A test that leaks state into the next (a CUDA error left set) shows in a shard's order.
shards=${MHC_CHECK_SHARDS:-8}
for ((i = 0; i < shards; i++)); do
  want cuda && { GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i step "test_cuda_$i" 300 \
    $t/test_cuda --gtest_filter="${MHC_CHECK_FILTER:--CudaBoundaryMatrix.*}"; } &
done
want matrix && { step test_matrix 420 $t/test_cuda --gtest_filter='CudaBoundaryMatrix.*'; } &
want schedule && { step test_schedule 240 $t/test_schedule; step dropped_join 60 $t/test_schedule_dropped_join; } &
# The Python suite in MHC_CHECK_PYTEST_WORKERS processes (pytest-xdist, in the GPU machine's
# image; default 6).
want pytest && { PYTHONPATH=$PWD/python step pytest 300 python3 -m pytest -q -ra -p no:cacheprovider \
  -p xdist -n "${MHC_CHECK_PYTEST_WORKERS:-6}" tests/python; } &
wait
if want sanitize; then
  for tool in memcheck racecheck synccheck; do
    step "sanitize-$tool" 90 compute-sanitizer --tool "$tool" --error-exitcode 9 $t/test_cuda \
      --gtest_filter="Sanitize*:-$new"
  done
fi
if want hf; then
  PYTHONPATH=$PWD/python step hf_decode 150 python3 bench/hf_decode.py \
    --out "$OUT/hf-decode.json" --commit "$commit" --driver "$driver"
fi
tar czf "$OUT/logs.tar.gz" -C /tmp mhc-logs
cat "$logs/info.log"
grep -E "error:|FAILED:" "$logs/build.log" 2>/dev/null | head -20
if ls "$logs"/test_cuda_*.log >/dev/null 2>&1; then
  cat "$logs"/test_cuda_*.log >"$logs/test_cuda.log"
  echo "test_cuda ($shards shards): $(grep -c '^\[       OK \]' "$logs/test_cuda.log") ok of" \
    "$(grep -oE 'Running [0-9]+ tests' "$logs/test_cuda.log" | awk '{s += $2} END {print s}')"
  grep -E "^\[  FAILED  \] .*\(|^\[  SKIPPED \] [A-Z]" "$logs/test_cuda.log" | head -20
fi
for f in test_matrix test_schedule dropped_join; do
  [ -f "$logs/$f.log" ] || continue
  echo "$f: $(grep -c '^\[       OK \]' "$logs/$f.log") ok, last started: $(grep '^\[ RUN' "$logs/$f.log" | tail -1)"
  grep -E "^\[  FAILED  \]|^\[  PASSED  \]|^\[  SKIPPED \] [0-9]" "$logs/$f.log" | head -12
done
[ -f "$logs/pytest.log" ] && { grep -E "^FAILED|^ERROR" "$logs/pytest.log" | head -20; tail -2 "$logs/pytest.log"; }
for tool in memcheck racecheck synccheck; do
  [ -f "$logs/sanitize-$tool.log" ] && tail -1 "$logs/sanitize-$tool.log"
done
[ -f "$logs/run.log" ] && grep -E "result:|head" "$logs/run.log" | head -6
[ -f "$logs/run_n2.log" ] && grep -E "result:" "$logs/run_n2.log" | head -2
[ -f "$logs/py_bench.log" ] && tail -30 "$logs/py_bench.log"
[ -f "$logs/hf_decode.log" ] && tail -8 "$logs/hf_decode.log"
cat "$logs/steps.txt"
