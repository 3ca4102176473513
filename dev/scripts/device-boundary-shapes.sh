#!/usr/bin/env bash
# Run THERE (the GPU machine) on binaries built HERE (dev/scripts/pack-device.sh, carried in
# .carry/bin): the fused boundary against the two launches it replaces at the shapes behind the
# plan's rule (docs/benchmarks.md, "The fused boundary measured"): n = 2 at the three hidden
# sizes, C = 7168 between and beyond dev/scripts/device-boundary.sh's sizes, and 16384 tokens at
# C = 4096 and 5120. JSON to $OUT (at most 8 files come back: six JSON and one archive of the
# logs), a short table to stdout. MHC_COMMIT names the binary's commit in the JSON.
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp/mhc-out}
mkdir -p "$OUT/logs"
[ -x /tmp/pk/mhc ] || tar xJf .carry/bin/bin.tar.xz -C /tmp
commit=${MHC_COMMIT:-unknown}
date_utc=$(date -u +%Y-%m-%d)
run() {  # run NAME mhc-bench-options...
  local name=$1
  shift
  timeout 200 /tmp/pk/mhc bench kernels --reps 30 --commit "$commit" \
    --json "$OUT/h200-$date_utc-boundary-$name-$commit.json" "$@" >"$OUT/logs/$name.log" 2>&1
  echo "$name rc=$?"
}
run n2-c4096 --hc 2 --hidden 4096 --tokens 1024,4096,8192
run n2-c5120 --hc 2 --hidden 5120 --tokens 1024,4096,8192
run n2-c7168 --hc 2 --hidden 7168 --tokens 1024,4096,8192
run c7168-mid --hidden 7168 --tokens 2048,3072,16384
run c5120-16k --hidden 5120 --tokens 16384
run c4096-16k --hidden 4096 --tokens 16384
tar czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
python3 dev/scripts/boundary-summary.py "$OUT"
