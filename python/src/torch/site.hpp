// Bound sites (docs/sites.md): torch.ops.mhc.bind_site binds a site's weights,
// scalars and options once and returns a handle; site_pre_out, site_coefficients_out,
// site_pre_overlap_out and site_boundary_out take the handle in their place. torch's price per
// call grows with a schema's arguments (docs/decisions.md, "Bound sites"), so the bound schemas
// are short and all positional. Each bound op runs its unbound op's code (ops.cpp) with the bound
// tensors: the same tensor checks, the same launches, bitwise the same results; the scalars,
// which cannot change, are checked and made into the call's parameters once, when bound.
//
// The registry holds references to the bound tensors, not copies: an in-place update of a weight
// (load_state_dict, copy_) is what the next call reads. Handles count up from 1 and are never
// reused. The bound ops are inference-only and have no Autograd kernel (no router to pay under
// no_grad): with grad enabled they refuse the call, since the bound weights, often parameters
// that require grad, are invisible to autograd.
#pragma once
#include <cstdint>
#include <string>

#include "checks.hpp"

namespace mhc::torch_ops {

#define MHC_SITE_PRE_OUT \
  "Tensor(a!) layer_input, Tensor(b!) post, Tensor(c!) comb, Tensor(d!) next_pre_mix"
inline constexpr const char* kBindSiteSchema =
    "(Tensor fn, Tensor hc_scale, Tensor hc_base, Tensor? norm_weight, float rms_eps, "
    "float pre_eps, float sinkhorn_eps, float post_mult, int sinkhorn_iters, float norm_eps, *, "
    "Tensor? workspace=None, str projection='tf32', bool batch_invariant=False) -> int";
inline constexpr const char* kSitePreOutSchema =
    "(int site, Tensor residual, Tensor? pre_mix, " MHC_SITE_PRE_OUT ") -> ()";
inline constexpr const char* kSiteCoefficientsOutSchema =
    "(int site, Tensor residual, Tensor(a!) post, Tensor(b!) comb, Tensor(c!) next_pre_mix, "
    "int side_stream=0) -> ()";
inline constexpr const char* kSitePreOverlapOutSchema =
    "(int site, Tensor residual, Tensor pre_mix, int side_stream, " MHC_SITE_PRE_OUT ") -> ()";
inline constexpr const char* kSiteBoundaryOutSchema =
    "(int site, Tensor sublayer_out, Tensor residual, Tensor post, Tensor comb, Tensor pre_mix, "
    "Tensor(a!) residual_next, Tensor(b!) layer_input, Tensor(c!) next_post, "
    "Tensor(d!) next_comb, Tensor(e!) next_pre_mix) -> ()";
#undef MHC_SITE_PRE_OUT

int64_t bind_site(Tensor fn, Tensor hc_scale, Tensor hc_base, OptTensor norm_weight, double rms_eps,
                  double pre_eps, double sinkhorn_eps, double post_mult, int64_t sinkhorn_iters,
                  double norm_eps, OptTensor workspace, std::string projection,
                  bool batch_invariant);
void release_site(int64_t site);
int64_t site_count();  // how many sites are bound now

void site_pre_out(int64_t site, Tensor residual, OptTensor pre_mix, Tensor layer_input, Tensor post,
                  Tensor comb, Tensor next_pre_mix);
void site_coefficients_out(int64_t site, Tensor residual, Tensor post, Tensor comb,
                           Tensor next_pre_mix, int64_t side_stream);
void site_pre_overlap_out(int64_t site, Tensor residual, Tensor pre_mix, int64_t side_stream,
                          Tensor layer_input, Tensor post, Tensor comb, Tensor next_pre_mix);
void site_boundary_out(int64_t site, Tensor sublayer_out, Tensor residual, Tensor post, Tensor comb,
                       Tensor pre_mix, Tensor residual_next, Tensor layer_input, Tensor next_post,
                       Tensor next_comb, Tensor next_pre_mix);

// For the fakes (mhc/_fakes.py, through ctypes: no dispatcher inside a trace): 1 and, in `out`,
// a bound site's n, C, device (type and index codes) and whether it has a norm weight, at bind
// time; -1 for a released site, 0 for a handle never bound.
inline constexpr int kSiteStateFields = 5;
int site_state(int64_t site, int64_t out[kSiteStateFields]);

}  // namespace mhc::torch_ops
