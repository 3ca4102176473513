#!/usr/bin/env bash
# One command for a fresh machine: set up, build, and run every test (GPU tests skip without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
ctest --test-dir "${MHC_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" "$@"
