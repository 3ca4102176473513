// The FP8 layer input's rows of `mhc bench kernels` (docs/fp8.md): the FP8 ops against the
// engine's alternative, the bf16 op followed by a group quantisation launch, timed in the same
// run. CUDA builds only.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mhc/core/kernel_plan.hpp"
#include "mhc/core/params.hpp"
#include "mhc/cuda/device_site.hpp"
#include "mhc/cuda/kernels.hpp"
#include "mhc/cuda/timing.hpp"

namespace mhc::bench {

struct Fp8Row {
  std::string name;
  double bytes;  // the floor's bytes: the FP8 layer_input's codes and scales, not bf16's
  cuda::EnqueueFn enqueue;
  bool coefficient_launch;  // the row runs the coefficient launch of `tuning`
};

// The rows at m tokens of shape p (C a multiple of 128, else none): the boundary (the previous
// post, the next input path, the coefficients) with the FP8 layer_input, and the plan's bf16
// boundary followed by the quantisation; the input path likewise. `tuning` is the plan's for m;
// coef_bytes the coefficient path's floor. The rows own their FP8 outputs (DeepGEMM's SM90
// column-major scales); the arguments must outlive them.
std::vector<Fp8Row> fp8_rows(const MhcParams& p, int64_t m, const cuda::DeviceSiteWeights& w,
                             cuda::SiteWorkspace& ws, const LaunchTuning& tuning,
                             double coef_bytes);

}  // namespace mhc::bench
