#!/usr/bin/env bash
# The host C++ test suite once more under AddressSanitizer (with LeakSanitizer) and
# UndefinedBehaviorSanitizer: a CPU-only build in build-sanitize/ (-DMHC_SANITIZE=address,undefined,
# no recovery; -O1 without NDEBUG, so the asserts are on too), then ctest. The CLI tests run the
# sanitized `mhc`, so its option and file parsing is covered too. Any report ends the process that
# made it and fails its test; the canary tests (tests/sanitize) fail if the sanitizers are not in
# the build. CI runs this after scripts/test.sh. Extra arguments go to ctest.
#
# Compiled with clang (MHC_SANITIZE_CXX, default clang++-14, which the fuzzers use too): ASan and
# UBSan as with g++ in about 0.7 of g++'s compile time at -O1 (37 s of CPU against 54 s on four
# sources, two of the library and two tests), and a second compiler's warnings next to the release
# build's g++.
set -euo pipefail
cd "$(dirname "$0")/.."
MHC_SETUP_CLANG=1 scripts/setup.sh
build_dir=${MHC_SANITIZE_BUILD_DIR:-build-sanitize}
cxx=${MHC_SANITIZE_CXX:-clang++-14}
# A build directory configured with another compiler (g++, before clang) starts over: when the
# compiler changes, CMake deletes the cache and configures again without the -D options below,
# which would leave a build without the sanitizers (and without their canary tests).
cached=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build_dir/CMakeCache.txt" 2>/dev/null || true)
if [ -n "$cached" ] && [ "$(realpath "$(command -v "$cached")" 2>/dev/null)" != \
    "$(realpath "$(command -v "$cxx")" 2>/dev/null)" ]; then
  echo "test-sanitizers.sh: $build_dir was configured with $cached; configuring it anew with $cxx"
  rm -rf "$build_dir"
fi
# With clang the same build holds the libFuzzer targets (-DMHC_FUZZ=ON: libFuzzer's coverage on
# the policy and I/O sources), so that fuzz/run.sh can run them from here
# (MHC_FUZZ_BUILD_DIR=build-sanitize, as CI does) without compiling the library a second time.
fuzz=OFF
"$cxx" --version 2>/dev/null | grep -q clang && fuzz=ON
# -O1 and no debug info: half the build time of RelWithDebInfo on 2 cores (6 min against 12,
# measured), and the reports still name the functions.
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE=-O1 \
  -DCMAKE_CXX_COMPILER="$cxx" \
  -DMHC_CUDA=OFF -DMHC_PYTHON=OFF -DMHC_SANITIZE=address,undefined -DMHC_FUZZ=$fuzz >/dev/null
cmake --build "$build_dir" -j "$(nproc)"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)" "$@"
