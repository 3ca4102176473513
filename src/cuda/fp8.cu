// The post + next input launch with an FP8 layer_input: the row kernel's and the cluster post's
// instantiations for Fp8LayerInput (their bf16 instantiations stay in kernels.cu).
#include "fp8_launch.cuh"
#include "mhc/cuda/post.cuh"
#include "mhc/cuda/sm90_post_cluster.cuh"

namespace mhc::cuda {

cudaError_t launch_post_fp8(int streams, const PostFp8Args& a, int64_t tokens, bool cluster,
                            LaunchTarget on) {
  if (streams == 2) {
    return MHC_N2_LAUNCH(cluster ? launch_post_cluster<2, Fp8LayerInput>(a, tokens, on)
                                 : launch_post<2, true, Fp8LayerInput>(a, tokens, on));
  }
  return cluster ? launch_post_cluster<4, Fp8LayerInput>(a, tokens, on)
                 : launch_post<4, true, Fp8LayerInput>(a, tokens, on);
}

void quantize_fp8(int64_t tokens, int hidden, const Bf16* rows, const Fp8Output& out,
                  LaunchTarget stream) {
  constexpr const char* what = "quantize_fp8";
  check_fp8_format(out.format, hidden, what);
  detail::require_that(tokens >= 0 && tokens <= INT32_MAX, "{}: token count {} out of range", what,
                       tokens);
  if (tokens == 0) return;
  detail::check_ptr(rows, "rows", what);
  const Fp8LayerInput view = fp8_output(out, tokens, hidden, what);
  detail::check_launch(launch_quantize_fp8(detail::bits(rows), tokens, hidden, view, stream), what);
}

}  // namespace mhc::cuda
