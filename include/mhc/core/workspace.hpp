// Sizes and layouts shared by the backends and their callers, no CUDA: the K splits of the raw
// prenorm GEMM (DeepGEMM's tf32_hc_prenorm_gemm layout) and the caller-owned workspace of the
// coefficient path (what mhc._C's workspace_bytes reports).
#pragma once
#include <cstdint>

#include "mhc/core/params.hpp"

namespace mhc {

// The raw prenorm GEMM splits K in blocks of this many columns, as DeepGEMM does.
inline constexpr int64_t kPrenormSplitBlockK = 64;

// Columns [begin, end) of K in split `split` of `splits`: the K / 64 blocks are dealt out in
// order, the first (blocks % splits) splits taking one more (DeepGEMM's split layout). A split
// past the last block is empty (begin == end).
struct SplitRange {
  int64_t begin = 0;
  int64_t end = 0;
};
SplitRange prenorm_split_range(int64_t k, int splits, int split);

// Throws mhc::Error naming the bad value: tokens < 0, N not in 1..32 or not a multiple of 8,
// K not a positive multiple of 64, splits < 1.
void check_prenorm_gemm_shape(int64_t tokens, int64_t nmix, int64_t k, int splits);

// The coefficient path's split-K limits, as the CUDA kernels' heuristic uses them.
inline constexpr int kPrenormChunkK = 32;        // K per warp step
inline constexpr int kPrenormGemmWarps = 8;      // warps per CTA
inline constexpr int kPrenormMaxTileRows = 128;  // the largest token tile (TMA kernel)
inline constexpr int kPrenormDecodeMaxSplits = 40;
// The most splits any plan rule gives a decode launch (ArchRules::decode_stage_k), and what the
// flagged reducer's scratch holds (decode_flagged.cuh). The rule's launches are one 16-row tile,
// whose partials fit in a workspace's first 128-token block at this count (the launcher checks
// every other count against the workspace).
inline constexpr int kPrenormDecodeSplitLimit = 64;

// Byte layout of one caller-owned workspace, a function of its size only (so that calls with any
// token count on one workspace agree on where the counters are): C floats of scratch for a bf16
// norm weight widened to fp32 (overwritten by every call that needs it), then per 128-token block
// eight arrival counters (uint32; zero between launches: the kernels re-arm them) and the block's
// split-K partials (floats). Offsets are 16-byte aligned (the kernels' vector loads).
struct WorkspaceLayout {
  int max_splits = 1;
  int64_t max_tokens = 0;  // a multiple of kPrenormMaxTileRows
  int64_t weight_offset = 0, weight_floats = 0;
  int64_t counters_offset = 0, counters = 0;
  int64_t partials_offset = 0, partial_floats = 0;
  int64_t bytes = 0;
};
// The smallest workspace for up to max_tokens tokens. Throws mhc::Error on an impossible shape or
// max_tokens < 0.
WorkspaceLayout workspace_layout(const MhcParams& p, int64_t max_tokens);
// The layout of a workspace of `bytes` bytes: as many 128-token blocks as fit (max_tokens 0 when
// not even one does).
WorkspaceLayout workspace_layout_for_bytes(const MhcParams& p, int64_t bytes);

}  // namespace mhc
