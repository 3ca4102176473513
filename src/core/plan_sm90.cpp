// Hopper (compute capability 9.0) heuristics of the kernel plan, each measured on an H200.
#include "mhc/core/kernel_plan.hpp"

namespace mhc {

ArchRules sm90_rules() {
  ArchRules r;
  r.name = "sm90";
  r.measured = "measured on an H200: docs/kernels.md, docs/tuning.md";
  // 16-token tiles win up to 256 tokens (more CTAs, less register pressure), 64-token tiles
  // above (hc_fn re-read from L2 once per tile); the TMA kernel from 1536 tokens: 32.9 vs 36.0 us
  // for the best register-fed tiling at 1536, a tie at 1024, slower at 512 (commit 5c87f23,
  // `mhc bench kernels --sweep`).
  r.mma64_from_tokens = 257;
  r.tma128_from_tokens = 1536;
  r.decode_max_splits = 40;
  r.fused_input_max_tokens = 64;
  // The native decode layout folds the previous site's post into the coefficient launch up to
  // 16 tokens: with `mhc bench kernels` (8 stack sites per CUDA graph, C=5120 n=4), per site
  // 9.6 us at 1 token and 9.8 at 4 folded, against 11.5 and 11.8 unfolded; 12.0 vs 12.7 at 16;
  // at 64 tokens 14.2 folded against 13.9, no gain. (The executor folds only when asked:
  // StackOptions::fold_previous_post.)
  r.folded_post_max_tokens = 16;
  r.pdl = true;
  r.overlap = OverlapAvailability::opt_in;
  // `mhc tune` at commit 9ec6b44, two runs each of C=5120, 4096 and 7168 interleaved, 5 rounds
  // each: the overlap won every round at every size up to 32 tokens in all six runs (up to 48
  // for C=4096), and at the next size (48; 64 for C=4096) lost in at least one round
  // (bench/results/logs/h200-2026-12-01-device-tune-9ec6b44.log, docs/tuning.md). The smallest
  // of the six thresholds, so that no measured size loses.
  r.overlap_max_tokens = kSm90OverlapMaxTokens;
  return r;
}

}  // namespace mhc
