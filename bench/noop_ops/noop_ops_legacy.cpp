// Benchmark only, not part of the package: the no-op ops of noop_ops.cpp (the same schemas, no
// router) registered through torch's regular C++ API (TORCH_LIBRARY, unboxed at::Tensor kernels)
// instead of the stable ABI, as torch.ops.mhc_noop_legacy.plain_X: what the stable ABI's boxing
// adds to a call of that schema. Built against this torch's full headers (bench/noop_ops/build.sh).
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include <optional>
#include <string>

namespace mhc_noop_legacy {

using at::Tensor;
using OptTensor = std::optional<Tensor>;

void post_out(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&) {}
void post_pre_out(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                  const OptTensor&, double, const Tensor&, const Tensor&, const OptTensor&) {}
void coefficients_out(const Tensor&, const Tensor&, const Tensor&, const Tensor&, double, double,
                      double, double, int64_t, const Tensor&, const Tensor&, const Tensor&, int64_t,
                      const OptTensor&, c10::string_view, bool) {}
void pre_out(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const OptTensor&,
             const OptTensor&, double, double, double, double, int64_t, double, const Tensor&,
             const Tensor&, const Tensor&, const Tensor&, const OptTensor&, c10::string_view,
             bool) {}
void boundary_out(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                  const OptTensor&, const Tensor&, const Tensor&, const Tensor&, double, double,
                  double, double, int64_t, double, const Tensor&, const Tensor&, const Tensor&,
                  const Tensor&, const Tensor&, const OptTensor&, c10::string_view, bool) {}
void noop2(const Tensor&, const Tensor&) {}

}  // namespace mhc_noop_legacy

// The schemas of registration.cpp, written out (bench/noop_dispatch.py checks them against the
// real ops').
TORCH_LIBRARY(mhc_noop_legacy, m) {
  m.def(
      "plain_post_out(Tensor sublayer_out, Tensor residual, Tensor post, Tensor comb, *, "
      "Tensor(a!) out) -> ()");
  m.def(
      "plain_post_pre_out(Tensor sublayer_out, Tensor residual, Tensor post, Tensor comb, Tensor "
      "next_pre_mix, Tensor? next_norm_weight, float norm_eps, *, Tensor(a!) residual_next, "
      "Tensor(b!) next_layer_input, Tensor? workspace=None) -> ()");
  m.def(
      "plain_coefficients_out(Tensor residual, Tensor fn, Tensor hc_scale, Tensor hc_base, float "
      "rms_eps, float pre_eps, float sinkhorn_eps, float post_mult, int sinkhorn_iters, *, "
      "Tensor(a!) post, Tensor(b!) comb, Tensor(c!) next_pre_mix, int side_stream=0, Tensor? "
      "workspace=None, str projection='tf32', bool batch_invariant=False) -> ()");
  m.def(
      "plain_pre_out(Tensor residual, Tensor fn, Tensor hc_scale, Tensor hc_base, Tensor? "
      "norm_weight, Tensor? pre_mix, float rms_eps, float pre_eps, float sinkhorn_eps, float "
      "post_mult, int sinkhorn_iters, float norm_eps, *, Tensor(a!) layer_input, Tensor(b!) post, "
      "Tensor(c!) comb, Tensor(d!) next_pre_mix, Tensor? workspace=None, str projection='tf32', "
      "bool batch_invariant=False) -> ()");
  m.def(
      "plain_boundary_out(Tensor sublayer_out, Tensor residual, Tensor post, Tensor comb, Tensor "
      "pre_mix, Tensor? norm_weight, Tensor fn, Tensor hc_scale, Tensor hc_base, float rms_eps, "
      "float pre_eps, float sinkhorn_eps, float post_mult, int sinkhorn_iters, float norm_eps, *, "
      "Tensor(a!) residual_next, Tensor(b!) layer_input, Tensor(c!) next_post, Tensor(d!) "
      "next_comb, Tensor(e!) next_pre_mix, Tensor? workspace=None, str projection='tf32', bool "
      "batch_invariant=False) -> ()");
  m.def("plain_noop2(Tensor a, Tensor(a!) out) -> ()");
}

TORCH_LIBRARY_IMPL(mhc_noop_legacy, CPU, m) {
  using namespace mhc_noop_legacy;
  m.impl("plain_post_out", &post_out);
  m.impl("plain_post_pre_out", &post_pre_out);
  m.impl("plain_coefficients_out", &coefficients_out);
  m.impl("plain_pre_out", &pre_out);
  m.impl("plain_boundary_out", &boundary_out);
  m.impl("plain_noop2", &noop2);
}
