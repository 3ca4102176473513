// The CUDA side of what engines call through mhc._C: the raw split partials of the prenorm GEMM,
// the four separate epsilons, the coefficient path on a caller-owned workspace, and the bf16
// weight widening, against the float64 reference on fresh random inputs with poisoned outputs.
// Skips cleanly without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <vector>

#include "gpu_test_util.hpp"
#include "mhc/core/error.hpp"
#include "mhc/core/workspace.hpp"
#include "mhc/cpu/reference.hpp"
#include "mhc/cuda/check.hpp"

namespace mhc {
namespace {

using test::poisoned;
using test::to_device;
using test::to_host;

void check_prenorm_gemm(int64_t tokens, int64_t nmix, int64_t k, int splits, uint64_t seed) {
  test::TestRng rng(seed);
  const std::vector<Bf16> x = test::random_bf16(size_t(tokens * k), rng, 1.0);
  std::vector<float> fn(size_t(nmix * k));
  for (float& v : fn) v = float(rng.normal());
  const auto dx = to_device(x);
  const auto dfn = to_device(fn);
  auto out = poisoned<float>(size_t(splits * tokens * nmix));
  auto sqrsum = poisoned<float>(size_t(splits * tokens));
  cuda::prenorm_gemm(tokens, nmix, k, splits, dx.get(), dfn.get(), out.get(), sqrsum.get(),
                     {nullptr, false});
  const ref::SplitPartials r = ref::prenorm_gemm(tokens, nmix, k, splits, x.data(), fn.data());
  const std::vector<float> got = to_host(out), got_sq = to_host(sqrsum);
  const std::string label = "M=" + std::to_string(tokens) + " N=" + std::to_string(nmix) +
                            " K=" + std::to_string(k) + " S=" + std::to_string(splits);
  // TF32 rounds fn (10-bit mantissa); the sums of squares are fp32.
  MHC_EXPECT_CLOSE(compare(got.data(), r.out.data(), int64_t(got.size())),
                   kTf32Tolerances.coefficients, label + " out");
  MHC_EXPECT_CLOSE(compare(got_sq.data(), r.sqrsum.data(), int64_t(got_sq.size())), 1e-5,
                   label + " sqrsum");
}

TEST(CudaPrenormGemm, SplitPartialsMatchTheReference) {
  MHC_SKIP_WITHOUT_GPU();
  uint64_t seed = 5000;
  for (int64_t nmix : {8, 24, 32}) {
    for (int64_t tokens : {1, 17, 100}) {
      for (int splits : {1, 3, 16}) check_prenorm_gemm(tokens, nmix, 20480, splits, ++seed);
    }
  }
  check_prenorm_gemm(5, 24, 640, 13, ++seed);  // more splits than 64-blocks: empty splits are 0
  check_prenorm_gemm(4096, 24, 7168, 16, ++seed);
}

// Coefficients with four different epsilons on a caller-owned workspace, twice (different token
// counts on the same workspace), against the reference.
TEST(CudaSeparateEpsilons, CoefficientsOnCallerWorkspaceMatchTheReference) {
  MHC_SKIP_WITHOUT_GPU();
  MhcParams p = test::small_params(4, 5120);
  p.rms_eps_override = 1e-3;
  p.pre_eps_override = 1e-2;
  p.sinkhorn_eps_override = 3e-2;
  const WorkspaceLayout layout = workspace_layout(p, 300);
  cuda::DeviceBuffer<uint8_t> memory(size_t(layout.bytes));
  memory.fill_bytes(0);
  cuda::SiteWorkspace ws(p, memory.get(), layout.bytes);
  uint64_t seed = 6000;
  for (int64_t tokens : {3, 300, 16, 1}) {
    const test::SiteCase c = test::random_site_case(p, tokens, ++seed, 0.5);
    const test::DeviceWeights w(c.weights);
    const auto x = to_device(c.x);
    test::DeviceCoefficients out(p, tokens);
    cuda::prenorm_coefficients(p, tokens, out.buffers(x, w), test::tuning(p, tokens), ws, nullptr);
    ref::SiteResult r;
    ref::coefficients(p, tokens, c.x.data(), c.weights.view(), r);
    const std::string label = test::case_name(p, tokens, 0.5);
    const double tol = kTf32Tolerances.coefficients;
    MHC_EXPECT_CLOSE(compare(to_host(out.pre).data(), r.pre.data(), tokens * p.n), tol,
                     label + " pre");
    MHC_EXPECT_CLOSE(compare(to_host(out.post).data(), r.post.data(), tokens * p.n), tol,
                     label + " post");
    MHC_EXPECT_CLOSE(compare(to_host(out.comb).data(), r.comb.data(), tokens * p.n * p.n), tol,
                     label + " comb");
  }
}

TEST(CudaSeparateEpsilons, NormEpsReachesInputPathAndFusedPost) {
  MHC_SKIP_WITHOUT_GPU();
  MhcParams p = test::small_params(4, 4096);
  p.norm_eps_override = 0.5;
  p.rms_eps_override = 1e-3;  // must not reach the input path
  const int64_t tokens = 9;
  const test::SiteCase c = test::random_site_case(p, tokens, 6100, 0.5);
  const auto x = to_device(c.x);
  const auto pre_mix = to_device(c.pre_mix);
  const auto norm = to_device(c.weights.norm_weight);
  auto out = poisoned<Bf16>(size_t(tokens * p.hidden));
  const LaunchTuning t = test::tuning(p, tokens);
  cuda::input_path(p, tokens, x.get(), pre_mix.get(), norm.get(), out.get(), {nullptr, t.pdl});
  const std::vector<double> want =
      ref::input_path(p, tokens, c.x.data(), c.pre_mix.data(), c.weights.norm_weight.data());
  MHC_EXPECT_CLOSE(compare(to_host(out).data(), want.data(), tokens * p.hidden),
                   kTf32Tolerances.activations, "input_path norm_eps=0.5");

  // post + the next input path in one launch, with the same norm_eps.
  const auto f = to_device(c.sublayer_out);
  const auto post = to_device(std::vector<float>(size_t(tokens * p.n), 0.7f));
  std::vector<float> comb_host(size_t(tokens * p.n * p.n), 0.1f);
  const auto comb = to_device(comb_host);
  auto x_next = poisoned<Bf16>(size_t(tokens * p.k()));
  auto next_input = poisoned<Bf16>(size_t(tokens * p.hidden));
  const cuda::NextInput next{pre_mix.get(), norm.get(), next_input.get()};
  cuda::post(p, tokens, x.get(), post.get(), comb.get(), f.get(), x_next.get(), &next, t, nullptr);
  const std::vector<Bf16> x_next_host = to_host(x_next);
  const std::vector<double> want_next = ref::input_path(
      p, tokens, x_next_host.data(), c.pre_mix.data(), c.weights.norm_weight.data());
  MHC_EXPECT_CLOSE(compare(to_host(next_input).data(), want_next.data(), tokens * p.hidden),
                   kTf32Tolerances.activations, "post_pre norm_eps=0.5");
}

TEST(CudaWiden, Bf16ToFp32IsExact) {
  MHC_SKIP_WITHOUT_GPU();
  test::TestRng rng(6200);
  const std::vector<Bf16> in = test::random_bf16(5120, rng, 3.0);
  const auto din = to_device(in);
  auto out = poisoned<float>(in.size());
  cuda::widen_bf16(din.get(), int64_t(in.size()), out.get(), {nullptr, false});
  const std::vector<float> got = to_host(out);
  for (size_t i = 0; i < in.size(); ++i) ASSERT_EQ(got[i], bf16_to_float(in[i])) << i;
}

TEST(CudaPrenormGemm, RefusesBadShapes) {
  MHC_SKIP_WITHOUT_GPU();
  const cuda::LaunchTarget plain{nullptr, false};
  EXPECT_THROW(cuda::prenorm_gemm(4, 24, 96, 1, nullptr, nullptr, nullptr, nullptr, plain), Error);
  EXPECT_THROW(cuda::prenorm_gemm(4, 24, 128, 70000, nullptr, nullptr, nullptr, nullptr, plain),
               Error);
  EXPECT_NO_THROW(cuda::prenorm_gemm(0, 24, 128, 2, nullptr, nullptr, nullptr, nullptr, plain));
  MHC_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace
}  // namespace mhc
