#!/usr/bin/env bash
# Run THERE (the GPU machine) on binaries built HERE (dev/scripts/pack-device.sh, carried in
# .carry/bin): the GPU test suites (C++ and Python) in parallel, compute-sanitizer on the
# Sanitize* tests, `mhc plan` and `mhc run`. No build on the device, so the whole validation fits
# in a few minutes of device time. Logs go to $OUT/logs.tar.gz, the summary to stdout.
set -uo pipefail
cd "$(dirname "$0")/../.."
# MHC_REQUIRE_GPU=1: a test that would skip for want of a GPU (or of the sm_90a kernels, or of
# CUDA in torch or _C) fails here instead of passing as a skip.
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1 MHC_REQUIRE_GPU=1
OUT=${OUT:-/tmp/mhc-out}
logs=/tmp/mhc-logs
mkdir -p "$OUT" "$logs"
tar xJf .carry/bin/bin.tar.xz -C /tmp
bin=/tmp/pk
nccl=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${nccl}:${LD_LIBRARY_PATH:-}
cp "$bin"/_C*.so python/mhc/
step() {  # step NAME SECONDS COMMAND...
  local name=$1 limit=$2 t0=$SECONDS
  shift 2
  timeout "$limit" "$@" >"$logs/$name.log" 2>&1
  echo "$name rc=$? $((SECONDS - t0))s" >>"$logs/steps.txt"
}
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; date -u; } >"$logs/info.log" 2>&1
# The fused boundary's 32-column stages, 64-row tiles, 128-row tiles (producer warpgroup) and wide
# stages have
# their own steps: a hang there must not cost the rest of the suite.
new_kernels='*ThirtyTwoColumnStages*:*HalfTiles*:*WholeTiles*:*WideStages*'
# Issue 17's boundary matrix (up to 8192 tokens at every model shape, float64 reference on the
# host) runs beside the rest.
matrix='CudaBoundaryMatrix.*'
{ step test_cuda "${MHC_T_CUDA:-330}" "$bin/test_cuda" --gtest_filter="-$new_kernels:$matrix"
  step test_cuda_new 180 "$bin/test_cuda" --gtest_filter="$new_kernels"; } &
step test_matrix 420 "$bin/test_cuda" --gtest_filter="$matrix" &
{ step test_schedule 240 "$bin/test_schedule"; step dropped_join 60 "$bin/test_schedule_dropped_join"; } &
# The Python suite runs beside the boundary matrix (420 s), so its larger limit costs no time.
PYTHONPATH=$PWD/python step pytest 360 python3 -m pytest -q -ra -p no:cacheprovider tests/python &
wait
for tool in memcheck racecheck synccheck; do
  step "sanitize-$tool" 60 compute-sanitizer --tool "$tool" --error-exitcode 9 "$bin/test_cuda" \
    --gtest_filter="Sanitize*:-$new_kernels"
  for case in ThirtyTwoColumnStages HalfTiles WholeTiles WideStages; do
    step "sanitize-$tool-$case" 40 compute-sanitizer --tool "$tool" --error-exitcode 9 \
      "$bin/test_cuda" --gtest_filter="SanitizeFusedBoundary.$case"
  done
done
step plan 30 "$bin/mhc" plan
step run 90 "$bin/mhc" run
tar czf "$OUT/logs.tar.gz" -C /tmp mhc-logs
cat "$logs/info.log"
for f in test_cuda test_cuda_new test_matrix test_schedule dropped_join; do
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED  \]|tests ran" "$logs/$f.log" | head -12
done
tail -4 "$logs/pytest.log"
for tool in memcheck racecheck synccheck; do
  tail -1 "$logs/sanitize-$tool.log"
  for case in ThirtyTwoColumnStages HalfTiles WholeTiles WideStages; do
    tail -1 "$logs/sanitize-$tool-$case.log"
  done
done
grep -E "result:|dispatch|side by side|native|overlap" "$logs/run.log" | head -8
cat "$logs/steps.txt"
