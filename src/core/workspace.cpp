#include "mhc/core/workspace.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <limits>

#include "mhc/core/error.hpp"

namespace mhc {

namespace {

constexpr int64_t kAlign = 256;

int64_t align_up(int64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

}  // namespace

SplitRange prenorm_split_range(int64_t k, int splits, int split) {
  const int64_t blocks = k / kPrenormSplitBlockK;
  const int64_t per_split = blocks / splits, extra = blocks % splits;
  const int64_t first = split * per_split + std::min<int64_t>(split, extra);
  const int64_t count = per_split + (split < extra ? 1 : 0);
  return {first * kPrenormSplitBlockK, (first + count) * kPrenormSplitBlockK};
}

void check_prenorm_gemm_shape(int64_t tokens, int64_t nmix, int64_t k, int splits) {
  if (tokens < 0) throw Error(fmt::format("prenorm_gemm: token count {} is negative", tokens));
  if (nmix < 8 || nmix > 32 || nmix % 8 != 0) {
    throw Error(fmt::format("prenorm_gemm: N={} must be 8, 16, 24 or 32", nmix));
  }
  if (k <= 0 || k % kPrenormSplitBlockK != 0) {
    throw Error(fmt::format("prenorm_gemm: K={} must be a positive multiple of {}", k,
                            kPrenormSplitBlockK));
  }
  if (splits < 1) throw Error(fmt::format("prenorm_gemm: num_splits={} must be >= 1", splits));
}

namespace {

int max_coefficient_splits(const MhcParams& p) {
  const int64_t by_k = p.k() / (kPrenormChunkK * kPrenormGemmWarps);
  return int(std::clamp<int64_t>(by_k, 1, kPrenormDecodeMaxSplits));
}

// Counters and partials of one 128-token block, in bytes (at most ~1.7 MB: nmix <= 80, splits
// <= 40).
int64_t block_bytes(const MhcParams& p) {
  return (kPrenormMaxTileRows / 16) * 4 +
         int64_t(kPrenormMaxTileRows) * (p.nmix() + 1) * max_coefficient_splits(p) * 4;
}

int64_t weight_bytes(const MhcParams& p) { return align_up(int64_t(p.hidden) * 4); }

// The most 128-token blocks whose layout's sizes fit an int64 (every size below is at most
// weight_bytes + blocks * block_bytes, with room to spare for the alignment).
int64_t max_blocks(const MhcParams& p) {
  return (std::numeric_limits<int64_t>::max() - weight_bytes(p) - kAlign) / block_bytes(p);
}

WorkspaceLayout layout_of_blocks(const MhcParams& p, int64_t blocks) {
  WorkspaceLayout w;
  w.max_splits = max_coefficient_splits(p);
  w.max_tokens = blocks * kPrenormMaxTileRows;
  w.weight_offset = 0;
  w.weight_floats = p.hidden;
  w.counters_offset = weight_bytes(p);
  w.counters = blocks * (kPrenormMaxTileRows / 16);
  w.partials_offset = w.counters_offset + w.counters * 4;
  w.partial_floats = w.max_tokens * (p.nmix() + 1) * w.max_splits;
  w.bytes = w.partials_offset + w.partial_floats * 4;
  return w;
}

}  // namespace

WorkspaceLayout workspace_layout(const MhcParams& p, int64_t max_tokens) {
  validate(p);
  if (max_tokens < 0) {
    throw Error(fmt::format("workspace: max_tokens={} must be >= 0", max_tokens));
  }
  // Blocks counted without forming max_tokens + 127, which overflows near 2^63.
  const int64_t blocks = max_tokens / kPrenormMaxTileRows + (max_tokens % kPrenormMaxTileRows != 0);
  if (blocks > max_blocks(p)) {
    throw Error(fmt::format(
        "workspace: max_tokens={} needs more than 2^63-1 bytes (C={} n={}: {} bytes per {} "
        "tokens); at most {} tokens",
        max_tokens, p.hidden, p.n, block_bytes(p), kPrenormMaxTileRows,
        max_blocks(p) * kPrenormMaxTileRows));
  }
  return layout_of_blocks(p, std::max<int64_t>(blocks, 1));
}

WorkspaceLayout workspace_layout_for_bytes(const MhcParams& p, int64_t bytes) {
  validate(p);
  // Compared, not subtracted: bytes - weight_bytes overflows for bytes near -2^63.
  const int64_t room = bytes > weight_bytes(p) ? bytes - weight_bytes(p) : 0;
  return layout_of_blocks(p, std::min(room / block_bytes(p), max_blocks(p)));
}

}  // namespace mhc
