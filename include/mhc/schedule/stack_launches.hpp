// The launches of an mHC stack's sites, in each layout, over device buffers the caller owns: what
// the StackExecutor (mhc/schedule/stack_executor.hpp) enqueues for a forward, and what
// `mhc bench kernels` times as a stack's steady state (bench/), so that both run the same code.
//
// Site s reads the streams src(s) (x_in for site 0, else x[s % 2]) and writes dst(s) =
// x[(s + 1) % 2]; its pre/post/comb go to the buffers of its parity, so that a launch of site s+1
// can read site s's while it writes its own. The layouts:
//   fused_post     every post also forms the next site's layer_input (or, for the last site, the
//                  final collapse and norm); only site 0 runs a separate input path;
//   decode         the input path inside the coefficient launch, plain posts (the last one still
//                  forms the output);
//   folded_decode  decode, and each post but the last inside the next site's coefficient launch;
//   fused_boundary folded_decode's launches at sizes where that launch is the fused boundary.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "mhc/core/bf16.hpp"
#include "mhc/core/config.hpp"
#include "mhc/core/params.hpp"
#include "mhc/cuda/device_site.hpp"
#include "mhc/cuda/kernels.hpp"
#include "mhc/schedule/two_stream.hpp"

namespace mhc::cuda {

// How a forward's sites are launched (docs/overlap.md).
enum class StackLayout {
  fused_post,     // every post also forms the next layer_input (the overlap schedule's layout)
  decode,         // input path inside the coefficient launch, plain posts (native, decode sizes)
  folded_decode,  // decode, and each post but the last inside the next coefficient launch
  // folded_decode's launches where the tuning fuses the boundary (LaunchTuning::fused_boundary):
  // site s > 0 is one launch (sm90_boundary.cuh) besides its sublayer. Native only; its
  // coefficients and layer_input are another kernel's than the overlap schedule's, so the two
  // schedules then agree within the TF32 tier, not bitwise.
  fused_boundary,
};
const char* to_string(StackLayout layout);

// The sublayer of site `site`: reads layer_input [tokens, C], writes out [tokens, C] on `stream`
// (with tensor parallelism, its all-reduce belongs in here too). Must not allocate or sync.
using SublayerFn = std::function<void(int site, int64_t tokens, const Bf16* layer_input, Bf16* out,
                                      cudaStream_t stream)>;

// Enqueued once x after site `site` has been formed (e.g. to copy it into a layer trace).
using SiteDoneFn = std::function<void(int site, int64_t tokens, const Bf16* x, cudaStream_t)>;

// Device buffers of a stack, not owned, each sized for the largest token count launched.
struct StackBuffers {
  const Bf16* x_in = nullptr;         // site 0's streams [M, n, C]
  Bf16* x[2] = {};                    // ping-pong streams [M, n, C]
  const float* pre_mix_in = nullptr;  // site 0's pre_mix [M, n]
  float* pre[2] = {};                 // [M, n] by site parity
  float* post[2] = {};                // [M, n] by site parity
  float* comb[2] = {};                // [M, n, n] by site parity
  Bf16* layer_input = nullptr;        // [M, C]
  Bf16* sublayer_out = nullptr;       // F [M, C]
  Bf16* output = nullptr;             // [M, C]: the last site's final collapse (and norm)
  const float* final_norm = nullptr;  // [C], or null: no final norm
};

class StackLaunches {
 public:
  // `sites[s]` are site s's weights (not owned; the number of sites is sites.size()); `sublayer`
  // null: no sublayer stage (the kernel benchmark); `site_done` null: none.
  StackLaunches(const MhcParams& p, std::vector<const DeviceSiteWeights*> sites,
                const StackBuffers& buffers, SiteWorkspace& workspace, SublayerFn sublayer,
                SiteDoneFn site_done = nullptr);

  // Site s's launches for `tokens` tokens in `layout`, as `tuning` (KernelPlan::tuning for this
  // shape and token count) says. The callables refer to this object, which must outlive them.
  SiteLaunches site(StackLayout layout, int s, int64_t tokens, const LaunchTuning& tuning) const;

  int sites() const { return int(sites_.size()); }
  const Bf16* src(int s) const { return s == 0 ? b_.x_in : b_.x[s % 2]; }
  Bf16* dst(int s) const { return b_.x[(s + 1) % 2]; }

 private:
  SiteLaunches fused_post(int s, int64_t tokens, const LaunchTuning& tuning) const;
  SiteLaunches decode(int s, int64_t tokens, const LaunchTuning& tuning) const;
  SiteLaunches folded_decode(int s, int64_t tokens, const LaunchTuning& tuning) const;
  CoefficientBuffers coefficient_buffers(int s) const;
  InputPathBuffers input_buffers(int s) const;
  PreviousPost previous_post(int s) const;
  void done(int s, int64_t tokens, cudaStream_t st) const {
    if (site_done_) site_done_(s, tokens, dst(s), st);
  }

  MhcParams p_;
  std::vector<const DeviceSiteWeights*> sites_;
  StackBuffers b_;
  SiteWorkspace& ws_;
  SublayerFn sublayer_;
  SiteDoneFn site_done_;
};

}  // namespace mhc::cuda
