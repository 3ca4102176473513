// The kernels of the torch ops torch.ops.mhc.* (one per op for CPU and CUDA tensors): the checks
// of checks.hpp, the workspace (the caller's or the pool's), the device guard and torch's
// current stream, then the launches through the adapter (../launch.hpp). Schemas: ops.cpp's
// registration; reference: docs/python.md.
#pragma once
#include <optional>
#include <string>
#include <tuple>

#include "checks.hpp"
#include "mhc/core/config.hpp"
#include "mhc/core/fp8.hpp"
#include "mhc/core/params.hpp"

namespace mhc::torch_ops {

using Tensors2 = std::tuple<Tensor, Tensor>;
using Tensors3 = std::tuple<Tensor, Tensor, Tensor>;
using Tensors4 = std::tuple<Tensor, Tensor, Tensor, Tensor>;
using Tensors5 = std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor>;

// Where pre_to, post_pre_to and boundary_to write the layer input: the bf16 tensor of the bf16
// ops (checked there), or (fp8 set) the FP8 codes and scales of the FP8 ops (fp8.cpp, which
// checks their tensors and format): the library's fused FP8 form on CUDA. Both (boundary_to only):
// FP8, the bf16 tensor the fused boundary's staging rows (checked as the bf16 layer_input).
struct LayerInputTo {
  const Tensor* bf16 = nullptr;
  const Fp8Output* fp8 = nullptr;
};

// What a bound site (site.hpp) fixes when it is bound: its scalars, checked then, made into the
// call's parameters and projection once. A call given one (`bound`) checks its tensors only, as
// the unbound op does, and takes these parameters where its n and C are the site's (a weight
// replaced under the binding may give others: then they are made again).
struct Prepared {
  MhcParams p;  // n and C of the site's fn
  Projection projection = Projection::tf32;
};
// Checked scalars (bind_site's checks) to a site's Prepared for n streams of hidden size c.
Prepared prepare(int64_t n, int64_t c, double rms_eps, double pre_eps, double sinkhorn_eps,
                 double post_mult, int64_t sinkhorn_iters, double norm_eps,
                 const std::string& projection);

void hc_prenorm_gemm(Tensor x, Tensor fn, Tensor out, Tensor sqrsum, int64_t num_splits);

void pre_out(Tensor residual, Tensor fn, Tensor hc_scale, Tensor hc_base, OptTensor norm_weight,
             OptTensor pre_mix, double rms_eps, double pre_eps, double sinkhorn_eps,
             double post_mult, int64_t sinkhorn_iters, double norm_eps, Tensor layer_input,
             Tensor post, Tensor comb, Tensor next_pre_mix, OptTensor workspace,
             std::string projection, bool batch_invariant);
// pre_out, post_pre_out and boundary_out with the layer input in `layer_input` (the same checks,
// messages and launches; the FP8 ops' path).
void pre_to(const Tensor& residual, const Tensor& fn, const Tensor& hc_scale, const Tensor& hc_base,
            const OptTensor& norm_weight, const OptTensor& pre_mix, double rms_eps, double pre_eps,
            double sinkhorn_eps, double post_mult, int64_t sinkhorn_iters, double norm_eps,
            LayerInputTo layer_input, const Tensor& post, const Tensor& comb,
            const Tensor& next_pre_mix, const OptTensor& workspace, const std::string& projection,
            bool batch_invariant, const Prepared* bound = nullptr);
void post_pre_to(const Tensor& sublayer_out, const Tensor& residual, const Tensor& post,
                 const Tensor& comb, const Tensor& next_pre_mix, const OptTensor& next_norm_weight,
                 double norm_eps, const Tensor& residual_next, LayerInputTo next_layer_input,
                 const OptTensor& workspace);
void boundary_to(const Tensor& sublayer_out, const Tensor& residual, const Tensor& post,
                 const Tensor& comb, const Tensor& pre_mix, const OptTensor& norm_weight,
                 const Tensor& fn, const Tensor& hc_scale, const Tensor& hc_base, double rms_eps,
                 double pre_eps, double sinkhorn_eps, double post_mult, int64_t sinkhorn_iters,
                 double norm_eps, const Tensor& residual_next, LayerInputTo layer_input,
                 const Tensor& next_post, const Tensor& next_comb, const Tensor& next_pre_mix,
                 const OptTensor& workspace, const std::string& projection, bool batch_invariant,
                 const Prepared* bound = nullptr);

Tensors4 pre(Tensor residual, Tensor fn, Tensor hc_scale, Tensor hc_base, OptTensor norm_weight,
             OptTensor pre_mix, double rms_eps, double pre_eps, double sinkhorn_eps,
             double post_mult, int64_t sinkhorn_iters, double norm_eps, OptTensor workspace,
             std::string projection, bool batch_invariant);

void coefficients_out(Tensor residual, Tensor fn, Tensor hc_scale, Tensor hc_base, double rms_eps,
                      double pre_eps, double sinkhorn_eps, double post_mult, int64_t sinkhorn_iters,
                      Tensor post, Tensor comb, Tensor next_pre_mix, int64_t side_stream,
                      OptTensor workspace, std::string projection, bool batch_invariant);
// coefficients_out and pre_overlap_out, given a bound site's Prepared (or none).
void coefficients_to(const Tensor& residual, const Tensor& fn, const Tensor& hc_scale,
                     const Tensor& hc_base, double rms_eps, double pre_eps, double sinkhorn_eps,
                     double post_mult, int64_t sinkhorn_iters, const Tensor& post,
                     const Tensor& comb, const Tensor& next_pre_mix, int64_t side_stream,
                     const OptTensor& workspace, const std::string& projection,
                     bool batch_invariant, const Prepared* bound);
Tensors3 coefficients(Tensor residual, Tensor fn, Tensor hc_scale, Tensor hc_base, double rms_eps,
                      double pre_eps, double sinkhorn_eps, double post_mult, int64_t sinkhorn_iters,
                      int64_t side_stream, OptTensor workspace, std::string projection,
                      bool batch_invariant);

void pre_overlap_out(Tensor residual, Tensor fn, Tensor hc_scale, Tensor hc_base,
                     OptTensor norm_weight, Tensor pre_mix, double rms_eps, double pre_eps,
                     double sinkhorn_eps, double post_mult, int64_t sinkhorn_iters, double norm_eps,
                     int64_t side_stream, Tensor layer_input, Tensor post, Tensor comb,
                     Tensor next_pre_mix, OptTensor workspace, std::string projection,
                     bool batch_invariant, OptTensor main_workspace);
void pre_overlap_to(const Tensor& residual, const Tensor& fn, const Tensor& hc_scale,
                    const Tensor& hc_base, const OptTensor& norm_weight, const Tensor& pre_mix,
                    double rms_eps, double pre_eps, double sinkhorn_eps, double post_mult,
                    int64_t sinkhorn_iters, double norm_eps, int64_t side_stream,
                    const Tensor& layer_input, const Tensor& post, const Tensor& comb,
                    const Tensor& next_pre_mix, const OptTensor& workspace,
                    const std::string& projection, bool batch_invariant,
                    const OptTensor& main_workspace, const Prepared* bound);
Tensors4 pre_overlap(Tensor residual, Tensor fn, Tensor hc_scale, Tensor hc_base,
                     OptTensor norm_weight, Tensor pre_mix, double rms_eps, double pre_eps,
                     double sinkhorn_eps, double post_mult, int64_t sinkhorn_iters, double norm_eps,
                     int64_t side_stream, OptTensor workspace, std::string projection,
                     bool batch_invariant, OptTensor main_workspace);

void join(int64_t side_stream, Tensor post, Tensor comb, Tensor next_pre_mix);

void post_out(Tensor sublayer_out, Tensor residual, Tensor post, Tensor comb, Tensor out);
Tensor post(Tensor sublayer_out, Tensor residual, Tensor post, Tensor comb);

void post_pre_out(Tensor sublayer_out, Tensor residual, Tensor post, Tensor comb,
                  Tensor next_pre_mix, OptTensor next_norm_weight, double norm_eps,
                  Tensor residual_next, Tensor next_layer_input, OptTensor workspace);
Tensors2 post_pre(Tensor sublayer_out, Tensor residual, Tensor post, Tensor comb,
                  Tensor next_pre_mix, OptTensor next_norm_weight, double norm_eps,
                  OptTensor workspace);

void boundary_out(Tensor sublayer_out, Tensor residual, Tensor post, Tensor comb, Tensor pre_mix,
                  OptTensor norm_weight, Tensor fn, Tensor hc_scale, Tensor hc_base, double rms_eps,
                  double pre_eps, double sinkhorn_eps, double post_mult, int64_t sinkhorn_iters,
                  double norm_eps, Tensor residual_next, Tensor layer_input, Tensor next_post,
                  Tensor next_comb, Tensor next_pre_mix, OptTensor workspace,
                  std::string projection, bool batch_invariant);
Tensors5 boundary(Tensor sublayer_out, Tensor residual, Tensor post, Tensor comb, Tensor pre_mix,
                  OptTensor norm_weight, Tensor fn, Tensor hc_scale, Tensor hc_base, double rms_eps,
                  double pre_eps, double sinkhorn_eps, double post_mult, int64_t sinkhorn_iters,
                  double norm_eps, OptTensor workspace, std::string projection,
                  bool batch_invariant);

}  // namespace mhc::torch_ops
