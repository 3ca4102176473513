// The post + next input launch with an FP8 layer_input: the row kernel's and the cluster post's
// instantiations for Fp8LayerInput (their bf16 instantiations stay in kernels.cu); and the
// stand-alone group quantisation.
#include "fp8_launch.cuh"
#include "mhc/cuda/post.cuh"
#include "mhc/cuda/sm90_post_cluster.cuh"

namespace mhc::cuda {

namespace {

// Quantises bf16 rows [T, C] into `out` (Fp8LayerInput; C a multiple of 128): one thread per
// 8-column vector, a half-warp per group; the stand-alone group quantisation an engine would launch
// after a bf16 layer_input, vLLM's per_token_group_quant_fp8 (the FP8 ops' benchmark times it
// beside them).
template <class Out>
__global__ void quantize_rows_kernel(const uint16_t* __restrict__ rows, int64_t vectors, int hidden,
                                     const Out out) {
  allow_dependents();
  wait_for_producer();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t row_vectors = hidden / kBf16PerVec;
  const int64_t token = i / row_vectors;
  const bool inside = i < vectors;
  float v[8] = {};
  if (inside) unpack_bf16x8(load_stream_u4(rows + i * kBf16PerVec), v);
  const int c = inside ? int(i - token * row_vectors) * kBf16PerVec : -1;
  out.row(token, hidden).store8(c, v, HalfWarpGroupMax{});
}
constexpr int kQuantizeFp8Threads = 256;

cudaError_t launch_quantize_fp8(const uint16_t* rows, int64_t tokens, int hidden,
                                const Fp8LayerInput& out, LaunchTarget on) {
  const int64_t vectors = tokens * (hidden / kBf16PerVec);
  if (rows == nullptr || !out.valid() || tokens < 1 || hidden <= 0 || hidden % kFp8GroupSize != 0 ||
      ceil_div(vectors, kQuantizeFp8Threads) > INT32_MAX) {
    return cudaErrorInvalidValue;
  }
  return launch_kernel(quantize_rows_kernel<Fp8LayerInput>,
                       dim3(static_cast<unsigned>(ceil_div(vectors, kQuantizeFp8Threads))),
                       dim3(kQuantizeFp8Threads), 0, on, rows, vectors, hidden, out);
}

}  // namespace

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
