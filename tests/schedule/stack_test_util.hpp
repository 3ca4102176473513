// Helpers shared by the stack executor tests: fresh inputs, and the executor's per-layer trace
// and output against the float64 reference stack.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "cuda/gpu_test_util.hpp"
#include "mhc/cpu/compare.hpp"
#include "mhc/cpu/model.hpp"
#include "mhc/cuda/check.hpp"
#include "mhc/schedule/stack_executor.hpp"

namespace mhc::cuda::test {

// A test fixture (Base: ::testing::Test or a TestWithParam) with a non-blocking stream; skips
// without a GPU.
template <typename Base = ::testing::Test>
class WithStream : public Base {
 protected:
  void SetUp() override {
    MHC_SKIP_WITHOUT_GPU();
    MHC_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  void TearDown() override {
    if (stream_) {
      cudaStreamSynchronize(stream_);
      cudaStreamDestroy(stream_);
    }
  }
  cudaStream_t stream_ = nullptr;
};

// The overlap schedule at every size the tests use.
inline KernelConfig overlap_everywhere() {
  return KernelConfig::parse(R"({"enable_mhc_overlap": true, "overlap_max_tokens": 4096})");
}

// Final streams, output and last pre, as raw bytes (bf16, bf16, then fp32 in two halves).
inline std::vector<uint16_t> raw_results(const StackExecutor& ex, int64_t tokens, cudaStream_t st) {
  const MhcParams& p = ex.params();
  const size_t xs = size_t(tokens * p.k()), os = size_t(tokens * p.hidden);
  std::vector<uint16_t> host(xs + os + size_t(tokens * p.n) * 2);
  MHC_CUDA_CHECK(cudaStreamSynchronize(st));
  MHC_CUDA_CHECK(cudaMemcpy(host.data(), ex.x_final(), xs * 2, cudaMemcpyDeviceToHost));
  MHC_CUDA_CHECK(cudaMemcpy(host.data() + xs, ex.output(), os * 2, cudaMemcpyDeviceToHost));
  MHC_CUDA_CHECK(cudaMemcpy(host.data() + xs + os, ex.last_pre(), size_t(tokens * p.n) * 4,
                            cudaMemcpyDeviceToHost));
  return host;
}

// How many values of raw_results are not finite.
inline size_t not_finite(const std::vector<uint16_t>& raw, const MhcParams& p, int64_t tokens) {
  const size_t bf16_values = size_t(tokens * (p.k() + p.hidden));
  size_t count = size_t(std::count_if(raw.begin(), raw.begin() + ptrdiff_t(bf16_values),
                                      [](uint16_t b) { return (b & 0x7f80u) == 0x7f80u; }));
  for (size_t i = bf16_values; i + 1 < raw.size(); i += 2) {
    float v;
    std::memcpy(&v, raw.data() + i, sizeof v);
    count += !std::isfinite(v);
  }
  return count;
}

// raw_results, where a value that is not finite (the poison of StackExecutor::poison_results
// where a forward wrote nothing) fails the test.
inline std::vector<uint16_t> results(const StackExecutor& ex, int64_t tokens, cudaStream_t st) {
  std::vector<uint16_t> raw = raw_results(ex, tokens, st);
  EXPECT_EQ(not_finite(raw, ex.params(), tokens), 0u)
      << "M=" << tokens << ": results not finite (not written?)";
  return raw;
}

// Poisons the results (StackExecutor::poison_results), runs `forward` and returns results(): a
// forward that leaves any of them unwritten fails instead of keeping an earlier run's bits.
template <typename Forward>
std::vector<uint16_t> results_of(StackExecutor& ex, int64_t tokens, cudaStream_t st,
                                 Forward&& forward) {
  ex.poison_results(st);
  forward();
  return results(ex, tokens, st);
}

// A dsv41-flash stack with another hidden size, stream count and depth.
inline MhcParams small_stack(int hidden, int n, int layers) {
  MhcParams p = preset("dsv41-flash");
  p.hidden = hidden;
  p.n = n;
  p.layers = layers;
  return p;
}

// Fresh inputs: x from a new embedding seed; with `carried`, a positive non-one-hot pre_mix.
inline void load_inputs(StackExecutor& ex, int64_t tokens, uint64_t seed, bool carried,
                        cudaStream_t st) {
  const MhcParams& p = ex.params();
  const auto x = synthetic_embeddings(p, tokens, seed);
  MHC_CUDA_CHECK(
      cudaMemcpyAsync(ex.x_in(), x.data(), x.size() * sizeof(Bf16), cudaMemcpyHostToDevice, st));
  std::vector<float> pre_mix(size_t(tokens * p.n), 0.f);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int j = 0; j < p.n; ++j) {
      pre_mix[size_t(t * p.n + j)] = carried ? 0.2f + 0.1f * float((t + j + seed) % 7) : (j == 0);
    }
  }
  MHC_CUDA_CHECK(cudaMemcpyAsync(ex.pre_mix_in(), pre_mix.data(), pre_mix.size() * sizeof(float),
                                 cudaMemcpyHostToDevice, st));
  MHC_CUDA_CHECK(cudaStreamSynchronize(st));
}

// x after every layer (the executor's trace, so it needs trace_layers) and the output against
// the float64 reference stack from x0 (one-hot entry), within the stack bounds of
// mhc/cpu/compare.hpp.
inline void expect_within_stack_bounds(const StackExecutor& ex, const ModelWeights& w,
                                       int64_t tokens, const std::vector<Bf16>& x0) {
  const MhcParams& p = ex.params();
  const StackReference ref = reference_stack(w, tokens, x0.data());
  std::vector<Bf16> x(size_t(tokens * p.k()));
  for (int layer = 0; layer < p.layers; ++layer) {
    MHC_CUDA_CHECK(
        cudaMemcpy(x.data(), ex.layer_trace(layer), x.size() * 2, cudaMemcpyDeviceToHost));
    const ErrorStats e =
        compare(x.data(), ref.x_after_layer[size_t(layer)].data(), int64_t(x.size()));
    EXPECT_TRUE(e.passes(stack_x_tolerance(layer + 1)))
        << "M=" << tokens << " layer " << layer + 1 << ": " << e.describe();
  }
  std::vector<Bf16> out(size_t(tokens * p.hidden));
  MHC_CUDA_CHECK(cudaMemcpy(out.data(), ex.output(), out.size() * 2, cudaMemcpyDeviceToHost));
  const ErrorStats e = compare(out.data(), ref.output.data(), int64_t(out.size()));
  EXPECT_TRUE(e.passes(kStackOutputTolerance)) << "M=" << tokens << " output: " << e.describe();
}

}  // namespace mhc::cuda::test
