#!/usr/bin/env bash
# One command for a fresh machine: set up, build, and run the main job (`mhc run`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
exec "${MHC_BUILD_DIR:-build}/mhc" run "$@"
