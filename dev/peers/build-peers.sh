#!/usr/bin/env bash
# Compiles the peers' kernels (the wrappers peer_*.cu around the sources fetch-peers.sh put in
# .peers/src) into .peers/build/libpeers.a for sm_90a, with the flags each project compiles its
# own kernels with (FlashInfer's JIT: C++17, -O3, --expt-relaxed-constexpr; DeepGEMM's JIT:
# C++20, -O3, relaxed constexpr, extended lambdas, --register-usage-level=10). Needs nvcc, not a
# GPU: run it HERE, so that the GPU machine only links. NVCC (default /usr/local/cuda/bin/nvcc).
# --bench: then also mhc_bench_peers itself with mhc's library, from HEAD (PEERS_BUILD_DIR,
# default build-peers-clean; 20-30 minutes on two busy cores), copied to .peers/bin with that
# commit, so that the GPU machine only runs it.
set -euo pipefail
cd "$(dirname "$0")/../.."
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
src=.peers/src
if [ ! -f "$src/flashinfer/csrc/mhc/mhc_post.cu" ]; then
  echo "build-peers: $src is missing: run dev/peers/fetch-peers.sh on a machine with network" >&2
  exit 2
fi
mkdir -p .peers/build
common=(-O3 -gencode=arch=compute_90a,code=sm_90a -Xcompiler=-fPIC --expt-relaxed-constexpr
  -ccbin "${CXX:-/usr/bin/g++}" -Idev/peers)
fi_flags=(-std=c++17 "${common[@]}" -I"$src/flashinfer/csrc/mhc" -I"$src/flashinfer/csrc"
  -I"$src/flashinfer/include" -I"$src/tvm_ffi/include" -static-global-template-stub=false)
dg_flags=(-std=c++20 "${common[@]}" --expt-extended-lambda --diag-suppress=39,161,174,177,186,940
  --ptxas-options=--register-usage-level=10 -Xcompiler=-fconcepts,-Wno-deprecated-declarations
  -I"$src/deepgemm/include" -I"$src/cutlass/include")
pids=()
"$NVCC" "${fi_flags[@]}" -c dev/peers/peer_flashinfer_post.cu -o .peers/build/fi_post.o & pids+=($!)
"$NVCC" "${fi_flags[@]}" -c dev/peers/peer_flashinfer_fuse.cu -o .peers/build/fi_fuse.o & pids+=($!)
"$NVCC" "${dg_flags[@]}" -c dev/peers/peer_deepgemm.cu -o .peers/build/dg_prenorm.o & pids+=($!)
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
if [ "$rc" != 0 ]; then
  echo "build-peers: a peer kernel failed to compile (messages above)" >&2
  exit 1
fi
rm -f .peers/build/libpeers.a
ar rcs .peers/build/libpeers.a .peers/build/fi_post.o .peers/build/fi_fuse.o .peers/build/dg_prenorm.o
echo "build-peers: .peers/build/libpeers.a"

if [ "${1:-}" = --bench ]; then
  # From a clean export of HEAD (not the working tree, which may hold others' unfinished edits),
  # so that the binary is the commit it names.
  head=$(git rev-parse --short HEAD)
  src=$(mktemp -d)/mhc-$head
  mkdir -p "$src"
  git archive HEAD | tar x -C "$src"
  b=${PEERS_BUILD_DIR:-build-peers-clean}
  CUDACXX=$NVCC cmake -S "$src" -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMHC_CUDA=ON \
    -DMHC_CUDA_ARCHS=90a -DMHC_CUDA_PTX= -DMHC_NCCL=OFF -DMHC_LAB=ON -DMHC_CLI=OFF \
    -DBUILD_TESTING=OFF -DMHC_PYTHON=OFF -DMHC_PEERS_DIR="$PWD/.peers" >/dev/null
  nice cmake --build "$b" -j "${PEERS_JOBS:-2}" --target mhc_bench_peers
  mkdir -p .peers/bin
  cp "$b/dev/peers/mhc_bench_peers" .peers/bin/
  echo "$head" >.peers/bin/COMMIT
  rm -rf "$(dirname "$src")"
  echo "build-peers: .peers/bin/mhc_bench_peers (commit $head)"
fi
