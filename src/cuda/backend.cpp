// The CUDA backend: runs sites and stacks on the GPU, times a whole site through CUDA graphs.
#include <fmt/core.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "mhc/core/error.hpp"
#include "mhc/cuda/check.hpp"
#include "mhc/cuda/cuda_backend.hpp"
#include "mhc/cuda/device_plan.hpp"
#include "mhc/cuda/device_site.hpp"
#include "mhc/cuda/head.hpp"
#include "mhc/cuda/kernels.hpp"
#include "mhc/cuda/timing.hpp"
#include "mhc/schedule/stack_run.hpp"

namespace mhc::cuda {
namespace {

template <typename... Args>
std::string msg(std::string_view format, const Args&... args) {
  return fmt::vformat(format, fmt::make_format_args(args...));
}

// A cheap identity of a model's weights: shapes plus samples of every array, so that the upload
// is done once per model, not once per call.
uint64_t fingerprint(const ModelWeights& w) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](const void* data, size_t bytes) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  };
  auto sample = [&](const std::vector<float>& v) {
    const size_t n = v.size();
    mix(&n, sizeof n);
    const size_t step = std::max<size_t>(1, n / 64);
    for (size_t i = 0; i < n; i += step) mix(&v[i], sizeof(float));
  };
  mix(&w.params, sizeof w.params);
  for (const auto& s : w.sites) {
    sample(s.hc_fn);
    sample(s.hc_base);
    sample(s.hc_scale);
    sample(s.norm_weight);
  }
  for (const auto& g : w.standin_gain) sample(g);
  sample(w.final_norm);
  return h;
}

// The weights time_site needs (one site's), kept while the same model is timed again.
struct DeviceModel {
  uint64_t id = 0;
  DeviceSiteWeights site;
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const KernelConfig& config) : config_(config) {
    int device = 0;
    MHC_CUDA_CHECK(cudaGetDevice(&device));
    MHC_CUDA_CHECK(cudaGetDeviceProperties(&prop_, device));
    if (prop_.major < 8) {
      throw Error(
          msg("GPU {} has compute capability {}.{}; the CUDA backend needs sm_80 or newer "
              "(mma.sync TF32)",
              prop_.name, prop_.major, prop_.minor));
    }
    plan_ = device_plan(config_);
    MHC_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~CudaBackend() override { cudaStreamDestroy(stream_); }

  std::string name() const override { return "cuda"; }
  std::string description() const override {
    return msg("{} (sm_{}{}, {} SMs), {}, projection {}{}", prop_.name, prop_.major, prop_.minor,
               prop_.multiProcessorCount, plan_.summary(), to_string(config_.projection),
               config_.batch_invariant ? ", batch-invariant" : "");
  }
  std::optional<ComputeCapability> capability() const override {
    return ComputeCapability{prop_.major, prop_.minor};
  }

  void run_site(const MhcParams& p, const SiteWeightsView& w, const SiteInputsView& in,
                const SiteOutputsView& out) override {
    validate(p);
    if (in.tokens == 0) return;
    const int64_t m = in.tokens;
    DeviceSiteWeights dw(p, w);
    DeviceSiteBuffers b(p, m);
    b.x.upload(in.x, size_t(m * p.k()));
    b.pre_mix.upload(in.pre_mix, size_t(m * p.n));
    b.sublayer_out.upload(in.sublayer_out, size_t(m * p.hidden));
    SiteWorkspace& ws = workspace(p, m);
    enqueue_site(p, m, dw, b, plan_.tuning(p, m), ws, stream_);
    MHC_CUDA_CHECK(cudaStreamSynchronize(stream_));
    b.layer_input.download(out.layer_input, size_t(m * p.hidden));
    b.pre.download(out.pre, size_t(m * p.n));
    b.post.download(out.post, size_t(m * p.n));
    b.comb.download(out.comb, size_t(m * p.n * p.n));
    b.x_next.download(out.x_next, size_t(m * p.k()));
  }

  // The stack runs through the StackExecutor (src/schedule) eagerly, on its fastest
  // single-stream layout: up to 64 tokens each site's input path rides in its coefficient launch
  // and the post is plain; above, the post also forms the next site's layer_input (measured on
  // an H200: docs/kernels.md). The overlap schedule is `mhc run`'s business
  // (mhc/schedule/stack_run.hpp).
  void run_head(const MhcParams& p, const HeadWeightsView& w, int64_t tokens, const Bf16* x,
                Bf16* out, float* weights) override {
    head_on_host(p, w, tokens, x, out, weights, stream_);
  }

  StackTrace run_stack(const ModelWeights& w, int64_t tokens, const Bf16* x0,
                       const SiteDone& /*after_site: one run of the whole stack*/ = {}) override {
    validate(w.params);
    StackRunOptions options;
    options.mode = ExecMode::eager;
    options.native_decode_schedule = true;
    return cuda::run_stack(w, tokens, x0, config_, options).trace;
  }

  SiteTiming time_site(const ModelWeights& w, int64_t tokens, int reps) override {
    const MhcParams& p = w.params;
    validate(p);
    SiteTiming timing;
    if (tokens == 0 || reps <= 0) {
      timing.method = "no-op (zero tokens)";
      return timing;
    }
    const DeviceModel& model = upload(w);
    SiteWorkspace& ws = workspace(p, tokens);
    const LaunchTuning tuning = plan_.tuning(p, tokens);
    const TimedResult r = time_rotated_graphs(
        p, tokens, prop_.l2CacheSize, reps, stream_, [&](DeviceSiteBuffers& b, cudaStream_t s) {
          enqueue_site(p, tokens, model.site, b, tuning, ws, s);
        });
    timing.median_us = r.median_us;
    timing.reps = r.reps;
    timing.method = r.method;
    return timing;
  }

 private:
  SiteWorkspace& workspace(const MhcParams& p, int64_t tokens) {
    if (!workspace_ || workspace_->hidden() != p.hidden || workspace_->streams() != p.n ||
        workspace_->max_tokens() < tokens) {
      workspace_.reset();
      workspace_ =
          std::make_unique<SiteWorkspace>(p, std::max<int64_t>(tokens, 16), max_prenorm_splits(p));
    }
    return *workspace_;
  }

  const DeviceModel& upload(const ModelWeights& w) {
    const uint64_t id = fingerprint(w);
    if (model_ && model_->id == id) return *model_;
    model_.reset();
    auto m = std::make_unique<DeviceModel>();
    m->id = id;
    m->site = DeviceSiteWeights(w.params, w.sites.at(0).view());
    model_ = std::move(m);
    return *model_;
  }

  KernelConfig config_;
  cudaDeviceProp prop_{};
  KernelPlan plan_;  // made once: every launch of this backend resolves it
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<SiteWorkspace> workspace_;
  std::unique_ptr<DeviceModel> model_;
};

}  // namespace

bool device_present() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return false;
  }
  return count > 0;
}

std::unique_ptr<Backend> make_backend(const KernelConfig& config) {
  if (!device_present()) throw Error("no CUDA GPU is visible");
  return std::make_unique<CudaBackend>(config);
}

}  // namespace mhc::cuda
