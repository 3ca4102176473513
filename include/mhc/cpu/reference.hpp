// Float64 reference of the same computations as mhc/cpu/fp32_site.hpp. Inputs are the bf16/f32
// values as stored; all arithmetic is double. Storage roundings that the model itself performs (y
// before the norm) are applied with round_to_bf16; outputs are returned unrounded so the error of a
// stored bf16 output against them includes its final rounding.
#pragma once
#include <cstdint>
#include <vector>

#include "mhc/core/bf16.hpp"
#include "mhc/core/head_views.hpp"
#include "mhc/core/params.hpp"
#include "mhc/core/site_views.hpp"

namespace mhc::ref {

struct SiteResult {
  std::vector<double> layer_input;  // [M, C]
  std::vector<double> mixes;        // [M, NMIX]
  std::vector<double> pre, post;    // [M, n]
  std::vector<double> comb;         // [M, n, n]
  std::vector<double> x_next;       // [M, n, C]
};

// The raw split partials of the prenorm GEMM (cpu::prenorm_gemm) in double.
struct SplitPartials {
  std::vector<double> out;     // [S, M, N]
  std::vector<double> sqrsum;  // [S, M]
};
SplitPartials prenorm_gemm(int64_t tokens, int64_t nmix, int64_t k, int splits, const Bf16* x,
                           const float* fn);

// norm_weight may be null: the plain collapse (as cpu::input_path).
std::vector<double> input_path(const MhcParams& p, int64_t tokens, const Bf16* x,
                               const float* pre_mix, const float* norm_weight);
void coefficients(const MhcParams& p, int64_t tokens, const Bf16* x, const SiteWeightsView& w,
                  SiteResult& out);  // fills mixes, pre, post, comb
void sinkhorn(int n, int iters, double eps_h, const double* logits, double* comb);
std::vector<double> post(const MhcParams& p, int64_t tokens, const Bf16* x, const double* post,
                         const double* comb, const Bf16* sublayer_out);
// The head collapse (docs/head.md): the collapse weights [M, n] and the output [M, C], unrounded;
// with w.norm_weight the collapse is stored as bf16 before the final norm, as the model does.
struct HeadResult {
  std::vector<double> weights;  // [M, n]
  std::vector<double> out;      // [M, C]
};
HeadResult head(const MhcParams& p, int64_t tokens, const Bf16* x, const HeadWeightsView& w);

SiteResult run_site(const MhcParams& p, const SiteWeightsView& w, const SiteInputsView& in);

}  // namespace mhc::ref
