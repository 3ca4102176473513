// The kernels of mhc._C: prenorm_gemm, coefficients, input_path, post, post_pre, boundary, head.
// Each checks its arrays (arrays.hpp), then runs the CPU backend (all arrays on the CPU, fp32) or
// the CUDA kernels (all on one CUDA device, launched on `stream`) through the adapter that the
// torch ops share (launch.hpp: the same launchers and kernel configuration). Thin: the work is the
// library's.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "arrays.hpp"
#include "bindings.hpp"
#include "launch.hpp"
#include "launch_head.hpp"
#include "mhc/core/config.hpp"
#include "mhc/core/error.hpp"
#include "mhc/core/workspace.hpp"
#if MHC_WITH_CUDA
#include <cuda_runtime_api.h>

#include "mhc/cuda/check.hpp"
#endif

namespace nb = nanobind;
using namespace nb::literals;

namespace mhc::python {

namespace {

// Makes the arrays' device current for the launches of one call, and restores the caller's.
class DeviceScope {
 public:
  explicit DeviceScope(const Device& device) {
    if (!device.cuda) return;
#if MHC_WITH_CUDA
    MHC_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device.id) MHC_CUDA_CHECK(cudaSetDevice(device.id));
    changed_ = previous_ != device.id;
#else
    fail("the arrays are on a CUDA device, but mhc._C was built without the CUDA backend");
#endif
  }
  ~DeviceScope() {
#if MHC_WITH_CUDA
    if (changed_) cudaSetDevice(previous_);
#endif
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = 0;
  bool changed_ = false;
};

launch::Target target(const Device& device, uintptr_t stream) {
  return device.cuda ? launch::Target{true, device.id, stream} : launch::Target{};
}

// The CUDA kernels' shape limits, as ValueError before anything runs.
void check_cuda_shape(const Device& device, const MhcParams& p) {
  if (!device.cuda) return;
  if (p.n != kCudaStreams[0] && p.n != kCudaStreams[1]) {
    fail("residual: the CUDA kernels support n = 2 or 4 streams, got " + std::to_string(p.n));
  }
  if (p.hidden % kCudaHiddenMultiple != 0) {
    fail("residual: the CUDA kernels need C (the last dimension) to be a multiple of 64, got " +
         std::to_string(p.hidden));
  }
}

Projection parse_projection(const std::string& projection) {
  if (projection == "tf32") return Projection::tf32;
  if (projection == "fp32") return Projection::fp32;
  fail("projection: expected \"tf32\" or \"fp32\", got \"" + projection + "\"");
}

launch::NormWeight weight_of(const NormWeightArg& w) {
  if (!w.arg) return {};
  return {w.arg->data(), w.is_bf16, w.arg->name};
}

launch::Scratch scratch_of(const Checked& ws) { return {ws.data(), ws.bytes()}; }

// The scratch of a bf16 norm weight on CUDA (the only use of input_path's workspace).
launch::Scratch weight_scratch(const NormWeightArg& w, const Device& device, nb::handle workspace) {
  if (!w.arg || !w.is_bf16 || !device.cuda || workspace.is_none()) return {};
  const Checked ws = check("workspace", workspace, DType::u8, {-1});
  same_device({&*w.arg, &ws});
  return scratch_of(ws);
}

// Runs `launch` with the GIL released; the adapter's argument errors become ValueError.
template <typename F>
void run(F&& launch) {
  try {
    nb::gil_scoped_release release;
    launch();
  } catch (const launch::ArgumentError& e) {
    fail(e.what());
  }
}

void prenorm_gemm(nb::handle x, nb::handle fn, nb::handle out, nb::handle sqrsum, int num_splits,
                  uintptr_t stream) {
  const Checked xa = check("x", x, DType::bf16, {-1, -1});
  const int64_t M = extent(xa, 0), K = extent(xa, 1);
  const Checked fa = check("fn", fn, DType::f32, {-1, K});
  const int64_t N = extent(fa, 0);
  if (num_splits < 1) fail("num_splits: must be >= 1, got " + std::to_string(num_splits));
  const Checked oa = check("out", out, DType::f32, {num_splits, M, N});
  const Checked sa = check("sqrsum", sqrsum, DType::f32, {num_splits, M});
  try {
    check_prenorm_gemm_shape(M, N, K, num_splits);
  } catch (const Error& e) {
    fail(e.what());
  }
  const Device device = same_device({&xa, &fa, &oa, &sa});
  for (const Checked* input : {&xa, &fa}) {
    require_disjoint(oa, *input);
    require_disjoint(sa, *input);
  }
  require_disjoint(oa, sa);
  DeviceScope scope(device);
  run([&] {
    launch::prenorm_gemm(M, N, K, num_splits, xa.bf16(), fa.f32(), oa.f32_out(), sa.f32_out(),
                         target(device, stream));
  });
}

// The streams [T, n, C]: T, n, C.
struct Streams {
  Checked arg;
  int64_t tokens, n, hidden;
};
Streams check_streams(const char* name, nb::handle array) {
  Checked a = check(name, array, DType::bf16, {-1, -1, -1});
  return {a, extent(a, 0), extent(a, 1), extent(a, 2)};
}

void coefficients(nb::handle residual, nb::handle fn, nb::handle hc_scale, nb::handle hc_base,
                  nb::handle pre, nb::handle post, nb::handle comb, nb::handle workspace,
                  double rms_eps, double pre_eps, double sinkhorn_eps, double post_mult,
                  int sinkhorn_iters, const std::string& projection, uintptr_t stream,
                  bool batch_invariant, uintptr_t fork_from) {
  const Streams s = check_streams("residual", residual);
  const int64_t T = s.tokens, n = s.n, nmix = n * (n + 2);
  const MhcParams p = make_params(s.hidden, n, {rms_eps, pre_eps, sinkhorn_eps, std::nullopt},
                                  post_mult, sinkhorn_iters);
  const Projection proj = parse_projection(projection);
  const Checked fa = check("fn", fn, DType::f32, {nmix, n * s.hidden});
  const Checked scale = check("hc_scale", hc_scale, DType::f32, {3});
  const Checked base = check("hc_base", hc_base, DType::f32, {nmix});
  const Checked pa = check("pre", pre, DType::f32, {T, n});
  const Checked qa = check("post", post, DType::f32, {T, n});
  const Checked ca = check("comb", comb, DType::f32, {T, n, n});
  const Checked ws = check("workspace", workspace, DType::u8, {-1});
  const Device device = same_device({&s.arg, &fa, &scale, &base, &pa, &qa, &ca, &ws});
  for (const Checked* output : {&pa, &qa, &ca}) {
    for (const Checked* other : {&s.arg, &fa, &scale, &base, &ws})
      require_disjoint(*output, *other);
  }
  require_disjoint(pa, qa);
  require_disjoint(pa, ca);
  require_disjoint(qa, ca);
  check_cuda_shape(device, p);
  DeviceScope scope(device);
  run([&] {
    launch::coefficients(
        p, T, s.arg.bf16(), {.fn = fa.f32(), .scale = scale.f32(), .base = base.f32()},
        {.pre = pa.f32_out(), .post = qa.f32_out(), .comb = ca.f32_out()}, scratch_of(ws),
        {proj, batch_invariant, fork_from}, target(device, stream));
  });
}

void input_path(nb::handle residual, nb::handle pre_mix, nb::handle norm_weight,
                nb::handle layer_input, double norm_eps, uintptr_t stream, nb::handle workspace) {
  const Streams s = check_streams("residual", residual);
  const int64_t T = s.tokens, n = s.n;
  const MhcParams p =
      make_params(s.hidden, n, {std::nullopt, std::nullopt, std::nullopt, norm_eps});
  const Checked pm = check("pre_mix", pre_mix, DType::f32, {T, n});
  const NormWeightArg w = check_norm_weight("norm_weight", norm_weight, s.hidden);
  const Checked out = check("layer_input", layer_input, DType::bf16, {T, s.hidden});
  const Device device =
      w.arg ? same_device({&s.arg, &pm, &out, &*w.arg}) : same_device({&s.arg, &pm, &out});
  for (const Checked* input : {&s.arg, &pm}) require_disjoint(out, *input);
  if (w.arg) require_disjoint(out, *w.arg);
  check_cuda_shape(device, p);
  const launch::Scratch scr = weight_scratch(w, device, workspace);
  DeviceScope scope(device);
  run([&] {
    launch::input_path(p, T, s.arg.bf16(), pm.f32(), weight_of(w), out.bf16_out(), scr,
                       target(device, stream));
  });
}

// What post and post_pre share: the checked arrays of this site's post.
struct CheckedPost {
  Streams x;
  Checked f, post, comb, x_next;
  MhcParams params;
  mhc::PostArgs inputs() const {
    return {.sublayer_out = f.bf16(),
            .residual = x.arg.bf16(),
            .post = post.f32(),
            .comb = comb.f32(),
            .residual_next = x_next.bf16_out()};
  }
};
CheckedPost check_post(nb::handle sublayer_out, nb::handle residual, nb::handle post,
                       nb::handle comb, nb::handle residual_next, std::optional<double> norm_eps) {
  const Streams s = check_streams("residual", residual);
  const int64_t T = s.tokens, n = s.n;
  CheckedPost a{s,
                check("sublayer_out", sublayer_out, DType::bf16, {T, s.hidden}),
                check("post", post, DType::f32, {T, n}),
                check("comb", comb, DType::f32, {T, n, n}),
                check("residual_next", residual_next, DType::bf16, {T, n, s.hidden}),
                make_params(s.hidden, n, {std::nullopt, std::nullopt, std::nullopt, norm_eps})};
  for (const Checked* input : {&a.x.arg, &a.f, &a.post, &a.comb}) {
    require_disjoint(a.x_next, *input);
  }
  return a;
}

void post(nb::handle sublayer_out, nb::handle residual, nb::handle post_coef, nb::handle comb,
          nb::handle residual_next, uintptr_t stream) {
  const CheckedPost a = check_post(sublayer_out, residual, post_coef, comb, residual_next, {});
  const Device device = same_device({&a.x.arg, &a.f, &a.post, &a.comb, &a.x_next});
  check_cuda_shape(device, a.params);
  DeviceScope scope(device);
  run([&] { launch::post(a.params, a.x.tokens, a.inputs(), target(device, stream)); });
}

void post_pre(nb::handle sublayer_out, nb::handle residual, nb::handle post_coef, nb::handle comb,
              nb::handle next_pre_mix, nb::handle next_norm_weight, nb::handle residual_next,
              nb::handle next_layer_input, double norm_eps, uintptr_t stream,
              nb::handle workspace) {
  const CheckedPost a =
      check_post(sublayer_out, residual, post_coef, comb, residual_next, norm_eps);
  const int64_t T = a.x.tokens;
  const Checked pm = check("next_pre_mix", next_pre_mix, DType::f32, {T, a.x.n});
  const NormWeightArg w = check_norm_weight("next_norm_weight", next_norm_weight, a.x.hidden);
  const Checked out = check("next_layer_input", next_layer_input, DType::bf16, {T, a.x.hidden});
  const Device device =
      w.arg ? same_device({&a.x.arg, &a.f, &a.post, &a.comb, &a.x_next, &pm, &out, &*w.arg})
            : same_device({&a.x.arg, &a.f, &a.post, &a.comb, &a.x_next, &pm, &out});
  for (const Checked* other : {&a.x.arg, &a.f, &a.post, &a.comb, &a.x_next, &pm}) {
    require_disjoint(out, *other);
  }
  require_disjoint(a.x_next, pm);
  if (w.arg) {
    require_disjoint(out, *w.arg);
    require_disjoint(a.x_next, *w.arg);
  }
  check_cuda_shape(device, a.params);
  const launch::Scratch scr = weight_scratch(w, device, workspace);
  DeviceScope scope(device);
  run([&] {
    launch::post_pre(a.params, T, a.inputs(), pm.f32(), weight_of(w), out.bf16_out(), scr,
                     target(device, stream));
  });
}

// A whole V4.1 boundary: the previous site's post (residual -> residual_next), the next site's
// input path on residual_next with the carried pre_mix, and its coefficients: on the CPU the
// three backend functions in turn, on CUDA one prenorm_coefficients call with the previous post,
// which the kernel plan runs as one launch where it can (launch.hpp).
void boundary(nb::handle sublayer_out, nb::handle residual, nb::handle post_coef, nb::handle comb,
              nb::handle pre_mix, nb::handle norm_weight, nb::handle fn, nb::handle hc_scale,
              nb::handle hc_base, nb::handle residual_next, nb::handle layer_input,
              nb::handle next_pre_mix, nb::handle next_post, nb::handle next_comb,
              nb::handle workspace, double rms_eps, double pre_eps, double sinkhorn_eps,
              double post_mult, int sinkhorn_iters, double norm_eps, const std::string& projection,
              uintptr_t stream, bool batch_invariant) {
  const CheckedPost a =
      check_post(sublayer_out, residual, post_coef, comb, residual_next, norm_eps);
  const int64_t T = a.x.tokens, n = a.x.n, nmix = n * (n + 2);
  const MhcParams p = make_params(a.x.hidden, n, {rms_eps, pre_eps, sinkhorn_eps, norm_eps},
                                  post_mult, sinkhorn_iters);
  const Projection proj = parse_projection(projection);
  const Checked pm = check("pre_mix", pre_mix, DType::f32, {T, n});
  const NormWeightArg w = check_norm_weight("norm_weight", norm_weight, a.x.hidden);
  const Checked fa = check("fn", fn, DType::f32, {nmix, n * a.x.hidden});
  const Checked scale = check("hc_scale", hc_scale, DType::f32, {3});
  const Checked base = check("hc_base", hc_base, DType::f32, {nmix});
  const Checked li = check("layer_input", layer_input, DType::bf16, {T, a.x.hidden});
  const Checked npm = check("next_pre_mix", next_pre_mix, DType::f32, {T, n});
  const Checked npost = check("next_post", next_post, DType::f32, {T, n});
  const Checked ncomb = check("next_comb", next_comb, DType::f32, {T, n, n});
  const Checked ws = check("workspace", workspace, DType::u8, {-1});
  std::vector<const Checked*> all = {&a.x.arg, &a.f,  &a.post, &a.comb, &a.x_next, &pm,    &fa,
                                     &scale,   &base, &li,     &npm,    &npost,    &ncomb, &ws};
  if (w.arg) all.push_back(&*w.arg);
  Device device = same_device({&a.x.arg, &ws});
  for (const Checked* arg : all) device = same_device({&a.x.arg, arg});
  const Checked* outputs[] = {&a.x_next, &li, &npm, &npost, &ncomb};
  for (const Checked* o : outputs) {
    for (const Checked* other : all) {
      if (other != o) require_disjoint(*o, *other);
    }
  }
  check_cuda_shape(device, p);
  DeviceScope scope(device);
  run([&] {
    launch::boundary(p, T, a.inputs(), pm.f32(), weight_of(w), li.bf16_out(),
                     {.fn = fa.f32(), .scale = scale.f32(), .base = base.f32()},
                     {.pre = npm.f32_out(), .post = npost.f32_out(), .comb = ncomb.f32_out()},
                     scratch_of(ws), {proj, batch_invariant, 0}, target(device, stream));
  });
}

// The head collapse (docs/head.md), as torch.ops.mhc.head_out.
void head(nb::handle residual, nb::handle fn, nb::handle hc_scale, nb::handle hc_base,
          nb::handle norm_weight, nb::handle out, double rms_eps, double hc_eps,
          std::optional<double> norm_eps, uintptr_t stream) {
  const Streams s = check_streams("residual", residual);
  const int64_t T = s.tokens, n = s.n;
  const MhcParams p =
      make_params(s.hidden, n, {rms_eps, hc_eps, std::nullopt, norm_eps.value_or(rms_eps)});
  const Checked fa = check("fn", fn, DType::f32, {n, n * s.hidden});
  const Checked scale = check("hc_scale", hc_scale, DType::f32, {1});
  const Checked base = check("hc_base", hc_base, DType::f32, {n});
  const NormWeightArg w = check_norm_weight("norm_weight", norm_weight, s.hidden);
  const Checked oa = check("out", out, DType::bf16, {T, s.hidden});
  const Device device = w.arg ? same_device({&s.arg, &fa, &scale, &base, &oa, &*w.arg})
                              : same_device({&s.arg, &fa, &scale, &base, &oa});
  for (const Checked* input : {&s.arg, &fa, &scale, &base}) require_disjoint(oa, *input);
  if (w.arg) require_disjoint(oa, *w.arg);
  check_cuda_shape(device, p);
  DeviceScope scope(device);
  run([&] {
    launch::head(p, T, s.arg.bf16(), {fa.f32(), base.f32(), scale.f32()}, weight_of(w),
                 oa.bf16_out(), target(device, stream));
  });
}

}  // namespace

void bind_ops(nb::module_& m) {
  m.def("prenorm_gemm", &prenorm_gemm, "x"_a, "fn"_a, "out"_a, "sqrsum"_a, "num_splits"_a,
        "stream"_a = 0,
        "DeepGEMM tf32_hc_prenorm_gemm: out[s] = x_s @ fn_s^T, sqrsum[s] = sum of x_s^2 over split "
        "s of K (K/64 blocks dealt out in order, the first K/64 % S splits one more). x [M,K] "
        "bf16, fn [N,K] f32, out [S,M,N] f32, sqrsum [S,M] f32. TF32 on CUDA, fp32 on the CPU.");
  m.def("coefficients", &coefficients, "residual"_a, "fn"_a, "hc_scale"_a, "hc_base"_a, "pre"_a,
        "post"_a, "comb"_a, "workspace"_a, "rms_eps"_a, "pre_eps"_a, "sinkhorn_eps"_a,
        "post_mult"_a, "sinkhorn_iters"_a, "projection"_a, "stream"_a = 0, nb::kw_only(),
        "batch_invariant"_a = false, "fork_from"_a = 0,
        "The coefficient path: pre (next_pre_mix in V4.1) [T,n], post [T,n], comb [T,n,n] from "
        "residual [T,n,C] bf16, fn [n(n+2), nC], hc_scale [3], hc_base [n(n+2)] (all f32). "
        "batch_invariant: a token's bits do not depend on T (CUDA; the CPU backend always is). "
        "fork_from: the stream that `stream` (the overlap's side stream) has just waited for: the "
        "launch takes the plan's side-stream CTA count and, while capturing, depends on main's "
        "last nodes alone where the side stream's other dependencies are theirs already (the "
        "same bits either way).");
  m.def("input_path", &input_path, "residual"_a, "pre_mix"_a, "norm_weight"_a.none(),
        "layer_input"_a, "norm_eps"_a, "stream"_a = 0, nb::kw_only(), "workspace"_a = nb::none(),
        "layer_input [T,C] = bf16(rmsnorm(bf16(sum_j pre_mix[:,j] residual[:,j])) * norm_weight); "
        "norm_weight None: the plain collapse. A bf16 norm_weight on CUDA needs workspace=.");
  m.def("post", &post, "sublayer_out"_a, "residual"_a, "post"_a, "comb"_a, "residual_next"_a,
        "stream"_a = 0,
        "residual_next[:,k] = bf16(post[:,k] sublayer_out + sum_j comb[:,j,k] residual[:,j]); "
        "residual_next must not overlap residual.");
  m.def("post_pre", &post_pre, "sublayer_out"_a, "residual"_a, "post"_a, "comb"_a, "next_pre_mix"_a,
        "next_norm_weight"_a.none(), "residual_next"_a, "next_layer_input"_a, "norm_eps"_a,
        "stream"_a = 0, nb::kw_only(), "workspace"_a = nb::none(),
        "post, then the next site's input path on residual_next with next_pre_mix (one launch on "
        "CUDA).");
  m.def("boundary", &boundary, "sublayer_out"_a, "residual"_a, "post"_a, "comb"_a, "pre_mix"_a,
        "norm_weight"_a.none(), "fn"_a, "hc_scale"_a, "hc_base"_a, "residual_next"_a,
        "layer_input"_a, "next_pre_mix"_a, "next_post"_a, "next_comb"_a, "workspace"_a, "rms_eps"_a,
        "pre_eps"_a, "sinkhorn_eps"_a, "post_mult"_a, "sinkhorn_iters"_a, "norm_eps"_a,
        "projection"_a, "stream"_a = 0, nb::kw_only(), "batch_invariant"_a = false,
        "A V4.1 boundary: post (residual -> residual_next), the next input path with the carried "
        "pre_mix (layer_input), and the coefficients of residual_next (next_pre_mix, next_post, "
        "next_comb). The bits of post_pre followed by coefficients, except where the kernel plan "
        "runs the fused boundary kernel (then within the TF32 tier; docs/kernels.md).");
  m.def("head", &head, "residual"_a, "fn"_a, "hc_scale"_a, "hc_base"_a, "norm_weight"_a.none(),
        "out"_a, "rms_eps"_a, "hc_eps"_a, "norm_eps"_a.none() = nb::none(), "stream"_a = 0,
        "The head collapse (docs/head.md): out [T,C] bf16 = bf16(sum_j w_j residual[:,j]) with w = "
        "sigmoid(rms-normalised (fn . residual) * hc_scale + hc_base) + hc_eps; fn [n, nC], "
        "hc_scale [1], hc_base [n] f32; norm_weight [C] f32/bf16: the final RMSNorm fused "
        "(norm_eps, None: rms_eps); None: the collapse alone.");
}

}  // namespace mhc::python
