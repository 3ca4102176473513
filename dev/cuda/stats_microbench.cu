// Developer micro-benchmark of the coefficient path's stats stage (not a test; built by CMake as
// mhc_stats_microbench when CUDA is on, dev/CMakeLists.txt): SM cycles per call of
// token_coefficients (one thread per token), token_coefficients_by_lanes (kStatsLanes lanes per
// token, two rows of P each) and the Sinkhorn iterations alone, with the loop as it runs and with
// the iteration count as a constant (unrolled), for one CTA on random reduced sums held in shared
// memory, as in the prenorm kernels' epilogue. Run on an sm_90 GPU:
// build/dev/mhc_stats_microbench. Results and their provenance: docs/decisions.md, "Stats
// micro-benchmark" and "The decode launch's serial tail" (the unrolled loop: faster here, slower in
// the kernel).
#include <cuda_runtime.h>

#include <cstdio>
#include <random>
#include <vector>

#include "mhc/cuda/coefficients.cuh"

namespace {

using namespace mhc::cuda;
constexpr int n = 4, kNmix = n * (n + 2), kStride = kNmix + 1, kMaxTokens = 128, kReps = 20;
constexpr int kIters = 20;  // the design's Sinkhorn iteration count (CoefficientParams default)
enum Variant {
  kOneThreadPerToken,
  kLanesPerToken,
  kLanesPerTokenFixed,  // the iteration count as a constant (20): the loop unrolled
  kSinkhornOnly,
  kSinkhornOnlyFixed
};

template <Variant kVariant>
__global__ void stats_kernel(const float* g_sums, int tokens, CoefficientParams cp,
                             long long* cycles, float* sink) {
  __shared__ float params[kCoefficientParamFloats<n>];
  __shared__ float sums[kMaxTokens * kStride];
  __shared__ float staged[kMaxTokens * (2 * n + n * n)];
  stage_coefficient_params<n>(cp, params);
  for (int i = threadIdx.x; i < tokens * kStride; i += blockDim.x) sums[i] = g_sums[i];
  __syncthreads();
  CoefficientOutputs out;
  out.pre = staged;
  out.post = staged + tokens * n;
  out.comb = out.post + tokens * n;
  const int tid = threadIdx.x;
  const long long start = clock64();
  for (int rep = 0; rep < kReps; ++rep) {
    if constexpr (kVariant == kOneThreadPerToken) {
      if (tid < tokens) token_coefficients<n>(sums + tid * kStride, tid, cp, params, out);
    } else if constexpr (kVariant == kLanesPerToken || kVariant == kLanesPerTokenFixed) {
      const int token = tid / kStatsLanes<n>;
      const bool active = token < tokens;
      if (tid / kWarp * kWarp < tokens * kStatsLanes<n>) {
        token_coefficients_by_lanes<n, kVariant == kLanesPerTokenFixed ? kIters : 0>(
            sums + (active ? token : 0) * kStride, token, active, cp, params, out);
      }
    } else if constexpr (kVariant == kSinkhornOnly || kVariant == kSinkhornOnlyFixed) {
      if (tid < tokens) {
        float p[n][n];
        for (int j = 0; j < n; ++j) {
          for (int k = 0; k < n; ++k) p[j][k] = sums[tid * kStride + 2 * n + j * n + k] + rep;
        }
        sinkhorn_iterations<n, kVariant == kSinkhornOnlyFixed ? kIters : 0>(p, cp);
        for (int j = 0; j < n; ++j) {
          for (int k = 0; k < n; ++k) out.comb[(tid * n + j) * n + k] = p[j][k];
        }
      }
    }
    __syncthreads();
  }
  const long long stop = clock64();
  if (tid == 0) *cycles = (stop - start) / kReps;
  if (tid < 16) sink[tid] = staged[tid];
}

template <typename Kernel>
void time_variant(Kernel kernel, const char* name, int tokens, int threads, const float* sums,
                  const CoefficientParams& cp, long long* d_cycles, float* sink) {
  long long cycles = 0;
  for (int i = 0; i < 3; ++i) {  // the last of three launches (the first warms up)
    kernel<<<1, threads>>>(sums, tokens, cp, d_cycles, sink);
    cudaMemcpy(&cycles, d_cycles, sizeof cycles, cudaMemcpyDeviceToHost);
  }
  std::printf("%-34s tokens=%3d threads=%3d %6lld cycles (%s)\n", name, tokens, threads, cycles,
              cudaGetErrorString(cudaGetLastError()));
}

}  // namespace

int main() {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(0.5f, 2.f);
  std::vector<float> host(kMaxTokens * kStride);
  for (float& v : host) v = uniform(rng);
  const std::vector<float> base(kNmix, 0.1f), scale = {1.f, 1.f, 2.f};
  float *sums, *hc_base, *hc_scale, *sink;
  long long* d_cycles;
  cudaMalloc(&sums, host.size() * sizeof(float));
  cudaMalloc(&hc_base, kNmix * sizeof(float));
  cudaMalloc(&hc_scale, 3 * sizeof(float));
  cudaMalloc(&sink, 16 * sizeof(float));
  cudaMalloc(&d_cycles, sizeof(long long));
  cudaMemcpy(sums, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(hc_base, base.data(), kNmix * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(hc_scale, scale.data(), 3 * sizeof(float), cudaMemcpyHostToDevice);
  CoefficientParams cp;
  cp.hc_base = hc_base;
  cp.hc_scale = hc_scale;
  cp.inv_k = 1.f / 20480;
  for (int tokens : {1, 16, 64, 128}) {
    time_variant(stats_kernel<kOneThreadPerToken>, "one thread per token (whole stats)", tokens,
                 288, sums, cp, d_cycles, sink);
    time_variant(stats_kernel<kSinkhornOnly>, "one thread per token (Sinkhorn)", tokens, 288, sums,
                 cp, d_cycles, sink);
    time_variant(stats_kernel<kSinkhornOnlyFixed>, "one thread per token (Sinkhorn, fixed)", tokens,
                 288, sums, cp, d_cycles, sink);
    if (tokens * kStatsLanes<n> <= 256) {  // the lane form where its lanes fit the CTA
      time_variant(stats_kernel<kLanesPerToken>, "lanes per token (whole stats)", tokens, 256, sums,
                   cp, d_cycles, sink);
      time_variant(stats_kernel<kLanesPerTokenFixed>, "lanes per token (whole stats, fixed)",
                   tokens, 256, sums, cp, d_cycles, sink);
    }
  }
  return 0;
}
