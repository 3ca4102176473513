#!/usr/bin/env bash
# Run THERE (the GPU machine): the A/B half of dev/scripts/device-validate-ab.sh alone, for a build
# whose validation already passed. Needs .carry/bin unpacked in /tmp/pk (device-validate.sh does
# it; this script does it when /tmp/pk/mhc is missing) and .carry/base/mhc-*.xz. The same
# environment knobs (MHC_AB_TOKENS, MHC_AB_REPS, MHC_AB_ROUNDS, MHC_AB_PRESETS, MHC_AB_GREP,
# MHC_BASE_COMMIT, MHC_NEW_COMMIT); JSON to $OUT/ab-PRESET-{base,new}-rROUND.json.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/mhc-out}
mkdir -p "$OUT"
[ -x /tmp/pk/mhc ] || tar xJf .carry/bin/bin.tar.xz -C /tmp
nccl=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${nccl}:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0
base=$(ls .carry/base/mhc-*.xz | head -1)
xz -dc "$base" >/tmp/mhc-base && chmod +x /tmp/mhc-base
declare -A bin=([base]=/tmp/mhc-base [new]=/tmp/pk/mhc)
declare -A commit=([base]=${MHC_BASE_COMMIT:-base} [new]=${MHC_NEW_COMMIT:-new})
tokens=${MHC_AB_TOKENS:-1024,2048,3072,4096,8192}
mkdir -p /tmp/ab-logs
for preset in ${MHC_AB_PRESETS:-dsv4-flash dsv41-flash dsv4-pro}; do
  for round in $(seq 1 "${MHC_AB_ROUNDS:-1}"); do
    for arm in base new; do
      timeout 150 "${bin[$arm]}" bench kernels --preset "$preset" --tokens "$tokens" \
        --reps "${MHC_AB_REPS:-20}" --commit "${commit[$arm]}" \
        --json "$OUT/ab-$preset-$arm-r$round.json" >"/tmp/ab-logs/$preset-$arm-r$round.log" 2>&1 ||
        echo "$preset $arm round $round failed (rc=$?)"
    done
  done
done
tar czf "$OUT/ab-logs.tar.gz" -C /tmp ab-logs
for log in /tmp/ab-logs/*.log; do
  grep -E "${MHC_AB_GREP:-site in stack, fused}" "$log" | sed "s|^|$(basename "$log" .log)  |"
done
