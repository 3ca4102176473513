// The head collapse's checked launcher (mhc/cuda/head.hpp), its choice of form, and the one
// compiled copy of its kernels (mhc/cuda/head.cuh, mhc/cuda/sm90_head_cluster.cuh).
#include <algorithm>
#include <iterator>
#include <type_traits>

#include "launch_checks.cuh"
#include "mhc/cuda/device_buffer.hpp"
#include "mhc/cuda/device_plan.hpp"
#include "mhc/cuda/head.cuh"
#include "mhc/cuda/head.hpp"
#include "mhc/cuda/sm90_head_cluster.cuh"

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

// The cluster form's CTA size: one for every group size and C, since the reduction order (the
// bits) follows it; 128 threads hold C / 8 columns of each stream with at most one to a few
// 16-byte vectors each at the model's C.
constexpr int kClusterThreads = 128;

template <int kStreams, int kTokens>
cudaError_t launch_cluster_group(const HeadArgs& a, int64_t tokens, LaunchTarget on) {
  return launch_head_cluster<kStreams, kHeadClusterCtas, kTokens, kClusterThreads>(a, tokens, on);
}

// The group sizes head_cluster_tokens picks; each has its kernel.
constexpr int kClusterGroups[] = {1, 4, 8};

template <int kStreams>
cudaError_t launch_cluster_as(const HeadArgs& a, int64_t tokens, LaunchTarget on) {
  switch (head_cluster_tokens(tokens, a.hidden)) {
    case 1:
      return launch_cluster_group<kStreams, 1>(a, tokens, on);
    case 4:
      return launch_cluster_group<kStreams, 4>(a, tokens, on);
    default:
      return launch_cluster_group<kStreams, 8>(a, tokens, on);
  }
}

template <int kStreams>
cudaError_t launch_head_as(HeadForm form, const HeadArgs& a, int64_t tokens, LaunchTarget on) {
  switch (form) {
    case HeadForm::kCluster:
      return launch_cluster_as<kStreams>(a, tokens, on);
    case HeadForm::kTokensPerCta:
      return launch_head<kStreams, kHeadTokensPerCta>(a, tokens, on);
    default:
      return launch_head<kStreams, 1>(a, tokens, on);
  }
}

// The cluster kernels as the current device loaded them, per group size: whether the image loaded
// is sm_90a (the kernel's body is compiled there only), and how much dynamic shared memory a CTA
// may take beside the static.
struct ClusterImage {
  bool sm90 = true;
  size_t dynamic_limit[std::size(kClusterGroups)] = {};
};

template <int kStreams, int kTokens>
cudaError_t query_cluster_group(int optin, bool* sm90, size_t* limit) {
  cudaFuncAttributes attr{};
  const cudaError_t err =
      head_cluster_attributes<kStreams, kHeadClusterCtas, kTokens, kClusterThreads>(&attr);
  if (err != cudaSuccess) return err;
  KernelVariantInfo loaded;
  loaded.binary_version = attr.binaryVersion;
  loaded.ptx_version = attr.ptxVersion;
  *sm90 = *sm90 && loaded_image(loaded).is_sm90a();
  *limit = size_t(optin) > attr.sharedSizeBytes ? size_t(optin) - attr.sharedSizeBytes : 0;
  return cudaSuccess;
}

template <int kStreams>
cudaError_t query_cluster_image(ClusterImage* im) {
  int device = 0, optin = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err == cudaSuccess) {
    err = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  }
  if (err == cudaSuccess)
    err = query_cluster_group<kStreams, 1>(optin, &im->sm90, &im->dynamic_limit[0]);
  if (err == cudaSuccess)
    err = query_cluster_group<kStreams, 4>(optin, &im->sm90, &im->dynamic_limit[1]);
  if (err == cudaSuccess)
    err = query_cluster_group<kStreams, 8>(optin, &im->sm90, &im->dynamic_limit[2]);
  return err;
}

// Queried once per stream count, as query_head_max_hidden.
const ClusterImage& cluster_image(int n) {
  const auto query = [](int streams) {
    ClusterImage im;
    const cudaError_t err =
        streams == 2 ? MHC_N2_LAUNCH(query_cluster_image<2>(&im)) : query_cluster_image<4>(&im);
    MHC_CUDA_CHECK(err);
    return im;
  };
  if (n == 2) {
    static const ClusterImage im = query(2);
    return im;
  }
  static const ClusterImage im = query(4);
  return im;
}

}  // namespace

// THE SWITCH: true makes the cluster form the head's form on every device that runs it (the sm_90a
// image), at every token count; false: the CTA forms everywhere (their bits, not the cluster
// form's). Off until the cluster kernel's GPU tests and timings have run in the product (its lab
// prototype's have; docs/head.md): the tests that force the cluster form run either way.
constexpr bool kHeadClusterFormOn = false;

// Tokens per cluster group; speed only, a token's bits do not depend on it. Measured with
// clusters of 8 CTAs on an H100, head collapse + final norm, group sizes 1, 2, 4, 8, 16
// (dev/results/h100-2026-12-07-b25ea38/head_cluster.txt): at 1-8 tokens one token a group was the
// fastest at C = 4096, 5120 and 7168 (the most clusters, the shortest CTAs), at 16 within 0.3 us
// of two; at 64, four tokens were within 0.8 us of the fastest at each C (13.06, 13.79, 14.75 us);
// from 1024 tokens eight were the fastest at C = 4096 and 5120 and four at C = 7168 (there eight
// tokens' slices leave 45 clusters resident at once against four's 92, the same file). Between 16
// and 64 and between 64 and 1024 not measured.
int head_cluster_tokens(int64_t tokens, int hidden) {
  constexpr int64_t kOneUpTo = 16, kLargeFrom = 1024;
  constexpr int kEightUpToHidden = 5120;
  if (tokens <= kOneUpTo) return 1;
  if (tokens < kLargeFrom || hidden > kEightUpToHidden) return 4;
  return 8;
}

bool head_cluster_fits(int n, int hidden) {
  if ((n != 2 && n != 4) || (n == 2 && !detail::kKernelsN2)) return false;
  if (hidden <= 0 || hidden % (kHeadClusterCtas * kBf16PerVec) != 0) return false;
  const ClusterImage& im = cluster_image(n);
  if (!im.sm90) return false;
  // Every group size, picked at this C or not: at n = 4 the one-token group, picked at every C,
  // is the largest anyway (it stages hc_fn: 9C bytes against eight tokens' 8C).
  for (size_t g = 0; g < std::size(kClusterGroups); ++g) {
    const size_t bytes = head_cluster_smem_bytes(n, kClusterGroups[g], hidden, kHeadClusterCtas);
    if (bytes > im.dynamic_limit[g]) return false;
  }
  return true;
}

bool head_cluster_planned(int n, int hidden) {
  return kHeadClusterFormOn && head_cluster_fits(n, hidden);
}

// Without the cluster form: few tokens, one token per CTA, bounded by one CTA's latency (its row
// and all of hc_fn read by one SM), which fewer, longer CTAs would lengthen. Many: hc_fn's L2
// traffic (read once per CTA, eight times x's bytes per token at n = 4 with one token per CTA)
// bounds the launch, and several tokens per CTA divide it. Measured on an H100 at C = 5120
// (bench/results/h100-2026-12-07-b1552c6/head-kernels.json, both forms' rows): the batched form
// was the faster from 1024 tokens on (1024, 2048, 4096, 8192) and 2.5-5 times slower at 1-16;
// between 16 and 1024 not measured. The two give the same bits, so the crossover is free.
HeadForm head_form_for(int64_t tokens, bool cluster) {
  constexpr int64_t kBatchedFrom = 1024;
  if (cluster) return HeadForm::kCluster;
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
  if (form == HeadForm::kPlan) form = head_form_for(tokens, head_cluster_planned(p.n, p.hidden));
  require_that(form != HeadForm::kCluster || head_cluster_fits(p.n, p.hidden),
               "{}: the cluster form does not run here (n={}, C={}): it needs the sm_90a image, C "
               "a multiple of {} and its groups' slices within a CTA's shared memory",
               what, p.n, p.hidden, kHeadClusterCtas * kBf16PerVec);
  require_that(
      form != HeadForm::kCluster ||
          ceil_div(tokens, int64_t(head_cluster_tokens(tokens, p.hidden))) * kHeadClusterCtas <=
              INT32_MAX,
      "{}: {} tokens are too many for one launch of the cluster form", what, tokens);
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
