// The FP8 layer input's host side for the launchers of src/cuda: the checked device view of an
// Fp8Output, and the post + next input launch with an FP8 output (fp8.cu, which holds those
// kernels' instantiations).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "launch_checks.cuh"
#include "mhc/cuda/fp8.cuh"
#include "mhc/cuda/kernels.hpp"
#include "mhc/cuda/post.cuh"

namespace mhc::cuda {

// The kernels' view of `out` for `tokens` tokens of C = hidden: codes present and 16-byte
// aligned (the kernels store 8 codes at once), scales present and float-aligned. The format is
// checked by the caller (check_fp8_format).
inline Fp8LayerInput fp8_output(const Fp8Output& out, int64_t tokens, int hidden,
                                const char* what) {
  detail::check_ptr(out.codes, "layer_input codes", what);
  detail::require_that(out.scales != nullptr, "{}: layer_input scales is null", what);
  detail::require_that(reinterpret_cast<uintptr_t>(out.scales) % alignof(float) == 0,
                       "{}: layer_input scales must be 4-byte aligned", what);
  return fp8_layer_input(out.codes, out.scales, tokens, hidden, out.format);
}

// The post fused with the next input path, layer_input in a.next_fp8: the row kernel, or the
// cluster post where `cluster` (the caller checked post_cluster_fits and the plan's choice).
cudaError_t launch_post_fp8(int streams, const PostFp8Args& a, int64_t tokens, bool cluster,
                            LaunchTarget on);

}  // namespace mhc::cuda
