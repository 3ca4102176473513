#!/usr/bin/env bash
# Run THERE (the GPU machine), from the repository root: a whole lease in one call, for when a
# machine start is scarce. Carry .deps, .whl and (for the peers) .peers.
#   1. build: dev/scripts/device-check.sh's build (the suites, the CLI, both Python extensions,
#      the peers' benchmark where .peers is carried), about 75 s on 16 cores;
#   2. timings on the idle GPU: dev/scripts/device-bench.sh (host cost of the ops, FP8 and head
#      rows, the head against torch.compile, the peers);
#   3. the suites: `mhc run`, test_cuda in shards, the Python suite, the sanitizers.
# At most 8 files come back from a call: the 7 JSONs of step 2 and logs.tar.gz with every log.
# MHC_SESSION_BUILD, _BENCH, _SUITES: each step's seconds (default 130, 280, 170: 580 s, so the
# peers get what the other timings leave of 280 s; with two calls on a warm machine give each
# script its default instead).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/mhc-session-out}
work=/tmp/mhc-session
rm -rf "$work" && mkdir -p "$work/build" "$work/bench" "$work/suites" "$OUT"
commit=${MHC_COMMIT:-unknown}
export MHC_COMMIT=$commit
OUT=$work/build MHC_CHECK_STEPS=build MHC_CHECK_SECONDS=${MHC_SESSION_BUILD:-130} \
  bash dev/scripts/device-check.sh >"$work/build.txt" 2>&1
OUT=$work/bench MHC_BENCH_SECONDS=${MHC_SESSION_BENCH:-280} \
  bash dev/scripts/device-bench.sh >"$work/bench.txt" 2>&1
OUT=$work/suites MHC_CHECK_STEPS="run cuda pytest sanitize" \
  MHC_CHECK_SECONDS=${MHC_SESSION_SUITES:-170} \
  bash dev/scripts/device-check.sh >"$work/suites.txt" 2>&1
mv "$work"/bench/*.json "$OUT"/ 2>/dev/null
tar czf "$OUT/logs.tar.gz" -C /tmp mhc-session
echo "== build"
tail -4 "$work/build.txt"
echo "== timings"
tail -60 "$work/bench.txt"
echo "== suites"
tail -40 "$work/suites.txt"
