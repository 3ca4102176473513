// The FP8 layer input's torch ops (docs/fp8.md): torch.ops.mhc.pre_fp8, post_pre_fp8 and
// boundary_fp8 and their _out forms, registered with the others (registration.cpp). Each takes
// its bf16 twin's arguments plus group_size, column_major_scales and use_ue8m0 (the names of
// vLLM's per_token_group_quant_fp8) and returns layer_input as float8_e4m3fn [T, C] and its
// float32 scales [T, C/128] first, then the twin's other outputs in the twin's order. Their checks
// match the fakes' (python/mhc/_fp8.py): the FP8 arguments and outputs first (naming the FP8 op),
// then the twin's checks (naming the twin).
#pragma once
#include <string>
#include <tuple>

#include "checks.hpp"

namespace mhc::torch_ops {

#define MHC_FP8_COEF "Tensor residual, Tensor fn, Tensor hc_scale, Tensor hc_base"
#define MHC_FP8_EPS \
  "float rms_eps, float pre_eps, float sinkhorn_eps, float post_mult, int sinkhorn_iters"
#define MHC_FP8_OPT                                                                 \
  "Tensor? workspace=None, str projection='tf32', bool batch_invariant=False, int " \
  "group_size=128, "                                                                \
  "bool column_major_scales=False, bool use_ue8m0=False"
#define MHC_FP8_GROUPS "int group_size=128, bool column_major_scales=False, bool use_ue8m0=False"
#define MHC_FP8_PRE \
  MHC_FP8_COEF ", Tensor? norm_weight, Tensor? pre_mix, " MHC_FP8_EPS ", float norm_eps"
#define MHC_FP8_POST_PRE                                                                          \
  "Tensor sublayer_out, Tensor residual, Tensor post, Tensor comb, Tensor next_pre_mix, Tensor? " \
  "next_norm_weight, float norm_eps"
#define MHC_FP8_BOUNDARY                                                                     \
  "Tensor sublayer_out, Tensor residual, Tensor post, Tensor comb, Tensor pre_mix, Tensor? " \
  "norm_weight, " MHC_FP8_COEF_NO_RESIDUAL ", " MHC_FP8_EPS ", float norm_eps"
#define MHC_FP8_COEF_NO_RESIDUAL "Tensor fn, Tensor hc_scale, Tensor hc_base"
inline constexpr const char* kPreFp8Schema =
    "(" MHC_FP8_PRE ", *, " MHC_FP8_OPT ") -> (Tensor, Tensor, Tensor, Tensor, Tensor)";
inline constexpr const char* kPreFp8OutSchema =
    "(" MHC_FP8_PRE
    ", *, Tensor(a!) layer_input, Tensor(b!) layer_input_scales, Tensor(c!) post, Tensor(d!) "
    "comb, Tensor(e!) next_pre_mix, " MHC_FP8_OPT ") -> ()";
inline constexpr const char* kPostPreFp8Schema =
    "(" MHC_FP8_POST_PRE ", *, Tensor? workspace=None, " MHC_FP8_GROUPS
    ") -> (Tensor, Tensor, Tensor)";
inline constexpr const char* kPostPreFp8OutSchema =
    "(" MHC_FP8_POST_PRE
    ", *, Tensor(a!) next_layer_input, Tensor(b!) next_layer_input_scales, Tensor(c!) "
    "residual_next, Tensor? workspace=None, " MHC_FP8_GROUPS ") -> ()";
inline constexpr const char* kBoundaryFp8Schema =
    "(" MHC_FP8_BOUNDARY ", *, " MHC_FP8_OPT
    ") -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)";
inline constexpr const char* kBoundaryFp8OutSchema =
    "(" MHC_FP8_BOUNDARY
    ", *, Tensor(a!) layer_input, Tensor(b!) layer_input_scales, Tensor(c!) residual_next, "
    "Tensor(d!) next_post, Tensor(e!) next_comb, Tensor(f!) next_pre_mix, " MHC_FP8_OPT ") -> ()";
#undef MHC_FP8_COEF
#undef MHC_FP8_EPS
#undef MHC_FP8_OPT
#undef MHC_FP8_GROUPS
#undef MHC_FP8_PRE
#undef MHC_FP8_POST_PRE
#undef MHC_FP8_BOUNDARY
#undef MHC_FP8_COEF_NO_RESIDUAL

using Tensors3 = std::tuple<Tensor, Tensor, Tensor>;
using Tensors5 = std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor>;
using Tensors6 = std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor, Tensor>;

void pre_fp8_out(Tensor residual, Tensor fn, Tensor hc_scale, Tensor hc_base, OptTensor norm_weight,
                 OptTensor pre_mix, double rms_eps, double pre_eps, double sinkhorn_eps,
                 double post_mult, int64_t sinkhorn_iters, double norm_eps, Tensor layer_input,
                 Tensor layer_input_scales, Tensor post, Tensor comb, Tensor next_pre_mix,
                 OptTensor workspace, std::string projection, bool batch_invariant,
                 int64_t group_size, bool column_major_scales, bool use_ue8m0);
Tensors5 pre_fp8(Tensor residual, Tensor fn, Tensor hc_scale, Tensor hc_base, OptTensor norm_weight,
                 OptTensor pre_mix, double rms_eps, double pre_eps, double sinkhorn_eps,
                 double post_mult, int64_t sinkhorn_iters, double norm_eps, OptTensor workspace,
                 std::string projection, bool batch_invariant, int64_t group_size,
                 bool column_major_scales, bool use_ue8m0);

void post_pre_fp8_out(Tensor sublayer_out, Tensor residual, Tensor post, Tensor comb,
                      Tensor next_pre_mix, OptTensor next_norm_weight, double norm_eps,
                      Tensor next_layer_input, Tensor next_layer_input_scales, Tensor residual_next,
                      OptTensor workspace, int64_t group_size, bool column_major_scales,
                      bool use_ue8m0);
Tensors3 post_pre_fp8(Tensor sublayer_out, Tensor residual, Tensor post, Tensor comb,
                      Tensor next_pre_mix, OptTensor next_norm_weight, double norm_eps,
                      OptTensor workspace, int64_t group_size, bool column_major_scales,
                      bool use_ue8m0);

void boundary_fp8_out(Tensor sublayer_out, Tensor residual, Tensor post, Tensor comb,
                      Tensor pre_mix, OptTensor norm_weight, Tensor fn, Tensor hc_scale,
                      Tensor hc_base, double rms_eps, double pre_eps, double sinkhorn_eps,
                      double post_mult, int64_t sinkhorn_iters, double norm_eps, Tensor layer_input,
                      Tensor layer_input_scales, Tensor residual_next, Tensor next_post,
                      Tensor next_comb, Tensor next_pre_mix, OptTensor workspace,
                      std::string projection, bool batch_invariant, int64_t group_size,
                      bool column_major_scales, bool use_ue8m0);
Tensors6 boundary_fp8(Tensor sublayer_out, Tensor residual, Tensor post, Tensor comb,
                      Tensor pre_mix, OptTensor norm_weight, Tensor fn, Tensor hc_scale,
                      Tensor hc_base, double rms_eps, double pre_eps, double sinkhorn_eps,
                      double post_mult, int64_t sinkhorn_iters, double norm_eps,
                      OptTensor workspace, std::string projection, bool batch_invariant,
                      int64_t group_size, bool column_major_scales, bool use_ue8m0);

}  // namespace mhc::torch_ops
