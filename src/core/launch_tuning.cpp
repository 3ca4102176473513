// The kernel plan resolved for one launch (KernelPlan::tuning): every decision a launcher reads,
// from the plan, the shape and the token count, with a sweep's overrides applied.
#include <fmt/core.h>

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

#include "mhc/core/error.hpp"
#include "mhc/core/kernel_limits.hpp"
#include "mhc/core/kernel_plan.hpp"

namespace mhc {
namespace {

int floor_pow2(int64_t v) {
  int p = 1;
  while (p * int64_t{2} <= v) p *= 2;
  return p;
}

// The shapes the CUDA kernels take on this plan's device (the launchers check them again).
void check_launch_shape(const KernelPlan& plan, const MhcParams& p, int64_t tokens) {
  if (!plan.has_kernels()) {
    throw Error(fmt::format(
        "launch tuning: no kernel image of this binary loads on this GPU (compute capability "
        "{}.{}; images built: {})",
        plan.capability.major, plan.capability.minor,
        plan.built.empty() ? "none: built without CUDA" : image_names(plan.built)));
  }
  if (p.n != 2 && p.n != 4) {
    throw Error(fmt::format(
        "launch tuning: n={} is not supported by the CUDA kernels (n must be 2 or 4)", p.n));
  }
  if (p.hidden <= 0 || p.hidden % 64 != 0) {
    throw Error(
        fmt::format("launch tuning: hidden size C={} must be a positive multiple of 64", p.hidden));
  }
  const int limit =
      plan.row_kernels_max_hidden > 0 ? plan.row_kernels_max_hidden : kRowKernelsHiddenLimit;
  if (p.hidden > limit) {
    throw Error(fmt::format(
        "launch tuning: hidden size C={} is above the kernels' limit {} on this device (the row "
        "kernels run one CTA of C / 32 threads per token)",
        p.hidden, limit));
  }
  if (tokens < 0 || tokens > std::numeric_limits<int32_t>::max()) {
    throw Error(fmt::format("launch tuning: token count {} out of range", tokens));
  }
}

// The coefficient launch's kernel and splits: the plan's for the size (batch-invariant mode: its
// kernel and the leaves' splits), a forced kernel keeping the plan's split count.
PrenormChoice choose_kernel(const KernelPlan& plan, const MhcParams& p, int64_t tokens,
                            const LaunchOverrides& o) {
  if (o.kernel == PrenormKernel::tma128 && !plan.tma128_available) {
    throw Error(fmt::format(
        "launch tuning: kernel tma128 is not in the image this GPU loads ({}); it needs the sm_90 "
        "instructions (an sm_90a image)",
        plan.image ? plan.image->name() : "none"));
  }
  PrenormChoice c;
  if (plan.batch_invariant) {
    c.kernel = o.kernel.value_or(plan.prenorm_kernel(tokens));
    c.splits = batch_invariant_choice(p, tokens, plan.sm_count, c.kernel).splits;
  } else {
    c = plan.prenorm_choice(tokens, p.k());
    if (o.kernel) c.kernel = *o.kernel;
  }
  if (o.splits) c.splits = *o.splits;
  const int most = max_prenorm_splits(p);
  if (c.splits < 1 || c.splits > most) {
    throw Error(
        fmt::format("launch tuning: splits={} must be in 1..{} for K={}", c.splits, most, p.k()));
  }
  return c;
}

FlaggedPartials plan_flagged_partials(const KernelPlan& plan, int64_t tokens) {
  if (tokens > plan.flagged_partials_max_tokens) return FlaggedPartials::never;
  return plan.flagged_partials_split_loop ? FlaggedPartials::always
                                          : FlaggedPartials::outside_split_loop;
}

int choose_split_ctas(const KernelPlan& plan, const LaunchTuning& t, const LaunchOverrides& o) {
  if (o.split_ctas) {
    if (*o.split_ctas < 0) {
      throw Error(fmt::format("launch tuning: split_ctas={} must be >= 0", *o.split_ctas));
    }
    return *o.split_ctas;
  }
  const bool loops = t.kernel == PrenormKernel::mma16 && !t.batch_invariant;
  return o.side_stream && loops ? plan.side_split_ctas(t.tokens, t.splits) : 0;
}

}  // namespace

int max_prenorm_splits(const MhcParams& p) {
  return static_cast<int>(std::max<int64_t>(1, p.k() / (kPrenormChunkK * kPrenormGemmWarps)));
}

int batch_invariant_leaves(const MhcParams& p) {
  // Enough leaves for a decode-size grid (the default's own split count there is of that order),
  // whole TMA stages per leaf, at most max_prenorm_splits (docs/decisions.md, "Batch-invariant
  // mode").
  const int64_t stages = p.k() / (kPrenormChunkK * kPrenormTmaChunksPerStage);
  return floor_pow2(std::min<int64_t>(
      {kBatchInvariantMaxLeaves, std::max<int64_t>(stages, 1), max_prenorm_splits(p)}));
}

PrenormChoice batch_invariant_choice(const MhcParams& p, int64_t tokens, int sm_count,
                                     PrenormKernel kernel) {
  const int leaves = batch_invariant_leaves(p);
  if (kernel != PrenormKernel::tma128) return {kernel, leaves};
  const int64_t rows = rows_per_tile(kernel);
  const int64_t tiles = std::max<int64_t>(1, (tokens + rows - 1) / rows);
  return {kernel, std::min(leaves, floor_pow2(std::max<int64_t>(1, sm_count / tiles)))};
}

std::string_view to_string(FlaggedPartials f) {
  switch (f) {
    case FlaggedPartials::never:
      return "never";
    case FlaggedPartials::outside_split_loop:
      return "outside_split_loop";
    case FlaggedPartials::always:
      return "always";
  }
  return "?";
}

LaunchTuning KernelPlan::tuning(const MhcParams& p, int64_t tokens,
                                const LaunchOverrides& o) const {
  check_launch_shape(*this, p, tokens);
  LaunchTuning t;
  t.hidden = p.hidden;
  t.streams = p.n;
  t.tokens = tokens;
  t.projection = o.projection.value_or(projection);
  t.batch_invariant = batch_invariant;
  const PrenormChoice c = choose_kernel(*this, p, tokens, o);
  t.kernel = c.kernel;
  t.splits = c.splits;
  t.pdl = pdl && o.pdl.value_or(true);
  const bool input_ctas = t.kernel != PrenormKernel::mma64;  // the 64-row tiles have none
  t.fused_input = o.fused_input.value_or(tokens <= fused_input_max_tokens) && input_ctas &&
                  p.hidden <= kFusedInputHiddenLimit;
  t.folded_post = tokens <= folded_post_max_tokens;
  const bool clusters = image->has_sm90_instructions();
  t.cluster_post = o.cluster_post.value_or(tokens <= cluster_post_max_tokens) && clusters &&
                   p.hidden <= kClusterPostHiddenLimit;
  t.post_columns = o.post_columns.value_or(tokens <= post_columns_max_tokens) &&
                   post_columns_fit(p.hidden, tokens);
  const bool boundary_rule = o.fused_boundary.value_or(fuses_boundary(p.hidden, p.n, tokens));
  t.fused_boundary = boundary_rule && tma128_available && !batch_invariant &&
                     t.projection == Projection::tf32 && boundary_takes_hidden(p.hidden);
  t.boundary = o.boundary;
  t.cluster_epilogue = o.cluster_epilogue.value_or(tma_cluster_epilogue) && tma128_available;
  t.split_ctas = choose_split_ctas(*this, t, o);
  t.flagged_partials = o.flagged_partials.value_or(plan_flagged_partials(*this, tokens));
  return t;
}

std::string LaunchTuning::describe() const {
  std::string out =
      fmt::format("{} splits={} {}", to_string(kernel), splits, to_string(projection));
  auto flag = [&out](bool on, std::string_view name) {
    if (on) out += fmt::format(" {}", name);
  };
  flag(batch_invariant, "batch_invariant");
  flag(pdl, "pdl");
  flag(fused_input, "fused_input");
  flag(folded_post, "folded_post");
  flag(cluster_post, "cluster_post");
  flag(post_columns, "post_columns");
  flag(fused_boundary, "fused_boundary");
  if (boundary.rows > 0) out += fmt::format(" boundary_rows={}", boundary.rows);
  if (boundary.splits > 0) out += fmt::format(" boundary_splits={}", boundary.splits);
  if (boundary.stage_columns > 0)
    out += fmt::format(" boundary_stage_columns={}", boundary.stage_columns);
  flag(cluster_epilogue, "cluster_epilogue");
  if (split_ctas > 0) out += fmt::format(" split_ctas={}", split_ctas);
  if (flagged_partials != FlaggedPartials::never)
    out += fmt::format(" flagged_partials={}", to_string(flagged_partials));
  return out;
}

std::string LaunchTuning::to_json() const {
  const nlohmann::json j = {{"hidden", hidden},
                            {"streams", streams},
                            {"tokens", tokens},
                            {"projection", std::string(to_string(projection))},
                            {"batch_invariant", batch_invariant},
                            {"kernel", std::string(to_string(kernel))},
                            {"splits", splits},
                            {"pdl", pdl},
                            {"fused_input", fused_input},
                            {"folded_post", folded_post},
                            {"cluster_post", cluster_post},
                            {"post_columns", post_columns},
                            {"fused_boundary", fused_boundary},
                            {"boundary_rows", boundary.rows},
                            {"boundary_splits", boundary.splits},
                            {"boundary_stage_columns", boundary.stage_columns},
                            {"cluster_epilogue", cluster_epilogue},
                            {"split_ctas", split_ctas},
                            {"flagged_partials", std::string(to_string(flagged_partials))}};
  return j.dump();
}

}  // namespace mhc
