#include "head.hpp"

#include <fmt/core.h>
#include <torch/csrc/inductor/aoti_torch/c/shim.h>

#include <limits>

#include "../launch_head.hpp"
#include "device.hpp"
#include "mhc/core/params.hpp"

namespace mhc::torch_ops {

namespace {

constexpr const char* kOp = "head";

// An epsilon: finite, >= 0, and within the library's range of the epsilon it is used as
// (`range`: hc_eps is added as pre_eps is).
void epsilon(const char* name, double value, const char* range) {
  // Not finite_nonnegative: that looks the range up by `name`, and hc_eps has none of its own.
  if (!(0.0 <= value && value < std::numeric_limits<double>::infinity())) {
    fail(fmt::format("mhc.{}: {} must be a finite number >= 0, got {}", kOp, name,
                     float_text(value)));
  }
  const ParamRange& r = param_range(range);
  if (!(r.lo <= value && value <= r.hi)) {
    fail(
        fmt::format("mhc.{}: {} must be in [{:g}, {:g}], got {} (docs/limits.md, parameter "
                    "ranges)",
                    kOp, name, r.lo, r.hi, float_text(value)));
  }
}

// The checks of python/mhc/_head.py's head_args, in its order.
Streams head_args(const Tensor& residual, const Tensor& fn, const Tensor& hc_scale,
                  const Tensor& hc_base, double rms_eps, double hc_eps,
                  const OptTensor& norm_weight, const std::optional<double>& norm_eps) {
  const Streams s = streams(kOp, residual);
  const Where dev = where(residual);
  tensor(kOp, "fn", fn, f32(), {s.n, s.n * s.c}, &dev, "[n, n*C]");
  tensor(kOp, "hc_scale", hc_scale, f32(), {1}, &dev, "[1]");
  tensor(kOp, "hc_base", hc_base, f32(), {s.n}, &dev, "[n]");
  optional(kOp, "norm_weight", norm_weight, norm_weight_dtypes(), {s.c}, &dev, "[C]");
  epsilon("rms_eps", rms_eps, "rms_eps");
  epsilon("hc_eps", hc_eps, "pre_eps");
  if (norm_eps) epsilon("norm_eps", *norm_eps, "norm_eps");
  return s;
}

}  // namespace

void head_out(Tensor residual, Tensor fn, Tensor hc_scale, Tensor hc_base, double rms_eps,
              double hc_eps, OptTensor norm_weight, std::optional<double> norm_eps, Tensor out) {
  const Streams s =
      head_args(residual, fn, hc_scale, hc_base, rms_eps, hc_eps, norm_weight, norm_eps);
  const Where dev = where(residual);
  tensor(kOp, "out", out, bf16(), {s.t, s.c}, &dev, "[T, C]");
  disjoint(kOp, {{"out", &out}},
           {{"residual", &residual},
            {"fn", &fn},
            {"hc_scale", &hc_scale},
            {"hc_base", &hc_base},
            {"norm_weight", maybe(norm_weight)}});
  MhcParams p;
  p.hidden = int(s.c);
  p.n = int(s.n);
  p.layers = 1;
  p.rms_eps_override = rms_eps;
  p.pre_eps_override = hc_eps;
  p.norm_eps_override = norm_eps.value_or(rms_eps);
  validate(p);
  Launching launch(residual);
  launch::NormWeight norm{nullptr, false, "norm_weight"};
  if (norm_weight) norm = {norm_weight->data_ptr(), is_bf16(*norm_weight), "norm_weight"};
  const launch::HeadWeights w{static_cast<const float*>(fn.data_ptr()),
                              static_cast<const float*>(hc_base.data_ptr()),
                              static_cast<const float*>(hc_scale.data_ptr())};
  launch::head(p, s.t, static_cast<const Bf16*>(residual.data_ptr()), w, norm,
               static_cast<Bf16*>(out.data_ptr()), launch.target);
}

Tensor head(Tensor residual, Tensor fn, Tensor hc_scale, Tensor hc_base, double rms_eps,
            double hc_eps, OptTensor norm_weight, std::optional<double> norm_eps) {
  const Streams s = streams(kOp, residual);
  Tensor out = new_tensor({s.t, s.c}, aoti_torch_dtype_bfloat16(), where(residual));
  head_out(residual, fn, hc_scale, hc_base, rms_eps, hc_eps, norm_weight, norm_eps, out);
  return out;
}

}  // namespace mhc::torch_ops
