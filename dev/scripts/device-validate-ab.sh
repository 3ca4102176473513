#!/usr/bin/env bash
# Run THERE (the GPU machine), one call: dev/scripts/device-validate.sh on the binaries packed HERE
# (.carry/bin, dev/scripts/pack-device.sh), then, only if every validation step passed, an A/B of
# that build's `mhc` against a base `mhc` (.carry/base/mhc-*.xz, an xz'd binary of the landed
# code) for each preset, the two interleaved in rounds (base, new, base, new) so that drift hits
# both alike. Carry [".carry/bin", ".carry/base"] (under the 64 MiB limit). JSON per run goes to
# $OUT/ab-PRESET-{base,new}-rROUND.json (commit fields: MHC_BASE_COMMIT, MHC_NEW_COMMIT), the
# validation's logs to $OUT/logs.tar.gz; the grep of every run is printed last. The validation
# alone took about 6 of a call's 10 minutes at 655785e (its steps.txt: the boundary matrix 308 s
# beside test_cuda's 256, then the sanitizers 50), which leaves the A/B about 4: one round by default.
#   MHC_NEW_COMMIT=abc1234 MHC_BASE_COMMIT=8b68ccb bash dev/scripts/device-validate-ab.sh
#   MHC_AB_TOKENS=1024,2048,3072,4096,8192 MHC_AB_REPS=20 MHC_AB_ROUNDS=1
#   MHC_AB_PRESETS="dsv4-flash dsv41-flash dsv4-pro" MHC_AB_GREP="site in stack, fused"
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/mhc-out}
export OUT
bash dev/scripts/device-validate.sh >"$OUT/validate.txt" 2>&1
cat "$OUT/validate.txt"
if grep -v " rc=0 " /tmp/mhc-logs/steps.txt | grep -q rc=; then
  echo "validation failed: no A/B (failed steps above)"
  exit 1
fi
bash dev/scripts/device-ab.sh
