// The head collapse's torch ops (docs/head.md): torch.ops.mhc.head and head_out, registered with
// the others (registration.cpp). Their checks match the fakes' (python/mhc/_head.py): the same
// conditions, order and messages.
#pragma once
#include <optional>

#include "checks.hpp"

namespace mhc::torch_ops {

#define MHC_HEAD_ARGS                                                                          \
  "Tensor residual, Tensor fn, Tensor hc_scale, Tensor hc_base, float rms_eps, float hc_eps, " \
  "Tensor? norm_weight=None, float? norm_eps=None"
inline constexpr const char* kHeadSchema = "(" MHC_HEAD_ARGS ") -> Tensor";
inline constexpr const char* kHeadOutSchema = "(" MHC_HEAD_ARGS ", *, Tensor(a!) out) -> ()";
#undef MHC_HEAD_ARGS

// norm_eps None: rms_eps (the model's one RMSNorm epsilon, as the public implementations use it).
void head_out(Tensor residual, Tensor fn, Tensor hc_scale, Tensor hc_base, double rms_eps,
              double hc_eps, OptTensor norm_weight, std::optional<double> norm_eps, Tensor out);
Tensor head(Tensor residual, Tensor fn, Tensor hc_scale, Tensor hc_base, double rms_eps,
            double hc_eps, OptTensor norm_weight, std::optional<double> norm_eps);

}  // namespace mhc::torch_ops
