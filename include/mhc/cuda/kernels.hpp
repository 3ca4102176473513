// Host API of the mHC CUDA kernels: checked launchers on device pointers, and the workspace of
// the coefficient path. Host-only (no kernels here), so tests, the backend and the benchmark
// share one compiled copy of every kernel (src/cuda/kernels.cu).
//
// Every launcher checks its arguments and throws mhc::Error on a bad shape, pointer or tuning;
// a CUDA launch error is thrown as mhc::Error too. Zero tokens is a valid no-op. Nothing here
// allocates: the coefficient path takes its split-K scratch from a SiteWorkspace made once.
#pragma once
#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <string>

#include "mhc/core/bf16.hpp"
#include "mhc/core/config.hpp"
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

// Tuning of the prenorm GEMM: K splits and tokens per CTA: 16 or 64 (register-fed kernel, any
// GPU) or 128 (TMA kernel, images with the sm_90 instructions). 0 means "choose" (the device's
// kernel plan); fused_input_max_tokens < 0 means the device plan's. The fused input path gives
// the bits of the separate launch (the row is cut alike in every CTA), so it fuses in
// batch-invariant mode too; the 64-row tile has no input-path CTAs.
struct PrenormTuning {
  int splits = 0;
  int rows_per_tile = 0;
  int64_t fused_input_max_tokens = -1;
  // The fixed reduction order of KernelConfig::batch_invariant (docs/batch_invariance.md): splits
  // must then be a power of two dividing batch_invariant_leaves(p), and equal to it for the
  // register-fed kernel.
  bool batch_invariant = false;
  // Launch with programmatic dependent launch (kernel config "pdl"; the image must have the
  // waits, else it is ignored).
  bool pdl = true;
  // The plan's cluster_post_max_tokens for the posts of the same site (NextInput); < 0: the
  // device plan's.
  int64_t cluster_post_max_tokens = -1;
  // The fused boundary (prenorm_coefficients with `previous`: one launch, sm90_boundary.cuh) from
  // this many tokens where it is eligible (boundary_fuses), at C >= fused_boundary_min_hidden and
  // n == fused_boundary_streams (0: any), from fewer tokens at wider C (fused_boundary_wide);
  // 0 tokens: never; < 0: the device plan's rule.
  int64_t fused_boundary_min_tokens = -1;
  int fused_boundary_min_hidden = 0;
  int fused_boundary_streams = 0;
  BoundaryWideSteps fused_boundary_wide{};
  // The fused boundary's CTAs per tile (1..8); 0: boundary_tile's rule. For sweeps.
  int boundary_splits = 0;
  // The fused boundary's tokens per tile: 128 or 64 (64-column stages only), or 32 (128-column
  // stages only); 0: boundary_tile's rule (128 where boundary_splits is forced, 32 with 128-column
  // stages). For sweeps.
  int boundary_rows = 0;
  // The fused boundary's columns per pipeline stage: 64 (2 stages of 104 KB in the ring at
  // n = 4), 32 (4 of 52 KB) or 128 (the wide stages of 32-row tiles: 2 of 88 KB, each row's
  // 256 bytes in one piece); 0: 64. For sweeps.
  int boundary_stage_columns = 0;
  // The TMA kernel's tiles of 2-8 splits as thread block clusters that reduce through distributed
  // shared memory and share the stats (the same bits; PrenormArgs::cluster_epilogue), where the
  // device holds every tile's cluster at once; and the fused boundary's (always a cluster) the
  // same way. 0: the workspace and the tile's last CTA; 1: the clusters (where they fit); < 0:
  // the device plan's (KernelPlan::tma_cluster_epilogue).
  int tma_cluster_epilogue = -1;
  // The 16-row kernel's CTAs per tile, each running every split_ctas-th split in turn (the same
  // bits as one CTA per split, on fewer SMs: the overlap's side stream,
  // KernelPlan::side_split_ctas); 0, or not fewer than the splits: one CTA per split; < 0: the
  // device plan's side_split_ctas for this launch (what the Python ops' side-stream launches
  // ask for). Other tiles, batch-invariant mode and the folded post run one CTA per split.
  int split_ctas = 0;
  // The 16-row kernel's partials as flagged pairs that a CTA per row polls, instead of the
  // arrival counter and the tile's last CTA (decode_flagged.cuh; the same bits): 1 where
  // decode_flagged_fits, 2 there but not in the split loop, 0 never; < 0: the device plan's
  // (flagged_partials_max_tokens, flagged_partials_split_loop).
  int flagged_partials = -1;
  std::string describe() const;
};
// `t` with the fused boundary at every token count, hidden size and stream count the kernel takes
// (boundary_fuses still asks for the image, the TF32 projection and C a multiple of 64): what the
// benchmarks and tests force, whatever the plan's rule (which leaves out some hidden sizes and
// stream counts, so that forcing only the token count would measure the unfused launches there).
PrenormTuning forcing_fused_boundary(PrenormTuning t);
// Whether the current device runs the bulk-copy (TMA) prenorm kernel (its kernel plan's answer).
bool tma_prenorm_available();
// Whether a TMA-kernel launch of `tokens` with `splits` splits (after prenorm_coefficients'
// rebalancing) that asks for the cluster epilogue (PrenormTuning::tma_cluster_epilogue, not
// batch-invariant) gets it: 2-8 splits, and every tile's cluster resident on the current device
// at once.
bool tma_cluster_epilogue_fits(const MhcParams& p, int64_t tokens, int splits);
// The kernel plan's tuning for this shape and token count (mhc/core/kernel_plan.hpp); a
// batch-invariant plan's is batch_invariant_tuning with the plan's kernel and multiprocessors.
PrenormTuning choose_prenorm_tuning(const KernelPlan& plan, const MhcParams& p, int64_t tokens);
// Largest split count the kernel accepts for this shape (one chunk per warp).
int max_prenorm_splits(const MhcParams& p);
// Batch-invariant mode: the number of K leaves (a power of two, from K alone) whose pairwise tree
// fixes the reduction order, and the tuning for `tokens`: the TMA kernel at every size where
// `bulk` (its order differs from the register-fed kernel's), with as many splits as fill the
// multiprocessors once; else the register-fed kernel with one leaf per split.
int batch_invariant_leaves(const MhcParams& p);
PrenormTuning batch_invariant_tuning(const MhcParams& p, int64_t tokens, int sm_count, bool bulk);
// The same for the kernel a batch-invariant plan picked (mhc::batch_invariant_kernel).
PrenormTuning batch_invariant_tuning(const MhcParams& p, int64_t tokens, int sm_count,
                                     PrenormKernel kernel);
// The tuning a config asks for under the plan made from it (device_plan(config)): the plan
// decides, batch-invariant mode included; throws mhc::Error when the plan was made for another
// batch_invariant setting.
PrenormTuning prenorm_tuning_for(const KernelPlan& plan, const KernelConfig& config,
                                 const MhcParams& p, int64_t tokens);

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
  Bf16* layer_input = nullptr;
};
// Whether prenorm_coefficients with this (resolved) tuning runs the input path inside the
// coefficient launch (extra CTAs) rather than as a launch of its own.
bool input_path_fuses(const MhcParams& p, int64_t tokens, const PrenormTuning& tuning);

// Whether prenorm_coefficients with `previous` (and `input`) runs the fused boundary kernel: the
// tuning's (or the device plan's) fused_boundary_* rule holds, the image has the sm_90a
// kernels, the TF32 projection, not batch-invariant, and the 16-row fold does not apply.
bool boundary_fuses(const MhcParams& p, int64_t tokens, const PrenormTuning& tuning,
                    Projection projection);
// The tile the fused boundary launches on this device for `tokens` with `tuning` and `ws` (the
// tuning's forced fields, the rules of mhc/core/sm90_boundary_plan.hpp for the rest, on this
// device's cluster capacities; what benchmarks report). Throws on a bad
// forced field.
BoundaryTile boundary_launch_tile(const MhcParams& p, int64_t tokens, const PrenormTuning& tuning,
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

// Step 2 in one launch: prenorm GEMM + sum of squares, split-K, fused stats. Refuses a workspace
// made for another C or n. `tuning` fields left 0 are chosen by choose_prenorm_tuning. With
// `input`, also step 1 on the same x: inside the same launch (extra CTAs beside the GEMM's) with
// 16-token tiles up to the plan's fused_input_max_tokens, where a launch costs more than the work,
// else as a separate input_path launch just before.
//
// With `previous` (needs `input`), the previous site's post runs first, inside the same launch
// where the input path fuses (the GEMM CTAs form their slices of x on the fly, the input-path
// CTAs write x and layer_input), else as a post + next input launch before. The results are
// bitwise those of post(previous, next = input) followed by this call without `previous`. Where
// boundary_fuses, one launch does all of it instead (the fused boundary): x bitwise the same,
// the coefficients and layer_input within the TF32 tier (another K and norm order). Since
// the launch reads previous->post/comb while writing b.post/b.comb, those must not alias.
void prenorm_coefficients(const MhcParams& p, int64_t tokens, const CoefficientBuffers& b,
                          Projection projection, PrenormTuning tuning, SiteWorkspace& ws,
                          cudaStream_t stream, const InputPathBuffers* input = nullptr,
                          const PreviousPost* previous = nullptr);

// Step 1: layer_input = bf16(rmsnorm(bf16(sum_j pre_mix[j] x[j])) * norm_weight).
void input_path(const MhcParams& p, int64_t tokens, const Bf16* x, const float* pre_mix,
                const float* norm_weight, Bf16* layer_input, LaunchTarget stream);

// The next site's input path, fused into the post (norm_weight null: plain collapse).
struct NextInput {
  const float* pre_mix = nullptr;  // this site's pre
  const float* norm_weight = nullptr;
  Bf16* layer_input = nullptr;
  // Up to this many tokens (and C <= 8192), one thread block cluster per token instead of one
  // CTA (sm90_post_cluster.cuh; the same bits); < 0: the device plan's cluster_post_max_tokens.
  int64_t cluster_max_tokens = -1;
};

// Up to this many tokens the plain post (next == nullptr) runs one thread per 8-column vector of
// a token (post_columns_kernel, post.cuh); above, one CTA per token. Both give the same bits.
inline constexpr int64_t kPostColumnsMaxTokens = 64;

// Whether post(..., next) runs by clusters (NextInput::cluster_max_tokens) on this device.
bool post_in_clusters(const MhcParams& p, int64_t tokens, const NextInput& next);

// Step 4: x_next = bf16(post * F + comb^T x); with `next`, also the next site's layer_input.
// x_next must not alias x.
void post(const MhcParams& p, int64_t tokens, const Bf16* x, const float* post, const float* comb,
          const Bf16* sublayer_out, Bf16* x_next, const NextInput* next, LaunchTarget stream);

// The raw split partials of the prenorm GEMM (mhc/cuda/prenorm_splits.cuh; DeepGEMM's
// tf32_hc_prenorm_gemm): x [M, K] bf16, fn [N, K], out [S, M, N], sqrsum [S, M]. Shapes as
// mhc::check_prenorm_gemm_shape; at most 65535 splits.
void prenorm_gemm(int64_t tokens, int64_t nmix, int64_t k, int splits, const Bf16* x,
                  const float* fn, float* out, float* sqrsum, cudaStream_t stream);

// out[i] = float(in[i]) for `count` values (exact): a bf16 weight for the fp32-weight kernels.
void widen_bf16(const Bf16* in, int64_t count, float* out, cudaStream_t stream);

// The stack's stand-in sublayer: F = bf16(gain * layer_input).
void standin_sublayer(const MhcParams& p, int64_t tokens, const Bf16* layer_input,
                      const float* gain, Bf16* out, LaunchTarget stream);

// Multiprocessors of the current device.
int current_sm_count();

}  // namespace mhc::cuda
