// A backend runs mHC sites and stacks on host buffers: "cpu" always, "cuda" when built with CUDA
// and a GPU is present. The CLI and the tests talk to backends only through this interface.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mhc/core/config.hpp"
#include "mhc/core/dispatch.hpp"
#include "mhc/core/head_views.hpp"
#include "mhc/core/site_views.hpp"
#include "mhc/cpu/compare.hpp"
#include "mhc/cpu/model.hpp"

namespace mhc {

struct SiteTiming {
  double median_us = 0;  // per site
  int reps = 0;
  std::string method;  // e.g. "CUDA graph replay, CUDA events" or "host steady clock"
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;         // "cpu", "cuda"
  virtual std::string description() const = 0;  // device and kernel path, e.g. "NVIDIA H200 sm_90a"
  virtual void run_site(const MhcParams& p, const SiteWeightsView& w, const SiteInputsView& in,
                        const SiteOutputsView& out) = 0;
  // The head collapse (docs/head.md) of x [M, n, C] into out [M, C], with the final norm where
  // w.norm_weight is set; the collapse weights [M, n] into `weights` unless it is null.
  virtual void run_head(const MhcParams& p, const HeadWeightsView& w, int64_t tokens, const Bf16* x,
                        Bf16* out, float* weights) = 0;
  // `after_site` is told after each site where the backend computes site by site (the CPU's);
  // one that runs the stack as a whole (the GPU's) may not call it.
  virtual StackTrace run_stack(const ModelWeights& w, int64_t tokens, const Bf16* x0,
                               const SiteDone& after_site = {}) = 0;
  // Time of one whole site (input path, coefficients, stand-in-free post) at this many tokens.
  virtual SiteTiming time_site(const ModelWeights& w, int64_t tokens, int reps) = 0;
  // The GPU's compute capability; none for the CPU.
  virtual std::optional<ComputeCapability> capability() const { return std::nullopt; }
  // The design doc's tolerances for what this backend computes under `config`.
  virtual Tolerances tolerances(const KernelConfig& config) const {
    return config.projection == Projection::fp32 ? kFp32Tolerances : kTf32Tolerances;
  }
};

// "auto" (best present), "cpu", "cuda". Throws mhc::Error when the backend is unknown, not built
// in, or has no device.
std::unique_ptr<Backend> make_backend(std::string_view name, const KernelConfig& config);
std::vector<std::string> built_backends();

}  // namespace mhc
