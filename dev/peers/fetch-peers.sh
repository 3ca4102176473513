#!/usr/bin/env bash
# Run HERE (a machine with network): fetches the peers' sources into .peers/ (git-ignored), the
# carry directory of dev/peers/run.sh. Only what the measured kernels need is kept:
#   FlashInfer (PyPI flashinfer-python): csrc/mhc/mhc_post.cu, csrc/mhc/mhc_pre_big_fuse.cu and
#     the headers they include (tvm_ffi_utils.h, flashinfer/layout.cuh, ...);
#   apache-tvm-ffi (PyPI): its headers and libtvm_ffi.so, which those sources link against;
#   DeepGEMM (GitHub deepseek-ai/DeepGEMM): deep_gemm/include, for sm90_tf32_hc_prenorm_gemm;
#   CUTLASS/CuTe headers that DeepGEMM's kernel includes, from FlashInfer's wheel (which bundles
#     CUTLASS), trimmed to the files the kernel's translation unit reads (nvcc -M).
# Versions and commits are written to .peers/VERSIONS (the JSON of run.sh carries them).
# Environment: PEERS_WHEELS a folder already holding the two wheels (else pip downloads them);
# DEEPGEMM_GIT a git directory of DeepGEMM (else cloned from GitHub); DEEPGEMM_REV (default the
# commit measured); PIP (default pip3); NVCC (default /usr/local/cuda/bin/nvcc).
set -euo pipefail
cd "$(dirname "$0")/../.."
FI_VERSION=0.7.2.post1
TVM_FFI_VERSION=0.1.15.post2
DEEPGEMM_REV=${DEEPGEMM_REV:-54e2261}
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
out=.peers
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

wheels=${PEERS_WHEELS:-$tmp/wheels}
if [ -z "${PEERS_WHEELS:-}" ]; then
  ${PIP:-pip3} download -q --no-deps -d "$wheels" "flashinfer-python==$FI_VERSION" \
    "apache-tvm-ffi==$TVM_FFI_VERSION"
fi
fi_whl=$(ls "$wheels"/flashinfer_python-"$FI_VERSION"-*.whl)
tvm_whl=$(ls "$wheels"/apache_tvm_ffi-"$TVM_FFI_VERSION"-*.whl | head -1)

# Stage the full trees in $tmp, then keep what the wrappers' translation units read.
mkdir -p "$tmp/fi" "$tmp/tvm"
unzip -q "$fi_whl" 'flashinfer/data/csrc/mhc/*' 'flashinfer/data/csrc/tvm_ffi_utils.h' \
  'flashinfer/data/include/*' 'flashinfer/data/cutlass/include/*' -d "$tmp/fi"
unzip -q "$fi_whl" "flashinfer_python-$FI_VERSION.dist-info/licenses/LICENSE" -d "$tmp/fi"
unzip -q "$tvm_whl" 'tvm_ffi/include/*' 'tvm_ffi/lib/libtvm_ffi.so' \
  "apache_tvm_ffi-$TVM_FFI_VERSION.dist-info/licenses/LICENSE" -d "$tmp/tvm"
if [ -n "${DEEPGEMM_GIT:-}" ]; then
  dg_git=$DEEPGEMM_GIT
else
  git clone -q --bare https://github.com/deepseek-ai/DeepGEMM "$tmp/dg.git"
  dg_git=$tmp/dg.git
fi
dg_commit=$(git --git-dir="$dg_git" rev-parse "$DEEPGEMM_REV^{commit}")
dg_describe=$(git --git-dir="$dg_git" describe --tags "$dg_commit" 2>/dev/null || echo "$dg_commit")
mkdir -p "$tmp/dg"
git --git-dir="$dg_git" archive "$dg_commit" deep_gemm/include LICENSE | tar x -C "$tmp/dg"

rm -rf "$out/src" "$out/lib"
mkdir -p "$out/src/flashinfer/csrc/mhc" "$out/src/flashinfer/include" "$out/src/tvm_ffi/include" \
  "$out/src/deepgemm/include" "$out/src/cutlass/include" "$out/lib"
cp "$tmp/fi/flashinfer/data/csrc/mhc/mhc_post.cu" "$tmp/fi/flashinfer/data/csrc/mhc/mhc_pre_big_fuse.cu" \
  "$out/src/flashinfer/csrc/mhc/"
cp "$tmp/fi/flashinfer/data/csrc/tvm_ffi_utils.h" "$out/src/flashinfer/csrc/"
cp -r "$tmp/tvm/tvm_ffi/include/." "$out/src/tvm_ffi/include/"
cp "$tmp/tvm/tvm_ffi/lib/libtvm_ffi.so" "$out/lib/"
cp "$tmp/dg/LICENSE" "$out/src/deepgemm/LICENSE"
cp "$tmp/fi/flashinfer_python-$FI_VERSION.dist-info/licenses/LICENSE" "$out/src/flashinfer/LICENSE"
cp "$tmp/tvm/apache_tvm_ffi-$TVM_FFI_VERSION.dist-info/licenses/LICENSE" "$out/src/tvm_ffi/LICENSE"

# The headers the three wrapper translation units read, from the staged trees.
inc="-I$tmp/fi/flashinfer/data/include -I$tmp/fi/flashinfer/data/csrc -I$tmp/tvm/tvm_ffi/include
  -I$tmp/dg/deep_gemm/include -I$tmp/fi/flashinfer/data/cutlass/include"
for tu in dev/peers/peer_flashinfer_post.cu dev/peers/peer_flashinfer_fuse.cu dev/peers/peer_deepgemm.cu; do
  "$NVCC" -std=c++17 -arch=sm_90a -M -DPEERS_FI_DIR="$tmp/fi/flashinfer/data/csrc" \
    -I"$tmp/fi/flashinfer/data/csrc/mhc" $inc -Idev/peers "$tu" -o "$tmp/$(basename "$tu").d"
done
cat "$tmp"/*.d | tr ' \\' '\n\n' | grep "^$tmp/" | sort -u | while read -r f; do
  case "$f" in
    "$tmp/fi/flashinfer/data/include/"*) dst="$out/src/flashinfer/include/${f#"$tmp/fi/flashinfer/data/include/"}" ;;
    "$tmp/fi/flashinfer/data/cutlass/include/"*) dst="$out/src/cutlass/include/${f#"$tmp/fi/flashinfer/data/cutlass/include/"}" ;;
    "$tmp/dg/deep_gemm/include/"*) dst="$out/src/deepgemm/include/${f#"$tmp/dg/deep_gemm/include/"}" ;;
    *) continue ;;
  esac
  mkdir -p "$(dirname "$dst")"
  cp "$f" "$dst"
done

cat >"$out/VERSIONS" <<JSON
{"flashinfer": "flashinfer-python $FI_VERSION", "tvm_ffi": "apache-tvm-ffi $TVM_FFI_VERSION",
 "deepgemm": "deepseek-ai/DeepGEMM $dg_describe ($dg_commit)",
 "cutlass": "the CUTLASS headers bundled in flashinfer-python $FI_VERSION"}
JSON
du -sh "$out"
