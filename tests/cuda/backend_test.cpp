// The CUDA backend as the CLI uses it: whole sites and the whole stack against the float64
// reference, the zero-token no-op, graph timing, and a small "Sanitize" suite meant to be run
// under compute-sanitizer (memcheck, racecheck, synccheck) over every kernel:
//   compute-sanitizer --tool racecheck test_cuda --gtest_filter='Sanitize*'
#include "mhc/core/backend.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "gpu_test_util.hpp"
#include "mhc/cpu/model.hpp"
#include "mhc/cpu/reference.hpp"

namespace mhc {
namespace {

using test::case_name;

std::unique_ptr<Backend> cuda_backend(Projection projection) {
  KernelConfig config;
  config.projection = projection;
  return cuda::make_backend(config);
}

void check_site(Backend& backend, const MhcParams& p, int64_t m, uint64_t seed, double amplitude,
                Projection projection) {
  const test::SiteCase c = test::random_site_case(p, m, seed, amplitude);
  SiteOutputs out = test::poisoned_outputs(p, m);
  backend.run_site(p, c.weights.view(), c.inputs(), out.view());
  const ref::SiteResult want = ref::run_site(p, c.weights.view(), c.inputs());
  const Tolerances tol = projection == Projection::fp32 ? kFp32Tolerances : kTf32Tolerances;
  const std::string label = case_name(p, m, amplitude) + " " + std::string(to_string(projection));
  MHC_EXPECT_CLOSE(compare(out.layer_input.data(), want.layer_input.data(), m * p.hidden),
                   tol.activations, label + " layer_input");
  MHC_EXPECT_CLOSE(compare(out.pre.data(), want.pre.data(), m * p.n), tol.coefficients,
                   label + " pre");
  MHC_EXPECT_CLOSE(compare(out.post.data(), want.post.data(), m * p.n), tol.coefficients,
                   label + " post");
  MHC_EXPECT_CLOSE(compare(out.comb.data(), want.comb.data(), m * p.n * p.n), tol.coefficients,
                   label + " comb");
  MHC_EXPECT_CLOSE(compare(out.x_next.data(), want.x_next.data(), m * p.k()), tol.activations,
                   label + " x_next");
}

TEST(CudaBackend, DescribesTheDevice) {
  MHC_SKIP_WITHOUT_GPU();
  auto backend = cuda_backend(Projection::tf32);
  EXPECT_EQ(backend->name(), "cuda");
  EXPECT_TRUE(backend->capability().has_value());
  std::printf("[ backend  ] %s\n", backend->description().c_str());
}

TEST(CudaBackend, SitesMatchTheReference) {
  MHC_SKIP_WITHOUT_GPU();
  const double amplitudes[] = {1e-3, 1.0, 1e2};
  uint64_t seed = 2000;
  for (Projection projection : {Projection::tf32, Projection::fp32}) {
    auto backend = cuda_backend(projection);
    for (int n : test::built_streams()) {
      for (int hidden : {4096, 5120, 7168}) {
        for (int64_t m : {1, 16, 17, 137}) {
          ++seed;
          check_site(*backend, test::small_params(n, hidden), m, seed, amplitudes[seed % 3],
                     projection);
        }
      }
    }
    check_site(*backend, test::small_params(4, 5120), 4096, ++seed, 1.0, projection);
  }
}

TEST(CudaBackend, ZeroTokensIsANoOp) {
  MHC_SKIP_WITHOUT_GPU();
  auto backend = cuda_backend(Projection::tf32);
  const MhcParams p = test::small_params(4, 5120);
  const test::SiteCase c = test::random_site_case(p, 0, 1, 1.0);
  SiteOutputs out(p, 0);
  EXPECT_NO_THROW(backend->run_site(p, c.weights.view(), c.inputs(), out.view()));
}

TEST(CudaBackend, SameBitsEveryRun) {
  MHC_SKIP_WITHOUT_GPU();
  auto backend = cuda_backend(Projection::tf32);
  const MhcParams p = test::small_params(4, 5120);
  const test::SiteCase c = test::random_site_case(p, 137, 2100, 1.0);
  SiteOutputs first = test::poisoned_outputs(p, 137);
  backend->run_site(p, c.weights.view(), c.inputs(), first.view());
  for (int run = 0; run < 5; ++run) {
    SiteOutputs again = test::poisoned_outputs(p, 137);
    backend->run_site(p, c.weights.view(), c.inputs(), again.view());
    EXPECT_TRUE(test::same_finite_bits(first.pre, again.pre)) << "run " << run;
    EXPECT_TRUE(test::same_finite_bits(first.post, again.post)) << "run " << run;
    EXPECT_TRUE(test::same_finite_bits(first.comb, again.comb)) << "run " << run;
    EXPECT_TRUE(test::same_finite_bits(first.x_next, again.x_next)) << "run " << run;
    EXPECT_TRUE(test::same_finite_bits(first.layer_input, again.layer_input)) << "run " << run;
  }
}

// The whole stack on the device (stand-in sublayer; either schedule) against the
// float64 reference stack. Once two implementations differ in one bf16 rounding of x their later
// roundings decorrelate, so the bound grows like sqrt(sites) (as in the CPU stack test).
void check_stack(const MhcParams& p, int64_t tokens, uint64_t seed, Projection projection,
                 double pre_bound, double out_bound) {
  if (!test::kernels_built_for(p.n)) return;  // n = 2 without -DMHC_KERNELS_N2
  const ModelWeights w = synthetic_model(p, seed);
  const std::vector<Bf16> x0 = synthetic_embeddings(p, tokens, seed + 1);
  auto backend = cuda_backend(projection);
  const StackTrace got = backend->run_stack(w, tokens, x0.data());
  const StackReference want = reference_stack(w, tokens, x0.data());
  ASSERT_EQ(got.x_after_layer.size(), want.x_after_layer.size());
  for (size_t l = 0; l < want.x_after_layer.size(); ++l) {
    const double bound = std::min(4e-2, 5e-3 * std::sqrt(2.0 * double(l + 1)));
    const ErrorStats e = compare(got.x_after_layer[l].data(), want.x_after_layer[l].data(),
                                 int64_t(want.x_after_layer[l].size()));
    std::printf("[ stack    ] %s layer %zu x: %s\n", describe(p).c_str(), l, e.describe().c_str());
    MHC_EXPECT_CLOSE(e, bound, "layer " + std::to_string(l) + " x");
  }
  MHC_EXPECT_CLOSE(compare(got.last_pre.data(), want.last_pre.data(), tokens * p.n), pre_bound,
                   "last_pre");
  MHC_EXPECT_CLOSE(compare(got.output.data(), want.output.data(), tokens * p.hidden), out_bound,
                   "output");
}

TEST(CudaBackend, StackTracksTheReference) {
  MHC_SKIP_WITHOUT_GPU();
  MhcParams p = test::small_params(4, 5120, 4);
  check_stack(p, 5, 2200, Projection::tf32, kTf32Tolerances.coefficients, 1e-2);
  // last_pre follows x, whose bf16 roundings decorrelate from the reference's after a few
  // sites, so its bound is the TF32 tier even with the fp32 projection.
  check_stack(p, 3, 2300, Projection::fp32, kTf32Tolerances.coefficients, 1e-2);
  check_stack(test::small_params(2, 4096, 3), 17, 2400, Projection::tf32,
              kTf32Tolerances.coefficients, 1e-2);
  // Above the plan's fused_input_max_tokens the stack runs its other schedule (post + next input
  // path).
  check_stack(test::small_params(4, 1024, 2), 137, 2450, Projection::tf32,
              kTf32Tolerances.coefficients, 1e-2);
}

TEST(CudaBackend, Dsv41FlashStackTracksTheReference) {
  MHC_SKIP_WITHOUT_GPU();
  check_stack(preset("dsv41-flash"), 2, 2500, Projection::tf32, 2e-2, 4e-2);
}

TEST(CudaBackend, TimesASiteWithGraphs) {
  MHC_SKIP_WITHOUT_GPU();
  auto backend = cuda_backend(Projection::tf32);
  const ModelWeights w = synthetic_model(test::small_params(4, 5120, 1), 2600);
  const SiteTiming t = backend->time_site(w, 16, 50);
  EXPECT_GT(t.median_us, 0.0);
  EXPECT_EQ(t.reps, 50);
  std::printf("[ timing   ] M=16: %.2f us (%s)\n", t.median_us, t.method.c_str());
}

// Small shapes that exercise every kernel and code path (one split and many, partial tiles, both
// n, fused and plain post, the stack) quickly enough for compute-sanitizer.
TEST(Sanitize, EveryKernelSmall) {
  MHC_SKIP_WITHOUT_GPU();
  for (Projection projection : {Projection::tf32, Projection::fp32}) {
    auto backend = cuda_backend(projection);
    for (int n : test::built_streams()) {
      for (int64_t m : {1, 17, 70}) {
        check_site(*backend, test::small_params(n, 256), m, 3000 + uint64_t(m), 1.0, projection);
      }
    }
  }
  check_stack(test::small_params(4, 256, 2), 19, 3100, Projection::tf32,
              kTf32Tolerances.coefficients, 1e-2);
  check_stack(test::small_params(2, 256, 2), 70, 3200, Projection::tf32,
              kTf32Tolerances.coefficients, 1e-2);
}

}  // namespace
}  // namespace mhc
