#!/usr/bin/env bash
# Run THERE (the GPU machine), with .deps carried: builds mhc and the plan tests, prints the
# kernel plan, runs `mhc tune` several times, the presets interleaved (one run of each preset,
# then again), then the plan tests and `mhc run` with one of the tactics files. Logs and tactics JSON go to
# $OUT. MHC_TUNE_RUNS (default 3) runs per preset; MHC_TUNE_PRESETS (default dsv41-flash);
# MHC_TUNE_ARGS extra arguments of `mhc tune` (e.g. --reps 20).
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp/mhc-out}
mkdir -p "$OUT"
export MHC_COMMIT=${MHC_COMMIT:-unknown}
export MHC_DRIVER=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)
stamp() { echo "=== $1 $(date -u +%H:%M:%S)"; }
status=0

stamp build
MHC_TARGETS="mhc test_cuda test_schedule" dev/scripts/device-build.sh >"$OUT/build.log" 2>&1 ||
  { tail -30 "$OUT/build.log"; exit 1; }
stamp plan
build-device/mhc plan | tee "$OUT/plan.txt"
build-device/mhc plan --json >"$OUT/plan.json"
for run in $(seq 1 "${MHC_TUNE_RUNS:-3}"); do
  for preset in ${MHC_TUNE_PRESETS:-dsv41-flash}; do
    stamp "tune $preset run $run"
    build-device/mhc tune --preset "$preset" ${MHC_TUNE_ARGS:-} --out "$OUT/tune-$preset-$run.json" \
      >"$OUT/tune-$preset-$run.log" 2>&1 || status=1
    tail -1 "$OUT/tune-$preset-$run.log" | head -c 300
    grep "overlap_max_tokens =" "$OUT/tune-$preset-$run.log"
  done
done
stamp tests
build-device/tests/test_cuda --gtest_filter='DevicePlan.*:CudaCoefficients.EveryTilingAndSplitCount:CudaCoefficients.BulkCopyKernelEveryShape:CudaCoefficients.RefusesAnotherHiddenSizeAndBadTuning:CudaCoefficients.LargeTokenCounts' >"$OUT/test_cuda.log" 2>&1 || status=1
build-device/tests/test_schedule >"$OUT/test_schedule.log" 2>&1 || status=1
grep -hE "^\[  (PASSED|FAILED) |FAILED  \]|tests ran" "$OUT"/test_*.log
stamp "run with tactics"
first=$(ls "$OUT"/tune-*-1.json | head -1)
build-device/mhc run --layers 8 --kernel-config "{\"enable_mhc_overlap\": true, \"tactics\": \"$first\"}" \
  >"$OUT/run-tactics.log" 2>&1 || status=1
grep -E "kernel plan|plan switches|dispatch|threshold from|schedules|result" "$OUT/run-tactics.log"
# The device tool returns at most 8 files: the tactics files and their logs travel as one archive.
tar czf "$OUT/tune.tgz" -C "$OUT" $(cd "$OUT" && ls tune-*) && rm -f "$OUT"/tune-*
stamp done
exit $status
