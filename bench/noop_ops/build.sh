#!/usr/bin/env bash
# Builds the benchmark-only no-op op libraries (not part of the package, not in any CMake build):
#   OUT/noop_ops.so         torch.ops.mhc_noop.*: mhc's _out schemas on the stable ABI, registered
#                           as python/src/torch/registration.cpp registers them (noop_ops.cpp)
#   OUT/noop_ops_legacy.so  torch.ops.mhc_noop_legacy.*: the same schemas through TORCH_LIBRARY
#                           (noop_ops_legacy.cpp; skipped with a warning where it fails to build)
# against the torch that PYTHON imports, with the flags of python/TorchOps.cmake (the stable one
# targets torch 2.10 as the package does). bench/noop_dispatch.py loads them.
#   bench/noop_ops/build.sh PYTHON OUT_DIR
set -euo pipefail
py=${1:?python}
out=${2:?output directory}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
torch_dir=$("$py" -c "import os, torch; print(os.path.dirname(torch.__file__))")
cxx=${CXX:-g++}
# Only torch/ of torch's include directory, as TorchOps.cmake does.
mkdir -p "$out/torch-include"
ln -sfn "$torch_dir/include/torch" "$out/torch-include/torch"
"$cxx" -O2 -std=c++17 -shared -fPIC -fvisibility=hidden -DTORCH_TARGET_VERSION=0x020a000000000000 \
  -isystem "$out/torch-include" "$here/noop_ops.cpp" -o "$out/noop_ops.so" \
  -Wl,--as-needed "$torch_dir/lib/libtorch_cpu.so"
if ! "$cxx" -O2 -std=c++20 -shared -fPIC -D_GLIBCXX_USE_CXX11_ABI=1 \
  -isystem "$torch_dir/include" -isystem "$torch_dir/include/torch/csrc/api/include" \
  "$here/noop_ops_legacy.cpp" -o "$out/noop_ops_legacy.so" \
  -L"$torch_dir/lib" -Wl,--as-needed -lc10 -ltorch_cpu; then
  echo "noop_ops/build.sh: the TORCH_LIBRARY variant did not build; timing without it" >&2
fi
echo "$out"
