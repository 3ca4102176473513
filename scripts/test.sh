#!/usr/bin/env bash
# One command for a fresh machine: set up, build, and run every test (GPU tests skip without a GPU):
# the C++ tests (ctest), then the Python package built with pip into build/venv-test and its
# pytest suite (tests/python). The Python tests' dependencies (torch: ~3 GB) download and install
# in the background while the C++ compiles; their log is build/python-deps.log.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build_dir=${MHC_BUILD_DIR:-build}
mkdir -p "$build_dir"
deps_log="$build_dir/python-deps.log"
# In a process group of its own (set -m), so that stopping it stops pip with it: on any exit before
# the wait below (a failed build or C++ test, Ctrl-C) the trap ends the whole group.
set -m
MHC_PYTHON_DEPS_ONLY=1 scripts/python-env.sh </dev/null >"$deps_log" 2>&1 &
deps_pid=$!
set +m
trap 'kill -- -"$deps_pid" 2>/dev/null || true' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
echo "test.sh: installing the Python tests' dependencies in the background, log in $deps_log"
# The Python package's build compiles mhc_core and mhc_backends again, with the same flags, in a
# directory of its own: through ccache (cmake/BuildSpeed.cmake) it takes build/'s objects. ccache
# tells compilers apart by name too, and scikit-build-core would pick Python's (g++), so one CXX
# for both. Without ccache both compile as before.
if command -v ccache >/dev/null; then
  export MHC_COMPILER_CACHE=${MHC_COMPILER_CACHE-ccache} CXX=${CXX:-c++}
  export CCACHE_DIR=${CCACHE_DIR:-$(cd "$build_dir" && pwd)/ccache}
fi
scripts/build.sh
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
if ! wait "$deps_pid"; then
  echo "test.sh: installing the Python tests' dependencies failed ($deps_log):" >&2
  cat "$deps_log" >&2
  exit 1
fi
trap - EXIT INT TERM
echo "test.sh: the Python tests' dependencies are installed"
py=$(scripts/python-env.sh)
"$py" -m pytest -q tests/python
