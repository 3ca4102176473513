// The C++ API for engines (mhc/api.hpp): each op gives the bits of the launchers it stands for,
// resolved from the same plan; a bf16 norm weight the bits of its fp32 widening; the overlap's
// side launch the bits of the plain one; and bad arguments are refused with the argument named.
#include "mhc/api.hpp"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "gpu_test_util.hpp"
#include "mhc/core/error.hpp"
#include "mhc/cuda/check.hpp"

namespace mhc {
namespace {

using test::DeviceCoefficients;
using test::FoldCase;
using test::FoldOutputs;
using test::poisoned;
using test::same_finite_bits;
using test::to_device;
using test::to_host;

// A zeroed workspace for up to `tokens` tokens, sized by the API.
struct DeviceWorkspace {
  cuda::DeviceBuffer<uint8_t> memory;
  Workspace ws;
  DeviceWorkspace(const MhcParams& p, int64_t tokens) : memory(size_t(workspace_bytes(p, tokens))) {
    memory.fill_bytes(0);
    ws = {memory.get(), int64_t(memory.size())};
  }
};

HcWeights weights_of(const test::DeviceWeights& w) {
  return {w.hc_fn.get(), w.hc_scale.get(), w.hc_base.get()};
}
Coefficients outputs_of(const DeviceCoefficients& c) {
  return {c.pre.get(), c.post.get(), c.comb.get()};
}
NormWeight fp32(const cuda::DeviceBuffer<float>& w) { return {w.get(), false}; }

void expect_same_site(const FoldOutputs& want, const FoldOutputs& got, const std::string& label) {
  EXPECT_TRUE(same_finite_bits(to_host(want.layer_input), to_host(got.layer_input))) << label;
  EXPECT_TRUE(same_finite_bits(to_host(want.coef.pre), to_host(got.coef.pre))) << label << " pre";
  EXPECT_TRUE(same_finite_bits(to_host(want.coef.post), to_host(got.coef.post))) << label;
  EXPECT_TRUE(same_finite_bits(to_host(want.coef.comb), to_host(got.coef.comb))) << label;
}

// pre (V4.1: the carried pre_mix; V4: this site's own pre) against input_path and the coefficient
// launch resolved from the same plan; and with the norm weight in bf16.
TEST(CppApi, PreEqualsTheLaunchers) {
  MHC_SKIP_WITHOUT_GPU();
  const KernelPlan& plan = test::device_plan();
  for (int64_t m : {1, 17, 300}) {
    const MhcParams p = test::small_params(4, 5120);
    FoldCase k(p, m, 21000 + uint64_t(m));
    const Ops ops(plan, p);
    DeviceWorkspace ws(p, m);
    cuda::SiteWorkspace site_ws(p, ws.ws.data, ws.ws.bytes);
    const LaunchTuning t = ops.tuning(m);
    for (bool carried : {true, false}) {
      FoldOutputs want(p, m), got(p, m);
      const float* pre_mix = carried ? k.pre_mix.get() : want.coef.pre.get();
      if (carried) {
        cuda::input_path(p, m, k.x_prev.get(), pre_mix, k.w.norm_weight.get(),
                         want.layer_input.get(), {nullptr, t.pdl});
      }
      cuda::prenorm_coefficients(p, m, want.coef.buffers(k.x_prev, k.w), t, site_ws, nullptr);
      if (!carried) {
        cuda::input_path(p, m, k.x_prev.get(), pre_mix, k.w.norm_weight.get(),
                         want.layer_input.get(), {nullptr, t.pdl});
      }
      ops.pre(m, k.x_prev.get(), weights_of(k.w), fp32(k.w.norm_weight),
              carried ? k.pre_mix.get() : nullptr, got.layer_input.get(), outputs_of(got.coef),
              ws.ws, nullptr);
      MHC_CUDA_CHECK(cudaDeviceSynchronize());
      expect_same_site(want, got, test::case_name(p, m, 1.0) + (carried ? " V4.1" : " V4"));
    }
    // A bf16 norm weight: the bits of its exact fp32 widening.
    std::vector<Bf16> bf16(size_t(p.hidden));
    std::vector<float> widened(bf16.size());
    for (size_t i = 0; i < bf16.size(); ++i) {
      bf16[i] = float_to_bf16(k.c.weights.norm_weight[i]);
      widened[i] = bf16_to_float(bf16[i]);
    }
    const auto bf16_d = to_device(bf16);
    const auto widened_d = to_device(widened);
    FoldOutputs a(p, m), b(p, m);
    ops.pre(m, k.x_prev.get(), weights_of(k.w), fp32(widened_d), k.pre_mix.get(),
            a.layer_input.get(), outputs_of(a.coef), ws.ws, nullptr);
    ops.pre(m, k.x_prev.get(), weights_of(k.w), {bf16_d.get(), true}, k.pre_mix.get(),
            b.layer_input.get(), outputs_of(b.coef), ws.ws, nullptr);
    MHC_CUDA_CHECK(cudaDeviceSynchronize());
    expect_same_site(a, b, test::case_name(p, m, 1.0) + " bf16 norm weight");
  }
}

// post, post_pre and boundary against the launchers; coefficients on a side stream against the
// plain launch.
TEST(CppApi, PostPostPreBoundaryAndCoefficientsEqualTheLaunchers) {
  MHC_SKIP_WITHOUT_GPU();
  const KernelPlan& plan = test::device_plan();
  const MhcParams p = test::small_params(4, 4096);
  for (int64_t m : {3, 64, 1000}) {
    FoldCase k(p, m, 22000 + uint64_t(m));
    const Ops ops(plan, p);
    DeviceWorkspace ws(p, m);
    cuda::SiteWorkspace site_ws(p, ws.ws.data, ws.ws.bytes);
    const LaunchTuning t = ops.tuning(m);
    const std::string label = test::case_name(p, m, 1.0);
    FoldOutputs want(p, m), got(p, m);
    const PostArgs post{k.f.get(), k.x_prev.get(), k.prev_post.get(), k.prev_comb.get(),
                        got.x.get()};
    // post_pre
    const cuda::NextInput next{k.pre_mix.get(), k.w.norm_weight.get(), want.layer_input.get()};
    cuda::post(p, m, k.x_prev.get(), k.prev_post.get(), k.prev_comb.get(), k.f.get(), want.x.get(),
               &next, t, nullptr);
    ops.post_pre(m, post, k.pre_mix.get(), fp32(k.w.norm_weight), got.layer_input.get(), ws.ws,
                 nullptr);
    MHC_CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_TRUE(same_finite_bits(to_host(want.x), to_host(got.x))) << label << " post_pre";
    EXPECT_TRUE(same_finite_bits(to_host(want.layer_input), to_host(got.layer_input))) << label;
    // post
    auto plain_want = poisoned<Bf16>(size_t(m * p.k())), plain = poisoned<Bf16>(size_t(m * p.k()));
    cuda::post(p, m, k.x_prev.get(), k.prev_post.get(), k.prev_comb.get(), k.f.get(),
               plain_want.get(), nullptr, t, nullptr);
    ops.post(m, {k.f.get(), k.x_prev.get(), k.prev_post.get(), k.prev_comb.get(), plain.get()},
             nullptr);
    MHC_CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_TRUE(same_finite_bits(to_host(plain_want), to_host(plain))) << label << " post";
    // boundary
    FoldOutputs fused(p, m), by_ops(p, m);
    const cuda::InputPathBuffers input{k.pre_mix.get(), k.w.norm_weight.get(),
                                       fused.layer_input.get()};
    const cuda::PreviousPost previous{k.x_prev.get(), k.prev_post.get(), k.prev_comb.get(),
                                      k.f.get(), fused.x.get()};
    cuda::prenorm_coefficients(p, m, fused.coef.buffers(fused.x, k.w), t, site_ws, nullptr, &input,
                               &previous);
    MHC_CUDA_CHECK(cudaDeviceSynchronize());
    const PostArgs into_ops{k.f.get(), k.x_prev.get(), k.prev_post.get(), k.prev_comb.get(),
                            by_ops.x.get()};
    ops.boundary(m, into_ops, k.pre_mix.get(), fp32(k.w.norm_weight), by_ops.layer_input.get(),
                 weights_of(k.w), outputs_of(by_ops.coef), ws.ws, nullptr);
    MHC_CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_TRUE(same_finite_bits(to_host(fused.x), to_host(by_ops.x))) << label << " boundary";
    expect_same_site(fused, by_ops, label + " boundary");
    // coefficients: plain, and as the overlap's side launch (the same bits on fewer CTAs)
    cudaStream_t main = nullptr, side = nullptr;
    MHC_CUDA_CHECK(cudaStreamCreateWithFlags(&main, cudaStreamNonBlocking));
    MHC_CUDA_CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    DeviceCoefficients on_main(p, m), on_side(p, m);
    ops.coefficients(m, k.x_prev.get(), weights_of(k.w), outputs_of(on_main), ws.ws, main);
    MHC_CUDA_CHECK(cudaDeviceSynchronize());
    ops.coefficients(m, k.x_prev.get(), weights_of(k.w), outputs_of(on_side), ws.ws, side, main);
    MHC_CUDA_CHECK(cudaDeviceSynchronize());
    MHC_CUDA_CHECK(cudaStreamDestroy(main));
    MHC_CUDA_CHECK(cudaStreamDestroy(side));
    EXPECT_TRUE(same_finite_bits(to_host(on_main.comb), to_host(on_side.comb))) << label;
    EXPECT_TRUE(same_finite_bits(to_host(on_main.pre), to_host(on_side.pre))) << label;
  }
}

std::string error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// Bad arguments are refused before any launch, the argument named; zero tokens is a no-op.
TEST(CppApi, RefusesBadArgumentsByName) {
  MHC_SKIP_WITHOUT_GPU();
  const KernelPlan& plan = test::device_plan();
  const MhcParams p = test::small_params(4, 4096);
  const int64_t m = 4;
  FoldCase k(p, m, 23000);
  const Ops ops(plan, p);
  DeviceWorkspace ws(p, m);
  FoldOutputs out(p, m);
  const auto pre = [&](const Bf16* residual, Bf16* layer_input, Workspace w, int64_t tokens) {
    return error_of([&] {
      ops.pre(tokens, residual, weights_of(k.w), fp32(k.w.norm_weight), k.pre_mix.get(),
              layer_input, outputs_of(out.coef), w, nullptr);
    });
  };
  EXPECT_EQ(pre(k.x_prev.get(), out.layer_input.get(), ws.ws, m), "no error");
  EXPECT_EQ(pre(nullptr, out.layer_input.get(), ws.ws, m), "mhc::Ops::pre: residual is null");
  EXPECT_EQ(pre(nullptr, nullptr, {}, 0), "no error") << "zero tokens";
  EXPECT_NE(pre(k.x_prev.get(), k.x_prev.get(), ws.ws, m).find("layer_input overlaps residual"),
            std::string::npos);
  EXPECT_NE(pre(k.x_prev.get(), out.layer_input.get(), {}, m).find("workspace is null"),
            std::string::npos);
  const Workspace small{ws.ws.data, 1024};  // not even one 128-token block
  EXPECT_NE(pre(k.x_prev.get(), out.layer_input.get(), small, m).find("serve 0 tokens"),
            std::string::npos);
  EXPECT_NE(pre(k.x_prev.get(), out.layer_input.get(), ws.ws, -1).find("token count -1"),
            std::string::npos);
  // post: residual_next over residual.
  EXPECT_NE(error_of([&] {
              ops.post(
                  m,
                  {k.f.get(), k.x_prev.get(), k.prev_post.get(), k.prev_comb.get(), k.x_prev.get()},
                  nullptr);
            }).find("residual_next overlaps residual"),
            std::string::npos);
  // Shapes the kernels do not take, and a plan of no real device.
  EXPECT_THROW(Ops(plan, test::small_params(3, 4096)), Error);
  EXPECT_THROW(Ops(plan, test::small_params(4, 4000)), Error);
  KernelPlan simulated = plan;
  simulated.device.reset();
  const Ops nowhere(simulated, p);
  EXPECT_NE(error_of([&] {
              nowhere.post(
                  m, {k.f.get(), k.x_prev.get(), k.prev_post.get(), k.prev_comb.get(), out.x.get()},
                  nullptr);
            }).find("simulated"),
            std::string::npos);
}

TEST(CppApi, DevicePlanIsTheDevicesAndWorkspaceBytesTheLayouts) {
  MHC_SKIP_WITHOUT_GPU();
  EXPECT_TRUE(cuda_available());
  int device = -1;
  MHC_CUDA_CHECK(cudaGetDevice(&device));
  const KernelPlan plan = device_plan(device, KernelConfig::parse(R"({"projection": "fp32"})"));
  EXPECT_EQ(plan.device, device);
  EXPECT_EQ(plan.projection, Projection::fp32);
  const MhcParams p = test::small_params(4, 7168);
  EXPECT_EQ(Ops(plan, p).tuning(8).projection, Projection::fp32);
  EXPECT_EQ(workspace_bytes(p, 300), workspace_layout(p, 300).bytes);
  EXPECT_THROW(device_plan(1 << 20), Error);
  EXPECT_THROW(device_plan(-1), Error);
  // A refused call leaves no CUDA error behind for the caller's next check.
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

}  // namespace
}  // namespace mhc
