// token_coefficients_by_lanes (kStatsLanes lanes per token, two rows of P each) against
// token_coefficients (one thread per token): bitwise equal outputs on random reduced sums, both
// stream counts, with a warp only partly filled by tokens and with every lane of the block busy.
// Outputs are poisoned (NaN) before each run, so a missed write fails.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gpu_test_util.hpp"
#include "mhc/cuda/check.hpp"
#include "mhc/cuda/coefficients.cuh"

namespace mhc {
namespace {

constexpr int kBlock = 256;

template <int n>
__global__ void coefficients_one_thread_per_token(const float* sums, int tokens,
                                                  cuda::CoefficientParams cp, const float* params,
                                                  cuda::CoefficientOutputs out) {
  const int token = int(threadIdx.x);
  if (token < tokens) {
    cuda::token_coefficients<n>(sums + token * (n * (n + 2) + 1), token, cp, params, out);
  }
}

template <int n>
__global__ void coefficients_by_lanes(const float* sums, int tokens, cuda::CoefficientParams cp,
                                      const float* params, cuda::CoefficientOutputs out) {
  constexpr int kLanes = cuda::kStatsLanes<n>;
  const int token = int(threadIdx.x) / kLanes;
  const bool active = token < tokens;
  if (int(threadIdx.x) / 32 * 32 < tokens * kLanes) {
    cuda::token_coefficients_by_lanes<n>(sums + (active ? token : 0) * (n * (n + 2) + 1), token,
                                         active, cp, params, out);
  }
}

struct Outputs {
  cuda::DeviceBuffer<float> pre, post, comb, mixes;
  Outputs(int tokens, int n)
      : pre(test::poisoned<float>(size_t(tokens) * n)),
        post(test::poisoned<float>(size_t(tokens) * n)),
        comb(test::poisoned<float>(size_t(tokens) * n * n)),
        mixes(test::poisoned<float>(size_t(tokens) * n * (n + 2))) {}
  cuda::CoefficientOutputs view() { return {pre.get(), post.get(), comb.get(), mixes.get()}; }
};

// Bitwise equal and finite (NaN never passes).
void expect_same_bits(const cuda::DeviceBuffer<float>& a, const cuda::DeviceBuffer<float>& b,
                      const char* what) {
  const std::vector<float> x = test::to_host(a), y = test::to_host(b);
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_TRUE(std::isfinite(x[i])) << what << "[" << i << "]";
    ASSERT_EQ(std::memcmp(&x[i], &y[i], sizeof(float)), 0)
        << what << "[" << i << "]: " << x[i] << " vs " << y[i];
  }
}

template <int n>
void check_same_outputs(int tokens, uint64_t seed) {
  constexpr int kNmix = n * (n + 2);
  constexpr int kK = 4096 * n;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_real_distribution<float> uniform(0.5f, 2.f);
  // Per token: NMIX dot products, then the sum of squares, sized like a real row of K values.
  std::vector<float> sums(size_t(tokens) * (kNmix + 1));
  for (int t = 0; t < tokens; ++t) {
    const float sumsq = kK * uniform(rng);
    for (int i = 0; i < kNmix; ++i) sums[t * (kNmix + 1) + i] = normal(rng) * std::sqrt(sumsq);
    sums[t * (kNmix + 1) + kNmix] = sumsq;
  }
  std::vector<float> params(kNmix + 3);
  for (int i = 0; i < kNmix; ++i) params[i] = 0.5f * normal(rng);
  for (int i = 0; i < 3; ++i) params[kNmix + i] = uniform(rng);
  cuda::CoefficientParams cp;
  cp.inv_k = 1.f / kK;
  const auto d_sums = test::to_device(sums);
  const auto d_params = test::to_device(params);
  Outputs one(tokens, n), rows(tokens, n);
  ASSERT_LE(tokens * cuda::kStatsLanes<n>, kBlock);
  ASSERT_LE(tokens, kBlock);
  coefficients_one_thread_per_token<n>
      <<<1, kBlock>>>(d_sums.get(), tokens, cp, d_params.get(), one.view());
  MHC_CUDA_CHECK(cudaGetLastError());
  coefficients_by_lanes<n><<<1, kBlock>>>(d_sums.get(), tokens, cp, d_params.get(), rows.view());
  MHC_CUDA_CHECK(cudaGetLastError());
  MHC_CUDA_CHECK(cudaDeviceSynchronize());
  expect_same_bits(one.pre, rows.pre, "pre");
  expect_same_bits(one.post, rows.post, "post");
  expect_same_bits(one.comb, rows.comb, "comb");
  expect_same_bits(one.mixes, rows.mixes, "mixes");
}

TEST(SinkhornByLanes, TwoRowsPerLane) {
  static_assert(cuda::kStatsLanes<4> == 2 && cuda::kStatsRowsPerLane<4> == 2);
  static_assert(cuda::kStatsLanes<2> == 1 && cuda::kStatsRowsPerLane<2> == 2);
}

TEST(SinkhornByLanes, BitwiseEqualToOneThreadPerToken) {
  MHC_SKIP_WITHOUT_GPU();
  uint64_t seed = 900;
  for (int tokens : {1, 3, 8, 13, 16, 64, 127, 128}) check_same_outputs<4>(tokens, ++seed);
  for (int tokens : {1, 7, 16, 128, 255, 256}) check_same_outputs<2>(tokens, ++seed);
}

}  // namespace
}  // namespace mhc
