// The peers' kernels on raw device pointers, for the side-by-side benchmark (bench_peers.cu).
// Each wrapper compiles the peer's own source unchanged (fetched into .peers/ by
// fetch-peers.sh, never copied into this tree) and calls the launch code that source uses, so the
// kernels, block sizes and dispatch are the peer's.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace peers {

// FlashInfer's mhc_post (flashinfer/data/csrc/mhc/mhc_post.cu, n = 4): out [T, 4, C] =
// bf16(post * layer_out + comb^T residual), comb [T, 4, 4] with row = source stream.
void flashinfer_post(const void* layer_out, const void* residual, const float* post,
                     const float* comb, void* out, int64_t tokens, int64_t hidden,
                     cudaStream_t stream);

// FlashInfer's mhc_pre_big_fuse (mhc_pre_big_fuse.cu, n = 4): from the prenorm GEMM's split
// partials dot_mix [S, T, 24] and sqrsum [S, T], the post [T, 4] and comb [T, 4, 4]
// coefficients and layer_input [T, C] = bf16(sum_j pre[j] residual[j]) with this site's own pre
// (the V4 collapse, no norm). S in {1, 2, 4, 8, 16}.
void flashinfer_pre_big_fuse(const float* dot_mix, const float* sqrsum, const void* residual,
                             const float* scale, const float* base, float* post, float* comb,
                             void* layer_input, int64_t tokens, int64_t hidden, double rms_eps,
                             double pre_eps, double sinkhorn_eps, double post_mult,
                             int sinkhorn_iters, int splits, cudaStream_t stream);

// DeepGEMM's sm90_tf32_hc_prenorm_gemm with N = 24 (deep_gemm/impls/
// sm90_tf32_hc_prenorm_gemm.cuh), instantiated ahead of time for K in {16384, 20480, 28672}
// and S in {1, 2, 4, 8, 16} with the template arguments DeepGEMM's JIT picks: d [S, M, 24] and
// sqr_sum [S, M] fp32 partials of a [M, K] bf16 @ b [24, K]^T fp32. False where not instantiated.
bool deepgemm_prenorm_supported(int64_t k, int splits);
void deepgemm_prenorm(const void* a, const float* b, float* d, float* sqr_sum, int64_t m, int64_t k,
                      int splits, cudaStream_t stream);

}  // namespace peers
