#!/usr/bin/env bash
# Run THERE: builds each snapshot in .ab/ (scripts/ab-prepare.sh) and runs the same command on
# each, e.g. the kernel benchmark, then prints each one's result lines side by side by name.
#   MHC_AB_ARGS="bench kernels --tokens 1,16,64 --reps 100" MHC_AB_GREP="^coefficients"
#   MHC_AB_TESTS="SinkhornByRows.*:CudaCoefficients.*"   (optional: GPU tests of each first)
set -uo pipefail
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp/mhc-out}
mkdir -p "$OUT"
args=${MHC_AB_ARGS:-"bench kernels --tokens 1,16,64,4096 --reps 100"}
pattern=${MHC_AB_GREP:-"^(coefficients|site in stack)"}
deps=$(pwd)/.deps
for tree in .ab/*/; do
  name=$(basename "$tree")
  echo "=== $name ($(cat "$tree/COMMIT")) $(date -u +%H:%M:%S)"
  ln -sfn "$deps" "$tree/.deps"
  cp -r scripts "$tree/" 2>/dev/null
  targets="mhc"
  [ -n "${MHC_AB_TESTS:-}" ] && targets="mhc test_cuda"
  (cd "$tree" && MHC_TARGETS="$targets" scripts/device-build.sh >"$OUT/build-$name.log" 2>&1) ||
    { tail -20 "$OUT/build-$name.log"; continue; }
  if [ -n "${MHC_AB_TESTS:-}" ]; then
    timeout 300 "$tree/build-device/tests/test_cuda" --gtest_filter="$MHC_AB_TESTS" \
      >"$OUT/test-$name.log" 2>&1
    grep -E "^\[  (PASSED|FAILED) |Failure" "$OUT/test-$name.log" | head -8
  fi
  # shellcheck disable=SC2086
  MHC_COMMIT=$(cat "$tree/COMMIT") timeout 300 "$tree/build-device/mhc" $args \
    >"$OUT/run-$name.log" 2>&1 || echo "run failed: $OUT/run-$name.log"
  grep -E "$pattern" "$OUT/run-$name.log" | sed "s/^/$name  /"
done
