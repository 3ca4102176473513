// The kernel plan as text (`mhc plan`, `mhc run`) and as JSON.
#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "mhc/core/kernel_plan.hpp"
#include "mhc/core/workspace.hpp"

namespace mhc {
namespace {

std::string range_text(int64_t lo, int64_t hi) {
  if (hi == kNoTokenLimit) return fmt::format("M >= {}", lo);
  if (hi <= 0) return "never";
  return lo == hi ? fmt::format("M = {}", lo) : fmt::format("{} <= M <= {}", lo, hi);
}

std::string limit_text(int64_t max_tokens) {
  if (max_tokens == kNoTokenLimit) return "at every size (forced)";
  if (max_tokens <= 0) return "never";
  return fmt::format("up to {} tokens", max_tokens);
}

std::string from_text(int64_t min_tokens) {
  if (min_tokens <= 0) return "never";
  if (min_tokens == 1) return "at every size";
  return fmt::format("from {} tokens", min_tokens);
}

// The shapes the fused boundary is limited to, if any: " at n = 4, C >= 4096".
std::string boundary_shapes_text(const KernelPlan& plan) {
  if (plan.fused_boundary_min_tokens <= 0) return "";
  std::string out;
  if (plan.fused_boundary_streams > 0)
    out += fmt::format(" at n = {}", plan.fused_boundary_streams);
  if (plan.fused_boundary_min_hidden > 0) {
    out += fmt::format("{} C >= {}", out.empty() ? " at" : ",", plan.fused_boundary_min_hidden);
  }
  for (const BoundaryStep& step : plan.fused_boundary_wide) {
    if (step.min_tokens <= 0 || step.min_tokens >= plan.fused_boundary_min_tokens) continue;
    out += fmt::format("; from {} at C >= {}", step.min_tokens, step.hidden);
  }
  return out;
}

// The wide steps in use, as [{"hidden": C, "min_tokens": M}, ...].
nlohmann::json wide_steps_json(const BoundaryWideSteps& steps) {
  nlohmann::json out = nlohmann::json::array();
  for (const BoundaryStep& step : steps) {
    if (step.min_tokens > 0)
      out.push_back({{"hidden", step.hidden}, {"min_tokens", step.min_tokens}});
  }
  return out;
}

std::string kernel_title(PrenormKernel k) {
  switch (k) {
    case PrenormKernel::mma16:
      return "prenorm_mma, 16-row tiles (register-fed mma.sync)";
    case PrenormKernel::mma64:
      return "prenorm_mma, 64-row tiles (register-fed mma.sync)";
    case PrenormKernel::tma128:
      return "sm90_prenorm_tma, 128-row tiles (TMA-fed)";
  }
  return "?";
}

// Where the plan sends each prenorm kernel, or why it never does.
std::string reach(const KernelPlan& plan, PrenormKernel k) {
  if (!plan.has_kernels()) return "absent (no image of this binary loads on this GPU)";
  if (k == PrenormKernel::tma128 && !plan.tma128_available) {
    return "absent (needs the sm_90 instructions; this image has none)";
  }
  std::string out;
  for (const PrenormRange& r : plan.prenorm) {
    if (r.kernel != k) continue;
    if (!out.empty()) out += ", ";
    out += range_text(r.min_tokens, r.max_tokens);
  }
  if (!out.empty()) return out;
  if (plan.batch_invariant) return "in the image, unused in batch-invariant mode";
  return fmt::format("in the image, only when forced (prenorm_kernel={})", to_string(k));
}

std::string image_text(const KernelPlan& plan) {
  if (!plan.image) return "none: no CUDA code of this binary runs on this GPU";
  const KernelImage& im = *plan.image;
  return fmt::format(
      "{} ({}{}; {})", im.name(),
      im.ptx ? "PTX, JIT-compiled by the driver at load" : "SASS, compiled ahead of time",
      im.has_wgmma() ? ", wgmma" : "",
      plan.image_queried ? "reported by the runtime" : "predicted from the build");
}

std::string built_text(const std::vector<KernelImage>& built) {
  if (built.empty()) return "none (built without CUDA)";
  return image_names(built);
}

// The measured split counts of the tactics' ranges, e.g. "measured: 8 (M <= 16), 4 (M >= 17)".
std::string measured_splits(const KernelPlan& plan) {
  std::string out;
  for (const PrenormRange& r : plan.prenorm) {
    if (r.splits <= 0) continue;
    out += fmt::format("{}{} ({})", out.empty() ? "measured: " : ", ", r.splits,
                       range_text(r.min_tokens, r.max_tokens));
  }
  return out;
}

std::string splits_text(const KernelPlan& plan) {
  if (const std::string measured = measured_splits(plan);
      !measured.empty() && !plan.forced_splits) {
    return measured + " (at most the shape's K / 256)";
  }
  if (plan.batch_invariant) {
    return "a power of two dividing the shape's K leaves (one leaf per split on the 16/64-row "
           "tiles; on the TMA kernel as many as fill the SMs once)";
  }
  if (plan.forced_splits)
    return fmt::format("{} (forced, at most the shape's K / 256)", *plan.forced_splits);
  const std::string stage =
      plan.rules.decode_stage_k > 0 && plan.rules.decode_stage_max_tokens > 0
          ? fmt::format(
                " (up to {} tokens K / {}, one register stage per split, where that is "
                "more; at most {})",
                plan.rules.decode_stage_max_tokens, plan.rules.decode_stage_k,
                kPrenormDecodeSplitLimit)
          : "";
  return fmt::format("tiles x splits fill the {} SMs once; at most {}{} and at most K / 256",
                     plan.sm_count, plan.rules.decode_max_splits, stage);
}

std::string overlap_text(const KernelPlan& plan) {
  switch (plan.overlap) {
    case OverlapAvailability::automatic:
      return fmt::format("automatic, 0 < M <= {}", plan.overlap_max_tokens);
    case OverlapAvailability::opt_in:
      return fmt::format("opt-in (enable_mhc_overlap=true), 0 < M <= {}", plan.overlap_max_tokens);
    case OverlapAvailability::never:
      return "never on this GPU";
  }
  return "?";
}

}  // namespace

std::string KernelPlan::describe() const {
  std::string out;
  auto line = [&out](std::string_view label, const std::string& value) {
    out += fmt::format("{:<17}{}\n", label, value);
  };
  line("gpu", fmt::format("{}compute capability {}.{}, {} SMs",
                          device ? fmt::format("device {}, ", *device) : "simulated, ",
                          capability.major, capability.minor, sm_count));
  line("images built", built_text(built));
  line("image loaded", image_text(*this));
  if (row_kernels_max_hidden > 0) {
    line("hidden size", fmt::format("C <= {} (the row kernels' CTAs of C / 32 threads at their "
                                    "register counts)",
                                    row_kernels_max_hidden));
  }
  line("heuristics", fmt::format("{} ({})", rules.name, rules.measured));
  for (PrenormKernel k : {PrenormKernel::mma16, PrenormKernel::mma64, PrenormKernel::tma128}) {
    line(fmt::format("prenorm {}", to_string(k)),
         fmt::format("{}: {}", kernel_title(k), reach(*this, k)));
  }
  line("prenorm from", prenorm_source);
  line("prenorm splits", splits_text(*this));
  line("projection", projection == Projection::tf32
                         ? "tf32 (the GEMM on TF32 tensor cores)"
                         : "fp32 (the compensated projection: fp32 accuracy, no fused boundary)");
  line("batch invariant",
       batch_invariant
           ? "yes: one order per size whatever the batch (with tma128: its order, for TF32 "
             "at 1-16 tokens by the leaf decode launch), splits from the K leaves, no "
             "folded post"
           : "no (kernel config batch_invariant=true)");
  line("fused input", "input path inside the 16-row or TMA coefficient launch, " +
                          limit_text(has_kernels() ? fused_input_max_tokens : 0));
  line("folded post", "previous post folded into the coefficient launch, " +
                          limit_text(has_kernels() ? folded_post_max_tokens : 0));
  line("cluster post", "post + next input by one cluster per token, " +
                           limit_text(has_kernels() ? cluster_post_max_tokens : 0));
  line("post columns", "plain post by 8-column vectors over many CTAs, " +
                           limit_text(has_kernels() ? post_columns_max_tokens : 0));
  line("flagged partials",
       "16-row tiles reduced by a CTA per row polling flagged partials, " +
           limit_text(has_kernels() ? flagged_partials_max_tokens : 0) +
           (flagged_partials_split_loop ? ", the split loop too" : ", not in the split loop"));
  line("cluster epilogue",
       tma_cluster_epilogue ? "yes: a TMA tile's 2-8 splits as one cluster where they fit at once"
                            : "no (the TMA kernel's splits reduce through the workspace)");
  line("fused boundary", "post + next input + coefficients in one launch (sm_90a), " +
                             from_text(has_kernels() ? fused_boundary_min_tokens : 0) +
                             boundary_shapes_text(*this));
  line("pdl", pdl ? "yes (griddepcontrol in the image)" : "no");
  line("overlap side",
       overlap_side_ctas > 0
           ? fmt::format("the side stream's coefficient launch of 1-16 tokens on {} CTAs "
                         "(splits in turn, the same bits)",
                         overlap_side_ctas)
           : std::string("one CTA per split"));
  line("overlap", overlap_text(*this));
  line("threshold from", overlap_max_tokens_source);
  line("overrides", overrides_text());
  line("switches",
       "kernel config prenorm_kernel (mma16|mma64|tma128), prenorm_splits, "
       "fused_input, folded_post, cluster_post, cluster_epilogue, fused_boundary, "
       "flagged_partials, pdl, post_columns, "
       "overlap_side_ctas, "
       "batch_invariant, "
       "enable_mhc_overlap, "
       "overlap_max_tokens, "
       "tactics");
  return out;
}

std::string KernelPlan::overrides_text() const {
  std::string out;
  for (const auto& o : overrides) {
    if (!out.empty()) out += " ";
    out += o;
  }
  return out.empty() ? "none" : out;
}

std::string KernelPlan::summary() const {
  if (!image) return "no kernel image of this binary loads here";
  std::string ranges;
  for (const PrenormRange& r : prenorm) {
    ranges += fmt::format(" {}", to_string(r.kernel));
    if (r.max_tokens != kNoTokenLimit) ranges += fmt::format(" M<={}", r.max_tokens);
  }
  std::string cluster_post;
  if (cluster_post_max_tokens > 0) {
    cluster_post = cluster_post_max_tokens == kNoTokenLimit
                       ? ", cluster post"
                       : fmt::format(", cluster post M<={}", cluster_post_max_tokens);
  }
  const std::string boundary =
      fused_boundary_min_tokens > 0
          ? fmt::format(", fused boundary M>={}{}", fused_boundary_min_tokens,
                        boundary_shapes_text(*this))
          : "";
  return fmt::format("{} {}, prenorm{}{}{}{}{}{}", image->name(), image->ptx ? "PTX (JIT)" : "SASS",
                     ranges, pdl ? ", pdl" : "", cluster_post,
                     tma_cluster_epilogue ? ", cluster epilogue" : "", boundary,
                     batch_invariant ? ", batch-invariant" : "");
}

std::string KernelPlan::to_json() const {
  nlohmann::json ranges = nlohmann::json::array();
  for (const PrenormRange& r : prenorm) {
    ranges.push_back(
        {{"kernel", std::string(to_string(r.kernel))},
         {"splits", r.splits > 0 ? nlohmann::json(r.splits) : nlohmann::json(nullptr)},
         {"min_tokens", r.min_tokens},
         {"max_tokens",
          r.max_tokens == kNoTokenLimit ? nlohmann::json(nullptr) : nlohmann::json(r.max_tokens)}});
  }
  nlohmann::json built_names = nlohmann::json::array();
  for (const KernelImage& im : built) built_names.push_back(im.name());
  auto limit = [](int64_t v) {
    return v == kNoTokenLimit ? nlohmann::json("all") : nlohmann::json(v);
  };
  const nlohmann::json j = {
      {"device", device ? nlohmann::json(*device) : nlohmann::json(nullptr)},
      {"capability", fmt::format("{}.{}", capability.major, capability.minor)},
      {"sm_count", sm_count},
      {"images_built", built_names},
      {"image_loaded", image ? nlohmann::json(image->name()) : nlohmann::json(nullptr)},
      {"compiled_ahead_of_time", compiled_ahead_of_time()},
      {"image_queried", image_queried},
      {"row_kernels_max_hidden", row_kernels_max_hidden},
      {"heuristics", rules.name},
      {"prenorm", ranges},
      {"prenorm_source", prenorm_source},
      {"batch_invariant", batch_invariant},
      {"projection", std::string(mhc::to_string(projection))},
      {"forced_splits", forced_splits ? nlohmann::json(*forced_splits) : nlohmann::json(nullptr)},
      {"decode_max_splits", rules.decode_max_splits},
      {"decode_stage_k", rules.decode_stage_k},
      {"decode_stage_max_tokens", rules.decode_stage_max_tokens},
      {"overlap_side_ctas", overlap_side_ctas},
      {"tma128_available", tma128_available},
      {"pdl", pdl},
      {"fused_input_max_tokens", limit(fused_input_max_tokens)},
      {"folded_post_max_tokens", limit(folded_post_max_tokens)},
      {"cluster_post_max_tokens", limit(cluster_post_max_tokens)},
      {"post_columns_max_tokens", limit(post_columns_max_tokens)},
      {"flagged_partials_max_tokens", limit(flagged_partials_max_tokens)},
      {"flagged_partials_split_loop", flagged_partials_split_loop},
      {"fused_boundary_min_tokens", fused_boundary_min_tokens},
      {"fused_boundary_min_hidden", fused_boundary_min_hidden},
      {"fused_boundary_streams", fused_boundary_streams},
      {"fused_boundary_wide", wide_steps_json(fused_boundary_wide)},
      {"tma_cluster_epilogue", tma_cluster_epilogue},
      {"overlap", std::string(mhc::to_string(overlap))},
      {"overlap_max_tokens", overlap_max_tokens},
      {"overlap_max_tokens_source", overlap_max_tokens_source},
      {"overrides", overrides}};
  return j.dump();
}

}  // namespace mhc
