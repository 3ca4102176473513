// coefficients.cuh: sinkhorn_iterations (a row and a column pass per reciprocal) against the
// float64 reference Sinkhorn at logit scales up to 1e4; token_coefficients_by_lanes (kStatsLanes
// lanes per token, two rows of P each) against token_coefficients (one thread per token): bitwise
// equal outputs on random reduced sums, both stream counts, with a warp only partly filled by
// tokens and with every lane of the block busy. Outputs are poisoned (NaN) before each run, so a
// missed write fails.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gpu_test_util.hpp"
#include "mhc/cpu/reference.hpp"
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

// The softmax of each row of logits plus eps (as token_coefficients forms P), then the Sinkhorn.
template <int n>
__global__ void sinkhorn_of_logits(const float* logits, int count, int iters, float eps,
                                   float* comb) {
  const int t = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (t >= count) return;
  float p[n][n];
  for (int j = 0; j < n; ++j) {
    float row_max = -INFINITY, total = 0.f;
    for (int k = 0; k < n; ++k) row_max = fmaxf(row_max, logits[(t * n + j) * n + k]);
    for (int k = 0; k < n; ++k) {
      p[j][k] = expf(logits[(t * n + j) * n + k] - row_max);
      total += p[j][k];
    }
    for (int k = 0; k < n; ++k) p[j][k] = p[j][k] / total + eps;
  }
  cuda::CoefficientParams cp;
  cp.sinkhorn_eps = eps;
  cp.sinkhorn_iters = iters;
  cuda::sinkhorn_iterations<n>(p, cp);
  for (int j = 0; j < n; ++j) {
    for (int k = 0; k < n; ++k) comb[(t * n + j) * n + k] = p[j][k];
  }
}

// Largest |GPU - float64| over `count` matrices of random logits (scales 0.5 to 1e4, every other
// matrix with a strong diagonal, as the model's comb has), the GPU running `gpu_iters` iterations
// and the reference 20. NaN or infinity returns infinity.
template <int n>
double sinkhorn_error(int count, int gpu_iters, uint64_t seed) {
  constexpr double kEps = 1e-6;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  const float scales[] = {0.5f, 2.f, 8.f, 50.f, 1e3f, 1e4f};
  std::vector<float> logits(size_t(count) * n * n);
  for (int t = 0; t < count; ++t) {
    const float scale = scales[t % 6];
    const bool diagonal = (t / 6) % 2 == 1;
    for (int j = 0; j < n; ++j) {
      for (int k = 0; k < n; ++k) {
        logits[(t * n + j) * n + k] = scale * (normal(rng) + (diagonal && j == k ? 3.f : 0.f));
      }
    }
  }
  auto comb = test::poisoned<float>(logits.size());
  const auto d_logits = test::to_device(logits);
  sinkhorn_of_logits<n>
      <<<(count + 127) / 128, 128>>>(d_logits.get(), count, gpu_iters, float(kEps), comb.get());
  MHC_CUDA_CHECK(cudaGetLastError());
  MHC_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> got = test::to_host(comb);
  std::vector<double> want(size_t(n) * n), in(size_t(n) * n);
  double worst = 0.0;
  for (int t = 0; t < count; ++t) {
    for (int i = 0; i < n * n; ++i) in[i] = logits[size_t(t) * n * n + i];
    ref::sinkhorn(n, 20, kEps, in.data(), want.data());
    for (int i = 0; i < n * n; ++i) {
      const double err = std::fabs(double(got[size_t(t) * n * n + i]) - want[i]);
      if (!(err <= worst)) worst = std::isfinite(err) ? err : INFINITY;
    }
  }
  return worst;
}

// The paired form agrees with the float64 Sinkhorn to 1e-5 (measured: ~2.5e-7 at n = 4); one
// iteration fewer is far outside that bound, so the check can fail.
TEST(Sinkhorn, PairedPassesMatchFloat64) {
  MHC_SKIP_WITHOUT_GPU();
  constexpr double kTolerance = 1e-5;
  EXPECT_LE(sinkhorn_error<4>(1 << 14, 20, 71), kTolerance);
  EXPECT_LE(sinkhorn_error<2>(1 << 14, 20, 72), kTolerance);
  EXPECT_GT(sinkhorn_error<4>(1 << 14, 19, 71), 10 * kTolerance);
  EXPECT_GT(sinkhorn_error<2>(1 << 14, 19, 72), 10 * kTolerance);
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
