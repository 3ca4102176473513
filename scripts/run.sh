#!/usr/bin/env bash
# One command for a fresh machine: set up, build the `mhc` command alone, and run the main job
# (`mhc run`; arguments go to it).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
MHC_TARGETS=mhc scripts/build.sh
exec "${MHC_BUILD_DIR:-build}/mhc" run "$@"
