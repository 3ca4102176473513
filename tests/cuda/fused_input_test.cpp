// The input path fused into the coefficient launch (extra CTAs of the 16-row and the TMA kernel)
// against the separate input_path launch: layer_input and every coefficient output bitwise
// equal, in the default and the batch-invariant mode, at every model hidden size. That equality
// is what lets batch-invariant mode fuse at decode sizes and not above. Fresh random inputs,
// outputs poisoned. Skips without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <vector>

#include "gpu_test_util.hpp"
#include "mhc/cuda/check.hpp"

namespace mhc {
namespace {

using test::DeviceCoefficients;
using test::DeviceWeights;
using test::poisoned;
using test::to_device;
using test::to_host;

struct Outputs {
  cuda::DeviceBuffer<Bf16> layer_input;
  DeviceCoefficients coef;
  Outputs(const MhcParams& p, int64_t m)
      : layer_input(poisoned<Bf16>(size_t(m * p.hidden))), coef(p, m) {}
};

// fused: one prenorm_coefficients call with `input`; else input_path, then the plain call.
void run(const MhcParams& p, int64_t m, const cuda::DeviceBuffer<Bf16>& x,
         const cuda::DeviceBuffer<float>& pre_mix, const DeviceWeights& w,
         const LaunchTuning& tuning, bool fused, cuda::SiteWorkspace& ws, Outputs& out) {
  const cuda::CoefficientBuffers b = out.coef.buffers(x, w);
  const cuda::InputPathBuffers input{pre_mix.get(), w.norm_weight.get(), out.layer_input.get()};
  if (fused) {
    cuda::prenorm_coefficients(p, m, b, tuning, ws, nullptr, &input);
  } else {
    cuda::input_path(p, m, x.get(), pre_mix.get(), w.norm_weight.get(), out.layer_input.get(),
                     {nullptr, tuning.pdl});
    cuda::prenorm_coefficients(p, m, b, tuning, ws, nullptr);
  }
  MHC_CUDA_CHECK(cudaDeviceSynchronize());
}

void check(const MhcParams& p, int64_t m, const LaunchTuning& tuning, uint64_t seed) {
  ASSERT_TRUE(tuning.fused_input) << "the case must exercise the fusion";
  const test::SiteCase c = test::random_site_case(p, m, seed, 1.0);
  const DeviceWeights w(c.weights);
  const auto x = to_device(c.x);
  const auto pre_mix = to_device(c.pre_mix);
  cuda::SiteWorkspace ws(p, m, max_prenorm_splits(p));
  Outputs fused(p, m), separate(p, m);
  run(p, m, x, pre_mix, w, tuning, true, ws, fused);
  run(p, m, x, pre_mix, w, tuning, false, ws, separate);
  const std::string label = test::case_name(p, m, 1.0) + " " + tuning.describe();
  EXPECT_TRUE(test::same_finite_bits(to_host(fused.layer_input), to_host(separate.layer_input)))
      << label << " layer_input";
  EXPECT_TRUE(test::same_finite_bits(to_host(fused.coef.pre), to_host(separate.coef.pre))) << label;
  EXPECT_TRUE(test::same_finite_bits(to_host(fused.coef.post), to_host(separate.coef.post)))
      << label;
  EXPECT_TRUE(test::same_finite_bits(to_host(fused.coef.comb), to_host(separate.coef.comb)))
      << label;
  EXPECT_TRUE(test::same_finite_bits(to_host(fused.coef.mixes), to_host(separate.coef.mixes)))
      << label;
}

TEST(CudaFusedInput, EqualsTheSeparateLaunchBitwise) {
  MHC_SKIP_WITHOUT_GPU();
  uint64_t seed = 1200;
  const bool tma = test::device_plan().tma128_available;
  for (int n : test::built_streams()) {
    for (int hidden : {4096, 5120, 7168}) {
      const MhcParams p = test::small_params(n, hidden);
      for (int64_t m : {1, 7, 16, 17, 64}) {
        LaunchOverrides mma16 = test::forced(0, 16);
        mma16.fused_input = true;
        check(p, m, test::tuning(p, m, mma16), ++seed);
        if (tma) {
          LaunchOverrides bulk = test::forced(0, 128);
          bulk.fused_input = true;
          check(p, m, test::tuning(p, m, bulk), ++seed);
        }
        LaunchOverrides invariant;
        invariant.fused_input = true;
        check(p, m, test::invariant_tuning(p, m, invariant), ++seed);
      }
    }
  }
}

// compute-sanitizer target (dev/scripts/device-validate.sh runs Sanitize*): the batch-invariant
// decode launch (sm90_prenorm_leaf.cuh on sm_90) with and without its input-path CTAs, full and
// short/empty leaves (n=2, C=5120: 80 stages over 32 leaves of 3).
TEST(SanitizeFusedInput, BatchInvariantDecodeSmall) {
  MHC_SKIP_WITHOUT_GPU();
  uint64_t seed = 1300;
  for (int n : test::built_streams()) {
    const MhcParams p = test::small_params(n, 5120);
    for (int64_t m : {1, 9, 16}) {
      LaunchOverrides fused;
      fused.fused_input = true;
      check(p, m, test::invariant_tuning(p, m, fused), ++seed);
    }
  }
}

}  // namespace
}  // namespace mhc
