// The CUDA kernels' shape limits that the launch resolution (KernelPlan::tuning, policy code) and
// the device headers share, no CUDA. src/cuda/kernels.cu checks them against the kernels' own
// constants at compile time.
#pragma once
#include <cstdint>

#include "mhc/core/params.hpp"
#include "mhc/core/workspace.hpp"

namespace mhc {

// The most splits the coefficient kernels take for this shape: one K chunk per warp of a split
// (K / 256), at least 1.
int max_prenorm_splits(const MhcParams& p);

inline constexpr int kPrenormTmaChunksPerStage = 4;  // K chunks of one TMA stage (128 of K)
inline constexpr int kBatchInvariantMaxLeaves = 32;  // the deepest tree of batch-invariant mode
// Batch-invariant mode (docs/batch_invariance.md): the number of K leaves (a power of two, from
// K alone, whole TMA stages each) whose pairwise tree fixes the reduction order.
int batch_invariant_leaves(const MhcParams& p);

// The row kernels (post, input path) run one CTA of C / 32 threads per token: at most 1024
// threads; their register counts may lower it on a device (KernelPlan::row_kernels_max_hidden).
inline constexpr int kRowKernelsHiddenLimit = 32768;
// The input path's CTAs inside a coefficient launch run C / 32 threads, at most 256.
inline constexpr int kFusedInputHiddenLimit = 8192;
// The post + next input by one cluster per token: at most 8 one-warp CTAs of 32 columns a lane.
inline constexpr int kClusterPostHiddenLimit = 8192;
// The plain post by columns (post_columns_kernel, post.cuh): one thread per 8-column vector of a
// token, CTAs of this many threads; where it runs is a plan decision (LaunchTuning::post_columns).
inline constexpr int kPostColumnThreads = 128;
// Whether its grid (one CTA per kPostColumnThreads vectors of all the tokens) fits the launch.
inline constexpr bool post_columns_fit(int hidden, int64_t tokens) {
  return hidden > 0 && tokens >= 1 && tokens <= 0x7fffffff &&
         (tokens * (hidden / 8) + kPostColumnThreads - 1) / kPostColumnThreads <= 0x7fffffff;
}

}  // namespace mhc
