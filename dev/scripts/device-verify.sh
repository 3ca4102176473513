#!/usr/bin/env bash
# Run THERE (the GPU machine), from the repository root, carrying .deps and .whl: one call that
# checks and times the work held back for a GPU run, in at most MHC_VERIFY_SECONDS (570; the
# timing steps, most wanted first, are skipped past it). In $OUT (at most 8 files):
#   summary.txt         each step's exit status and time; the test totals
#   head-kernels.json   mhc bench kernels --only head (the plan's form: with MHC_VERIFY_HEAD_CLUSTER=1
#                       the cluster form, whose switch this copy turns on)
#   python-ops.json, cpp-kernels.json, hf-eager.json   bench/python_ops_device.sh
#   graph-probe.txt     dev/scripts/graph-ratio-probe.py (post's Python graph against the C++ item)
#   ncu-fp8-input.txt   Nsight Compute on the FP8 input path's launches at 1 token
#   logs.tar.gz         the logs, fp8-kernels.json (mhc bench kernels --only FP8, 1-8192 tokens),
#                       and post-columns/*.json: the plain post by columns at every size
#                       against by rows at every size (kernel config post_columns), C = 4096, 5120
#                       and 7168, 16-1024 tokens: where the plan's 64-token limit should be
# MHC_VERIFY_HEAD_CLUSTER=1: kHeadClusterFormOn turned on in this copy of src/cuda/head.cu before
# the build (never committed from here). To check a held-back commit, apply it to the working
# tree before the call (git revert of its hold-back commit).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1 MHC_REQUIRE_GPU=1
OUT=${OUT:-/tmp/mhc-verify-out}
logs=/tmp/mhc-verify-logs
mkdir -p "$OUT" "$logs"
commit=${MHC_COMMIT:-$(cat COMMIT 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)}
export MHC_COMMIT=$commit
t0=$SECONDS
note() { echo "$1 at $((SECONDS - t0)) s" >>"$OUT/summary.txt"; }
# MHC_VERIFY_SECONDS (default 570): the whole call's deadline; a timing step that would pass it is
# skipped (and says so), so that the suites' totals and the logs always come back.
deadline=$((t0 + ${MHC_VERIFY_SECONDS:-570} - 15))
room() { [ $((deadline - SECONDS)) -ge "$1" ] || { note "$2 skipped (no time left)"; false; }; }
if [ "${MHC_VERIFY_HEAD_CLUSTER:-0}" = 1 ]; then
  sed -i 's/constexpr bool kHeadClusterFormOn = false;/constexpr bool kHeadClusterFormOn = true;/' \
    src/cuda/head.cu
  grep -q 'kHeadClusterFormOn = true' src/cuda/head.cu && note "head cluster form switched on"
fi
b=build-check  # the directory bench/python_ops_device.sh builds into: its build is incremental
python3 -m pip install -q --no-index --find-links .whl nanobind scikit-build-core >/dev/null 2>&1
CXX=/usr/bin/g++ CC=/usr/bin/gcc cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER=/usr/bin/g++ -DCMAKE_CUDA_HOST_COMPILER=/usr/bin/g++ -DMHC_CUDA=ON \
  -DMHC_CUDA_ARCHS=90a -DMHC_CUDA_PTX= -DMHC_KERNELS_N2=OFF -DMHC_PYTHON=ON -DMHC_TORCH_OPS=ON \
  -DMHC_DEPS_DIR="$PWD/.deps" -DPython_EXECUTABLE="$(command -v python3)" >"$logs/configure.log" 2>&1
timeout 150 cmake --build $b -j "$(nproc)" --target test_cuda test_schedule mhc _C mhc_torch_ops \
  -- -k 0 >"$logs/build.log" 2>&1
note "build rc=$?"
cp $b/python/_C*.so $b/python/_torch_ops*.so python/mhc/ 2>>"$logs/build.log"
for i in 0 1 2 3 4 5 6 7; do
  GTEST_TOTAL_SHARDS=8 GTEST_SHARD_INDEX=$i timeout 150 $b/tests/test_cuda \
    --gtest_filter='-CudaBoundaryMatrix.*' >"$logs/test_cuda_$i.log" 2>&1 &
done
PYTHONPATH=$PWD/python timeout 150 python3 -m pytest -q -p no:cacheprovider -p xdist -n 4 \
  tests/python >"$logs/pytest.log" 2>&1 &
wait
note "test_cuda and pytest done"
timeout 60 $b/tests/test_schedule >"$logs/test_schedule.log" 2>&1
note "test_schedule rc=$?"
for tool in memcheck racecheck; do
  room 60 "sanitize $tool" || continue
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 $b/tests/test_cuda \
    --gtest_filter='Sanitize*' >"$logs/sanitize-$tool.log" 2>&1
  note "sanitize $tool rc=$?"
done
cat "$logs"/test_cuda_*.log >"$logs/test_cuda.log"
{
  echo "test_cuda: $(grep -c '^\[       OK \]' "$logs/test_cuda.log") ok of" \
    "$(grep -oE 'Running [0-9]+ tests' "$logs/test_cuda.log" | awk '{s += $2} END {print s}')"
  grep -E "^\[  FAILED  \] .*\(" "$logs/test_cuda.log" | head -20
  tail -1 "$logs/pytest.log"
  grep -E "^\[  PASSED  \]|^\[  FAILED  \]" "$logs/test_schedule.log" | head -3
  for tool in memcheck racecheck; do tail -1 "$logs/sanitize-$tool.log"; done
} >>"$OUT/summary.txt"
# The timing steps, most wanted first.
if room 40 "head bench"; then
  timeout 40 $b/mhc bench kernels --preset dsv41-flash --only head \
    --tokens 1,2,4,8,16,64,1024,4096,8192 --json "$OUT/head-kernels.json" --commit "$commit" \
    >"$logs/head-bench.log" 2>&1
  note "head bench rc=$?"
fi
mkdir -p "$logs/post-columns"
for preset in dsv4-flash dsv41-flash dsv4-pro; do
  for columns in true false; do
    room 30 "post columns=$columns $preset" || continue
    timeout 30 $b/mhc bench kernels --preset $preset --only post --reps 100 \
      --tokens 16,32,64,96,128,192,256,512,1024 \
      --kernel-config "{\"post_columns\": $columns}" --commit "$commit" \
      --json "$logs/post-columns/$preset-columns-$columns.json" >>"$logs/post-columns.log" 2>&1
    note "post columns=$columns $preset rc=$?"
  done
done
if room 110 "python ops"; then
  OUT=/tmp/mhc-verify-pyops MHC_DEVICE_SECONDS=110 bash bench/python_ops_device.sh \
    >"$logs/python-ops.log" 2>&1
  cp /tmp/mhc-verify-pyops/{python-ops,cpp-kernels,hf-eager}.json "$OUT/" 2>/dev/null
  note "python ops done"
fi
if room 70 "fp8 bench"; then
  timeout 70 $b/mhc bench kernels --preset dsv41-flash --only FP8 \
    --tokens 1,2,4,8,16,64,256,1024,4096,8192 --json "$logs/fp8-kernels.json" --commit "$commit" \
    >"$logs/fp8-bench.log" 2>&1
  note "fp8 bench rc=$?"
fi
if room 45 "graph probe"; then
  PYTHONPATH=$PWD/python timeout 45 python3 dev/scripts/graph-ratio-probe.py --mhc $b/mhc \
    >"$OUT/graph-probe.txt" 2>&1
  note "graph probe rc=$?"
fi
if room 60 "ncu"; then
  timeout 60 ncu --section LaunchStats --section Occupancy --section WarpStateStats \
    --section SourceCounters --section SpeedOfLight -k regex:input_path --launch-count 4 \
    $b/mhc bench kernels --preset dsv41-flash --only "FP8 input path" --tokens 1 --reps 5 \
    >"$OUT/ncu-fp8-input.txt" 2>&1
  note "ncu rc=$?"
fi
tar czf "$OUT/logs.tar.gz" -C /tmp mhc-verify-logs mhc-verify-pyops 2>/dev/null
grep -E "error:|FAILED:" "$logs/build.log" | head -5
sed -n '/^op (no_grad)/,$p' "$logs/python-ops.log" | head -40
tail -4 "$OUT/graph-probe.txt"
cat "$OUT/summary.txt"
