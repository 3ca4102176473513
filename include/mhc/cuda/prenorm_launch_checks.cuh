// The coefficient kernels' raw launchers' preconditions (host): each launcher refuses, before any
// CUDA call, arguments that would take its kernel out of its buffers or into a hang (invariants as
// asserts, as DeepGEMM's launchers do), returning cudaErrorInvalidValue. The checked API
// (mhc::cuda::prenorm_coefficients and the fused boundary's launch_boundary) establishes every one
// of them first, with its own messages; these only keep a raw launch from running on bad ones.
#pragma once
#include <cstdint>

#include "mhc/cuda/input_path.cuh"
#include "mhc/cuda/prenorm_common.cuh"

namespace mhc::cuda {

// What every coefficient kernel needs: 1..INT32_MAX tokens (a tile's coordinates are ints), K =
// n x C with C a multiple of 64, at least one split, the coefficient inputs and outputs, leaf
// fields whose partial blocks divide (partial_blocks), the workspace wherever partial blocks go
// through it, and with a fused input path or a folded previous post their pointers, on a row of
// C = K / n cut as the row kernels cut it (row_kernel_threads).
template <int kStreams>
inline bool prenorm_args_valid(const PrenormArgs& a) {
  const bool shape = a.tokens >= 1 && a.tokens <= INT32_MAX && a.k > 0 &&
                     a.k % (kStreams * 64) == 0 && a.splits >= 1;
  const bool leaves = a.leaf_chunks == 0 ||
                      (a.leaf_chunks > 0 && a.leaves_per_split >= 1 && a.leaves_per_partial >= 1 &&
                       a.leaves_per_split % a.leaves_per_partial == 0);
  if (!shape || !leaves) return false;
  const bool coefficients = a.x != nullptr && a.hc_fn != nullptr && a.coef.hc_base != nullptr &&
                            a.coef.hc_scale != nullptr && a.out.pre != nullptr &&
                            a.out.post != nullptr && a.out.comb != nullptr;
  const bool workspace =
      partial_blocks(a) == 1 || (a.partials != nullptr && a.tile_counters != nullptr);
  const bool input = a.input.layer_input == nullptr ||
                     (a.input.pre_mix != nullptr && a.input.hidden * kStreams == a.k &&
                      a.input.row_threads == row_kernel_threads(a.input.hidden));
  const bool previous = a.previous.x == nullptr ||
                        (a.previous.post != nullptr && a.previous.comb != nullptr &&
                         a.previous.sublayer_out != nullptr && a.previous.x_out != nullptr);
  return coefficients && workspace && input && previous;
}

// Whether a kernel's fused input-path CTAs of `threads` threads cover the row's cut (row_column;
// no input path fused: yes).
inline bool fused_input_fits(const PrenormArgs& a, int threads) {
  return a.input.layer_input == nullptr || a.input.row_threads <= threads;
}

}  // namespace mhc::cuda
