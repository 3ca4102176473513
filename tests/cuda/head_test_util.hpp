// A head case (cpu/head_test_util.hpp) on the device for the head kernels' suites
// (head_test.cpp: the CTA forms; head_cluster_test.cpp: the cluster form): its inputs, and its
// outputs poisoned (0xFF: NaN) before every launch, so that an unwritten value fails.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "cpu/head_test_util.hpp"
#include "gpu_test_util.hpp"
#include "mhc/cuda/head.hpp"

namespace mhc::test {

// The legacy default stream, with PDL where the device plan says the loaded image has the waits.
inline cuda::LaunchTarget head_stream() { return {nullptr, device_plan().pdl}; }

struct DeviceHead {
  cuda::DeviceBuffer<Bf16> x, out;
  cuda::DeviceBuffer<float> fn, base, scale, norm, weights;
  explicit DeviceHead(const HeadCase& c)
      : x(to_device(c.x)),
        out(poisoned<Bf16>(size_t(c.tokens * c.p.hidden))),
        fn(to_device(c.weights.hc_fn)),
        base(to_device(c.weights.hc_base)),
        scale(to_device(c.weights.hc_scale)),
        norm(to_device(c.norm_weight)),
        weights(poisoned<float>(size_t(c.tokens * c.p.n))) {}
  // The buffers from token `first` on (a window of the batch).
  cuda::HeadBuffers buffers(const MhcParams& p, bool with_norm, int64_t first = 0) const {
    return {x.get() + first * p.k(),
            fn.get(),
            base.get(),
            scale.get(),
            with_norm ? norm.get() : nullptr,
            out.get() + first * p.hidden,
            weights.get() + first * p.n};
  }
  // One launch on the default stream over tokens [first, first + tokens), every output poisoned
  // first; returns the whole (out, weights).
  std::pair<std::vector<Bf16>, std::vector<float>> run(const MhcParams& p, int64_t tokens,
                                                       bool with_norm, cuda::HeadForm form,
                                                       int64_t first = 0) {
    out.fill_bytes(0xFF);
    weights.fill_bytes(0xFF);
    cuda::head(p, tokens, buffers(p, with_norm, first), head_stream(), form);
    MHC_CUDA_CHECK(cudaDeviceSynchronize());
    return {to_host(out), to_host(weights)};
  }
};

// Token m's row of a [M, width] output.
template <typename T>
std::vector<T> token_row(const std::vector<T>& all, int64_t m, int64_t width) {
  return std::vector<T>(all.begin() + m * width, all.begin() + (m + 1) * width);
}

}  // namespace mhc::test
