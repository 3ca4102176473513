// The head collapse's checked launcher (mhc/cuda/head.hpp) and its one compiled copy of the
// kernels (mhc/cuda/head.cuh).
#include <algorithm>
#include <type_traits>

#include "launch_checks.cuh"
#include "mhc/cuda/device_buffer.hpp"
#include "mhc/cuda/head.cuh"
#include "mhc/cuda/head.hpp"

namespace mhc::cuda {

using detail::bits;
using detail::check_launch;
using detail::check_ptr;
using detail::check_shape;
using detail::require_that;

namespace {

// Queried once per stream count: the attribute is the loaded image's, the same for every launch.
// The n = 2 kernel exists only in builds with the n = 2 kernels (launch_checks.cuh).
int query_head_max_hidden(int n) {
  int threads = 0;
  constexpr int kTokens = kHeadTokensPerCta;
  const cudaError_t err = n == 2 ? MHC_N2_LAUNCH(head_max_threads<2, kTokens>(&threads))
                                 : head_max_threads<4, kTokens>(&threads);
  MHC_CUDA_CHECK(err);
  return std::min(row_kernel_max_hidden(), threads / kWarp * kWarp * kRowVecs * kBf16PerVec);
}

bool overlaps(const void* a, int64_t a_bytes, const void* b, int64_t b_bytes) {
  const auto a0 = reinterpret_cast<uintptr_t>(a), b0 = reinterpret_cast<uintptr_t>(b);
  return a0 < b0 + uintptr_t(b_bytes) && b0 < a0 + uintptr_t(a_bytes);
}

template <int kStreams>
cudaError_t launch_head_as(HeadForm form, const HeadArgs& a, int64_t tokens, LaunchTarget on) {
  return form == HeadForm::kTokensPerCta ? launch_head<kStreams, kHeadTokensPerCta>(a, tokens, on)
                                         : launch_head<kStreams, 1>(a, tokens, on);
}

}  // namespace

// Few tokens: one token per CTA, bounded by one CTA's latency (its row and all of hc_fn read by
// one SM), which fewer, longer CTAs would lengthen. Many: hc_fn's L2 traffic (read once per CTA,
// eight times x's bytes per token at n = 4 with one token per CTA) bounds the launch, and several
// tokens per CTA divide it. Measured on an H100 at C = 5120 (bench/results/h100-2026-12-07-
// b1552c6/head-kernels.json, both forms' rows): the batched form was the faster from 1024 tokens
// on (1024, 2048, 4096, 8192) and 2.5-5 times slower at 1-16; between 16 and 1024 not measured.
HeadForm head_form_for(int64_t tokens) {
  constexpr int64_t kBatchedFrom = 1024;
  return tokens >= kBatchedFrom ? HeadForm::kTokensPerCta : HeadForm::kTokenPerCta;
}

int head_max_hidden(int n) {
  require_that(n == 2 || n == 4, "head: n={} is not supported by the CUDA kernels (2 or 4)", n);
  require_that(n != 2 || detail::kKernelsN2,
               "head: the n = 2 kernels were not built; configure with -DMHC_KERNELS_N2=ON");
  if (n == 2) {
    static const int limit = query_head_max_hidden(2);
    return limit;
  }
  static const int limit = query_head_max_hidden(4);
  return limit;
}

void head(const MhcParams& p, int64_t tokens, const HeadBuffers& b, LaunchTarget stream,
          HeadForm form) {
  constexpr const char* what = "head";
  check_shape(p, tokens, what);
  const int max_hidden = head_max_hidden(p.n);
  require_that(p.hidden <= max_hidden,
               "{}: hidden size C={} is above the head kernel's limit {} for n={} on this device",
               what, p.hidden, max_hidden, p.n);
  if (tokens == 0) return;
  check_ptr(b.x, "x", what);
  check_ptr(b.hc_fn, "hc_fn", what);
  check_ptr(b.out, "out", what);
  require_that(b.hc_base != nullptr && b.hc_scale != nullptr,
               "{}: hc_base and hc_scale must not be null", what);
  if (b.norm_weight != nullptr) check_ptr(b.norm_weight, "norm_weight", what);
  if (b.norm_weight_bf16 != nullptr) check_ptr(b.norm_weight_bf16, "norm_weight_bf16", what);
  require_that(b.norm_weight == nullptr || b.norm_weight_bf16 == nullptr,
               "{}: give norm_weight or norm_weight_bf16, not both", what);
  require_that(!overlaps(b.out, tokens * p.hidden * 2, b.x, tokens * p.k() * 2),
               "{}: out must not overlap x", what);
  HeadArgs a;
  a.x = bits(b.x);
  a.hc_fn = b.hc_fn;
  a.hc_base = b.hc_base;
  a.hc_scale = b.hc_scale;
  a.norm_weight = b.norm_weight;
  a.norm_weight_bf16 = bits(b.norm_weight_bf16);
  a.out = bits(b.out);
  a.weights = b.weights;
  a.hidden = p.hidden;
  a.rms_eps = static_cast<float>(p.rms_eps());
  a.hc_eps = static_cast<float>(p.pre_eps());
  a.norm_eps = static_cast<float>(p.norm_eps());
  if (form == HeadForm::kPlan) form = head_form_for(tokens);
  const cudaError_t err = p.n == 2 ? MHC_N2_LAUNCH(launch_head_as<2>(form, a, tokens, stream))
                                   : launch_head_as<4>(form, a, tokens, stream);
  check_launch(err, what);
}

void head_on_host(const MhcParams& p, const HeadWeightsView& w, int64_t tokens, const Bf16* x,
                  Bf16* out, float* weights, cudaStream_t stream) {
  check_shape(p, tokens, "head");
  if (tokens == 0) return;
  require_that(x && out && w.hc_fn && w.hc_base && w.hc_scale,
               "head: x, out, hc_fn, hc_base and hc_scale must not be null");
  const auto upload = [](const auto* host, size_t count) {
    DeviceBuffer<std::remove_const_t<std::remove_pointer_t<decltype(host)>>> d(count);
    d.upload(host, count);
    return d;
  };
  const auto d_x = upload(x, size_t(tokens * p.k()));
  const auto d_fn = upload(w.hc_fn, size_t(head_fn_count(p)));
  const auto d_base = upload(w.hc_base, size_t(head_base_count(p)));
  const auto d_scale = upload(w.hc_scale, size_t(kHeadScaleCount));
  DeviceBuffer<float> d_norm(w.norm_weight ? size_t(p.hidden) : 0);
  if (w.norm_weight) d_norm.upload(w.norm_weight, size_t(p.hidden));
  DeviceBuffer<Bf16> d_out(size_t(tokens * p.hidden));
  DeviceBuffer<float> d_weights(size_t(tokens * p.n));
  head(p, tokens,
       {d_x.get(), d_fn.get(), d_base.get(), d_scale.get(), w.norm_weight ? d_norm.get() : nullptr,
        d_out.get(), d_weights.get()},
       LaunchTarget(stream, false));
  MHC_CUDA_CHECK(cudaStreamSynchronize(stream));
  d_out.download(out, size_t(tokens * p.hidden));
  if (weights) d_weights.download(weights, size_t(tokens * p.n));
}

}  // namespace mhc::cuda
