#!/usr/bin/env bash
# Builds the libFuzzer targets with clang into build-fuzz/ (MHC_FUZZ_BUILD_DIR) and runs each one
# for a fixed time over a scratch copy of the committed seed corpus (fuzz/corpus/<target>), so the
# repository is never modified. Exit status: 0 when no target crashed; otherwise 1, with the
# crashing input in build-fuzz/artifacts/ (add it to fuzz/corpus/<target>/ as a regression once
# fixed).
#
#   fuzz/run.sh [seconds per target]     (default 30; CI runs 30 s x 3 targets)
#
# First every target replays its seeds once (-runs=0): the committed corpus plus large seeds that
# fuzz/make_corpus.py --large writes into the build directory (deep nesting, many tensors, huge
# numbers: too big to commit, and beyond what mutation reaches in 30 s).
#
# The seed is fixed (MHC_FUZZ_SEED, default 1) so a CI run is reproducible; pass another seed, or
# more seconds, to explore further by hand. MHC_FUZZ_ARGS adds libFuzzer flags (e.g.
# -detect_leaks=0 where LeakSanitizer cannot run). See docs/fuzzing.md.
set -uo pipefail
cd "$(dirname "$0")/.."
secs=${1:-30}
seed=${MHC_FUZZ_SEED:-1}
build=${MHC_FUZZ_BUILD_DIR:-build-fuzz}
cxx=${MHC_FUZZ_CXX:-clang++-14}

MHC_SETUP_CLANG=1 scripts/setup.sh || exit 1
# A build directory already configured with the fuzz targets (scripts/test-sanitizers.sh' with
# clang: MHC_FUZZ_BUILD_DIR=build-sanitize) is kept as it is; otherwise a fuzz-only build.
if ! grep -q '^MHC_FUZZ:BOOL=ON$' "$build/CMakeCache.txt" 2>/dev/null; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$cxx" \
    -DMHC_CUDA=OFF -DBUILD_TESTING=OFF -DMHC_FUZZ=ON >/dev/null || exit 1
fi
targets="safetensors index config"
cmake --build "$build" -j "$(nproc)" --target fuzz_safetensors fuzz_index fuzz_config || exit 1
large="$build/seeds-large"
rm -rf "$large" && python3 fuzz/make_corpus.py --large "$large" || exit 1
# Inputs up to 8 MiB: the large seeds (a header of ~100k tensors is ~7 MB) must not be cut.
max_len=8388608

status=0
mkdir -p "$build/artifacts"
for target in $targets; do
  echo "fuzz: replaying the seeds of $target"
  if ! timeout -k 10 600 "$build/fuzz/fuzz_$target" -runs=0 -timeout=30 -rss_limit_mb=4096 \
      -max_len=$max_len -artifact_prefix="$build/artifacts/$target-" \
      "fuzz/corpus/$target" "$large/$target" >"$build/replay-$target.log" 2>&1; then
    echo "fuzz: replay of $target FAILED; inputs in $build/artifacts/:"
    tail -40 "$build/replay-$target.log"
    status=1
  fi
done
# Each target is one process on one core: as many run at once as there are cores (two on CI: the
# three targets take 60 s instead of 90), each for its full time. Their summaries follow in order.
fuzz_target() {
  local target=$1 work="$build/corpus-$1" log="$build/fuzz-$1.log" rc
  rm -rf "$work" && mkdir -p "$work"
  echo "fuzz: $target for ${secs}s (seed $seed), log in $log"
  # -max_total_time bounds the fuzzing; timeout(1) is a hard stop should the process hang anyway
  # (-timeout is libFuzzer's per-input limit, reported as a crash).
  timeout -k 10 $((secs + 120)) "$build/fuzz/fuzz_$target" -max_total_time="$secs" -seed="$seed" \
    -timeout=10 -rss_limit_mb=2048 -max_len=1048576 -dict=fuzz/json.dict -print_final_stats=1 \
    -artifact_prefix="$build/artifacts/$target-" ${MHC_FUZZ_ARGS:-} "$work" "fuzz/corpus/$target" \
    >"$log" 2>&1
  rc=$?
  grep -E "INITED|DONE|stat::number_of_executed_units|stat::new_units_added|ERROR|SUMMARY" "$log"
  if [ $rc -ne 0 ]; then
    echo "fuzz: $target FAILED (exit $rc); inputs in $build/artifacts/:"
    ls -l "$build/artifacts" | grep -- "$target-" || true
    tail -40 "$log"
    return 1
  fi
}
pids=()
for target in $targets; do
  while [ "$(jobs -pr | wc -l)" -ge "$(nproc)" ]; do wait -n || true; done
  fuzz_target "$target" >"$build/summary-$target.txt" 2>&1 &
  pids+=($!)
done
i=0
for target in $targets; do
  wait "${pids[$i]}" || status=1
  cat "$build/summary-$target.txt"
  i=$((i + 1))
done
exit $status
