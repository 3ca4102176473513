// mhc::Backend on the fp32 CPU site (mhc/cpu/fp32_site.hpp).
#include "mhc/cpu/cpu_backend.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "mhc/core/error.hpp"
#include "mhc/cpu/fp32_site.hpp"

namespace mhc::cpu {

namespace {

// Seed of the inputs time_site runs on (the values do not matter for the time, only that they
// are finite and realistic).
constexpr uint64_t kTimingSeed = 0x74696d65;

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const KernelConfig& config) : config_(config) {}

  std::string name() const override { return "cpu"; }

  std::string description() const override {
    std::string text = fmt::format("CPU fp32, {} threads", threads());
    // The CPU has no TF32: asked for it, it still computes the projection in fp32, so its error
    // is the fp32 tier of the design doc, not the TF32 one.
    if (config_.projection == Projection::tf32)
      text += " (tf32 projection asked: computed in fp32)";
    return text;
  }

  void run_site(const MhcParams& p, const SiteWeightsView& w, const SiteInputsView& in,
                const SiteOutputsView& out) override {
    cpu::run_site(p, w, in, out);
  }

  void run_head(const MhcParams& p, const HeadWeightsView& w, int64_t tokens, const Bf16* x,
                Bf16* out, float* weights) override {
    cpu::head(p, tokens, x, w, out, weights);
  }

  StackTrace run_stack(const ModelWeights& w, int64_t tokens, const Bf16* x0,
                       const SiteDone& after_site = {}) override {
    return cpu_stack(w, tokens, x0, after_site);
  }

  SiteTiming time_site(const ModelWeights& w, int64_t tokens, int reps) override;
  // The CPU computes the projection in fp32 whatever the config asks, so it is held to the
  // fp32 tier.
  Tolerances tolerances(const KernelConfig&) const override { return kFp32Tolerances; }

 private:
  KernelConfig config_;
};

SiteTiming CpuBackend::time_site(const ModelWeights& w, int64_t tokens, int reps) {
  const MhcParams& p = w.params;
  validate(p);
  if (tokens < 0) throw Error(fmt::format("time_site: token count {} is negative", tokens));
  if (reps < 1) throw Error(fmt::format("time_site: reps={} must be at least 1", reps));
  if (w.sites.empty()) throw Error("time_site: the model has no sites");
  const SiteWeightsView sw = w.sites.front().view();
  const std::vector<Bf16> x = synthetic_embeddings(p, tokens, kTimingSeed);
  const std::vector<float> pre_mix = first_site_pre_mix(p, tokens);
  // F is an input of the timed site (the sublayer is not part of it): the stand-in of the real
  // layer_input, computed once up front.
  SiteOutputs out(p, tokens);
  cpu::input_path(p, tokens, x.data(), pre_mix.data(), sw.norm_weight, out.layer_input.data());
  std::vector<Bf16> sublayer_out(out.layer_input.size());
  standin_sublayer(p, tokens, out.layer_input.data(), w.standin_gain.front().data(),
                   sublayer_out.data());
  const SiteInputsView in{tokens, x.data(), pre_mix.data(), sublayer_out.data()};

  cpu::run_site(p, sw, in, out.view());  // warm-up: page in the buffers and hc_fn
  std::vector<double> times_us;
  times_us.reserve(size_t(reps));
  for (int rep = 0; rep < reps; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    cpu::run_site(p, sw, in, out.view());
    const auto stop = std::chrono::steady_clock::now();
    times_us.push_back(std::chrono::duration<double, std::micro>(stop - start).count());
  }
  std::sort(times_us.begin(), times_us.end());
  const size_t mid = times_us.size() / 2;
  SiteTiming timing;
  timing.median_us =
      times_us.size() % 2 == 1 ? times_us[mid] : 0.5 * (times_us[mid - 1] + times_us[mid]);
  timing.reps = reps;
  timing.method = "host steady clock";
  return timing;
}

}  // namespace

std::unique_ptr<Backend> make_backend(const KernelConfig& config) {
  return std::make_unique<CpuBackend>(config);
}

}  // namespace mhc::cpu
