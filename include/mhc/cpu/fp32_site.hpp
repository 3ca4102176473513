// CPU backend: the whole V4.1 site in fp32 (fp32 accumulation, bf16 storage), as the design doc
// says. Plain contiguous loops the compiler vectorises; tokens are spread over threads.
// Zero tokens is valid and does nothing.
#pragma once
#include <cstdint>

#include "mhc/core/bf16.hpp"
#include "mhc/core/head_views.hpp"
#include "mhc/core/params.hpp"
#include "mhc/core/site_views.hpp"

namespace mhc::cpu {

// Step 1: layer_input[m] = bf16(rmsnorm(bf16(sum_j pre_mix[m][j] * x[m][j])) * norm_weight).
// norm_weight may be null: no norm, the plain collapse bf16(sum_j pre_mix[m][j] * x[m][j]).
void input_path(const MhcParams& p, int64_t tokens, const Bf16* x, const float* pre_mix,
                const float* norm_weight, Bf16* layer_input);

// Step 2: mixes (optional, may be null; [M, NMIX]), pre, post, comb.
void coefficients(const MhcParams& p, int64_t tokens, const Bf16* x, const SiteWeightsView& w,
                  float* pre, float* post, float* comb, float* mixes = nullptr);

// The raw split partials of the prenorm GEMM (DeepGEMM's tf32_hc_prenorm_gemm semantics, in fp32:
// the CPU has no TF32): for split s, columns mhc::prenorm_split_range(k, splits, s),
// out[s][m][i] = fn[i] . x[m] and sqrsum[s][m] = x[m] . x[m] over the split's columns.
// x [M, K] bf16, fn [N, K], out [S, M, N], sqrsum [S, M]. Shapes: mhc::check_prenorm_gemm_shape.
void prenorm_gemm(int64_t tokens, int64_t nmix, int64_t k, int splits, const Bf16* x,
                  const float* fn, float* out, float* sqrsum);

// The T-step Sinkhorn of one token: logits [n*n] (row j = source stream) -> comb [n*n].
void sinkhorn(int n, int iters, float eps_h, const float* logits, float* comb);

// Step 4: x_next[m][k] = bf16(post[m][k] * F[m] + sum_j comb[m][j][k] * x[m][j]).
void post(const MhcParams& p, int64_t tokens, const Bf16* x, const float* post, const float* comb,
          const Bf16* sublayer_out, Bf16* x_next);

// After the last site: bf16(rmsnorm(bf16(sum_j pre[m][j] * x[m][j])) * norm_weight), i.e. the
// input path with the final norm's weight. norm_weight may be null (no final norm: plain collapse).
void final_collapse(const MhcParams& p, int64_t tokens, const Bf16* x, const float* pre,
                    const float* norm_weight, Bf16* out);

// The head collapse (hc_head, docs/head.md): per token, w = sigmoid((hc_fn . v) * rsqrt(mean(v^2)
// + rms_eps) * hc_scale[0] + hc_base) + pre_eps, then out = bf16(sum_j w[j] * x[j]), normalised
// as the input path does where w.norm_weight is set (the final RMSNorm). weights [M, n] may be
// null; otherwise it receives w.
void head(const MhcParams& p, int64_t tokens, const Bf16* x, const HeadWeightsView& w, Bf16* out,
          float* weights = nullptr);

// Steps 1, 2 and 4 on given inputs (sublayer_out supplied by the caller).
void run_site(const MhcParams& p, const SiteWeightsView& w, const SiteInputsView& in,
              const SiteOutputsView& out);

// Threads for the token-parallel loops. 0 (the default) means min(hardware threads, 8). Results
// are bitwise the same for every value: each token is computed by one thread, in a fixed order.
void set_threads(int threads);
int threads();  // the effective count

}  // namespace mhc::cpu
