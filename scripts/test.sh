#!/usr/bin/env bash
# One command for a fresh machine: set up, build, and run every test (GPU tests skip without a GPU):
# the C++ tests (ctest), then the Python package built with pip into build/venv-test and its
# pytest suite (tests/python).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
build_dir=${MHC_BUILD_DIR:-build}
junit="$(cd "$build_dir" && pwd)/ctest-junit.xml"
rc=0
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)" --output-junit "$junit" "$@" || rc=$?
# ctest's own summary counts a skipped test (a GPU test on a machine without one) as not failed;
# this line says how many ran and how many were skipped.
python3 - "$junit" <<'PY'
import sys
import xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
tests, failed, skipped = (int(root.get(k, 0)) for k in ("tests", "failures", "skipped"))
print(f"ctest summary: {tests} tests, {tests - failed - skipped} passed, {skipped} skipped "
      f"(GPU tests without a GPU, or not built), {failed} failed")
PY
[ "$rc" -eq 0 ] || exit "$rc"
py=$(scripts/python-env.sh)
"$py" -m pytest -q tests/python
