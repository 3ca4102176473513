#!/usr/bin/env bash
# Run THERE (the GPU machine): A/B of binaries built HERE, without building anything there. Each
# .carry/ab/NAME.tar.xz is a dev/scripts/pack-device.sh tarball (copy .carry/bin/bin.tar.xz there
# after packing each ref); carry [".carry/ab"]. For each NAME: the GPU tests matching
# MHC_AB_TESTS (test_cuda, optional), compute-sanitizer memcheck/racecheck/synccheck over
# MHC_AB_SANITIZE (optional), then MHC_AB_ROUNDS rounds (default 2) of the command MHC_AB_ARGS,
# the binaries interleaved (A B A B) so that drift hits both alike. JSON per run and logs go to
# $OUT/ab/; the lines matching MHC_AB_GREP of every run are printed last, by name and round.
# MHC_AB_CHECK_ONLY=NAME: tests and sanitizers for that binary only (the others are landed code).
#   MHC_AB_ARGS="bench kernels --hidden 5120 --tokens 2048,4096 --reps 30"
#   MHC_AB_GREP="fused boundary|site in stack"  MHC_AB_TESTS="CudaFusedBoundary.*"
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp/mhc-out}
dir="$OUT/ab"
mkdir -p "$dir/logs"
args=${MHC_AB_ARGS:-"bench kernels --tokens 1,16,4096 --reps 30"}
pattern=${MHC_AB_GREP:-"^(coefficients|site in stack)"}
rounds=${MHC_AB_ROUNDS:-2}
names=()
for tarball in .carry/ab/*.tar.xz; do
  name=$(basename "$tarball" .tar.xz)
  names+=("$name")
  rm -rf "/tmp/ab/$name" && mkdir -p "/tmp/ab/$name"
  tar xJf "$tarball" -C "/tmp/ab/$name" || { echo "$name: bad tarball"; exit 1; }
  bin="/tmp/ab/$name/pk"
  [ -n "${MHC_AB_CHECK_ONLY:-}" ] && [ "$name" != "$MHC_AB_CHECK_ONLY" ] && continue
  if [ -n "${MHC_AB_TESTS:-}" ]; then
    timeout 400 "$bin/test_cuda" --gtest_filter="$MHC_AB_TESTS" >"$dir/logs/test-$name.log" 2>&1
    echo "$name tests rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$dir/logs/test-$name.log" | tr '\n' ' ')"
  fi
  if [ -n "${MHC_AB_SANITIZE:-}" ]; then
    for tool in memcheck racecheck synccheck; do
      timeout 300 compute-sanitizer --tool "$tool" --error-exitcode 9 "$bin/test_cuda" \
        --gtest_filter="$MHC_AB_SANITIZE" >"$dir/logs/sanitize-$tool-$name.log" 2>&1
      echo "$name $tool rc=$? $(grep -E 'ERROR SUMMARY|hazard' "$dir/logs/sanitize-$tool-$name.log" | tail -1)"
    done
  fi
done
for round in $(seq 1 "$rounds"); do
  for name in "${names[@]}"; do
    # `mhc bench kernels` labels its JSON with --commit; `mhc bench overlap` takes no such option.
    commit=()
    [[ "$args" == "bench kernels"* ]] && commit=(--commit "$name")
    # shellcheck disable=SC2086
    timeout 300 "/tmp/ab/$name/pk/mhc" $args "${commit[@]}" \
      --json "$dir/$name-run$round.json" >"$dir/logs/run-$name-$round.log" 2>&1 ||
      echo "$name round $round failed: see logs/run-$name-$round.log"
  done
done
tar czf "$dir/logs.tar.gz" -C "$dir" logs
for name in "${names[@]}"; do
  for round in $(seq 1 "$rounds"); do
    grep -E "$pattern" "$dir/logs/run-$name-$round.log" | sed "s/^/$name r$round  /"
  done
done
rm -rf "$dir/logs"
