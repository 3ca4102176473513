// Host API of the mHC CUDA kernels: checked launchers on device pointers, and the workspace of
// the coefficient path. Host-only (no kernels here), so tests, the backend and the benchmark
// share one compiled copy of every kernel (src/cuda/kernels.cu).
//
// Every launcher checks its arguments and throws mhc::Error on a bad shape, pointer or tuning;
// a CUDA launch error is thrown as mhc::Error too. Zero tokens is a valid no-op. Nothing here
// allocates: the coefficient path takes its split-K scratch from a SiteWorkspace made once.
// Nothing here decides either: the site launchers take a LaunchTuning, the others a LaunchTarget
// whose PDL their caller resolved, both from the kernel plan (mhc/core/kernel_plan.hpp); no
// launcher reads a process-wide plan. An engine calls them through mhc/api.hpp.
#pragma once
#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <string>

#include "mhc/core/bf16.hpp"
#include "mhc/core/config.hpp"
#include "mhc/core/fp8.hpp"
#include "mhc/core/kernel_limits.hpp"
#include "mhc/core/kernel_plan.hpp"
#include "mhc/core/params.hpp"
#include "mhc/core/sm90_boundary_plan.hpp"
#include "mhc/cuda/launch_target.hpp"

namespace mhc::cuda {

// Split-K partials and per-tile arrival counters for one hidden size and stream count. Sized
// once for the largest token count and split count it will serve; zeroed when made (the
// counters between launches, and no flagged pair may read as written: decode_flagged.cuh).
class SiteWorkspace {
 public:
  SiteWorkspace(const MhcParams& p, int64_t max_tokens, int max_splits);
  // Over `bytes` bytes of caller-owned device memory (256-byte aligned, zero-filled once when
  // made), laid out as mhc::workspace_layout_for_bytes says; not freed here.
  SiteWorkspace(const MhcParams& p, void* memory, int64_t bytes);
  ~SiteWorkspace();
  SiteWorkspace(const SiteWorkspace&) = delete;
  SiteWorkspace& operator=(const SiteWorkspace&) = delete;

  int hidden() const { return hidden_; }
  int streams() const { return streams_; }
  int64_t max_tokens() const { return max_tokens_; }
  int64_t partial_capacity() const { return partial_capacity_; }  // floats
  float* partials() const { return partials_; }
  unsigned* tile_counters() const { return tile_counters_; }
  // C floats of scratch for a widened bf16 norm weight; null for an owning workspace.
  float* weight_scratch() const { return weight_scratch_; }

 private:
  bool owns_ = true;
  float* weight_scratch_ = nullptr;
  int hidden_ = 0, streams_ = 0;
  int64_t max_tokens_ = 0, partial_capacity_ = 0;
  float* partials_ = nullptr;
  unsigned* tile_counters_ = nullptr;
};

// Whether a TMA-kernel launch of `tokens` with `splits` splits (after prenorm_coefficients'
// rebalancing) that asks for the cluster epilogue (LaunchTuning::cluster_epilogue, not
// batch-invariant) gets it: 2-8 splits, and every tile's cluster resident on the current device
// at once. Only for an image with the TMA kernel (KernelPlan::tma128_available).
bool tma_cluster_epilogue_fits(const MhcParams& p, int64_t tokens, int splits);

struct CoefficientBuffers {         // device pointers
  const Bf16* x = nullptr;          // [M, n, C]
  const float* hc_fn = nullptr;     // [NMIX, K]
  const float* hc_base = nullptr;   // [NMIX]
  const float* hc_scale = nullptr;  // [3]
  float* pre = nullptr;             // [M, n]
  float* post = nullptr;            // [M, n]
  float* comb = nullptr;            // [M, n, n]
  float* mixes = nullptr;           // [M, NMIX], optional
};

// Step 1 requested together with step 2 (device pointers); see prenorm_coefficients.
struct InputPathBuffers {
  const float* pre_mix = nullptr;
  const float* norm_weight = nullptr;  // null: plain collapse
  // With fp8: null, or [T, C] bf16 scratch where the fused boundary stages its unscaled rows
  // (prenorm_coefficients); no other launch reads it.
  Bf16* layer_input = nullptr;
  const Fp8Output* fp8 = nullptr;  // set: layer_input written as FP8 instead
};
// The tile the fused boundary launches on this device for `tokens` with `tuning` and `ws` (the
// tuning's forced fields, the rules of mhc/core/sm90_boundary_plan.hpp for the rest, on this
// device's cluster capacities; what benchmarks report). Throws on a bad forced field.
BoundaryTile boundary_launch_tile(const MhcParams& p, int64_t tokens, const LaunchTuning& tuning,
                                  const SiteWorkspace& ws);

// The previous site's post, folded into this site's coefficient launch (decode sizes): this
// site's x is not read but formed, x = bf16(post * F + comb^T x_prev), and written to x_next.
struct PreviousPost {
  const Bf16* x = nullptr;             // the previous site's streams [M, n, C]
  const float* post = nullptr;         // its post [M, n]
  const float* comb = nullptr;         // its comb [M, n, n]
  const Bf16* sublayer_out = nullptr;  // its sublayer output [M, C]
  Bf16* x_next = nullptr;              // this site's streams [M, n, C]: must be b.x
};

// With an FP8 layer_input (input->fp8) the fused input-path CTAs and the fold write it as FP8.
// Where the tuning runs the fused boundary: with a staging buffer (input->layer_input) the fused
// boundary, its wide stages writing FP8 themselves (sm90_boundary_fp8.cuh), its other shapes bf16
// into the staging buffer followed by the group quantisation (either way the bf16 boundary's
// layer_input quantised, and its other outputs bitwise); without one the post + next input launch
// and the plain coefficient launch.
//
// Step 2 in one launch: prenorm GEMM + sum of squares, split-K, fused stats, as `tuning` says
// (KernelPlan::tuning for this shape and token count; its kernel, splits and projection). Refuses
// a workspace made for another C or n. With `input`, also step 1 on the same x: inside the same
// launch (extra CTAs beside the GEMM's) where tuning.fused_input, else as a separate input_path
// launch just before.
//
// With `previous` (needs `input`), the previous site's post runs first, inside the same launch
// where the input path fuses into a 16-row launch (the GEMM CTAs form their slices of x on the
// fly, the input-path CTAs write x and layer_input), else as a post + next input launch before.
// The results are bitwise those of post(previous, next = input) followed by this call without
// `previous`. Where tuning.fused_boundary (and it does not fold), one launch does all of it
// instead (the fused boundary): x bitwise the same, the coefficients and layer_input within the
// TF32 tier (another K and norm order). Since the launch reads previous->post/comb while writing
// b.post/b.comb, those must not alias.
void prenorm_coefficients(const MhcParams& p, int64_t tokens, const CoefficientBuffers& b,
                          const LaunchTuning& tuning, SiteWorkspace& ws, cudaStream_t stream,
                          const InputPathBuffers* input = nullptr,
                          const PreviousPost* previous = nullptr);

// Step 1: layer_input = bf16(rmsnorm(bf16(sum_j pre_mix[j] x[j])) * norm_weight), with PDL where
// `stream` asks for it (LaunchTuning::pdl).
void input_path(const MhcParams& p, int64_t tokens, const Bf16* x, const float* pre_mix,
                const float* norm_weight, Bf16* layer_input, LaunchTarget stream);
// Step 1 with the FP8 layer_input: the same kernel, its output quantised per group (fp8.cuh).
void input_path(const MhcParams& p, int64_t tokens, const Bf16* x, const float* pre_mix,
                const float* norm_weight, const Fp8Output& layer_input, LaunchTarget stream);

// Quantises bf16 rows [T, C] as the FP8 layer_input is quantised (docs/fp8.md), in a launch of
// its own: what an engine runs after a bf16 layer_input (the benchmark's comparison).
void quantize_fp8(int64_t tokens, int hidden, const Bf16* rows, const Fp8Output& out,
                  LaunchTarget stream);

// The next site's input path, fused into the post (norm_weight null: plain collapse).
struct NextInput {
  const float* pre_mix = nullptr;  // this site's pre
  const float* norm_weight = nullptr;
  Bf16* layer_input = nullptr;
  const Fp8Output* fp8 = nullptr;  // set: layer_input written as FP8 instead (layer_input unused)
};

// Step 4: x_next = bf16(post * F + comb^T x); with `next`, also the next site's layer_input (by
// one cluster per token where tuning.cluster_post, the same bits). x_next must not alias x.
void post(const MhcParams& p, int64_t tokens, const Bf16* x, const float* post, const float* comb,
          const Bf16* sublayer_out, Bf16* x_next, const NextInput* next, const LaunchTuning& tuning,
          cudaStream_t stream);

// The raw split partials of the prenorm GEMM (mhc/cuda/prenorm_splits.cuh; DeepGEMM's
// tf32_hc_prenorm_gemm): x [M, K] bf16, fn [N, K], out [S, M, N], sqrsum [S, M]. Shapes as
// mhc::check_prenorm_gemm_shape; at most 65535 splits.
void prenorm_gemm(int64_t tokens, int64_t nmix, int64_t k, int splits, const Bf16* x,
                  const float* fn, float* out, float* sqrsum, LaunchTarget stream);

// out[i] = float(in[i]) for `count` values (exact): a bf16 weight for the fp32-weight kernels.
void widen_bf16(const Bf16* in, int64_t count, float* out, LaunchTarget stream);

// The stack's stand-in sublayer: F = bf16(gain * layer_input).
void standin_sublayer(const MhcParams& p, int64_t tokens, const Bf16* layer_input,
                      const float* gain, Bf16* out, LaunchTarget stream);

// Multiprocessors of the current device.
int current_sm_count();

}  // namespace mhc::cuda
