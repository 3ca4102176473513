#!/usr/bin/env bash
# Run THERE (the nvidia-h200-x2 machine), after dev/scripts/device-deps.sh here and with .deps carried:
# the tensor-parallel work of one device session in one call (docs/tensor_parallel.md). Builds
# test_dist, test_core and mhc (NCCL is found by cmake/Nccl.cmake, also inside Python's
# nvidia-nccl wheel), runs the TP tests, `mhc run --tp 2` and `mhc bench overlap --tp 2`.
# Logs and JSON go to $OUT. Steps: MHC_STEPS (default "info build test run bench").
set -uo pipefail
cd "$(dirname "$0")/../.."
# NVLink multicast must stay off on the shared machines (KINDS.md); the runner also forces it.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
OUT=${OUT:-/tmp/mhc-out}
mkdir -p "$OUT"
steps=${MHC_STEPS:-"info build test run bench"}
has() { [[ " $steps " == *" $1 "* ]]; }
stamp() { echo "=== $1 $(date -u +%H:%M:%S)"; }
status=0
# The .git a GPU machine sees can be stale (it recorded an older commit once): take the commit
# from the caller (MHC_COMMIT=$(git rev-parse --short HEAD) here), never from git there.
export MHC_COMMIT=${MHC_COMMIT:-unknown}

if has info; then
  stamp info
  { nvidia-smi; nvidia-smi topo -m; nvcc --version | tail -1
    python3 -c 'import nvidia.nccl as m; print("nccl wheel:", list(m.__path__)[0])'; } \
    >"$OUT/info.log" 2>&1
  tail -25 "$OUT/info.log"
fi
if has build; then
  stamp build
  MHC_TARGETS="test_dist test_core mhc" dev/scripts/device-build.sh >"$OUT/build.log" 2>&1 ||
    { grep -E "error|NCCL" "$OUT/build.log" | head -30; exit 1; }
  grep -E "mhc: (CUDA|NCCL)" "$OUT/build.log"
fi
if has test; then
  stamp "test_dist"
  timeout "${MHC_TEST_TIMEOUT:-500}" build-device/tests/test_dist >"$OUT/test_dist.log" 2>&1 || status=1
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED  \]|tests ran|Failure|error" "$OUT/test_dist.log" | head -40
  build-device/tests/test_core --gtest_filter='ShardRange*:StandinShard*:CheckTp*:TensorParallel*:PlannedAll*:RequireRun*' \
    >"$OUT/test_core_tp.log" 2>&1 || status=1
  tail -1 "$OUT/test_core_tp.log"
fi
if has run; then
  stamp "mhc run --tp 2"
  timeout 300 build-device/mhc run --tp 2 --kernel-config '{"enable_mhc_overlap": true}' \
    2>&1 | tee "$OUT/run-tp2.log" | tail -20 || status=1
  timeout 300 build-device/mhc run --tp 2 --mode eager --layers 4 2>&1 | tail -4 || status=1
fi
if has bench; then
  stamp "bench overlap --tp 2"
  timeout 400 build-device/mhc bench overlap --tp 2 --layers 40 --reps ${MHC_REPS:-40} \
    --json "$OUT/overlap-tp2.json" 2>&1 | tee "$OUT/overlap-tp2.log" || status=1
fi
stamp done
exit $status
