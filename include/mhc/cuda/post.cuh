// The post (design doc, step 4): x_next[k] = bf16(post[k] * F + sum_j comb[j][k] * x[j]), fp32
// accumulation; row j of comb is the source stream. Optionally fused with the NEXT site's input
// path (or the final collapse + norm after the last site): the next pre_mix is this site's pre,
// already known, so layer_input(s+1) = rmsnorm(bf16(sum_k pre[k] * x_next[k])) * w(s+1) is formed
// from the x_next values still in registers, which saves a full read of x per site.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "mhc/core/kernel_limits.hpp"
#include "mhc/cuda/common.cuh"
#include "mhc/cuda/fp8.cuh"
#include "mhc/cuda/input_path.cuh"

namespace mhc::cuda {

struct PostArgs {
  const uint16_t* x = nullptr;             // [M, n, C]
  const float* post = nullptr;             // [M, n]
  const float* comb = nullptr;             // [M, n, n]
  const uint16_t* sublayer_out = nullptr;  // [M, C]
  uint16_t* x_next = nullptr;              // [M, n, C]
  int hidden = 0;
  int row_threads = 0;  // row_kernel_threads(hidden): the row's cut (row_column)
  float eps_n = 0.f;
  // Fused next input path (only read by the kNextInput instantiation).
  const float* next_pre_mix = nullptr;      // [M, n]: this site's pre
  const float* next_norm_weight = nullptr;  // [C], or null for a plain collapse
  uint16_t* next_layer_input = nullptr;     // [M, C]
};

// The post's arguments with an FP8 next layer_input (fp8.cuh) instead of next_layer_input: a
// type of their own, so that the bf16 kernels' parameters stay PostArgs.
struct PostFp8Args : PostArgs {
  Fp8LayerInput next_fp8;
};
// The arguments of a post kernel whose next layer_input is of type Out, and that layer_input.
template <class Out>
using PostArgsFor = std::conditional_t<Out::kCollective, PostFp8Args, PostArgs>;
__host__ __device__ inline Bf16LayerInput next_layer_input(const PostArgs& a) {
  return {a.next_layer_input};
}
__host__ __device__ inline Fp8LayerInput next_layer_input(const PostFp8Args& a) {
  return a.next_fp8;
}

// out[e] = bf16(post_k * f[e] + sum_j comb[j][k] * xs[j][e]) for output stream k: the formula of
// the post, shared with the coefficient launch that forms x on the fly, so that both produce the
// same bits. comb_to_k[j] = comb[j][k].
template <int kStreams>
__device__ __forceinline__ void post_stream8(const float (&xs)[kStreams][8], const float (&f)[8],
                                             float post_k, const float (&comb_to_k)[kStreams],
                                             float (&out)[8]) {
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    float acc = post_k * f[e];
#pragma unroll
    for (int j = 0; j < kStreams; ++j) acc = fmaf(comb_to_k[j], xs[j][e], acc);
    out[e] = round_bf16(acc);  // the stored value is what the next site reads
  }
}

// post_stream8's sum for one column before its bf16 rounding (xs[j]: source stream j there), for
// the fused boundary (sm90_boundary.cuh), which widens x per column to save registers and rounds
// pairs with one packing conversion (the same bits: rounding is idempotent). Kept beside
// post_stream8 rather than under it: routing the row kernels through it reorders their sm_90a
// SASS. The fused boundary's x is tested bitwise against the post kernel's
// (fused_boundary_test.cpp).
template <int kStreams>
__device__ __forceinline__ float post_sum(const float (&xs)[kStreams], float f, float post_k,
                                          const float (&comb_to_k)[kStreams]) {
  float acc = post_k * f;
#pragma unroll
  for (int j = 0; j < kStreams; ++j) acc = fmaf(comb_to_k[j], xs[j], acc);
  return acc;
}

// post_stream8 for output stream k, from comb's column k (what flows into stream k).
template <int kStreams>
__device__ __forceinline__ void post_stream8_k(const float (&xs)[kStreams][8], const float (&f)[8],
                                               const float (&post)[kStreams],
                                               const float (&comb)[kStreams][kStreams], int k,
                                               float (&out)[8]) {
  float comb_to_k[kStreams];
#pragma unroll
  for (int j = 0; j < kStreams; ++j) comb_to_k[j] = comb[j][k];
  post_stream8<kStreams>(xs, f, post[k], comb_to_k, out);
}

// This token's post[n] and comb[n][n] (row j of comb: source stream j).
template <int kStreams>
__device__ __forceinline__ void load_post_coefficients(const PostArgs& a, int64_t token,
                                                       float (&post)[kStreams],
                                                       float (&comb)[kStreams][kStreams]) {
#pragma unroll
  for (int j = 0; j < kStreams; ++j) {
    post[j] = a.post[token * kStreams + j];
#pragma unroll
    for (int k = 0; k < kStreams; ++k) comb[j][k] = a.comb[(token * kStreams + j) * kStreams + k];
  }
}

// The post of one 8-column vector of a token (column c), all n output streams: loads x and F and
// returns the values x_next takes, out[k] for output stream k (bf16-rounded), without storing
// them. kGuarded: c < 0 means past the row (zeros in), as in post_token.
template <int kStreams, bool kGuarded>
__device__ __forceinline__ void post_vector_values(const PostArgs& a, int64_t token, int64_t c,
                                                   float (&out)[kStreams][8]) {
  constexpr int n = kStreams;
  const bool inside = !kGuarded || c >= 0;
  const uint16_t* x_token = a.x + token * n * a.hidden;
  uint4 xv[n];
#pragma unroll
  for (int j = 0; j < n; ++j) {
    xv[j] = inside ? load_stream_u4(x_token + j * a.hidden + c) : make_uint4(0, 0, 0, 0);
  }
  const uint4 fv =
      inside ? load_stream_u4(a.sublayer_out + token * a.hidden + c) : make_uint4(0, 0, 0, 0);
  float post[n], comb[n][n];
  load_post_coefficients<n>(a, token, post, comb);
  float xs[n][8], f[8];
#pragma unroll
  for (int j = 0; j < n; ++j) unpack_bf16x8(xv[j], xs[j]);
  unpack_bf16x8(fv, f);
#pragma unroll
  for (int k = 0; k < n; ++k) post_stream8_k<n>(xs, f, post, comb, k, out[k]);
}

// Stores post_vector_values' out as x_next's vector at column c of the token.
template <int kStreams>
__device__ __forceinline__ void store_post_vector(const PostArgs& a, int64_t token, int64_t c,
                                                  const float (&out)[kStreams][8]) {
  uint16_t* x_next_token = a.x_next + token * kStreams * a.hidden;
#pragma unroll
  for (int k = 0; k < kStreams; ++k) store_u4(x_next_token + k * a.hidden + c, pack_bf16x8(out[k]));
}

// post_vector_values, then the stores (none past the row).
template <int kStreams, bool kGuarded>
__device__ __forceinline__ void post_vector(const PostArgs& a, int64_t token, int64_t c,
                                            float (&out)[kStreams][8]) {
  post_vector_values<kStreams, kGuarded>(a, token, c, out);
  if (!kGuarded || c >= 0) store_post_vector<kStreams>(a, token, c, out);
}

// One token's post (and next input path) by one CTA; `scratch` holds one float per warp. Also
// run by the extra CTAs of a coefficient launch that folds in the previous site's post
// (prenorm_mma.cuh), with kEarlyWeights false: there the up-front norm weights (load_norm_weights)
// would spill, and that CTA is off the launch's critical path. All threads of the CTA must
// call it.
template <int kStreams, int kVec, bool kNextInput, bool kEarlyWeights = true, class A = PostArgs>
__device__ __forceinline__ void post_token(const A& a, int64_t token, float* scratch) {
  constexpr int n = kStreams;
  const int hidden = a.hidden;
  const uint16_t* x_token = a.x + token * n * hidden;
  uint16_t* x_next_token = a.x_next + token * n * hidden;

  uint4 xv[kVec][n];
  uint4 fv[kVec];
#pragma unroll
  for (int v = 0; v < kVec; ++v) {
    const int c = row_column(v, hidden, a.row_threads);
#pragma unroll
    for (int j = 0; j < n; ++j) {
      xv[v][j] = c >= 0 ? load_stream_u4(x_token + j * hidden + c) : make_uint4(0, 0, 0, 0);
    }
    fv[v] = c >= 0 ? load_stream_u4(a.sublayer_out + token * hidden + c) : make_uint4(0, 0, 0, 0);
  }
  float4 w[kVec][2];
  if constexpr (kNextInput && kEarlyWeights) {
    load_norm_weights<kVec>(a.next_norm_weight, hidden, a.row_threads, w);
  }
  float post[n], comb[n][n], next_weights[n];
  load_post_coefficients<n>(a, token, post, comb);
  if constexpr (kNextInput) {
#pragma unroll
    for (int j = 0; j < n; ++j) next_weights[j] = a.next_pre_mix[token * n + j];
  }

  float y[kVec][8];
  float sum_sq = 0.f;
#pragma unroll
  for (int v = 0; v < kVec; ++v) {
    const int c = row_column(v, hidden, a.row_threads);
    float xs[n][8], f[8], out[n][8];
#pragma unroll
    for (int j = 0; j < n; ++j) unpack_bf16x8(xv[v][j], xs[j]);
    unpack_bf16x8(fv[v], f);
#pragma unroll
    for (int k = 0; k < n; ++k) {
      post_stream8_k<n>(xs, f, post, comb, k, out[k]);
      if (c >= 0) store_u4(x_next_token + k * hidden + c, pack_bf16x8(out[k]));
    }
    if constexpr (kNextInput) {
      collapse8<n>(out, next_weights, y[v]);
#pragma unroll
      for (int e = 0; e < 8; ++e) sum_sq = fmaf(y[v][e], y[v][e], sum_sq);
    }
  }
  if constexpr (kNextInput) {
    rms_norm_store<kVec, kEarlyWeights>(y, sum_sq, w, a.next_norm_weight, a.eps_n, hidden,
                                        a.row_threads, next_layer_input(a).row(token, hidden),
                                        scratch);
  }
}

template <int kStreams, int kVec, bool kNextInput, class Out = Bf16LayerInput>
__global__ void post_kernel(const PostArgsFor<Out> a) {
  __shared__ float scratch[kWarp];
  allow_dependents();
  wait_for_producer();
  post_token<kStreams, kVec, kNextInput>(a, blockIdx.x, scratch);
}

// The plain post (no next input path) with one thread per 8-column vector of a token, all n
// streams, in CTAs of kPostColumnThreads (kernel_limits.hpp), where the plan says
// (LaunchTuning::post_columns). The post is elementwise, so this cut of the row gives post_token's
// bits (the same post_stream8); at decode sizes it spreads a token's bytes (50 KB at C=5120, n=4)
// over many SMs instead of one CTA's (docs/decisions.md, "The post and the next input path by
// thread block clusters"). hidden is a multiple of 8 (check_shape).
template <int kStreams>
__global__ void __launch_bounds__(kPostColumnThreads)
    post_columns_kernel(const PostArgs a, int64_t tokens) {
  constexpr int n = kStreams;
  allow_dependents();
  wait_for_producer();
  const int64_t vecs = a.hidden / kBf16PerVec;
  const int64_t i = int64_t(blockIdx.x) * kPostColumnThreads + threadIdx.x;
  if (i >= tokens * vecs) return;
  const int64_t token = i / vecs;
  const int64_t c = (i - token * vecs) * kBf16PerVec;
  float out[n][8];
  post_vector<n, false>(a, token, c, out);
}

// The post launchers' preconditions (launch_post, launch_post_cluster), refused before any CUDA
// call as the coefficient launchers' (prenorm_launch_checks.cuh): 1..INT32_MAX tokens, C in whole
// 16-byte vectors cut as the row kernels cut it (row_kernel_threads), the post's pointers, and with
// kNextInput the next input path's. mhc::cuda::post checks them with messages.
// With an FP8 output (Out), C in whole FP8 groups and the codes and scales set.
template <bool kNextInput, class Out = Bf16LayerInput>
inline bool post_args_valid(const PostArgsFor<Out>& a, int64_t tokens) {
  const int multiple = kNextInput && Out::kCollective ? kFp8GroupSize : kBf16PerVec;
  const bool shape = tokens >= 1 && tokens <= INT32_MAX && a.hidden > 0 &&
                     a.hidden % multiple == 0 && a.row_threads == row_kernel_threads(a.hidden);
  const bool pointers = a.x != nullptr && a.post != nullptr && a.comb != nullptr &&
                        a.sublayer_out != nullptr && a.x_next != nullptr;
  const bool next = !kNextInput || (a.next_pre_mix != nullptr && next_layer_input(a).valid());
  return shape && pointers && next;
}

// Raw launcher, one CTA per token: refuses arguments outside post_args_valid
// (cudaErrorInvalidValue).
template <int kStreams, bool kNextInput, class Out = Bf16LayerInput>
cudaError_t launch_post(const PostArgsFor<Out>& args, int64_t tokens, LaunchTarget on) {
  if (!post_args_valid<kNextInput, Out>(args, tokens)) return cudaErrorInvalidValue;
  return launch_kernel(post_kernel<kStreams, kRowVecs, kNextInput, Out>,
                       dim3(static_cast<unsigned>(tokens)), dim3(row_kernel_threads(args.hidden)),
                       0, on, args);
}

// Raw launcher of the plain post by columns: refuses arguments outside post_args_valid and a grid
// past post_columns_fit (cudaErrorInvalidValue).
template <int kStreams>
cudaError_t launch_post_columns(const PostArgs& args, int64_t tokens, LaunchTarget on) {
  if (!post_args_valid<false>(args, tokens) || !post_columns_fit(args.hidden, tokens)) {
    return cudaErrorInvalidValue;
  }
  const int64_t threads = tokens * (args.hidden / kBf16PerVec);
  return launch_kernel(post_columns_kernel<kStreams>,
                       dim3(static_cast<unsigned>(ceil_div(threads, kPostColumnThreads))),
                       dim3(kPostColumnThreads), 0, on, args, tokens);
}

}  // namespace mhc::cuda
