#!/usr/bin/env bash
# Run THERE (the GPU machine) on binaries built HERE (dev/scripts/pack-device.sh, carried in
# .carry/bin), after dev/scripts/device-validate.sh (whose suites include the fused boundary's tests):
# the fused boundary (issue 17, sm90_boundary.cuh) against the two launches it replaces, per size
# and hidden size (`mhc bench kernels`: "fused boundary (one launch)" beside "coef + post with
# next input", and the stacks' steady states), then one Nsight Compute profile of the kernel at
# 4096 tokens (with its details and per-instruction counters as text). JSON and an archive of
# the logs go to $OUT/boundary/, a short table to stdout.
# MHC_COMMIT names the binary's commit in the JSON.
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp/mhc-out}
dir="$OUT/boundary"
mkdir -p "$dir"
[ -x /tmp/pk/mhc ] || tar xJf .carry/bin/bin.tar.xz -C /tmp
bin=/tmp/pk
commit=${MHC_COMMIT:-unknown}
date_utc=$(date -u +%Y-%m-%d)
run() {  # run NAME HIDDEN TOKENS
  local name=$1 hidden=$2 tokens=$3
  timeout 240 "$bin/mhc" bench kernels --hidden "$hidden" --tokens "$tokens" --reps 30 \
    --commit "$commit" --json "$dir/h200-$date_utc-$name-$commit.json" >"$dir/$name.log" 2>&1
  echo "$name rc=$?"
}
run c5120 5120 1,16,128,512,1024,2048,4096,8192
run c4096 4096 1024,4096,8192
run c7168 7168 1024,4096,8192
# The boundary's split count swept (1, 2, 4, 8 CTAs per tile; "  fused boundary sweep" rows).
timeout 240 "$bin/mhc" bench kernels --tokens 512,1024,2048,4096,8192 --reps 20 --sweep \
  --commit "$commit" --json "$dir/h200-$date_utc-sweep-$commit.json" >"$dir/sweep.log" 2>&1
echo "sweep rc=$?"
logs="$dir/logs"
mkdir -p "$logs"
timeout 120 ncu --kernel-name regex:sm90_boundary_kernel --launch-count 1 --set full \
  -o "$logs/ncu-boundary-4096" "$bin/mhc" bench kernels --tokens 4096 --reps 5 \
  >"$logs/ncu.log" 2>&1
echo "ncu rc=$?"
ncu --import "$logs/ncu-boundary-4096.ncu-rep" --page details --print-details all \
  >"$logs/ncu-details.txt" 2>&1
ncu --import "$logs/ncu-boundary-4096.ncu-rep" --page source --csv --print-source sass \
  >"$logs/ncu-sass.csv" 2>&1
grep -E "^ +(Duration|Issued Ipc Active|Warp Cycles Per Issued Instruction|DRAM Throughput|Stall (Long|Short) Scoreboard|Stall Wait|Stall Barrier)" \
  "$logs/ncu-details.txt" | head -12
# At most 8 files come back from the device: the JSON beside one archive of the logs.
mv "$dir"/*.log "$logs/" 2>/dev/null
tar czf "$dir/logs.tar.gz" -C "$dir" logs && rm -rf "$logs"
python3 dev/scripts/boundary-summary.py "$dir"
