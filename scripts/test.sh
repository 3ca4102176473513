#!/usr/bin/env bash
# One command for a fresh machine: set up, build, and run every test (GPU tests skip without a GPU):
# the C++ tests (ctest), then the Python package built with pip into build/venv-test and its
# pytest suite (tests/python).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
ctest --test-dir "${MHC_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" "$@"
py=$(scripts/python-env.sh)
"$py" -m pytest -q tests/python
