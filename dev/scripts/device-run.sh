#!/usr/bin/env bash
# Run THERE: one device session's work in one call. Builds, runs the GPU tests, the
# compute-sanitizer suite and the kernel benchmark, and leaves logs and the JSON under $OUT.
# Steps are chosen with MHC_STEPS (default "info build test sanitize bench").
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp/mhc-out}
mkdir -p "$OUT"
steps=${MHC_STEPS:-"info build test sanitize bench"}
build_dir=${MHC_BUILD_DIR:-build-device}
status=0
has() { [[ " $steps " == *" $1 "* ]]; }
stamp() { echo "=== $1 $(date -u +%H:%M:%S)"; }

if has info; then
  stamp info
  { nvidia-smi; nvcc --version; compute-sanitizer --version | head -2; } 2>&1 | tee "$OUT/info.log"
fi
if has build; then
  stamp build
  dev/scripts/device-build.sh >"$OUT/build.log" 2>&1 || grep -E "error|FAILED" "$OUT/build.log" | head -20
  tail -2 "$OUT/build.log"
  [ -x "$build_dir/tests/test_cuda" ] || { tail -40 "$OUT/build.log"; exit 1; }
fi
bin="$build_dir/tests/test_cuda"
if has test; then
  stamp test
  timeout "${MHC_TEST_TIMEOUT:-300}" "$bin" ${MHC_GTEST_ARGS:-} >"$OUT/test_cuda.log" 2>&1 || status=1
  grep -E "^\[  (PASSED|FAILED) |FAILED|tests ran|Failure" "$OUT/test_cuda.log" | head -40
fi
if has sanitize; then
  for tool in memcheck racecheck synccheck; do
    stamp "sanitize $tool"
    timeout "${MHC_SANITIZE_TIMEOUT:-120}" compute-sanitizer --tool "$tool" --error-exitcode 9 "$bin" --gtest_filter='Sanitize*' \
      >"$OUT/sanitize-$tool.log" 2>&1 || status=1
    tail -3 "$OUT/sanitize-$tool.log"
  done
fi
if has bench; then
  stamp bench
  if [ -x "$build_dir/mhc" ]; then
    timeout "${MHC_BENCH_TIMEOUT:-200}" "$build_dir/mhc" bench kernels ${MHC_BENCH_ARGS:-} --json "$OUT/bench.json" 2>&1 |
      tee "$OUT/bench.log" || status=1
  else
    echo "mhc did not build: no benchmark"
    status=1
  fi
fi
stamp done
exit $status
