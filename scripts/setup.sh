#!/usr/bin/env bash
# Installs what mhc needs to build and test on a Debian/Ubuntu machine (as root, or with sudo).
# Idempotent: installs only what is missing. The CUDA toolkit is optional and never installed here.
set -euo pipefail
packages=(cmake ninja-build g++ libgtest-dev googletest nlohmann-json3-dev libcli11-dev libfmt-dev
  clang-format-14  # the format test (tests/format)
  python3-venv python3-dev  # the Python package (scripts/python-env.sh)
  ccache)  # scripts/test.sh: the Python package's build reuses the objects of build/
# The sanitizer build and the fuzzers (scripts/test-sanitizers.sh, fuzz/run.sh) need clang and its
# sanitizer/libFuzzer runtimes: MHC_SETUP_CLANG=1 adds them.
if [ "${MHC_SETUP_CLANG:-0}" = 1 ]; then packages+=(clang-14 libclang-rt-14-dev); fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  echo "setup: installing ${missing[*]}"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
