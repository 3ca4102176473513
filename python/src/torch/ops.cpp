#include "ops.hpp"

#include <fmt/core.h>
#include <torch/csrc/inductor/aoti_torch/c/shim.h>

#include <climits>

#include "../launch.hpp"
#include "device.hpp"
#include "mhc/core/params.hpp"
#include "pool.hpp"

namespace mhc::torch_ops {

namespace {

using launch::CoefficientOptions;
using launch::NormWeight;
using launch::Scratch;

const Bf16* bf16_in(const Tensor& t) { return static_cast<const Bf16*>(t.data_ptr()); }
Bf16* bf16_out(const Tensor& t) { return static_cast<Bf16*>(t.data_ptr()); }
const float* f32_in(const Tensor& t) { return static_cast<const float*>(t.data_ptr()); }
float* f32_out(const Tensor& t) { return static_cast<float*>(t.data_ptr()); }

struct Eps {
  std::optional<double> rms, pre, sinkhorn, norm;
};

// The parameters of a call (validated: the library's ranges of the epsilons and of post_mult).
MhcParams params(const Streams& s, const Eps& eps, double post_mult = 2.0,
                 int64_t sinkhorn_iters = 20) {
  MhcParams p;
  p.hidden = int(s.c);
  p.n = int(s.n);
  p.layers = 1;
  p.sinkhorn_iters = int(sinkhorn_iters);
  p.post_mult = post_mult;
  p.rms_eps_override = eps.rms;
  p.pre_eps_override = eps.pre;
  p.sinkhorn_eps_override = eps.sinkhorn;
  p.norm_eps_override = eps.norm;
  validate(p);  // mhc::Error naming the parameter outside its range
  return p;
}

Projection projection_of(const std::string& projection) {
  return projection == "fp32" ? Projection::fp32 : Projection::tf32;
}

// A call's parameters: a bound site's where n and C are its (ops.hpp, Prepared), else made now.
MhcParams params_of(const Streams& s, const Prepared* bound, const Eps& eps, double post_mult,
                    int64_t sinkhorn_iters) {
  if (bound && bound->p.n == s.n && bound->p.hidden == s.c) return bound->p;
  return params(s, eps, post_mult, sinkhorn_iters);
}

Projection projection_for(const std::string& projection, const Prepared* bound) {
  return bound ? bound->projection : projection_of(projection);
}

// The workspace of a call: the caller's (checked), else on CUDA the pool's for `slot`; on the CPU,
// which needs none, nothing.
OptTensor workspace_for(const OptTensor& workspace, const Streams& s, int64_t slot,
                        const char* name = "workspace") {
  const Where& dev = s.dev;
  if (!workspace) {
    if (!dev.cuda()) return std::nullopt;
    return pool_workspace(dev, s.c, s.n, s.t, slot);
  }
  if (dtype_of(*workspace) != aoti_torch_dtype_uint8()) {
    fail(fmt::format("mhc: {} must be a uint8 tensor from mhc.make_workspace(...)", name));
  }
  if (!(where(*workspace) == dev) || !workspace->is_contiguous()) {
    fail(fmt::format("mhc: {} must be a contiguous tensor on {}", name, dev.text()));
  }
  return workspace;
}

// The coefficient path's workspace is a 1-D byte array.
Scratch scratch(const OptTensor& ws) {
  if (!ws) return {};
  if (ws->dim() != 1) {
    std::string shape = "[";
    for (int64_t i = 0; i < ws->dim(); ++i) shape += (i ? ", " : "") + std::to_string(ws->size(i));
    fail("workspace: expected shape [*], got " + shape + "]");
  }
  return {ws->data_ptr(), ws->numel()};
}

NormWeight norm_weight_of(const OptTensor& w, const char* name) {
  if (!w) return {nullptr, false, name};
  return {w->data_ptr(), is_bf16(*w), name};
}

using launch::profile::Scope;

// A call's host phases (launch::profile): checks, then setup (workspace, device, stream), then the
// launches; nothing is timed unless profiling is on.
struct Phases : Scope {
  Phases() : Scope(launch::profile::kChecks) { launch::profile::count_call(); }
  void setup() { next(launch::profile::kSetup); }
  void launches() { next(launch::profile::kLaunch); }
};

// The launch of a call with scratch: where (Launching), the scratch and the norm weight; the
// scratch checks refuse the call (a RuntimeError naming the argument) before its first launch.
class SiteLaunch {
 public:
  SiteLaunch(const Streams& s, const OptTensor& ws, const OptTensor& weight,
             const char* weight_name)
      : launch_(s.dev),
        scratch_(torch_ops::scratch(ws)),
        weight_(norm_weight_of(weight, weight_name)) {}
  const launch::Target& at() const { return launch_.target; }
  Scratch scratch() const { return scratch_; }
  const NormWeight& weight() const { return weight_; }
  // The coefficient path's room for `tokens` in `coef` (a workspace: see pre_overlap's), then
  // the bf16 weight's widening room in `weight_scratch`.
  void refuse_small(const MhcParams& p, int64_t tokens, const Scratch* coef, bool batch_invariant,
                    const Scratch* weight_scratch) const {
    try {
      if (coef) launch::check_coefficient_workspace(p, tokens, *coef, batch_invariant, at());
      if (weight_scratch) launch::check_weight_scratch(p, weight_, *weight_scratch, at());
    } catch (const launch::ArgumentError& e) {
      fail(e.what());
    }
  }

 private:
  Launching launch_;
  Scratch scratch_;
  NormWeight weight_;
};

// The coefficient path's inputs, named for disjoint.
#define MHC_COEFFICIENT_INPUTS(residual, fn, hc_scale, hc_base) \
  {"residual", &residual}, {"fn", &fn}, {"hc_scale", &hc_scale}, { "hc_base", &hc_base }

void pre_disjoint(const char* op, const Tensor& residual, const Tensor& fn, const Tensor& hc_scale,
                  const Tensor& hc_base, const OptTensor& norm_weight, const OptTensor& pre_mix,
                  const Tensor* layer_input, const Tensor& post, const Tensor& comb,
                  const Tensor& next_pre_mix, Named ws, Named main_ws) {
  disjoint(op,
           {{"layer_input", layer_input},
            {"post", &post},
            {"comb", &comb},
            {"next_pre_mix", &next_pre_mix}},
           {MHC_COEFFICIENT_INPUTS(residual, fn, hc_scale, hc_base),
            {"norm_weight", maybe(norm_weight)},
            {"pre_mix", maybe(pre_mix)},
            ws,
            main_ws});
}

Tensors4 new_pre_outputs(const Tensor& residual, const Streams& s) {
  const Where dev = where(residual);
  const int32_t f = aoti_torch_dtype_float32();
  return {new_tensor({s.t, s.c}, aoti_torch_dtype_bfloat16(), dev), new_tensor({s.t, s.n}, f, dev),
          new_tensor({s.t, s.n, s.n}, f, dev), new_tensor({s.t, s.n}, f, dev)};
}

Tensor like_residual(const Tensor& residual, const Streams& s) {
  return new_tensor({s.t, s.n, s.c}, aoti_torch_dtype_bfloat16(), where(residual));
}

HcWeights site_weights(const Tensor& fn, const Tensor& hc_scale, const Tensor& hc_base) {
  return {.fn = f32_in(fn), .scale = f32_in(hc_scale), .base = f32_in(hc_base)};
}

Coefficients coefficient_outputs_of(const Tensor& pre, const Tensor& post, const Tensor& comb) {
  return {.pre = f32_out(pre), .post = f32_out(post), .comb = f32_out(comb)};
}

PostArgs post_inputs_of(const Tensor& sublayer_out, const Tensor& residual, const Tensor& post,
                        const Tensor& comb, const Tensor& residual_next) {
  return {.sublayer_out = bf16_in(sublayer_out),
          .residual = bf16_in(residual),
          .post = f32_in(post),
          .comb = f32_in(comb),
          .residual_next = bf16_out(residual_next)};
}

// The adapter's layer input of a LayerInputTo.
launch::LayerInputOut layer_input_of(const LayerInputTo& to) {
  if (to.fp8 && to.bf16) return {*to.fp8, bf16_out(*to.bf16)};  // bf16: the staging rows
  if (to.fp8) return *to.fp8;
  return bf16_out(*to.bf16);
}

}  // namespace

Prepared prepare(int64_t n, int64_t c, double rms_eps, double pre_eps, double sinkhorn_eps,
                 double post_mult, int64_t sinkhorn_iters, double norm_eps,
                 const std::string& projection) {
  return {params({0, n, c, Where{}}, {rms_eps, pre_eps, sinkhorn_eps, norm_eps}, post_mult,
                 sinkhorn_iters),
          projection_of(projection)};
}

void hc_prenorm_gemm(Tensor x, Tensor fn, Tensor out, Tensor sqrsum, int64_t num_splits) {
  const char* op = "hc_prenorm_gemm";
  Phases phase;
  const GemmShape g = gemm_args(x, fn, out, sqrsum, num_splits);
  runnable(op, x);
  disjoint(op, {{"out", &out}, {"sqrsum", &sqrsum}}, {{"x", &x}, {"fn", &fn}});
  phase.setup();
  Launching launch(x);
  phase.launches();
  launch::prenorm_gemm(g.m, g.n, g.k, int(num_splits), bf16_in(x), f32_in(fn), f32_out(out),
                       f32_out(sqrsum), launch.target);
}

void pre_out(Tensor residual, Tensor fn, Tensor hc_scale, Tensor hc_base, OptTensor norm_weight,
             OptTensor pre_mix, double rms_eps, double pre_eps, double sinkhorn_eps,
             double post_mult, int64_t sinkhorn_iters, double norm_eps, Tensor layer_input,
             Tensor post, Tensor comb, Tensor next_pre_mix, OptTensor workspace,
             std::string projection, bool batch_invariant) {
  pre_to(residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps, sinkhorn_eps,
         post_mult, sinkhorn_iters, norm_eps, {&layer_input, nullptr}, post, comb, next_pre_mix,
         workspace, projection, batch_invariant);
}

void pre_to(const Tensor& residual, const Tensor& fn, const Tensor& hc_scale, const Tensor& hc_base,
            const OptTensor& norm_weight, const OptTensor& pre_mix, double rms_eps, double pre_eps,
            double sinkhorn_eps, double post_mult, int64_t sinkhorn_iters, double norm_eps,
            LayerInputTo layer_input, const Tensor& post, const Tensor& comb,
            const Tensor& next_pre_mix, const OptTensor& workspace, const std::string& projection,
            bool batch_invariant, const Prepared* bound) {
  const char* op = "pre";
  Phases phase;
  const Streams s =
      pre_args(op, residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps,
               sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, projection, bound != nullptr);
  if (layer_input.bf16) {
    pre_outputs(op, residual, *layer_input.bf16, post, comb, next_pre_mix);
  } else {
    coefficient_outputs(op, post, comb, next_pre_mix, s, s.dev);
  }
  const MhcParams p =
      params_of(s, bound, {rms_eps, pre_eps, sinkhorn_eps, norm_eps}, post_mult, sinkhorn_iters);
  phase.setup();
  const OptTensor ws = workspace_for(workspace, s, kMainSlot);
  pre_disjoint(op, residual, fn, hc_scale, hc_base, norm_weight, pre_mix, layer_input.bf16, post,
               comb, next_pre_mix, {"workspace", maybe(ws)}, {"main_workspace", nullptr});
  const SiteLaunch site(s, ws, norm_weight, "norm_weight");
  const Scratch scr = site.scratch();
  site.refuse_small(p, s.t, &scr, batch_invariant, &scr);
  phase.launches();
  // V4.1 (pre_mix): the input path with the carried pre_mix, fused into the coefficient launch
  // where the plan says; V4: the collapse with this site's own pre, after the coefficients.
  launch::pre(p, s.t, bf16_in(residual), site_weights(fn, hc_scale, hc_base),
              pre_mix ? f32_in(*pre_mix) : nullptr, site.weight(), layer_input_of(layer_input),
              coefficient_outputs_of(next_pre_mix, post, comb), scr,
              {projection_for(projection, bound), batch_invariant, 0}, site.at());
}

Tensors4 pre(Tensor residual, Tensor fn, Tensor hc_scale, Tensor hc_base, OptTensor norm_weight,
             OptTensor pre_mix, double rms_eps, double pre_eps, double sinkhorn_eps,
             double post_mult, int64_t sinkhorn_iters, double norm_eps, OptTensor workspace,
             std::string projection, bool batch_invariant) {
  const Tensors4 out = new_pre_outputs(residual, streams("pre", residual));
  pre_out(residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps, sinkhorn_eps,
          post_mult, sinkhorn_iters, norm_eps, std::get<0>(out), std::get<1>(out), std::get<2>(out),
          std::get<3>(out), workspace, projection, batch_invariant);
  return out;
}

namespace {

// What coefficients_out and pre_overlap_out's coefficient path share, after their checks: the
// launch on the current stream, or on the side stream after the current stream's queued work.
void launch_coefficients(const MhcParams& p, const Streams& s, const Tensor& residual,
                         const Tensor& fn, const Tensor& hc_scale, const Tensor& hc_base,
                         const Tensor& post, const Tensor& comb, const Tensor& next_pre_mix,
                         Scratch ws, int64_t side_stream, Projection projection,
                         bool batch_invariant, launch::Target at) {
  CoefficientOptions options{projection, batch_invariant, 0};
  if (side_stream != 0 && at.cuda) {
    const uintptr_t main = at.stream;
    at.stream = uintptr_t(side_stream);
    launch::stream_wait(at.stream, main, at.device);
    // fork_from: the plan's side-stream launch and, under capture, the launch hung off main's
    // last nodes alone where it can (mhc/schedule/capture_edges.hpp).
    options.fork_from = main;
  }
  launch::coefficients(p, s.t, bf16_in(residual), site_weights(fn, hc_scale, hc_base),
                       coefficient_outputs_of(next_pre_mix, post, comb), ws, options, at);
}

}  // namespace

void coefficients_out(Tensor residual, Tensor fn, Tensor hc_scale, Tensor hc_base, double rms_eps,
                      double pre_eps, double sinkhorn_eps, double post_mult, int64_t sinkhorn_iters,
                      Tensor post, Tensor comb, Tensor next_pre_mix, int64_t side_stream,
                      OptTensor workspace, std::string projection, bool batch_invariant) {
  coefficients_to(residual, fn, hc_scale, hc_base, rms_eps, pre_eps, sinkhorn_eps, post_mult,
                  sinkhorn_iters, post, comb, next_pre_mix, side_stream, workspace, projection,
                  batch_invariant, nullptr);
}

void coefficients_to(const Tensor& residual, const Tensor& fn, const Tensor& hc_scale,
                     const Tensor& hc_base, double rms_eps, double pre_eps, double sinkhorn_eps,
                     double post_mult, int64_t sinkhorn_iters, const Tensor& post,
                     const Tensor& comb, const Tensor& next_pre_mix, int64_t side_stream,
                     const OptTensor& workspace, const std::string& projection,
                     bool batch_invariant, const Prepared* bound) {
  const char* op = "coefficients";
  Phases phase;
  const Streams s =
      coefficient_args(op, residual, fn, hc_scale, hc_base, rms_eps, pre_eps, sinkhorn_eps,
                       post_mult, sinkhorn_iters, projection, bound != nullptr);
  coefficient_outputs(op, post, comb, next_pre_mix, s, s.dev);
  MhcParams p =
      params_of(s, bound, {rms_eps, pre_eps, sinkhorn_eps, {}}, post_mult, sinkhorn_iters);
  p.norm_eps_override.reset();  // the coefficient path has no norm: as the unbound op's
  phase.setup();
  const bool on_side = side_stream != 0 && s.dev.cuda();
  const OptTensor ws = workspace_for(workspace, s, on_side ? side_stream : kMainSlot);
  disjoint(op, {{"post", &post}, {"comb", &comb}, {"next_pre_mix", &next_pre_mix}},
           {MHC_COEFFICIENT_INPUTS(residual, fn, hc_scale, hc_base), {"workspace", maybe(ws)}});
  const SiteLaunch site(s, ws, std::nullopt, "norm_weight");
  const Scratch scr = site.scratch();
  site.refuse_small(p, s.t, &scr, batch_invariant, nullptr);
  phase.launches();
  launch_coefficients(p, s, residual, fn, hc_scale, hc_base, post, comb, next_pre_mix, scr,
                      side_stream, projection_for(projection, bound), batch_invariant, site.at());
}

Tensors3 coefficients(Tensor residual, Tensor fn, Tensor hc_scale, Tensor hc_base, double rms_eps,
                      double pre_eps, double sinkhorn_eps, double post_mult, int64_t sinkhorn_iters,
                      int64_t side_stream, OptTensor workspace, std::string projection,
                      bool batch_invariant) {
  const Tensors4 out = new_pre_outputs(residual, streams("coefficients", residual));
  coefficients_out(residual, fn, hc_scale, hc_base, rms_eps, pre_eps, sinkhorn_eps, post_mult,
                   sinkhorn_iters, std::get<1>(out), std::get<2>(out), std::get<3>(out),
                   side_stream, workspace, projection, batch_invariant);
  return {std::get<1>(out), std::get<2>(out), std::get<3>(out)};
}

namespace {

// pre_overlap's input path runs on the current stream. Its only scratch is the widened copy of a
// bf16 norm weight on CUDA; when the coefficient path runs on the same stream (no side stream,
// or CPU tensors) it shares `workspace`, else it takes `main_workspace` or, only where it needs
// scratch at all, the current stream's workspace from the pool.
OptTensor main_workspace_for(const OptTensor& workspace, const OptTensor& main_workspace,
                             const Streams& s, const OptTensor& norm_weight, bool on_side) {
  if (main_workspace) {
    return workspace_for(main_workspace, s, kMainSlot, "main_workspace");
  }
  if (!on_side) return workspace_for(workspace, s, kMainSlot);
  if (norm_weight && is_bf16(*norm_weight)) {
    return workspace_for(std::nullopt, s, kMainSlot);
  }
  return std::nullopt;
}

}  // namespace

void pre_overlap_out(Tensor residual, Tensor fn, Tensor hc_scale, Tensor hc_base,
                     OptTensor norm_weight, Tensor pre_mix, double rms_eps, double pre_eps,
                     double sinkhorn_eps, double post_mult, int64_t sinkhorn_iters, double norm_eps,
                     int64_t side_stream, Tensor layer_input, Tensor post, Tensor comb,
                     Tensor next_pre_mix, OptTensor workspace, std::string projection,
                     bool batch_invariant, OptTensor main_workspace) {
  pre_overlap_to(residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps,
                 sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, side_stream, layer_input, post,
                 comb, next_pre_mix, workspace, projection, batch_invariant, main_workspace,
                 nullptr);
}

void pre_overlap_to(const Tensor& residual, const Tensor& fn, const Tensor& hc_scale,
                    const Tensor& hc_base, const OptTensor& norm_weight, const Tensor& pre_mix,
                    double rms_eps, double pre_eps, double sinkhorn_eps, double post_mult,
                    int64_t sinkhorn_iters, double norm_eps, int64_t side_stream,
                    const Tensor& layer_input, const Tensor& post, const Tensor& comb,
                    const Tensor& next_pre_mix, const OptTensor& workspace,
                    const std::string& projection, bool batch_invariant,
                    const OptTensor& main_workspace, const Prepared* bound) {
  const char* op = "pre_overlap";
  Phases phase;
  if (!pre_mix.defined()) {
    fail(
        "mhc.pre_overlap: pre_mix is required (the V4.1 delayed form); the V4 form cannot "
        "overlap, its input path needs this site's coefficients");
  }
  const Streams s =
      pre_args(op, residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps,
               sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, projection, bound != nullptr);
  pre_outputs(op, residual, layer_input, post, comb, next_pre_mix);
  const MhcParams p =
      params_of(s, bound, {rms_eps, pre_eps, sinkhorn_eps, norm_eps}, post_mult, sinkhorn_iters);
  phase.setup();
  const bool on_side = side_stream != 0 && s.dev.cuda();
  // The side stream forks after the input path is queued, so the sublayer's launch, queued next
  // on the current stream, is not held behind the coefficient path. The input path runs on the
  // current stream: its scratch is never the side stream's workspace.
  const OptTensor main_ws = main_workspace_for(workspace, main_workspace, s, norm_weight, on_side);
  pre_disjoint(op, residual, fn, hc_scale, hc_base, norm_weight, pre_mix, &layer_input, post, comb,
               next_pre_mix, {"workspace", maybe(workspace)}, {"main_workspace", maybe(main_ws)});
  const OptTensor ws = workspace_for(workspace, s, on_side ? side_stream : kMainSlot);
  const SiteLaunch site(s, main_ws, norm_weight, "norm_weight");
  const Scratch scr = scratch(ws), main_scr = site.scratch();
  site.refuse_small(p, s.t, nullptr, batch_invariant, &main_scr);
  site.refuse_small(p, s.t, &scr, batch_invariant, nullptr);
  phase.launches();
  if (!on_side) {  // pre's launches: one where the plan fuses the input path into the coefficients
    launch::pre(p, s.t, bf16_in(residual), site_weights(fn, hc_scale, hc_base), f32_in(pre_mix),
                site.weight(), bf16_out(layer_input),
                coefficient_outputs_of(next_pre_mix, post, comb), scr,
                {projection_for(projection, bound), batch_invariant, 0}, site.at());
    return;
  }
  launch::input_path(p, s.t, bf16_in(residual), f32_in(pre_mix), site.weight(),
                     bf16_out(layer_input), main_scr, site.at());
  launch_coefficients(p, s, residual, fn, hc_scale, hc_base, post, comb, next_pre_mix, scr,
                      side_stream, projection_for(projection, bound), batch_invariant, site.at());
}

Tensors4 pre_overlap(Tensor residual, Tensor fn, Tensor hc_scale, Tensor hc_base,
                     OptTensor norm_weight, Tensor pre_mix, double rms_eps, double pre_eps,
                     double sinkhorn_eps, double post_mult, int64_t sinkhorn_iters, double norm_eps,
                     int64_t side_stream, OptTensor workspace, std::string projection,
                     bool batch_invariant, OptTensor main_workspace) {
  const Tensors4 out = new_pre_outputs(residual, streams("pre_overlap", residual));
  pre_overlap_out(residual, fn, hc_scale, hc_base, norm_weight, pre_mix, rms_eps, pre_eps,
                  sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, side_stream, std::get<0>(out),
                  std::get<1>(out), std::get<2>(out), std::get<3>(out), workspace, projection,
                  batch_invariant, main_workspace);
  return out;
}

void join(int64_t side_stream, Tensor post, Tensor comb, Tensor next_pre_mix) {
  // The three coefficient tensors are arguments so that torch.compile keeps their readers after
  // the join; the current stream waits for the side stream.
  (void)comb;
  (void)next_pre_mix;
  if (side_stream == 0 || !post.defined() || !where(post).cuda()) return;
  Launching launch(post);
  launch::stream_wait(launch.target.stream, uintptr_t(side_stream), launch.target.device);
}

void post_out(Tensor sublayer_out, Tensor residual, Tensor post, Tensor comb, Tensor out) {
  const char* op = "post";
  Phases phase;
  const Streams s = post_inputs(op, sublayer_out, residual, post, comb);
  const Where& dev = s.dev;
  tensor(op, "out", out, bf16(), {s.t, s.n, s.c}, &dev, "[T, n, C]");
  disjoint(
      op, {{"out", &out}},
      {{"sublayer_out", &sublayer_out}, {"residual", &residual}, {"post", &post}, {"comb", &comb}});
  const MhcParams p = params(s, {});
  phase.setup();
  Launching launch(dev);
  phase.launches();
  launch::post(p, s.t, post_inputs_of(sublayer_out, residual, post, comb, out), launch.target);
}

Tensor post(Tensor sublayer_out, Tensor residual, Tensor post, Tensor comb) {
  Tensor out = like_residual(residual, streams("post", residual));
  post_out(sublayer_out, residual, post, comb, out);
  return out;
}

void post_pre_out(Tensor sublayer_out, Tensor residual, Tensor post, Tensor comb,
                  Tensor next_pre_mix, OptTensor next_norm_weight, double norm_eps,
                  Tensor residual_next, Tensor next_layer_input, OptTensor workspace) {
  post_pre_to(sublayer_out, residual, post, comb, next_pre_mix, next_norm_weight, norm_eps,
              residual_next, {&next_layer_input, nullptr}, workspace);
}

void post_pre_to(const Tensor& sublayer_out, const Tensor& residual, const Tensor& post,
                 const Tensor& comb, const Tensor& next_pre_mix, const OptTensor& next_norm_weight,
                 double norm_eps, const Tensor& residual_next, LayerInputTo next_layer_input,
                 const OptTensor& workspace) {
  const char* op = "post_pre";
  Phases phase;
  const Streams s = post_pre_args(op, sublayer_out, residual, post, comb, next_pre_mix,
                                  next_norm_weight, norm_eps);
  const Where& dev = s.dev;
  tensor(op, "residual_next", residual_next, bf16(), {s.t, s.n, s.c}, &dev, "[T, n, C]");
  if (next_layer_input.bf16) {
    tensor(op, "next_layer_input", *next_layer_input.bf16, bf16(), {s.t, s.c}, &dev, "[T, C]");
  }
  const MhcParams p = params(s, {{}, {}, {}, norm_eps});
  phase.setup();
  // Only a bf16 weight on CUDA reads the workspace (it is widened there): no pool lookup else.
  const bool widens = next_norm_weight && is_bf16(*next_norm_weight) && dev.cuda();
  const OptTensor ws = widens || workspace ? workspace_for(workspace, s, kMainSlot) : std::nullopt;
  disjoint(op, {{"residual_next", &residual_next}, {"next_layer_input", next_layer_input.bf16}},
           {{"residual", &residual},
            {"sublayer_out", &sublayer_out},
            {"post", &post},
            {"comb", &comb},
            {"next_pre_mix", &next_pre_mix},
            {"next_norm_weight", maybe(next_norm_weight)},
            {"workspace", maybe(ws)}});
  const SiteLaunch site(s, widens ? ws : std::nullopt, next_norm_weight, "next_norm_weight");
  const Scratch scr = site.scratch();
  site.refuse_small(p, s.t, nullptr, false, &scr);
  phase.launches();
  launch::post_pre(p, s.t, post_inputs_of(sublayer_out, residual, post, comb, residual_next),
                   f32_in(next_pre_mix), site.weight(), layer_input_of(next_layer_input), scr,
                   site.at());
}

Tensors2 post_pre(Tensor sublayer_out, Tensor residual, Tensor post, Tensor comb,
                  Tensor next_pre_mix, OptTensor next_norm_weight, double norm_eps,
                  OptTensor workspace) {
  const Streams s = streams("post_pre", residual);
  Tensors2 out{like_residual(residual, s),
               new_tensor({s.t, s.c}, aoti_torch_dtype_bfloat16(), where(residual))};
  post_pre_out(sublayer_out, residual, post, comb, next_pre_mix, next_norm_weight, norm_eps,
               std::get<0>(out), std::get<1>(out), workspace);
  return out;
}

void boundary_out(Tensor sublayer_out, Tensor residual, Tensor post, Tensor comb, Tensor pre_mix,
                  OptTensor norm_weight, Tensor fn, Tensor hc_scale, Tensor hc_base, double rms_eps,
                  double pre_eps, double sinkhorn_eps, double post_mult, int64_t sinkhorn_iters,
                  double norm_eps, Tensor residual_next, Tensor layer_input, Tensor next_post,
                  Tensor next_comb, Tensor next_pre_mix, OptTensor workspace,
                  std::string projection, bool batch_invariant) {
  boundary_to(sublayer_out, residual, post, comb, pre_mix, norm_weight, fn, hc_scale, hc_base,
              rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps, residual_next,
              {&layer_input, nullptr}, next_post, next_comb, next_pre_mix, workspace, projection,
              batch_invariant);
}

void boundary_to(const Tensor& sublayer_out, const Tensor& residual, const Tensor& post,
                 const Tensor& comb, const Tensor& pre_mix, const OptTensor& norm_weight,
                 const Tensor& fn, const Tensor& hc_scale, const Tensor& hc_base, double rms_eps,
                 double pre_eps, double sinkhorn_eps, double post_mult, int64_t sinkhorn_iters,
                 double norm_eps, const Tensor& residual_next, LayerInputTo layer_input,
                 const Tensor& next_post, const Tensor& next_comb, const Tensor& next_pre_mix,
                 const OptTensor& workspace, const std::string& projection, bool batch_invariant,
                 const Prepared* bound) {
  const char* op = "boundary";
  Phases phase;
  const Streams s = boundary_args(op, sublayer_out, residual, post, comb, pre_mix, norm_weight, fn,
                                  hc_scale, hc_base, rms_eps, pre_eps, sinkhorn_eps, post_mult,
                                  sinkhorn_iters, norm_eps, projection, bound != nullptr);
  if (layer_input.bf16) {
    boundary_outputs(op, residual, residual_next, *layer_input.bf16, next_post, next_comb,
                     next_pre_mix);
  } else {
    const Where& dev = s.dev;
    tensor(op, "residual_next", residual_next, bf16(), {s.t, s.n, s.c}, &dev, "[T, n, C]");
    coefficient_outputs(op, next_post, next_comb, next_pre_mix, s, dev, "next_post", "next_comb",
                        "next_pre_mix");
  }
  const MhcParams p =
      params_of(s, bound, {rms_eps, pre_eps, sinkhorn_eps, norm_eps}, post_mult, sinkhorn_iters);
  phase.setup();
  const OptTensor ws = workspace_for(workspace, s, kMainSlot);
  disjoint(op,
           {{"residual_next", &residual_next},
            {"layer_input", layer_input.bf16},
            {"next_post", &next_post},
            {"next_comb", &next_comb},
            {"next_pre_mix", &next_pre_mix}},
           {{"residual", &residual},
            {"sublayer_out", &sublayer_out},
            {"post", &post},
            {"comb", &comb},
            {"pre_mix", &pre_mix},
            {"norm_weight", maybe(norm_weight)},
            {"fn", &fn},
            {"hc_scale", &hc_scale},
            {"hc_base", &hc_base},
            {"workspace", maybe(ws)}});
  const SiteLaunch site(s, ws, norm_weight, "norm_weight");
  const Scratch scr = site.scratch();
  site.refuse_small(p, s.t, &scr, batch_invariant, &scr);
  phase.launches();
  launch::boundary(p, s.t, post_inputs_of(sublayer_out, residual, post, comb, residual_next),
                   f32_in(pre_mix), site.weight(), layer_input_of(layer_input),
                   site_weights(fn, hc_scale, hc_base),
                   coefficient_outputs_of(next_pre_mix, next_post, next_comb), scr,
                   {projection_for(projection, bound), batch_invariant, 0}, site.at());
}
Tensors5 boundary(Tensor sublayer_out, Tensor residual, Tensor post, Tensor comb, Tensor pre_mix,
                  OptTensor norm_weight, Tensor fn, Tensor hc_scale, Tensor hc_base, double rms_eps,
                  double pre_eps, double sinkhorn_eps, double post_mult, int64_t sinkhorn_iters,
                  double norm_eps, OptTensor workspace, std::string projection,
                  bool batch_invariant) {
  const Streams s = streams("boundary", residual);
  const Tensors4 pre_outs = new_pre_outputs(residual, s);
  const Tensors5 out{like_residual(residual, s), std::get<0>(pre_outs), std::get<1>(pre_outs),
                     std::get<2>(pre_outs), std::get<3>(pre_outs)};
  boundary_out(sublayer_out, residual, post, comb, pre_mix, norm_weight, fn, hc_scale, hc_base,
               rms_eps, pre_eps, sinkhorn_eps, post_mult, sinkhorn_iters, norm_eps,
               std::get<0>(out), std::get<1>(out), std::get<2>(out), std::get<3>(out),
               std::get<4>(out), workspace, projection, batch_invariant);
  return out;
}

}  // namespace mhc::torch_ops
