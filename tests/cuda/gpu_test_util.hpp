// Shared helpers of the GPU tests: skip without a GPU, device copies of a random site case, and
// the comparisons against the float64 reference.
#pragma once
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cpu/test_util.hpp"
#include "mhc/cpu/compare.hpp"
#include "mhc/cuda/check.hpp"
#include "mhc/cuda/cuda_backend.hpp"
#include "mhc/cuda/device_buffer.hpp"
#include "mhc/cuda/device_plan.hpp"
#include "mhc/cuda/kernels.hpp"

namespace mhc::test {

inline bool gpu_present() {
  static const bool present = cuda::device_present();
  return present;
}

// The launch description of the current device (the default kernel config, or batch-invariant
// mode), made once per test binary: what every test launch resolves. Needs a GPU.
inline const KernelPlan& device_plan(bool batch_invariant = false) {
  if (batch_invariant) {
    static const KernelPlan invariant =
        cuda::device_plan(KernelConfig::parse(R"({"batch_invariant": true})"));
    return invariant;
  }
  static const KernelPlan plain = cuda::device_plan(KernelConfig{});
  return plain;
}

// The device plan's launch for this shape and token count, with a test's overrides.
inline LaunchTuning tuning(const MhcParams& p, int64_t tokens, const LaunchOverrides& o = {}) {
  return device_plan().tuning(p, tokens, o);
}
// A sweep's forced tile and split count as the tests write them: `rows` tokens per tile (16, 64
// or 128) and `splits` splits, either 0 for the plan's.
inline LaunchOverrides forced(int splits, int rows) {
  LaunchOverrides o;
  if (rows > 0) {
    o.kernel = rows == 16   ? PrenormKernel::mma16
               : rows == 64 ? PrenormKernel::mma64
                            : PrenormKernel::tma128;
  }
  if (splits > 0) o.splits = splits;
  return o;
}
// The batch-invariant plan's launch (its kernel and the K leaves' splits unless forced).
inline LaunchTuning invariant_tuning(const MhcParams& p, int64_t tokens,
                                     const LaunchOverrides& o = {}) {
  return device_plan(true).tuning(p, tokens, o);
}

// MHC_REQUIRE_GPU=1 (dev/scripts/device-validate.sh sets it on the GPU machine): a test that would
// skip for want of a GPU or of the sm_90a image's kernels fails instead, so that a driver the
// runtime cannot use, or a build without sm_90a, cannot pass there as a run of skips.
inline bool gpu_required() {
  const char* v = std::getenv("MHC_REQUIRE_GPU");
  return v != nullptr && std::string(v) == "1";
}

// Why no GPU is visible: the runtime's error, or a count of zero.
inline std::string gpu_absence() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  cudaGetLastError();  // clear a sticky error
  return err != cudaSuccess ? std::string("cudaGetDeviceCount: ") + cudaGetErrorString(err)
                            : "no CUDA GPU visible";
}

// Skips the test unless `condition` holds; fails it instead under MHC_REQUIRE_GPU=1.
#define MHC_SKIP_UNLESS(condition, reason)                                             \
  if (!(condition)) {                                                                  \
    if (::mhc::test::gpu_required()) GTEST_FAIL() << reason << " (MHC_REQUIRE_GPU=1)"; \
    GTEST_SKIP() << reason;                                                            \
  }

#define MHC_SKIP_WITHOUT_GPU() \
  MHC_SKIP_UNLESS(::mhc::test::gpu_present(), ::mhc::test::gpu_absence())

// Skips a test of a kernel that only the sm_90a image holds (TMA, clusters); `what` names it.
#define MHC_SKIP_WITHOUT_SM90A_KERNELS(what)                   \
  MHC_SKIP_WITHOUT_GPU();                                      \
  MHC_SKIP_UNLESS(::mhc::test::device_plan().tma128_available, \
                  what << " needs the sm_90a image's kernels")

// The stream counts the CUDA kernels were built for: n = 2 only with -DMHC_KERNELS_N2=ON (no
// DeepSeek preset has n = 2). The GPU cases of n = 2 run where they exist; elsewhere the launch
// refuses them (KernelsN2.RefusedWhereNotBuilt).
inline std::vector<int> built_streams() {
#if defined(MHC_KERNELS_N2)
  return {2, 4};
#else
  return {4};
#endif
}
inline bool kernels_built_for(int n) {
  const std::vector<int> built = built_streams();
  return std::find(built.begin(), built.end(), n) != built.end();
}

template <typename T>
cuda::DeviceBuffer<T> to_device(const std::vector<T>& host) {
  cuda::DeviceBuffer<T> d(host.size());
  d.upload(host.data(), host.size());
  return d;
}

template <typename T>
std::vector<T> to_host(const cuda::DeviceBuffer<T>& d) {
  std::vector<T> host(d.size());
  d.download(host.data(), host.size());
  return host;
}

// The kernel launches `enqueue(stream)` makes, read from a CUDA graph captured from it (the
// launches are captured, not run): which kernels ran and on which grids.
template <typename Enqueue>
std::vector<cudaKernelNodeParams> captured_kernels(Enqueue&& enqueue) {
  cudaStream_t stream = nullptr;
  MHC_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph = nullptr;
  MHC_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  enqueue(stream);
  MHC_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  size_t count = 0;
  MHC_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  MHC_CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &count));
  std::vector<cudaKernelNodeParams> kernels;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type;
    MHC_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
    if (type != cudaGraphNodeTypeKernel) continue;
    cudaKernelNodeParams params{};
    MHC_CUDA_CHECK(cudaGraphKernelNodeGetParams(node, &params));
    kernels.push_back(params);
  }
  MHC_CUDA_CHECK(cudaGraphDestroy(graph));
  MHC_CUDA_CHECK(cudaStreamDestroy(stream));
  return kernels;
}

// A poisoned (0xFF bytes: NaN) device buffer of `count` elements.
template <typename T>
cuda::DeviceBuffer<T> poisoned(size_t count) {
  cuda::DeviceBuffer<T> d(count);
  d.fill_bytes(0xFF);
  return d;
}

// Device copies of a site case's weights.
struct DeviceWeights {
  cuda::DeviceBuffer<float> hc_fn, hc_base, hc_scale, norm_weight;
  explicit DeviceWeights(const SiteWeights& w)
      : hc_fn(to_device(w.hc_fn)),
        hc_base(to_device(w.hc_base)),
        hc_scale(to_device(w.hc_scale)),
        norm_weight(to_device(w.norm_weight)) {}
};

// The coefficient path's outputs on the device, poisoned.
struct DeviceCoefficients {
  cuda::DeviceBuffer<float> pre, post, comb, mixes;
  DeviceCoefficients(const MhcParams& p, int64_t tokens)
      : pre(poisoned<float>(size_t(tokens * p.n))),
        post(poisoned<float>(size_t(tokens * p.n))),
        comb(poisoned<float>(size_t(tokens * p.n * p.n))),
        mixes(poisoned<float>(size_t(tokens * p.nmix()))) {}
  cuda::CoefficientBuffers buffers(const cuda::DeviceBuffer<Bf16>& x,
                                   const DeviceWeights& w) const {
    return {x.get(),   w.hc_fn.get(), w.hc_base.get(), w.hc_scale.get(),
            pre.get(), post.get(),    comb.get(),      mixes.get()};
  }
};

// The coefficient path's outputs copied to the host.
struct HostCoefficients {
  std::vector<float> pre, post, comb, mixes;
};

inline HostCoefficients download_coefficients(const DeviceCoefficients& d) {
  return {to_host(d.pre), to_host(d.post), to_host(d.comb), to_host(d.mixes)};
}

inline bool same_coefficients(const HostCoefficients& a, const HostCoefficients& b) {
  return same_finite_bits(a.pre, b.pre) && same_finite_bits(a.post, b.post) &&
         same_finite_bits(a.comb, b.comb) && same_finite_bits(a.mixes, b.mixes);
}

// EXPECTs `got` bitwise `want` and finite, each output named.
inline void expect_same_coefficients(const HostCoefficients& want, const HostCoefficients& got,
                                     const std::string& label) {
  EXPECT_TRUE(same_finite_bits(want.pre, got.pre)) << label << " pre";
  EXPECT_TRUE(same_finite_bits(want.post, got.post)) << label << " post";
  EXPECT_TRUE(same_finite_bits(want.comb, got.comb)) << label << " comb";
  EXPECT_TRUE(same_finite_bits(want.mixes, got.mixes)) << label << " mixes";
}

// A boundary between two sites on the device (the folded post and the fused boundary tests): the
// previous site (x, post, comb, F), this site's weights and carried pre_mix.
struct FoldCase {
  MhcParams p;
  int64_t m;
  SiteCase c;
  DeviceWeights w;
  cuda::DeviceBuffer<Bf16> x_prev, f;
  cuda::DeviceBuffer<float> prev_post, prev_comb, pre_mix;
  FoldCase(const MhcParams& params, int64_t tokens, uint64_t seed, double amplitude = 1.0)
      : p(params),
        m(tokens),
        c(random_site_case(params, tokens, seed, amplitude)),
        w(c.weights),
        x_prev(to_device(c.x)),
        f(to_device(c.sublayer_out)),
        prev_post(random_floats(size_t(tokens * params.n), seed + 1, 0.0, 2.0)),
        prev_comb(random_floats(size_t(tokens * params.n * params.n), seed + 2, 0.0, 1.0)),
        pre_mix(to_device(c.pre_mix)) {}

  static cuda::DeviceBuffer<float> random_floats(size_t count, uint64_t seed, double lo,
                                                 double hi) {
    TestRng rng(seed);
    std::vector<float> v(count);
    for (float& e : v) e = float(rng.uniform(lo, hi));
    return to_device(v);
  }
};

// The outputs of the path under test, poisoned.
struct FoldOutputs {
  cuda::DeviceBuffer<Bf16> x, layer_input;
  DeviceCoefficients coef;
  FoldOutputs(const MhcParams& p, int64_t m)
      : x(poisoned<Bf16>(size_t(m * p.k()))),
        layer_input(poisoned<Bf16>(size_t(m * p.hidden))),
        coef(p, m) {}
};

inline std::string case_name(const MhcParams& p, int64_t tokens, double amplitude) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "n=%d C=%d M=%lld amp=%g", p.n, p.hidden, (long long)tokens,
                amplitude);
  return buf;
}

#define MHC_EXPECT_CLOSE(stats, tol, label)                                            \
  do {                                                                                 \
    const ::mhc::ErrorStats mhc_stats_ = (stats);                                      \
    EXPECT_TRUE(mhc_stats_.passes(tol))                                                \
        << (label) << ": " << mhc_stats_.describe() << " (tolerance " << (tol) << ")"; \
  } while (0)

}  // namespace mhc::test
