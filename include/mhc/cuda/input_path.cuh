// The input path (design doc, step 1): layer_input = bf16(y * rsqrt(mean(y^2) + eps_n) * w) with
// y = bf16(sum_j pre_mix[j] * x[j]). One CTA per token; each thread owns up to kRowVecs 16-byte
// vectors of the C-row, keeps y in registers for the RMS reduction, and loads all its streams
// before the first use so that they are in flight together.
//
// The row helpers here are shared with the fused post + next input path (post.cuh).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "mhc/cuda/common.cuh"
#include "mhc/cuda/fp8.cuh"

namespace mhc::cuda {

inline constexpr int kRowVecs = 4;  // 16-byte vectors of a C-row per thread

// Threads of a one-CTA-per-token row kernel for hidden size C (a multiple of 8).
__host__ __device__ inline int row_kernel_threads(int hidden) {
  const int64_t threads = ceil_div(ceil_div(hidden, kBf16PerVec), kRowVecs);
  return static_cast<int>(ceil_div(threads, kWarp) * kWarp);
}
inline int row_kernel_max_hidden() { return 1024 * kRowVecs * kBf16PerVec; }

// Column offset of this thread's vector v, or -1 past the row. The row is cut over `threads`
// threads, row_kernel_threads(C), whatever the block size: a larger CTA (the fused input-path
// CTAs of the coefficient kernels) then holds the same vectors per thread and sums the row in the
// same order as the row kernels, its extra warps adding exact zeros (block_sum). `threads` comes
// from the launch (blockDim or a kernel argument), not computed here: the register-tight kernels
// that inline the row helpers have no register to spare for it.
//
// `thread` is the thread of that cut this one stands for: threadIdx.x in a row CTA; the cluster
// post (sm90_post_cluster.cuh) spreads a row CTA's threads over a cluster's CTAs.
__device__ __forceinline__ int row_column(int v, int hidden, int threads, int thread) {
  if (thread >= threads) return -1;
  const int c = (thread + v * threads) * kBf16PerVec;
  return c < hidden ? c : -1;
}
__device__ __forceinline__ int row_column(int v, int hidden, int threads) {
  return row_column(v, hidden, threads, int(threadIdx.x));
}

// y[e] = bf16(sum_j weights[j] * xs[j][e]), accumulated in fp32 in stream order.
template <int kStreams>
__device__ __forceinline__ void collapse8(const float (&xs)[kStreams][8],
                                          const float (&weights)[kStreams], float (&y)[8]) {
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    float acc = 0.f;
#pragma unroll
    for (int j = 0; j < kStreams; ++j) acc = fmaf(weights[j], xs[j][e], acc);
    y[e] = round_bf16(acc);
  }
}

// The collapse of the thread's vectors of a row (xv: kStreams packed streams per vector; zeros
// past the row collapse to zeros), y[v] = collapse8's, and returns the thread's sum of squares of
// y in vector order: one loop for the input path and the head collapse, so that they agree
// bitwise.
template <int kStreams, int kVec>
__device__ __forceinline__ float collapse_row(const uint4 (&xv)[kVec][kStreams],
                                              const float (&weights)[kStreams],
                                              float (&y)[kVec][8]) {
  float sum_sq = 0.f;
#pragma unroll
  for (int v = 0; v < kVec; ++v) {
    float xs[kStreams][8];
#pragma unroll
    for (int j = 0; j < kStreams; ++j) unpack_bf16x8(xv[v][j], xs[j]);
    collapse8<kStreams>(xs, weights, y[v]);
#pragma unroll
    for (int e = 0; e < 8; ++e) sum_sq = fmaf(y[v][e], y[v][e], sum_sq);
  }
  return sum_sq;
}

// The norm weight of the thread's vectors of the row (zeros past the row or for a null weight),
// loaded together with the row's streams: read after the block reduction, its latency would follow
// the reduction on every row kernel's critical path (measured faster).
template <int kVec>
__device__ __forceinline__ void load_norm_weights(const float* norm_weight, int hidden, int threads,
                                                  float4 (&w)[kVec][2]) {
#pragma unroll
  for (int v = 0; v < kVec; ++v) {
    const int c = row_column(v, hidden, threads);
    const bool load = norm_weight != nullptr && c >= 0;
    w[v][0] = load ? load_weight_f4(norm_weight + c) : make_float4(0.f, 0.f, 0.f, 0.f);
    w[v][1] = load ? load_weight_f4(norm_weight + c + 4) : make_float4(0.f, 0.f, 0.f, 0.f);
  }
}

// The RMSNorm's scale from the row's sum of squares: one formula for every kernel that forms a
// layer_input, so that they agree bitwise.
__device__ __forceinline__ float rms_scale(float total_sum_sq, int hidden, float eps_n) {
  return 1.f / sqrtf(total_sum_sq / float(hidden) + eps_n);
}

// Writes layer_input = y * rsqrt(sum_sq / C + eps_n) * w for the thread's vectors of the row,
// into the token's row `out_row` of a layer_input (fp8.cuh: Bf16Row, the bf16 rows, or Fp8Row,
// their FP8 codes and group scales): w from load_norm_weights (kPreloaded), or else loaded here,
// vector by vector after the reduction (the coefficient launches' input-path CTAs, off their
// launch's critical path, keep that form). sum_sq is this thread's share; the block total is
// formed in a fixed order. A null norm_weight writes y (a plain collapse, no norm). All threads
// of the block must call it.
template <int kVec, bool kPreloaded, class Row>
__device__ __forceinline__ void rms_norm_store(const float (&y)[kVec][8], float sum_sq,
                                               const float4 (&w)[kVec][2], const float* norm_weight,
                                               float eps_n, int hidden, int threads,
                                               const Row& out_row, float* scratch) {
  // An FP8 row's store holds its group's reduction: the lanes past the row call it too.
  constexpr bool kCollective = !std::is_same_v<Row, Bf16Row>;
  float scale = 1.f;
  if (norm_weight != nullptr) {
    scale = rms_scale(block_sum(sum_sq, scratch), hidden, eps_n);
  }
#pragma unroll
  for (int v = 0; v < kVec; ++v) {
    const int c = row_column(v, hidden, threads);
    if (!kCollective && c < 0) continue;
    float o[8];
    if (norm_weight != nullptr && (!kCollective || c >= 0)) {
      const float4 w0 = kPreloaded ? w[v][0] : load_weight_f4(norm_weight + c);
      const float4 w1 = kPreloaded ? w[v][1] : load_weight_f4(norm_weight + c + 4);
      float wv[8];
      unpack_f4x2(w0, w1, wv);
#pragma unroll
      for (int e = 0; e < 8; ++e) o[e] = y[v][e] * scale * wv[e];
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) o[e] = y[v][e];
    }
    out_row.store8(c, o, HalfWarpGroupMax{});
  }
}

// rms_norm_store for the bf16 row at out_row (the token's row of layer_input).
template <int kVec, bool kPreloaded>
__device__ __forceinline__ void rms_norm_store(const float (&y)[kVec][8], float sum_sq,
                                               const float4 (&w)[kVec][2], const float* norm_weight,
                                               float eps_n, int hidden, int threads,
                                               uint16_t* out_row, float* scratch) {
  rms_norm_store<kVec, kPreloaded, Bf16Row>(y, sum_sq, w, norm_weight, eps_n, hidden, threads,
                                            Bf16Row{out_row}, scratch);
}

// One token's input path, by the whole block (also used by the fused input-path CTAs of the
// coefficient kernels, with kEarlyWeights false: there the input path is off the launch's
// critical path, where the early loads measure no faster); the row cut over `threads` threads
// (row_column).
// `scratch` holds one float per warp.
template <int kStreams, int kVec, bool kEarlyWeights = true, class Out = Bf16LayerInput>
__device__ __forceinline__ void input_path_token(const uint16_t* __restrict__ x,
                                                 const float* __restrict__ pre_mix,
                                                 const float* __restrict__ norm_weight, int hidden,
                                                 int threads, float eps_n, const Out& layer_input,
                                                 int64_t token, float* scratch) {
  const uint16_t* x_token = x + token * kStreams * hidden;
  float weights[kStreams];
#pragma unroll
  for (int j = 0; j < kStreams; ++j) weights[j] = pre_mix[token * kStreams + j];

  uint4 xv[kVec][kStreams];
#pragma unroll
  for (int v = 0; v < kVec; ++v) {
    const int c = row_column(v, hidden, threads);
#pragma unroll
    for (int j = 0; j < kStreams; ++j) {
      xv[v][j] = c >= 0 ? load_stream_u4(x_token + j * hidden + c) : make_uint4(0, 0, 0, 0);
    }
  }
  float4 w[kVec][2];
  if constexpr (kEarlyWeights) load_norm_weights<kVec>(norm_weight, hidden, threads, w);
  float y[kVec][8];
  const float sum_sq = collapse_row<kStreams, kVec>(xv, weights, y);
  rms_norm_store<kVec, kEarlyWeights>(y, sum_sq, w, norm_weight, eps_n, hidden, threads,
                                      layer_input.row(token, hidden), scratch);
}

// input_path_token into the bf16 layer_input [T, C].
template <int kStreams, int kVec, bool kEarlyWeights = true>
__device__ __forceinline__ void input_path_token(const uint16_t* __restrict__ x,
                                                 const float* __restrict__ pre_mix,
                                                 const float* __restrict__ norm_weight, int hidden,
                                                 int threads, float eps_n,
                                                 uint16_t* __restrict__ layer_input, int64_t token,
                                                 float* scratch) {
  input_path_token<kStreams, kVec, kEarlyWeights, Bf16LayerInput>(
      x, pre_mix, norm_weight, hidden, threads, eps_n, Bf16LayerInput{layer_input}, token, scratch);
}

template <int kStreams, int kVec, class Out>
__global__ void input_path_kernel(const uint16_t* __restrict__ x, const float* __restrict__ pre_mix,
                                  const float* __restrict__ norm_weight, int hidden, float eps_n,
                                  const typename Out::Param layer_input) {
  __shared__ float scratch[kWarp];
  allow_dependents();
  wait_for_producer();
  input_path_token<kStreams, kVec, true, Out>(x, pre_mix, norm_weight, hidden, int(blockDim.x),
                                              eps_n, Out{layer_input}, blockIdx.x, scratch);
}

// launch_input_path's preconditions, refused before any CUDA call (cudaErrorInvalidValue):
// 1..INT32_MAX tokens, C in whole 16-byte vectors (in whole FP8 groups for an FP8 output), and
// the pointers it reads and writes (the norm weight may be null). mhc::cuda::input_path checks
// them with messages.
template <class Out>
inline bool input_path_args_valid(const uint16_t* x, const float* pre_mix, int64_t tokens,
                                  int hidden, const Out& layer_input) {
  const int multiple = Out::kCollective ? kFp8GroupSize : kBf16PerVec;
  return tokens >= 1 && tokens <= INT32_MAX && hidden > 0 && hidden % multiple == 0 &&
         x != nullptr && pre_mix != nullptr && layer_input.valid();
}

template <int kStreams, class Out>
cudaError_t launch_input_path_as(const uint16_t* x, const float* pre_mix, const float* norm_weight,
                                 int64_t tokens, int hidden, float eps_n, const Out& layer_input,
                                 LaunchTarget on) {
  if (!input_path_args_valid(x, pre_mix, tokens, hidden, layer_input)) {
    return cudaErrorInvalidValue;
  }
  return launch_kernel(input_path_kernel<kStreams, kRowVecs, Out>,
                       dim3(static_cast<unsigned>(tokens)), dim3(row_kernel_threads(hidden)), 0, on,
                       x, pre_mix, norm_weight, hidden, eps_n, layer_input.param());
}

template <int kStreams>
cudaError_t launch_input_path(const uint16_t* x, const float* pre_mix, const float* norm_weight,
                              int64_t tokens, int hidden, float eps_n, uint16_t* layer_input,
                              LaunchTarget on) {
  return launch_input_path_as<kStreams>(x, pre_mix, norm_weight, tokens, hidden, eps_n,
                                        Bf16LayerInput{layer_input}, on);
}

}  // namespace mhc::cuda
