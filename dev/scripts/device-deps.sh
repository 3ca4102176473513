#!/usr/bin/env bash
# Run HERE (the development machine): copies the header-only dependencies, fmt's headers (mhc
# compiles its implementation) and GoogleTest's sources into .deps/ (git-ignored), which the GPU
# machine (no -dev packages) builds against.
# Pass .deps in the device call's `carry`.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .deps/include
for d in nlohmann CLI fmt; do
  rm -rf ".deps/include/$d"
  cp -r "/usr/include/$d" ".deps/include/$d"
done
rm -rf .deps/googletest
cp -r /usr/src/googletest .deps/googletest
du -sh .deps
