// One mHC site on the device: its weights and buffers, and the launches of a whole site enqueued
// on a stream (what the backend runs, captures and times, and what `mhc bench` times).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "mhc/core/config.hpp"
#include "mhc/core/params.hpp"
#include "mhc/core/site_views.hpp"
#include "mhc/cuda/device_buffer.hpp"
#include "mhc/cuda/kernels.hpp"

namespace mhc::cuda {

struct DeviceSiteWeights {
  DeviceBuffer<float> hc_fn, hc_base, hc_scale, norm_weight;
  DeviceSiteWeights() = default;
  DeviceSiteWeights(const MhcParams& p, const SiteWeightsView& w);
};

// Per-token buffers of one site for up to `tokens` tokens.
struct DeviceSiteBuffers {
  int64_t tokens = 0;
  DeviceBuffer<Bf16> x, x_next, sublayer_out, layer_input;
  DeviceBuffer<float> pre_mix, pre, post, comb, mixes;
  // A second post/comb pair (zeroed) for schedules that read one site's while writing the next.
  DeviceBuffer<float> post_alt, comb_alt;
  DeviceSiteBuffers() = default;
  DeviceSiteBuffers(const MhcParams& p, int64_t tokens);
  CoefficientBuffers coefficients(const DeviceSiteWeights& w) const;
};

// Input path and coefficient path (one launch at decode sizes), then the post, of one site, in
// stream order on one stream, as `tuning` (KernelPlan::tuning) says (no allocation, capturable).
void enqueue_site(const MhcParams& p, int64_t tokens, const DeviceSiteWeights& w,
                  DeviceSiteBuffers& b, const LaunchTuning& tuning, SiteWorkspace& ws,
                  cudaStream_t stream);

}  // namespace mhc::cuda
