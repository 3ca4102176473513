#!/usr/bin/env bash
# Run THERE (the GPU machine), from the repository root, carrying .deps and .whl: the lab's open
# questions on the head, the FP8 launches and the ops' host cost, in one call. In $OUT:
#   head_cluster.txt    dev/cuda/head_cluster_microbench: the head cut by columns over a cluster,
#                       checked against float64 and for batch invariance, timed beside
#                       mhc::cuda::head (docs/head.md's open targets)
#   noop-dispatch.json  bench/noop_dispatch.py on this host: torch's price per call for mhc's
#                       schemas (no-op ops, CPU tensors: the dispatcher's cost is the host's)
#   fp8-kernels.json    mhc bench kernels --only FP8: the FP8 rows beside their twins
#   fp8-tests.txt       test_cuda's FP8 cases (bitwise against the reference quantiser)
#   ncu-fp8.txt         Nsight Compute on the FP8 boundary's and its bf16 twin's launches at 1 and
#                       256 tokens (where the FP8 forms cost most over their twins, docs/fp8.md)
#   steps.txt, logs.tar.gz
# MHC_PROBES_SECONDS: the whole run's deadline (default 540).
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/mhc-probes-out}
logs=/tmp/mhc-probes-logs
mkdir -p "$OUT" "$logs"
deadline=$((SECONDS + ${MHC_PROBES_SECONDS:-540}))
b=${MHC_BUILD_DIR:-build-probes}
commit=${MHC_COMMIT:-$(cat COMMIT 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)}
step() {  # step NAME SECONDS COMMAND...: at most SECONDS, never past the deadline
  local name=$1 limit=$2 t0=$SECONDS
  shift 2
  local left=$((deadline - SECONDS))
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -lt 5 ]; then echo "$name skipped (no time left)" >>"$OUT/steps.txt"; return; fi
  timeout "$limit" "$@" >"$logs/$name.log" 2>&1
  echo "$name rc=$? $((SECONDS - t0))s (limit ${limit}s)" >>"$OUT/steps.txt"
}
python3 -m pip install -q --no-index --find-links .whl nanobind scikit-build-core >/dev/null 2>&1
step build 200 env MHC_BUILD_DIR=$b \
  MHC_TARGETS="mhc mhc_head_cluster_microbench _C mhc_torch_ops test_cuda" bash dev/scripts/device-build.sh \
  -DMHC_KERNELS_N2=OFF -DMHC_CUDA_ARCHS=90a -DMHC_CUDA_PTX= -DMHC_DEPS_DIR="$PWD/.deps" \
  -DMHC_PYTHON=ON -DMHC_TORCH_OPS=ON -DPython_EXECUTABLE="$(command -v python3)"
cp $b/python/_C*.so $b/python/_torch_ops*.so python/mhc/ 2>>"$logs/build.log"
step fp8_bench 70 $b/mhc bench kernels --preset dsv41-flash --only FP8 \
  --tokens 1,2,4,8,16,64,256,1024,4096 --json "$OUT/fp8-kernels.json" --commit "$commit"
step fp8_tests 60 $b/tests/test_cuda --gtest_filter='*Fp8*:*fp8*'
cp "$logs/fp8_tests.log" "$OUT/fp8-tests.txt"
step head_cluster 200 $b/dev/mhc_head_cluster_microbench
cp "$logs/head_cluster.log" "$OUT/head_cluster.txt"
step noop_build 40 env CXX=/usr/bin/g++ bash bench/noop_ops/build.sh python3 /tmp/mhc-noop
PYTHONPATH=$PWD/python step noop 90 python3 bench/noop_dispatch.py --lib-dir /tmp/mhc-noop \
  --out "$OUT/noop-dispatch.json" --calls 2000 --rounds 5 --commit "$commit"
step ncu 120 ncu --section SpeedOfLight --section Occupancy --section LaunchStats \
  --section MemoryWorkloadAnalysis --launch-count 40 $b/mhc bench kernels --preset dsv41-flash \
  --tokens 1,256 --only FP8 --reps 5
cp "$logs/ncu.log" "$OUT/ncu-fp8.txt" 2>/dev/null
tar czf "$OUT/logs.tar.gz" -C /tmp mhc-probes-logs
tail -40 "$OUT/head_cluster.txt" 2>/dev/null
cat "$OUT/steps.txt"
