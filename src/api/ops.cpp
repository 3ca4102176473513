// The C++ API of mhc/api.hpp: checked arguments, the kernel plan resolved per call, and the
// launchers of mhc/cuda/kernels.hpp. Nothing here decides what runs; the plan does.
#include <fmt/core.h>

#include <initializer_list>
#include <string>

#include "mhc/api.hpp"
#include "mhc/core/error.hpp"
#include "mhc/core/kernel_limits.hpp"
#include "mhc/core/workspace.hpp"
#if MHC_WITH_CUDA
#include <cuda_runtime_api.h>

#include "mhc/cuda/check.hpp"
#include "mhc/cuda/cuda_backend.hpp"
#include "mhc/cuda/device_plan.hpp"
#include "mhc/cuda/kernels.hpp"
#include "mhc/schedule/capture_edges.hpp"
#endif

namespace mhc {
namespace {

[[noreturn]] void fail(const char* op, const std::string& problem) {
  throw Error(fmt::format("mhc::{}: {}", op, problem));
}

}  // namespace

int64_t workspace_bytes(const MhcParams& p, int64_t max_tokens) {
  return workspace_layout(p, max_tokens).bytes;
}

Ops::Ops(const KernelPlan& plan, const MhcParams& p) : Ops(plan, p, LaunchOverrides{}) {}

Ops::Ops(const KernelPlan& plan, const MhcParams& p, const LaunchOverrides& overrides)
    : plan_(plan), p_(p), overrides_(overrides) {
  validate(p_);
  plan_.tuning(p_, 0, overrides_);  // the shape against the plan's kernels
}

LaunchTuning Ops::tuning(int64_t tokens) const { return plan_.tuning(p_, tokens, overrides_); }

#if MHC_WITH_CUDA

namespace {

// One device array of a call, for the checks: its name in the API, address and bytes.
struct Array {
  const char* name;
  const void* data;
  int64_t bytes;
  bool required = true;  // false: null means absent (not checked, not read)
};

bool overlap(const Array& a, const Array& b) {
  const auto begin = [](const Array& x) { return reinterpret_cast<uintptr_t>(x.data); };
  return a.data && b.data && a.bytes > 0 && b.bytes > 0 &&
         begin(a) < begin(b) + uint64_t(b.bytes) && begin(b) < begin(a) + uint64_t(a.bytes);
}

// Every array present, and no output overlapping another output or an input. `optional` inputs
// may be null (then they are not read).
void check_arrays(const char* op, std::initializer_list<Array> inputs,
                  std::initializer_list<Array> outputs,
                  std::initializer_list<Array> optional = {}) {
  for (const auto* group : {&inputs, &outputs}) {
    for (const Array& a : *group) {
      if (a.required && a.data == nullptr) fail(op, fmt::format("{} is null", a.name));
    }
  }
  for (const Array& out : outputs) {
    for (const auto* group : {&inputs, &outputs, &optional}) {
      for (const Array& other : *group) {
        if (&other != &out && overlap(out, other)) {
          fail(op, fmt::format("{} overlaps {}", out.name, other.name));
        }
      }
    }
  }
}

// What every call of an Ops shares: its shape's array sizes, the current device against the
// plan's, the workspace over the caller's bytes and a bf16 norm weight widened into it.
class Call {
 public:
  Call(const char* op, const KernelPlan& plan, const MhcParams& p, int64_t tokens)
      : op_(op), p_(p), tokens_(tokens) {
    int device = -1;
    MHC_CUDA_CHECK(cudaGetDevice(&device));
    if (!plan.device || *plan.device != device) {
      fail(op, plan.device ? fmt::format("the plan was made for CUDA device {}, device {} is "
                                         "current",
                                         *plan.device, device)
                           : std::string("the plan is a simulated GPU's (make it with "
                                         "mhc::device_plan)"));
    }
  }

  int64_t streams_bytes() const { return tokens_ * p_.k() * 2; }        // [T, n, C] bf16
  int64_t row_bytes() const { return tokens_ * p_.hidden * 2; }         // [T, C] bf16
  int64_t per_stream_bytes() const { return tokens_ * p_.n * 4; }       // [T, n] fp32
  int64_t comb_bytes() const { return tokens_ * p_.n * p_.n * 4; }      // [T, n, n] fp32
  int64_t fn_bytes() const { return int64_t(p_.nmix()) * p_.k() * 4; }  // [NMIX, K] fp32
  int64_t weight_bytes(const NormWeight& w) const { return p_.hidden * (w.bf16 ? 2 : 4); }

  // layer_input's arrays: the bf16 rows (and no scales), or the FP8 codes and scales, whose
  // format is checked against the shape here.
  Array layer_input_rows(const char* bf16_name, Bf16* bf16, const Fp8Output* fp8) const {
    if (fp8 == nullptr) return {bf16_name, bf16, row_bytes()};
    check_fp8_format(fp8->format, p_.hidden, op_);
    return {"layer_input codes", fp8->codes, tokens_ * p_.hidden};
  }
  Array layer_input_scales(const Fp8Output* fp8) const {
    if (fp8 == nullptr) return {"layer_input scales", nullptr, 0, false};
    return {"layer_input scales", fp8->scales,
            fp8_scale_floats(tokens_, p_.hidden, fp8->format) * 4};
  }
  // The FP8 boundary's optional bf16 staging rows (the bf16 pointer beside an FP8 output).
  Array layer_input_staging(Bf16* bf16, const Fp8Output* fp8) const {
    return {"staging", fp8 != nullptr ? bf16 : nullptr, row_bytes(), false};
  }

  // The coefficient path's workspace for this call: present, aligned, large enough.
  cuda::SiteWorkspace coefficient_workspace(Workspace ws, bool batch_invariant) const {
    check_workspace(ws);
    const WorkspaceLayout layout = workspace_layout_for_bytes(p_, ws.bytes);
    if (layout.max_tokens < tokens_) {
      fail(op_, fmt::format("the workspace's {} bytes serve {} tokens, the call has {} (size it "
                            "with mhc::workspace_bytes)",
                            ws.bytes, layout.max_tokens, tokens_));
    }
    if (batch_invariant && batch_invariant_leaves(p_) > layout.max_splits) {
      fail(op_, fmt::format("batch-invariant mode needs room for {} split partials per token, "
                            "the workspace has {}",
                            batch_invariant_leaves(p_), layout.max_splits));
    }
    return cuda::SiteWorkspace(p_, ws.data, ws.bytes);
  }

  // The fp32 norm weight the kernels read: a bf16 one widened into the workspace's scratch.
  const float* norm_weight(NormWeight w, Workspace ws, cuda::LaunchTarget stream) const {
    if (w.data == nullptr || !w.bf16) return static_cast<const float*>(w.data);
    check_workspace(ws);
    const WorkspaceLayout layout = workspace_layout_for_bytes(p_, ws.bytes);
    if (ws.bytes < layout.weight_offset + layout.weight_floats * 4) {
      fail(op_,
           "the workspace is too small to widen the bf16 norm weight into (size it with "
           "mhc::workspace_bytes)");
    }
    auto* scratch = reinterpret_cast<float*>(static_cast<char*>(ws.data) + layout.weight_offset);
    cuda::widen_bf16(static_cast<const Bf16*>(w.data), p_.hidden, scratch, stream);
    return scratch;
  }

 private:
  void check_workspace(Workspace ws) const {
    if (ws.data == nullptr) fail(op_, "the workspace is null (size it with mhc::workspace_bytes)");
    if (reinterpret_cast<uintptr_t>(ws.data) % 256 != 0) {
      fail(op_, "the workspace must be 256-byte aligned");
    }
  }

  const char* op_;
  const MhcParams& p_;
  int64_t tokens_;
};

cuda::CoefficientBuffers coefficient_buffers(const Bf16* x, const HcWeights& w,
                                             const Coefficients& out) {
  cuda::CoefficientBuffers b;
  b.x = x;
  b.hc_fn = w.fn;
  b.hc_base = w.base;
  b.hc_scale = w.scale;
  b.pre = out.pre;
  b.post = out.post;
  b.comb = out.comb;
  return b;
}

}  // namespace

bool cuda_available() { return cuda::device_present(); }

KernelPlan device_plan(int device, const KernelConfig& config) {
  int count = 0;
  MHC_CUDA_CHECK(cudaGetDeviceCount(&count));
  if (device < 0 || device >= count) {
    throw Error(
        fmt::format("mhc::device_plan: device {} is not a CUDA device of this process "
                    "({} visible)",
                    device, count));
  }
  int previous = 0;
  MHC_CUDA_CHECK(cudaGetDevice(&previous));
  if (previous != device) MHC_CUDA_CHECK(cudaSetDevice(device));
  try {
    KernelPlan plan = cuda::device_plan(config);
    if (previous != device) MHC_CUDA_CHECK(cudaSetDevice(previous));
    return plan;
  } catch (...) {
    if (previous != device) cudaSetDevice(previous);
    throw;
  }
}

void Ops::pre_to(int64_t tokens, const Bf16* residual, const HcWeights& w, NormWeight norm_weight,
                 const float* pre_mix, LayerInputOut layer_input, const Coefficients& out,
                 Workspace ws, Stream stream) const {
  const LaunchTuning t = tuning(tokens);
  if (tokens == 0) return;
  const Call c("Ops::pre", plan_, p_, tokens);
  check_arrays("Ops::pre",
               {{"residual", residual, c.streams_bytes()},
                {"w.fn", w.fn, c.fn_bytes()},
                {"w.scale", w.scale, 12},
                {"w.base", w.base, p_.nmix() * 4}},
               {c.layer_input_rows("layer_input", layer_input.bf16, layer_input.fp8),
                c.layer_input_scales(layer_input.fp8),
                {"out.pre", out.pre, c.per_stream_bytes()},
                {"out.post", out.post, c.per_stream_bytes()},
                {"out.comb", out.comb, c.comb_bytes()}},
               {{"pre_mix", pre_mix, c.per_stream_bytes()},
                {"norm_weight", norm_weight.data, c.weight_bytes(norm_weight)},
                {"workspace", ws.data, ws.bytes}});
  cuda::SiteWorkspace site_ws = c.coefficient_workspace(ws, t.batch_invariant);
  const float* norm = c.norm_weight(norm_weight, ws, {stream, t.pdl});
  const cuda::CoefficientBuffers b = coefficient_buffers(residual, w, out);
  if (pre_mix != nullptr) {  // V4.1: the carried pre_mix, in the coefficient launch where it fuses
    const cuda::InputPathBuffers input{pre_mix, norm, layer_input.bf16, layer_input.fp8};
    cuda::prenorm_coefficients(p_, tokens, b, t, site_ws, stream, &input);
    return;
  }
  cuda::prenorm_coefficients(p_, tokens, b, t, site_ws, stream);  // V4: this site's own pre
  if (layer_input.fp8 != nullptr) {
    cuda::input_path(p_, tokens, residual, out.pre, norm, *layer_input.fp8, {stream, t.pdl});
  } else {
    cuda::input_path(p_, tokens, residual, out.pre, norm, layer_input.bf16, {stream, t.pdl});
  }
}

void Ops::coefficients(int64_t tokens, const Bf16* residual, const HcWeights& w,
                       const Coefficients& out, Workspace ws, Stream stream,
                       Stream forked_from) const {
  const bool side = forked_from != nullptr && forked_from != stream;
  LaunchOverrides o = overrides_;
  o.side_stream = side;
  const LaunchTuning t = plan_.tuning(p_, tokens, o);
  if (tokens == 0) return;
  const Call c("Ops::coefficients", plan_, p_, tokens);
  check_arrays("Ops::coefficients",
               {{"residual", residual, c.streams_bytes()},
                {"w.fn", w.fn, c.fn_bytes()},
                {"w.scale", w.scale, 12},
                {"w.base", w.base, p_.nmix() * 4}},
               {{"out.pre", out.pre, c.per_stream_bytes()},
                {"out.post", out.post, c.per_stream_bytes()},
                {"out.comb", out.comb, c.comb_bytes()}},
               {{"workspace", ws.data, ws.bytes}});
  cuda::SiteWorkspace site_ws = c.coefficient_workspace(ws, t.batch_invariant);
  if (side) cuda::fork_from(forked_from, stream);
  cuda::prenorm_coefficients(p_, tokens, coefficient_buffers(residual, w, out), t, site_ws, stream);
}

void Ops::input_path_to(int64_t tokens, const Bf16* residual, const float* pre_mix,
                        NormWeight norm_weight, LayerInputOut layer_input, Workspace ws,
                        Stream stream) const {
  const LaunchTuning t = tuning(tokens);
  if (tokens == 0) return;
  const Call c("Ops::input_path", plan_, p_, tokens);
  check_arrays(
      "Ops::input_path",
      {{"residual", residual, c.streams_bytes()}, {"pre_mix", pre_mix, c.per_stream_bytes()}},
      {c.layer_input_rows("layer_input", layer_input.bf16, layer_input.fp8),
       c.layer_input_scales(layer_input.fp8)},
      {{"norm_weight", norm_weight.data, c.weight_bytes(norm_weight)},
       {"workspace", ws.data, ws.bytes}});
  const cuda::LaunchTarget on{stream, t.pdl};
  const float* norm = c.norm_weight(norm_weight, ws, on);
  if (layer_input.fp8 != nullptr) {
    cuda::input_path(p_, tokens, residual, pre_mix, norm, *layer_input.fp8, on);
  } else {
    cuda::input_path(p_, tokens, residual, pre_mix, norm, layer_input.bf16, on);
  }
}

void Ops::post(int64_t tokens, const PostArgs& a, Stream stream) const {
  const LaunchTuning t = tuning(tokens);
  if (tokens == 0) return;
  const Call c("Ops::post", plan_, p_, tokens);
  check_arrays("Ops::post",
               {{"sublayer_out", a.sublayer_out, c.row_bytes()},
                {"residual", a.residual, c.streams_bytes()},
                {"post", a.post, c.per_stream_bytes()},
                {"comb", a.comb, c.comb_bytes()}},
               {{"residual_next", a.residual_next, c.streams_bytes()}});
  cuda::post(p_, tokens, a.residual, a.post, a.comb, a.sublayer_out, a.residual_next, nullptr, t,
             stream);
}

void Ops::post_pre_to(int64_t tokens, const PostArgs& a, const float* next_pre_mix,
                      NormWeight next_norm_weight, LayerInputOut next_layer_input, Workspace ws,
                      Stream stream) const {
  const LaunchTuning t = tuning(tokens);
  if (tokens == 0) return;
  const Call c("Ops::post_pre", plan_, p_, tokens);
  check_arrays("Ops::post_pre",
               {{"sublayer_out", a.sublayer_out, c.row_bytes()},
                {"residual", a.residual, c.streams_bytes()},
                {"post", a.post, c.per_stream_bytes()},
                {"comb", a.comb, c.comb_bytes()},
                {"next_pre_mix", next_pre_mix, c.per_stream_bytes()}},
               {{"residual_next", a.residual_next, c.streams_bytes()},
                c.layer_input_rows("next_layer_input", next_layer_input.bf16, next_layer_input.fp8),
                c.layer_input_scales(next_layer_input.fp8)},
               {{"next_norm_weight", next_norm_weight.data, c.weight_bytes(next_norm_weight)},
                {"workspace", ws.data, ws.bytes}});
  const cuda::NextInput next{next_pre_mix, c.norm_weight(next_norm_weight, ws, {stream, t.pdl}),
                             next_layer_input.bf16, next_layer_input.fp8};
  cuda::post(p_, tokens, a.residual, a.post, a.comb, a.sublayer_out, a.residual_next, &next, t,
             stream);
}

void Ops::boundary_to(int64_t tokens, const PostArgs& a, const float* pre_mix,
                      NormWeight norm_weight, LayerInputOut layer_input, const HcWeights& next,
                      const Coefficients& out, Workspace ws, Stream stream) const {
  const LaunchTuning t = tuning(tokens);
  if (tokens == 0) return;
  const Call c("Ops::boundary", plan_, p_, tokens);
  check_arrays("Ops::boundary",
               {{"sublayer_out", a.sublayer_out, c.row_bytes()},
                {"residual", a.residual, c.streams_bytes()},
                {"post", a.post, c.per_stream_bytes()},
                {"comb", a.comb, c.comb_bytes()},
                {"pre_mix", pre_mix, c.per_stream_bytes()},
                {"next.fn", next.fn, c.fn_bytes()},
                {"next.scale", next.scale, 12},
                {"next.base", next.base, p_.nmix() * 4}},
               {{"residual_next", a.residual_next, c.streams_bytes()},
                c.layer_input_rows("layer_input", layer_input.bf16, layer_input.fp8),
                c.layer_input_scales(layer_input.fp8),
                c.layer_input_staging(layer_input.bf16, layer_input.fp8),
                {"out.pre", out.pre, c.per_stream_bytes()},
                {"out.post", out.post, c.per_stream_bytes()},
                {"out.comb", out.comb, c.comb_bytes()}},
               {{"norm_weight", norm_weight.data, c.weight_bytes(norm_weight)},
                {"workspace", ws.data, ws.bytes}});
  cuda::SiteWorkspace site_ws = c.coefficient_workspace(ws, t.batch_invariant);
  const cuda::InputPathBuffers input{pre_mix, c.norm_weight(norm_weight, ws, {stream, t.pdl}),
                                     layer_input.bf16, layer_input.fp8};
  const cuda::PreviousPost previous{a.residual, a.post, a.comb, a.sublayer_out, a.residual_next};
  cuda::prenorm_coefficients(p_, tokens, coefficient_buffers(a.residual_next, next, out), t,
                             site_ws, stream, &input, &previous);
}

void prenorm_gemm(const KernelPlan& plan, int64_t m, int64_t n, int64_t k, int splits,
                  const Bf16* x, const float* fn, float* out, float* sqrsum, Stream stream) {
  if (m == 0) {
    check_prenorm_gemm_shape(m, n, k, splits);
    return;
  }
  const MhcParams p;  // for the device check only
  const Call c("prenorm_gemm", plan, p, m);
  cuda::prenorm_gemm(m, n, k, splits, x, fn, out, sqrsum, {stream, plan.pdl});
}

#else  // the CPU-only build: no device to run on

namespace {
[[noreturn]] void no_cuda(const char* op) {
  fail(op, "mhc was built without the CUDA backend (configure with -DMHC_CUDA=ON)");
}
}  // namespace

bool cuda_available() { return false; }
KernelPlan device_plan(int, const KernelConfig&) { no_cuda("device_plan"); }
void Ops::coefficients(int64_t, const Bf16*, const HcWeights&, const Coefficients&, Workspace,
                       Stream, Stream) const {
  no_cuda("Ops::coefficients");
}
void Ops::post(int64_t, const PostArgs&, Stream) const { no_cuda("Ops::post"); }
void Ops::pre_to(int64_t, const Bf16*, const HcWeights&, NormWeight, const float*, LayerInputOut,
                 const Coefficients&, Workspace, Stream) const {
  no_cuda("Ops::pre");
}
void Ops::input_path_to(int64_t, const Bf16*, const float*, NormWeight, LayerInputOut, Workspace,
                        Stream) const {
  no_cuda("Ops::input_path");
}
void Ops::post_pre_to(int64_t, const PostArgs&, const float*, NormWeight, LayerInputOut, Workspace,
                      Stream) const {
  no_cuda("Ops::post_pre");
}
void Ops::boundary_to(int64_t, const PostArgs&, const float*, NormWeight, LayerInputOut,
                      const HcWeights&, const Coefficients&, Workspace, Stream) const {
  no_cuda("Ops::boundary");
}
void prenorm_gemm(const KernelPlan&, int64_t, int64_t, int64_t, int, const Bf16*, const float*,
                  float*, float*, Stream) {
  no_cuda("prenorm_gemm");
}

#endif

// The bf16 and FP8 forms of the ops that write layer_input: one implementation each.
void Ops::pre(int64_t tokens, const Bf16* residual, const HcWeights& w, NormWeight norm_weight,
              const float* pre_mix, Bf16* layer_input, const Coefficients& out, Workspace ws,
              Stream stream) const {
  pre_to(tokens, residual, w, norm_weight, pre_mix, {layer_input, nullptr}, out, ws, stream);
}

void Ops::pre(int64_t tokens, const Bf16* residual, const HcWeights& w, NormWeight norm_weight,
              const float* pre_mix, const Fp8Output& layer_input, const Coefficients& out,
              Workspace ws, Stream stream) const {
  pre_to(tokens, residual, w, norm_weight, pre_mix, {nullptr, &layer_input}, out, ws, stream);
}

void Ops::input_path(int64_t tokens, const Bf16* residual, const float* pre_mix,
                     NormWeight norm_weight, Bf16* layer_input, Workspace ws, Stream stream) const {
  input_path_to(tokens, residual, pre_mix, norm_weight, {layer_input, nullptr}, ws, stream);
}

void Ops::input_path(int64_t tokens, const Bf16* residual, const float* pre_mix,
                     NormWeight norm_weight, const Fp8Output& layer_input, Workspace ws,
                     Stream stream) const {
  input_path_to(tokens, residual, pre_mix, norm_weight, {nullptr, &layer_input}, ws, stream);
}

void Ops::post_pre(int64_t tokens, const PostArgs& a, const float* next_pre_mix,
                   NormWeight next_norm_weight, Bf16* next_layer_input, Workspace ws,
                   Stream stream) const {
  post_pre_to(tokens, a, next_pre_mix, next_norm_weight, {next_layer_input, nullptr}, ws, stream);
}

void Ops::post_pre(int64_t tokens, const PostArgs& a, const float* next_pre_mix,
                   NormWeight next_norm_weight, const Fp8Output& next_layer_input, Workspace ws,
                   Stream stream) const {
  post_pre_to(tokens, a, next_pre_mix, next_norm_weight, {nullptr, &next_layer_input}, ws, stream);
}

void Ops::boundary(int64_t tokens, const PostArgs& a, const float* pre_mix, NormWeight norm_weight,
                   Bf16* layer_input, const HcWeights& next, const Coefficients& out, Workspace ws,
                   Stream stream) const {
  boundary_to(tokens, a, pre_mix, norm_weight, {layer_input, nullptr}, next, out, ws, stream);
}

void Ops::boundary(int64_t tokens, const PostArgs& a, const float* pre_mix, NormWeight norm_weight,
                   const Fp8Output& layer_input, const HcWeights& next, const Coefficients& out,
                   Workspace ws, Stream stream) const {
  boundary_to(tokens, a, pre_mix, norm_weight, {nullptr, &layer_input}, next, out, ws, stream);
}

void Ops::boundary(int64_t tokens, const PostArgs& a, const float* pre_mix, NormWeight norm_weight,
                   const Fp8Output& layer_input, Bf16* staging, const HcWeights& next,
                   const Coefficients& out, Workspace ws, Stream stream) const {
  boundary_to(tokens, a, pre_mix, norm_weight, {staging, &layer_input}, next, out, ws, stream);
}

}  // namespace mhc
