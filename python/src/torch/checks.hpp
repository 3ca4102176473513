// The argument checks of the torch ops, before any kernel runs: the same conditions, in the same
// order and with the same messages as the fake implementations' (python/mhc/_checks.py), so
// that a bad call fails alike eagerly, under torch.compile and on meta tensors. Every failure is
// a RuntimeError (a stable-ABI kernel's exceptions reach Python as RuntimeError) whose message
// names the op, the argument and what was expected.
#pragma once
#include <torch/csrc/stable/tensor.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mhc::torch_ops {

using torch::stable::Tensor;
using OptTensor = std::optional<Tensor>;

[[noreturn]] void fail(const std::string& message);

// Text as Python prints it: a float's repr ("1e-06", "inf", "-1.0"), a str's repr ('bf16').
std::string float_text(double value);
std::string str_repr(const std::string& text);

// A tensor's device: type and index (aoti_torch_device_type_* codes).
struct Where {
  int32_t type = 0, index = -1;
  bool operator==(const Where& o) const { return type == o.type && index == o.index; }
  bool cpu() const;
  bool cuda() const;
  std::string text() const;  // "cpu", "cuda:0", "meta"
};
Where where(const Tensor& t);

// The accepted dtypes of an argument (aoti_torch_dtype_* codes).
struct DTypes {
  int32_t codes[2];
  int count;
};
DTypes bf16();
DTypes f32();
DTypes norm_weight_dtypes();  // float32 or bfloat16
int32_t dtype_of(const Tensor& t);
bool is_bf16(const Tensor& t);

using Shape = std::initializer_list<int64_t>;

// A tensor, not None (the dispatcher passes None for a Tensor argument as an undefined tensor).
void defined(const char* op, const char* name, const Tensor& t);
// dtype, device (`device` null: any), shape, contiguity; `dims` names the shape ("[T, n, C]").
void tensor(const char* op, const char* name, const Tensor& t, DTypes dtypes, Shape shape,
            const Where* device, const char* dims);
void optional(const char* op, const char* name, const OptTensor& t, DTypes dtypes, Shape shape,
              const Where* device, const char* dims);

// residual's [T, n, C] and its device, read once per call: every later check and the launch
// take the device from here rather than asking torch again (each ask is a call through the shim).
struct Streams {
  int64_t t = 0, n = 0, c = 0;
  Where dev{};
};
Streams streams(const char* op, const Tensor& residual);
void runnable(const char* op, const Tensor& residual);
void runnable(const char* op, const Where& residual_device);
void scalars(const char* op, double rms_eps, double pre_eps, double sinkhorn_eps, double post_mult,
             int64_t sinkhorn_iters, const std::string& projection);
void finite_nonnegative(const char* op, const char* name, double value);
void weights(const char* op, const Tensor& fn, const Tensor& hc_scale, const Tensor& hc_base,
             const Streams& s, const Where& device);
void coefficient_outputs(const char* op, const Tensor& post, const Tensor& comb,
                         const Tensor& next_pre_mix, const Streams& s, const Where& device,
                         const char* post_name = "post", const char* comb_name = "comb",
                         const char* pre_name = "next_pre_mix");
Streams post_inputs(const char* op, const Tensor& sublayer_out, const Tensor& residual,
                    const Tensor& post, const Tensor& comb);

// Outputs against inputs and each other (real tensors: their memory ranges); None and empty
// tensors are skipped.
using Named = std::pair<const char*, const Tensor*>;
void disjoint(const char* op, std::initializer_list<Named> outputs,
              std::initializer_list<Named> inputs);
const Tensor* maybe(const OptTensor& t);

// The checks of each op family (python/mhc/_checks.py of the same names). scalars_bound: the
// scalars (epsilons, post_mult, sinkhorn_iters, projection) were checked when a bound site
// (site.hpp) was bound, and are not checked again; the tensors are, in the same order.
Streams pre_args(const char* op, const Tensor& residual, const Tensor& fn, const Tensor& hc_scale,
                 const Tensor& hc_base, const OptTensor& norm_weight, const OptTensor& pre_mix,
                 double rms_eps, double pre_eps, double sinkhorn_eps, double post_mult,
                 int64_t sinkhorn_iters, double norm_eps, const std::string& projection,
                 bool scalars_bound = false);
void pre_outputs(const char* op, const Tensor& residual, const Tensor& layer_input,
                 const Tensor& post, const Tensor& comb, const Tensor& next_pre_mix);
Streams coefficient_args(const char* op, const Tensor& residual, const Tensor& fn,
                         const Tensor& hc_scale, const Tensor& hc_base, double rms_eps,
                         double pre_eps, double sinkhorn_eps, double post_mult,
                         int64_t sinkhorn_iters, const std::string& projection,
                         bool scalars_bound = false);
Streams post_pre_args(const char* op, const Tensor& sublayer_out, const Tensor& residual,
                      const Tensor& post, const Tensor& comb, const Tensor& next_pre_mix,
                      const OptTensor& next_norm_weight, double norm_eps);
Streams boundary_args(const char* op, const Tensor& sublayer_out, const Tensor& residual,
                      const Tensor& post, const Tensor& comb, const Tensor& pre_mix,
                      const OptTensor& norm_weight, const Tensor& fn, const Tensor& hc_scale,
                      const Tensor& hc_base, double rms_eps, double pre_eps, double sinkhorn_eps,
                      double post_mult, int64_t sinkhorn_iters, double norm_eps,
                      const std::string& projection, bool scalars_bound = false);
void boundary_outputs(const char* op, const Tensor& residual, const Tensor& residual_next,
                      const Tensor& layer_input, const Tensor& next_post, const Tensor& next_comb,
                      const Tensor& next_pre_mix);
// hc_prenorm_gemm: (M, N, K).
struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
};
GemmShape gemm_args(const Tensor& x, const Tensor& fn, const Tensor& out, const Tensor& sqrsum,
                    int64_t num_splits);

}  // namespace mhc::torch_ops
