// Picking backends by name, and the CPU backend behind the Backend interface.
#include "mhc/core/backend.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "mhc/core/error.hpp"
#include "mhc/cpu/compare.hpp"
#include "mhc/cpu/fp32_site.hpp"
#include "mhc/cpu/model.hpp"
#include "mhc/cpu/reference.hpp"

namespace mhc {
namespace {

MhcParams small_model_params() {
  MhcParams p;
  p.hidden = 256;
  p.n = 4;
  p.layers = 2;
  return p;
}

std::string error_of(std::string_view name) {
  try {
    make_backend(name, KernelConfig{});
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(BackendRegistry, CpuIsAlwaysThere) {
  const auto backend = make_backend("cpu", KernelConfig{});
  ASSERT_NE(backend, nullptr);
  EXPECT_EQ(backend->name(), "cpu");
  EXPECT_NE(backend->description().find("CPU fp32"), std::string::npos) << backend->description();
  const std::vector<std::string> built = built_backends();
  EXPECT_NE(std::find(built.begin(), built.end(), "cpu"), built.end());
}

TEST(BackendRegistry, UnknownNameIsAnError) {
  const std::string message = error_of("tpu");
  EXPECT_NE(message.find("unknown backend 'tpu'"), std::string::npos) << message;
  EXPECT_NE(message.find("cpu"), std::string::npos) << message;
  EXPECT_FALSE(error_of("").empty());
}

#if !MHC_WITH_CUDA
TEST(BackendRegistry, CudaWithoutCudaSupportSaysSo) {
  const std::string message = error_of("cuda");
  EXPECT_NE(message.find("no CUDA support"), std::string::npos) << message;
  EXPECT_NE(message.find("--backend cpu"), std::string::npos) << message;
  EXPECT_EQ(make_backend("auto", KernelConfig{})->name(), "cpu");
}
#endif

// The CPU has no TF32: asked for it, it says it computes in fp32.
TEST(CpuBackend, DescriptionTellsTf32IsComputedInFp32) {
  KernelConfig tf32;
  tf32.projection = Projection::tf32;
  KernelConfig fp32;
  fp32.projection = Projection::fp32;
  EXPECT_NE(make_backend("cpu", tf32)->description().find("fp32"), std::string::npos);
  EXPECT_NE(make_backend("cpu", tf32)->description(), make_backend("cpu", fp32)->description());
}

TEST(CpuBackend, RunSiteIsTheCpuSite) {
  const MhcParams p = small_model_params();
  const ModelWeights w = synthetic_model(p, 3);
  const int64_t M = 5;
  const std::vector<Bf16> x = synthetic_embeddings(p, M, 4);
  const std::vector<float> pre_mix = first_site_pre_mix(p, M);
  std::vector<Bf16> F(size_t(M * p.hidden));
  for (size_t i = 0; i < F.size(); ++i) F[i] = float_to_bf16(std::sin(float(i) + 0.5f));
  const SiteInputsView in{M, x.data(), pre_mix.data(), F.data()};
  SiteOutputs via_backend(p, M), direct(p, M);
  via_backend.comb.assign(via_backend.comb.size(), std::nanf(""));
  make_backend("cpu", KernelConfig{})->run_site(p, w.sites[0].view(), in, via_backend.view());
  cpu::run_site(p, w.sites[0].view(), in, direct.view());
  EXPECT_EQ(0, std::memcmp(via_backend.comb.data(), direct.comb.data(),
                           direct.comb.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(via_backend.x_next.data(), direct.x_next.data(),
                           direct.x_next.size() * sizeof(Bf16)));
  const ref::SiteResult r = ref::run_site(p, w.sites[0].view(), in);
  EXPECT_TRUE(compare(via_backend.comb.data(), r.comb.data(), int64_t(r.comb.size()))
                  .passes(kFp32Tolerances.coefficients));
}

TEST(CpuBackend, RunStackIsTheCpuStack) {
  const MhcParams p = small_model_params();
  const ModelWeights w = synthetic_model(p, 5);
  const std::vector<Bf16> x0 = synthetic_embeddings(p, 2, 6);
  const StackTrace got = make_backend("cpu", KernelConfig{})->run_stack(w, 2, x0.data());
  const StackTrace want = cpu_stack(w, 2, x0.data());
  ASSERT_EQ(got.output.size(), want.output.size());
  EXPECT_EQ(0, std::memcmp(got.output.data(), want.output.data(), want.output.size() * 2));
  EXPECT_EQ(got.x_after_layer.size(), 2u);
}

TEST(CpuBackend, TimeSiteReportsAMedian) {
  const MhcParams p = small_model_params();
  const ModelWeights w = synthetic_model(p, 7);
  const auto backend = make_backend("cpu", KernelConfig{});
  const SiteTiming t = backend->time_site(w, 4, 5);
  EXPECT_GT(t.median_us, 0);
  EXPECT_EQ(t.reps, 5);
  EXPECT_EQ(t.method, "host steady clock");
  EXPECT_GE(backend->time_site(w, 0, 1).median_us, 0);
  EXPECT_THROW(backend->time_site(w, 4, 0), Error);
  EXPECT_THROW(backend->time_site(w, -1, 3), Error);
}

}  // namespace
}  // namespace mhc
