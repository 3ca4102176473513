#!/usr/bin/env bash
# The host C++ test suite once more under AddressSanitizer (with LeakSanitizer) and
# UndefinedBehaviorSanitizer: a CPU-only build in build-sanitize/ (-DMHC_SANITIZE=address,undefined,
# no recovery; -O1 without NDEBUG, so the asserts are on too), then ctest. The CLI tests run the
# sanitized `mhc`, so its option and file parsing is covered too. Any report ends the process that
# made it and fails its test; the canary tests (tests/sanitize) fail if the sanitizers are not in
# the build. CI runs this after scripts/test.sh. Extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build_dir=${MHC_SANITIZE_BUILD_DIR:-build-sanitize}
# -O1 and no debug info: half the build time of RelWithDebInfo on 2 cores (6 min against 12,
# measured), and the reports still name the functions.
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE=-O1 \
  -DMHC_CUDA=OFF -DMHC_PYTHON=OFF -DMHC_SANITIZE=address,undefined >/dev/null
cmake --build "$build_dir" -j "$(nproc)"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)" "$@"
