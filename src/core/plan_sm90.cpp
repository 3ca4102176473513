// Hopper (compute capability 9.0) heuristics of the kernel plan, each measured on an H200.
#include "mhc/core/kernel_plan.hpp"

namespace mhc {

ArchRules sm90_rules() {
  ArchRules r;
  r.name = "sm90";
  r.measured = "measured on an H200: docs/kernels.md, docs/tuning.md";
  // 16-token tiles win up to 256 tokens (more CTAs, less register pressure), 64-token tiles
  // above (hc_fn re-read from L2 once per tile); the TMA kernel from the smallest size at which
  // it beat the best register-fed tiling in the sweep (docs/kernels.md; docs/decisions.md, "Large
  // batches").
  r.mma64_from_tokens = 257;
  r.tma128_from_tokens = 1536;
  r.decode_max_splits = 40;
  // One register stage per split where K needs more than 40 splits for it (C = 7168 at n = 4:
  // 56): behind the stand-in sublayers the native site paid 0.6-0.85 us less at 1-8 tokens, a
  // site in a stack graph 0.2-0.95 us less; from 16 tokens the overlap's main stream paid up to
  // 1.45 us more; at C = 4096 and 5120, 48-64 splits did not win (docs/decisions.md, "The
  // decode coefficient launch").
  r.decode_stage_k = 512;
  r.decode_stage_max_tokens = 8;
  r.fused_input_max_tokens = 64;
  // The fold saves a launch per site at decode sizes and nothing by 64 tokens (docs/decisions.md,
  // "The folded decode layout stays opt-in"); the executor folds only when asked
  // (fold_previous_post).
  r.folded_post_max_tokens = 16;
  // The post + next input by clusters won at every measured size up to 64 tokens at C=5120 and
  // 4096 / 7168 (ties at 64 there) and tied at 128, lost from 256 (docs/decisions.md, "The post
  // and the next input path by thread block clusters").
  r.cluster_post_max_tokens = 64;
  // The decode launch's split reduction by flagged partials (decode_flagged.cuh), one CTA per
  // split: behind the stand-in sublayers the native site paid 0.2-0.9 us less at 1-8 tokens at C =
  // 4096 and 5120 (at 12 a tie), 0.2-0.3 us less at 1-2 at C = 7168 and 0.2 more at 8; in a graph
  // of mHC launches alone it won at every size to 32. Not in the overlap's split loop, where the
  // main stream paid up to 0.6 us more at C = 4096 and 7168 (docs/decisions.md, "The
  // decode coefficient launch").
  r.flagged_partials_max_tokens = 8;
  // The fused boundary kernel (sm90_boundary.cuh) against the two launches it replaces, per site
  // in a stack graph on the H200 with the half tiles' producer warp: at n = 4 from
  // 768 tokens 3-4% faster at C = 4096 up to 1024 tokens and 7-14% above, 13-15% at C = 5120,
  // 24-26% at C = 7168; 512 tokens lost at every C (docs/decisions.md, "The fused boundary at
  // large batches"). n = 2 lost; C below 4096 was not measured.
  r.fused_boundary_min_tokens = 768;
  r.fused_boundary_min_hidden = 4096;
  r.fused_boundary_streams = 4;
  // Wider rows cross over earlier (per site in a stack graph, two rounds): at C = 5120
  // lost at 576 tokens, tied at 608 and won from 640; at C = 7168 lost at 512 and won from 544
  // (6%; 23% at 704); at C = 4096 tied at 704-736 and won from 768 (docs/decisions.md, "The fused
  // boundary at large batches").
  r.fused_boundary_wide = {{{5120, 640}, {7168, 544}}};
  // The TMA kernel's tiles as clusters where they fit at once (2 splits from about 4100 to 8400
  // tokens on an H200): GEMM + stats 2.3-4.6% faster at 8192 tokens, the same bits; elsewhere
  // the clusters do not fit in one wave and the launcher keeps the workspace path
  // (docs/decisions.md, "Large batches").
  r.tma_cluster_epilogue = true;
  r.pdl = true;
  // Behind the stand-in sublayers the overlap's main stream paid 0.9-1.4 us less per site at
  // 1-16 tokens with the side stream's coefficient launch on 8 CTAs than on one per split (40);
  // 4, 12 and 16 CTAs were slower there, and at 32-64 tokens (2-4 tiles) the longer launches
  // stopped hiding (docs/overlap.md, "The side stream on fewer SMs").
  r.overlap_side_ctas = 8;
  r.overlap = OverlapAvailability::opt_in;
  // The smallest threshold `mhc tune` measured over the three hidden sizes, so that no measured
  // size loses (docs/tuning.md; docs/decisions.md, "The Hopper overlap threshold").
  r.overlap_max_tokens = kSm90OverlapMaxTokens;
  return r;
}

}  // namespace mhc
