// The kernel plan: the one launch description of a device (or a simulated one) under a kernel
// config. From the kernel images of this binary the device loads, one heuristics table per
// architecture (src/core/plan_sm*.cpp), the config's switches and its tactics, it holds every
// tuning decision: the prenorm kernel per token range, the split counts, PDL, the fused input
// path, the folded post, the projection, batch-invariant mode, and whether and up to which batch
// the overlap may run. KernelPlan::tuning resolves it for one shape and token count into a
// LaunchTuning, which is all a launcher (mhc/cuda/kernels.hpp) reads. The dispatch policy, the
// executor, the C++ API (mhc/api.hpp), the Python ops, the benchmarks and `mhc plan` all go
// through it; nothing else decides, and nothing reads a process-wide plan.
//
// Policy code, no CUDA: the plan of a real device is built by mhc::cuda::device_plan from the
// image the runtime reports loading (src/cuda/device_plan.cpp); a simulated one (`mhc plan --arch
// 10.0`, the tests) from the image the driver would pick from the build's list. Made once per
// device and config and then only read (hold it const).
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mhc/core/config.hpp"
#include "mhc/core/dispatch.hpp"
#include "mhc/core/params.hpp"
#include "mhc/core/sm90_boundary_plan.hpp"

namespace mhc {

enum class PrenormKernel { mma16, mma64, tma128 };  // register-fed 16/64-row tiles, sm90 TMA
std::string_view to_string(PrenormKernel k);
int rows_per_tile(PrenormKernel k);
PrenormKernel parse_prenorm_kernel(std::string_view s);  // throws mhc::Error

enum class OverlapAvailability { automatic, opt_in, never };
std::string_view to_string(OverlapAvailability a);

inline constexpr int64_t kNoTokenLimit = std::numeric_limits<int64_t>::max();

// A lower token threshold for the fused boundary from a wider hidden size: at C >= hidden, from
// min_tokens (0: an unused step).
struct BoundaryStep {
  int hidden = 0;
  int64_t min_tokens = 0;
};
using BoundaryWideSteps = std::array<BoundaryStep, 2>;

// One architecture's measured heuristics (src/core/plan_sm90.cpp, plan_sm80.cpp, plan_sm100.cpp).
struct ArchRules {
  std::string name;      // "sm90"
  std::string measured;  // where the numbers below come from
  int64_t mma64_from_tokens = 257;
  std::optional<int64_t> tma128_from_tokens;  // unset: the TMA kernel is never picked by itself
  int decode_max_splits = 40;
  // > 0: up to decode_stage_max_tokens tokens, more splits than decode_max_splits where K needs
  // them for each split to hold at most this much K (one register stage of the 16-row kernel:
  // 8 warps x 2 chunks of 32 = 512), up to kPrenormDecodeSplitLimit, so that all of a split's
  // hc_fn is requested before the kernel waits for x.
  int64_t decode_stage_k = 0;
  int64_t decode_stage_max_tokens = 0;
  int64_t fused_input_max_tokens = 64;
  int64_t folded_post_max_tokens = 16;
  // The post + next input path by clusters of one-warp CTAs (sm_90 clusters), up to this many
  // tokens; by one CTA per token above.
  int64_t cluster_post_max_tokens = 0;
  // The plain post (no next input path) by 8-column vectors over many CTAs up to this many tokens
  // (post_columns_kernel: a token's bytes spread over many SMs at decode sizes); by one CTA per
  // token above. The same bits either way.
  int64_t post_columns_max_tokens = 64;
  // The 16-row decode kernel's split reduction by flagged partials polled by a CTA per row
  // (decode_flagged.cuh; the same bits as the arrival counter), up to this many tokens and where
  // they fit (at most four tiles); 0: never.
  int64_t flagged_partials_max_tokens = 0;
  // The fused boundary (post + next input path + coefficients in one launch, sm_90 TMA and
  // clusters) from this many tokens; 0: never. Only where C >= fused_boundary_min_hidden and
  // n == fused_boundary_streams (0: any), the shapes where it was measured to win.
  int64_t fused_boundary_min_tokens = 0;
  int fused_boundary_min_hidden = 0;
  int fused_boundary_streams = 0;
  // Lower thresholds at wider C, where the fused boundary's lead starts earlier (BoundaryStep).
  BoundaryWideSteps fused_boundary_wide{};
  // The TMA prenorm kernel's splits of a tile as one thread block cluster (2-8 splits, where the
  // device holds every tile's cluster at once): the split reduction through distributed shared
  // memory and the stats shared, the same bits.
  bool tma_cluster_epilogue = false;
  bool pdl = true;  // where the image has griddepcontrol
  // The overlap's side-stream coefficient launch of one 16-row tile (1-16 tokens) on this many
  // CTAs, each running several splits in turn (the same bits as one CTA per split); 0, and at
  // more tokens: one CTA per split. Its time hides behind the sublayer, whose kernels want the
  // SMs; with more tiles the longer launch stopped hiding (docs/overlap.md).
  int overlap_side_ctas = 0;
  OverlapAvailability overlap = OverlapAvailability::never;
  int overlap_max_tokens = 16;
};
// Whether a fused-boundary rule (ArchRules::fused_boundary_*) covers a site of C = hidden and
// n = streams at this many tokens: from min_tokens, or from a wide step's fewer tokens where C
// reaches the step's hidden size (steps only lower the threshold, so 1, "every size", stays 1).
inline bool boundary_rule_holds(int64_t min_tokens, int min_hidden, int rule_streams,
                                const BoundaryWideSteps& wide, int hidden, int streams,
                                int64_t tokens) {
  if (min_tokens <= 0 || hidden < min_hidden || (rule_streams != 0 && streams != rule_streams)) {
    return false;
  }
  int64_t threshold = min_tokens;
  for (const BoundaryStep& step : wide) {
    if (step.min_tokens > 0 && hidden >= step.hidden)
      threshold = std::min(threshold, step.min_tokens);
  }
  return tokens >= threshold;
}

ArchRules sm80_rules();
ArchRules sm90_rules();
ArchRules sm100_rules();
// The rules for cc and the image it loads: SM100 rules only with SM100 code in the binary.
ArchRules rules_for(ComputeCapability cc, const std::optional<KernelImage>& image);

struct PrenormRange {
  int64_t min_tokens = 1, max_tokens = kNoTokenLimit;  // inclusive
  PrenormKernel kernel = PrenormKernel::mma16;
  int splits = 0;  // measured by `mhc tune` (tactics); 0: the plan's rule (prenorm_choice)
};

// Batch-invariant mode (KernelConfig::batch_invariant): one kernel per token count whatever the
// batch around it, since the kernels cut K differently: the TMA kernel at every size where the
// image has it, else the 16-row tiles up to this size and the 64-row tiles above.
inline constexpr int64_t kBatchInvariantMma16MaxTokens = 256;
PrenormKernel batch_invariant_kernel(int64_t tokens, bool tma128_available);

struct PrenormChoice {
  PrenormKernel kernel = PrenormKernel::mma16;
  int splits = 1;
};
// Batch-invariant mode's splits for `kernel` at `tokens`: one K leaf per split on the 16/64-row
// kernels; on the TMA kernel (whose order differs) as many leaves per split as keep the
// multiprocessors filled once, a power of two dividing the leaves (batch_invariant_leaves).
PrenormChoice batch_invariant_choice(const MhcParams& p, int64_t tokens, int sm_count,
                                     PrenormKernel kernel);

// The 16-row kernel's split reduction by flagged partials (decode_flagged.cuh; the same bits as
// the arrival counter and the tile's last CTA), where they fit.
enum class FlaggedPartials { never, outside_split_loop, always };
std::string_view to_string(FlaggedPartials f);

// A launch's decisions, every one resolved for one shape and token count (KernelPlan::tuning):
// all that the launchers of mhc/cuda/kernels.hpp read, and what `mhc plan --tokens` prints.
// Made by KernelPlan::tuning, which checks each field against the plan's image; not edited after.
struct LaunchTuning {
  int hidden = 0, streams = 0;  // the shape it was resolved for (the launchers check it)
  int64_t tokens = 0;           // ... and the token count
  Projection projection = Projection::tf32;
  // Every reduction in one fixed order (docs/batch_invariance.md): splits then a power of two
  // dividing batch_invariant_leaves, equal to it on the register-fed kernels.
  bool batch_invariant = false;
  PrenormKernel kernel = PrenormKernel::mma16;  // the coefficient launch's tiles
  int splits = 1;                               // its K splits, 1..max_prenorm_splits
  bool pdl = false;                             // programmatic dependent launch
  // The input path rides in the coefficient launch (its CTAs beside the GEMM's, the bits of the
  // separate launch) where one asks for both; else it is a launch of its own just before.
  bool fused_input = false;
  // The stack folds a site's post into the next coefficient launch at this size (its layout;
  // the 16-row launch with the fused input path folds it in, any other runs post + input first).
  bool folded_post = false;
  bool cluster_post = false;  // the post + next input by one cluster per token (the same bits)
  bool post_columns = false;  // the plain post by 8-column vectors over many CTAs (the same bits)
  // A coefficient launch with the previous post runs the fused boundary kernel (one launch,
  // sm90_boundary.cuh) wherever it does not fold; its tile by `boundary`'s forced fields, the
  // rules of mhc/core/sm90_boundary_plan.hpp for the rest (they need the workspace and the
  // device's cluster capacities, so they are applied at the launch).
  bool fused_boundary = false;
  BoundaryForced boundary;
  // The TMA kernel's (and the fused boundary's) splits of a tile as one cluster that reduces
  // through distributed shared memory, where the clusters fit at once (the same bits).
  bool cluster_epilogue = false;
  // The 16-row kernel's CTAs per tile, each running every split_ctas-th split in turn (the same
  // bits on fewer SMs: the overlap's side stream); 0: one CTA per split.
  int split_ctas = 0;
  FlaggedPartials flagged_partials = FlaggedPartials::never;

  int rows_per_tile() const { return mhc::rows_per_tile(kernel); }
  // One line: "mma16 splits=40 tf32 pdl fused_input cluster_post flagged_partials".
  std::string describe() const;
  std::string to_json() const;
};

// What one launch asks of the plan besides its shape (KernelPlan::tuning). The fields below
// side_stream are for sweeps (benchmarks, tests): each set one replaces the plan's decision.
// kernel and splits are taken as given (refused where the image or the shape cannot run them);
// the switches only where the kernel can (cluster_post=true runs the cluster post where the image
// has clusters and C fits one, fused_boundary=true the fused boundary at every token count and
// shape where its kernel runs).
struct LaunchOverrides {
  bool side_stream = false;  // the overlap's side-stream coefficient launch (side_split_ctas)
  std::optional<Projection> projection;
  std::optional<PrenormKernel> kernel;
  std::optional<int> splits;
  std::optional<bool> fused_input;
  std::optional<bool> cluster_post;
  std::optional<bool> post_columns;
  std::optional<bool> fused_boundary;
  std::optional<bool> cluster_epilogue;
  std::optional<int> split_ctas;
  std::optional<FlaggedPartials> flagged_partials;
  std::optional<bool> pdl;
  BoundaryForced boundary;  // the fused boundary's tile fields (0: the rules')
};

struct KernelPlan {
  std::optional<int> device;  // the CUDA device ordinal (none: a simulated GPU)
  ComputeCapability capability;
  int sm_count = 0;
  std::vector<KernelImage> built;
  std::optional<KernelImage> image;  // the one this GPU loads; none: no CUDA path at all
  bool image_queried = false;        // reported by the runtime (else predicted from `built`)
  // The largest C the one-CTA-per-token row kernels launch at on this device (their register
  // counts cap a CTA's threads, one per 32 columns); 0: not queried (no GPU, a simulated plan).
  int row_kernels_max_hidden = 0;
  ArchRules rules;
  std::vector<PrenormRange> prenorm;  // covers 1..kNoTokenLimit in order
  std::string prenorm_source;         // "built-in rules of sm90 (...)" or the tactics
  // Every reduction in one fixed order (docs/batch_invariance.md): `prenorm` then follows
  // batch_invariant_kernel, the splits follow the K leaves (batch_invariant_choice),
  // and nothing fuses or folds (those launches cut a row's sums differently).
  bool batch_invariant = false;
  Projection projection = Projection::tf32;  // the kernel config's
  std::optional<int> forced_splits;
  bool tma128_available = false;  // the TMA kernel's body is in the loaded image
  bool pdl = false;
  int64_t fused_input_max_tokens = 0;       // 0: never fused
  int64_t folded_post_max_tokens = 0;       // 0: never folded
  int64_t cluster_post_max_tokens = 0;      // 0: the post + next input by row CTAs only
  int64_t post_columns_max_tokens = 0;      // 0: the plain post by row CTAs only
  int64_t flagged_partials_max_tokens = 0;  // 0: the 16-row kernel's arrival counter only
  // ... and in the split loop (the overlap's side launch) too: only where the kernel config asks
  // for flagged partials (behind the stand-in sublayers the side launch's flagged form made the
  // main stream pay more at C = 4096 and 7168: docs/decisions.md, "The decode coefficient launch").
  bool flagged_partials_split_loop = false;
  int64_t fused_boundary_min_tokens = 0;    // 0: the boundary's launches are never fused
  int fused_boundary_min_hidden = 0;        // ... and only from this C (0: any)
  int fused_boundary_streams = 0;           // ... and only at this n (0: any)
  BoundaryWideSteps fused_boundary_wide{};  // ... from fewer tokens at wider C (ArchRules)
  bool tma_cluster_epilogue = false;        // ArchRules::tma_cluster_epilogue, in the image
  int overlap_side_ctas = 0;                // ArchRules::overlap_side_ctas (0: one CTA per split)
  // CTAs for the overlap's side-stream coefficient launch of 1-16 tokens in `splits` splits:
  // overlap_side_ctas; 0 (one CTA per split) at more tokens, or where that is not fewer.
  int side_split_ctas(int64_t tokens, int splits) const;
  // Whether the plan fuses the boundary of a site of this shape at this many tokens.
  bool fuses_boundary(int hidden, int streams, int64_t tokens) const;
  OverlapAvailability overlap = OverlapAvailability::never;
  int overlap_max_tokens = 0;
  std::string overlap_max_tokens_source;
  std::vector<std::string> overrides;  // the kernel-config keys that changed the plan

  bool has_kernels() const { return image.has_value(); }
  bool compiled_ahead_of_time() const { return image && !image->ptx; }
  PrenormKernel prenorm_kernel(int64_t tokens) const;
  PrenormRange prenorm_range(int64_t tokens) const;  // mma16 at the rule's splits if empty
  // The kernel and split count for `tokens` at the shape's K (at most K / 256 splits: one K chunk
  // of 32 per warp of 8). Splits fill the multiprocessors once, capped at decode sizes because
  // the reduction reads every split's partials (decode_max_splits, or decode_stage_k's count).
  PrenormChoice prenorm_choice(int64_t tokens, int64_t k) const;
  bool fuses_input(int64_t tokens, PrenormKernel kernel) const;
  // Every decision of one launch for this shape and token count, resolved (LaunchTuning), with
  // `overrides` applied. Throws mhc::Error where the plan has no kernels, where the shape is not
  // one the CUDA kernels take (n = 2 or 4, C a positive multiple of 64, at most the row kernels'
  // limit), and on an override the image or the shape cannot run. Allocates nothing unless it
  // throws: made per launch where the token count changes.
  LaunchTuning tuning(const MhcParams& p, int64_t tokens,
                      const LaunchOverrides& overrides = {}) const;
  std::string describe() const;  // the multi-line text of `mhc plan`
  // One line: "sm_90a SASS (runtime), prenorm mma16 M<=256 mma64 M<=1535 tma128, pdl".
  std::string summary() const;
  std::string overrides_text() const;  // "prenorm_splits=8 fused_input=false", or "none"
  std::string to_json() const;
};

// Throws mhc::Error when the config forces a path this image lacks (the TMA kernel without the
// sm_90 instructions), or loads tactics measured on another architecture.
KernelPlan make_plan(ComputeCapability cc, int sm_count, std::optional<KernelImage> image,
                     bool image_queried, const std::vector<KernelImage>& built,
                     const KernelConfig& config);
// A simulated device: the image the driver would pick from `built`.
KernelPlan simulated_plan(ComputeCapability cc, int sm_count, const std::vector<KernelImage>& built,
                          const KernelConfig& config);

}  // namespace mhc
