#!/usr/bin/env bash
# Run THERE (the GPU machine), after dev/scripts/device-deps.sh here and with .deps carried: the
# overlap work of one device session in one call. Builds, runs the schedule tests (and
# test_schedule_dropped_join: the same checks must see a schedule without its join fail),
# `mhc run` in FULL mode with a trace, and `mhc bench overlap` at C=5120, 4096 and 7168.
# Logs and JSON go to $OUT. Steps: MHC_STEPS (default "build test run bench").
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp/mhc-out}
mkdir -p "$OUT"
steps=${MHC_STEPS:-"build test run bench"}
has() { [[ " $steps " == *" $1 "* ]]; }
stamp() { echo "=== $1 $(date -u +%H:%M:%S)"; }
status=0
# The .git a GPU machine sees can be stale (it recorded an older commit once): take the commit
# from the caller (MHC_COMMIT=$(git rev-parse --short HEAD) here), never from git there.
export MHC_COMMIT=${MHC_COMMIT:-unknown}
export MHC_DRIVER=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)
export MHC_CLOCKS=$(nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader | head -1)

if has build; then
  stamp build
  MHC_TARGETS="test_schedule test_schedule_dropped_join mhc" dev/scripts/device-build.sh \
    >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
fi
if has test; then
  stamp "test_schedule"
  build-device/tests/test_schedule >"$OUT/test_schedule.log" 2>&1 || status=1
  grep -E "^\[  (PASSED|FAILED) |FAILED  \]|tests ran" "$OUT/test_schedule.log" | head -30
  stamp "test_schedule_dropped_join (the ordering checks must catch a missing join)"
  build-device/tests/test_schedule_dropped_join >"$OUT/test_dropped_join.log" 2>&1 || status=1
  grep -E "^\[  (PASSED|FAILED) |FAILED  \]|tests ran" "$OUT/test_dropped_join.log" | head -12
fi
if has run; then
  stamp "mhc run"
  build-device/mhc run --kernel-config '{"enable_mhc_overlap": true}' --trace "$OUT/trace.json" \
    --json >"$OUT/run.json" 2>"$OUT/run.err" || status=1
  build-device/mhc run --kernel-config '{"enable_mhc_overlap": true}' 2>&1 | tee "$OUT/run.log" | tail -25
fi
if has bench; then
  for preset in dsv41-flash dsv4-flash dsv4-pro; do
    stamp "bench overlap $preset"
    build-device/mhc bench overlap --preset "$preset" --layers 40 --reps ${MHC_REPS:-40} \
      --json "$OUT/overlap-$preset.json" 2>&1 | tee "$OUT/overlap-$preset.log" || status=1
  done
fi
stamp done
exit $status
