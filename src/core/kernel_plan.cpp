#include "mhc/core/kernel_plan.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <charconv>

#include "mhc/core/error.hpp"
#include "mhc/core/workspace.hpp"

namespace mhc {
namespace {

int capability_number(ComputeCapability cc) { return cc.major * 10 + cc.minor; }

KernelImage parse_image(std::string_view entry) {
  KernelImage image;
  std::string_view rest;
  if (entry.rfind("sm_", 0) == 0) {
    rest = entry.substr(3);
  } else if (entry.rfind("compute_", 0) == 0) {
    image.ptx = true;
    rest = entry.substr(8);
  } else {
    throw Error(fmt::format("kernel image '{}': expected sm_<arch> or compute_<arch>", entry));
  }
  if (!rest.empty() && (rest.back() == 'a' || rest.back() == 'f')) {
    image.variant = rest.back();
    rest.remove_suffix(1);
  }
  const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), image.arch);
  if (rest.empty() || ec != std::errc() || end != rest.data() + rest.size() || image.arch < 10 ||
      image.arch > 999) {
    throw Error(
        fmt::format("kernel image '{}': expected sm_<arch> or compute_<arch>, e.g. sm_90a", entry));
  }
  return image;
}

// Whether SASS `image` runs on a GPU of capability cc (binary compatibility holds within a major
// version, upwards in minor; an 'a' image runs only on its exact capability).
bool sass_runs_on(const KernelImage& image, ComputeCapability cc) {
  const int gpu = capability_number(cc);
  if (image.arch / 10 != cc.major || image.arch > gpu) return false;
  return image.variant != 'a' || image.arch == gpu;
}

std::vector<PrenormRange> auto_ranges(const ArchRules& r, bool tma) {
  std::vector<PrenormRange> ranges;
  const bool use_tma = tma && r.tma128_from_tokens.has_value();
  const int64_t mma_end = use_tma ? *r.tma128_from_tokens - 1 : kNoTokenLimit;
  auto add = [&](int64_t lo, int64_t hi, PrenormKernel k) {
    if (lo <= hi) ranges.push_back({lo, hi, k});
  };
  add(1, std::min(r.mma64_from_tokens - 1, mma_end), PrenormKernel::mma16);
  add(r.mma64_from_tokens, mma_end, PrenormKernel::mma64);
  if (use_tma) add(*r.tma128_from_tokens, kNoTokenLimit, PrenormKernel::tma128);
  return ranges;
}

// The overlap threshold: the kernel config's, else the tactics' (same architecture only), else
// the architecture's built-in default.
void apply_threshold(KernelPlan& plan, const KernelConfig& config) {
  if (config.tactics) {
    const Tactics& t = *config.tactics;
    if (!(t.capability == plan.capability)) {
      throw Error(
          fmt::format("tactics {} were measured on compute capability {}.{} ({}); this GPU "
                      "is {}.{}: run `mhc tune` on it",
                      t.source, t.capability.major, t.capability.minor, t.gpu,
                      plan.capability.major, plan.capability.minor));
    }
  }
  if (config.overlap_max_tokens) {
    plan.overlap_max_tokens = *config.overlap_max_tokens;
    plan.overlap_max_tokens_source = "kernel config (overlap_max_tokens)";
  } else if (config.tactics) {
    plan.overlap_max_tokens = config.tactics->overlap_max_tokens;
    plan.overlap_max_tokens_source = config.tactics->describe();
  } else {
    plan.overlap_max_tokens = plan.rules.overlap_max_tokens;
    plan.overlap_max_tokens_source =
        fmt::format("built-in default of {} ({})", plan.rules.name, plan.rules.measured);
  }
}

// The tactics' measured prenorm ranges (their architecture was checked by apply_threshold).
void apply_prenorm_tactics(KernelPlan& plan, const KernelConfig& config) {
  if (!config.tactics || config.tactics->prenorm.empty()) return;
  std::vector<PrenormRange> ranges;
  int64_t lo = 1;
  for (const PrenormTactic& t : config.tactics->prenorm) {
    const PrenormKernel k = parse_prenorm_kernel(t.kernel);
    if (k == PrenormKernel::tma128 && !plan.tma128_available) {
      throw Error(fmt::format(
          "{} picks tma128 up to {} tokens, but the image this GPU loads ({}) "
          "has no TMA kernel: run `mhc tune` with this binary",
          config.tactics->source, t.max_tokens, plan.image ? plan.image->name() : "none"));
    }
    ranges.push_back({lo, t.max_tokens, k, t.splits});
    if (t.max_tokens != kNoTokenLimit) lo = t.max_tokens + 1;
  }
  plan.prenorm = std::move(ranges);
  plan.prenorm_source = config.tactics->describe();
}

// The tactics' measured fused-boundary threshold replaces the built-in rule: at the measured n,
// from the measured C up (a wider C crossed over earlier wherever measured), from that many
// tokens (0: never).
void apply_boundary_tactics(KernelPlan& plan, const KernelConfig& config) {
  if (!config.tactics || !config.tactics->fused_boundary_min_tokens) return;
  const int64_t from = *config.tactics->fused_boundary_min_tokens;
  if (from > 0 && !plan.tma128_available) {
    throw Error(fmt::format(
        "{} fuses the boundary from {} tokens, but the image this GPU loads ({}) has no fused "
        "boundary kernel: run `mhc tune` with this binary",
        config.tactics->source, from, plan.image ? plan.image->name() : "none"));
  }
  plan.fused_boundary_min_tokens = from;
  plan.fused_boundary_min_hidden = config.tactics->hidden;
  plan.fused_boundary_streams = config.tactics->n;
  plan.fused_boundary_wide = {};
  plan.overrides.push_back(fmt::format("fused_boundary_min_tokens={} (tactics)", from));
}

void apply_switches(KernelPlan& plan, const KernelConfig& config) {
  if (config.prenorm_kernel) {
    const PrenormKernel k = parse_prenorm_kernel(*config.prenorm_kernel);
    if (k == PrenormKernel::tma128 && !plan.tma128_available) {
      throw Error(fmt::format(
          "kernel config prenorm_kernel=tma128: the TMA kernel is not in the image this GPU "
          "loads ({}); it needs the sm_90 instructions (an sm_90a or newer image)",
          plan.image ? plan.image->name() : "none"));
    }
    plan.prenorm = {{1, kNoTokenLimit, k}};
    plan.prenorm_source = "kernel config (prenorm_kernel)";
    plan.overrides.push_back("prenorm_kernel=" + *config.prenorm_kernel);
  }
  if (config.prenorm_splits) {
    plan.forced_splits = *config.prenorm_splits;
    plan.overrides.push_back(fmt::format("prenorm_splits={}", *config.prenorm_splits));
  }
  if (config.fused_input) {
    plan.fused_input_max_tokens = *config.fused_input ? kNoTokenLimit : 0;
    plan.overrides.push_back(fmt::format("fused_input={}", *config.fused_input));
  }
  if (config.folded_post) {
    plan.folded_post_max_tokens = *config.folded_post ? kNoTokenLimit : 0;
    plan.overrides.push_back(fmt::format("folded_post={}", *config.folded_post));
  }
  if (config.cluster_post) {
    const bool clusters = plan.image && plan.image->has_sm90_instructions();
    if (*config.cluster_post && !clusters) {
      throw Error(fmt::format(
          "kernel config cluster_post=true: the image this GPU loads ({}) has no thread block "
          "clusters; they need the sm_90 instructions (an sm_90a or newer image)",
          plan.image ? plan.image->name() : "none"));
    }
    plan.cluster_post_max_tokens = *config.cluster_post ? kNoTokenLimit : 0;
    plan.overrides.push_back(fmt::format("cluster_post={}", *config.cluster_post));
  }
  if (config.post_columns) {
    plan.post_columns_max_tokens = *config.post_columns ? kNoTokenLimit : 0;
    plan.overrides.push_back(fmt::format("post_columns={}", *config.post_columns));
  }
  if (config.flagged_partials) {
    plan.flagged_partials_max_tokens = *config.flagged_partials ? kNoTokenLimit : 0;
    plan.flagged_partials_split_loop = *config.flagged_partials;
    plan.overrides.push_back(fmt::format("flagged_partials={}", *config.flagged_partials));
  }
  if (config.cluster_epilogue) {
    if (*config.cluster_epilogue && !plan.tma128_available) {
      throw Error(fmt::format(
          "kernel config cluster_epilogue=true: the TMA prenorm kernel is not in the image this "
          "GPU loads ({}); it needs the sm_90a instructions (TMA, clusters)",
          plan.image ? plan.image->name() : "none"));
    }
    plan.tma_cluster_epilogue = *config.cluster_epilogue;
    plan.overrides.push_back(fmt::format("cluster_epilogue={}", *config.cluster_epilogue));
  }
  if (config.fused_boundary) {
    if (*config.fused_boundary && !plan.tma128_available) {
      throw Error(fmt::format(
          "kernel config fused_boundary=true: the fused boundary kernel is not in the image this "
          "GPU loads ({}); it needs the sm_90a instructions (TMA, clusters)",
          plan.image ? plan.image->name() : "none"));
    }
    plan.fused_boundary_min_tokens = *config.fused_boundary ? 1 : 0;
    plan.fused_boundary_min_hidden = 0;  // forced: every shape
    plan.fused_boundary_streams = 0;
    plan.fused_boundary_wide = {};
    plan.overrides.push_back(fmt::format("fused_boundary={}", *config.fused_boundary));
  }
  if (config.overlap_side_ctas) {
    plan.overlap_side_ctas = *config.overlap_side_ctas;
    plan.overrides.push_back(fmt::format("overlap_side_ctas={}", *config.overlap_side_ctas));
  }
  if (config.pdl) {
    const bool waits = plan.image && plan.image->has_sm90_instructions();
    if (*config.pdl && !waits) {
      throw Error(fmt::format(
          "kernel config pdl=true: the image this GPU loads ({}) has no griddepcontrol; PDL "
          "needs the sm_90 instructions (an sm_90a or newer image)",
          plan.image ? plan.image->name() : "none"));
    }
    plan.pdl = *config.pdl;
    plan.overrides.push_back(fmt::format("pdl={}", *config.pdl));
  }
}

// Batch-invariant mode overrides the size-dependent choices; the switches that would break the
// fixed order are refused rather than silently ignored.
void apply_batch_invariance(KernelPlan& plan, const KernelConfig& config) {
  auto refuse = [](std::string_view key) {
    throw Error(fmt::format(
        "kernel config {} cannot be combined with batch_invariant: batch-invariant mode fixes "
        "the prenorm kernel and splits and never folds the post",
        key));
  };
  if (config.prenorm_kernel) refuse("prenorm_kernel");
  if (config.prenorm_splits) refuse("prenorm_splits");
  if (config.overlap_side_ctas.value_or(0) > 0) refuse("overlap_side_ctas");
  if (config.folded_post.value_or(false)) refuse("folded_post=true");
  // Its split count follows the batch size, and with it the GEMM's K order.
  if (config.fused_boundary.value_or(false)) refuse("fused_boundary=true");
  // The leaves' pairwise tree is reduced by the last CTA (reduce_splits_pairwise) only.
  if (config.cluster_epilogue.value_or(false)) refuse("cluster_epilogue=true");
  plan.batch_invariant = true;
  plan.overlap_side_ctas = 0;  // the leaf kernels' splits follow the K leaves
  plan.prenorm.clear();
  plan.prenorm_source = "batch-invariant mode (batch_invariant_kernel)";
  if (plan.tma128_available) {
    plan.prenorm.push_back({1, kNoTokenLimit, PrenormKernel::tma128});
  } else {
    plan.prenorm.push_back({1, kBatchInvariantMma16MaxTokens, PrenormKernel::mma16});
    plan.prenorm.push_back(
        {kBatchInvariantMma16MaxTokens + 1, kNoTokenLimit, PrenormKernel::mma64});
  }
  // The fused input path stays (its CTAs cut the row as the input_path kernel does, so fused
  // and separate give the same bits); the folded post does not (its CTAs are the 16-row kernel's).
  plan.folded_post_max_tokens = 0;
  plan.fused_boundary_min_tokens = 0;
  plan.tma_cluster_epilogue = false;
  plan.overrides.push_back("batch_invariant=true");
}

}  // namespace

PrenormKernel batch_invariant_kernel(int64_t tokens, bool tma128_available) {
  if (tma128_available) return PrenormKernel::tma128;
  return tokens <= kBatchInvariantMma16MaxTokens ? PrenormKernel::mma16 : PrenormKernel::mma64;
}

std::string KernelImage::name() const {
  const std::string v = variant ? std::string(1, variant) : std::string();
  return fmt::format("{}_{}{}", ptx ? "compute" : "sm", arch, v);
}

std::vector<KernelImage> parse_images(std::string_view list) {
  std::vector<KernelImage> images;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    const std::string_view entry = list.substr(0, comma);
    if (!entry.empty()) images.push_back(parse_image(entry));
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return images;
}

std::string image_names(const std::vector<KernelImage>& images, std::string_view separator) {
  std::string out;
  for (const KernelImage& im : images) {
    if (!out.empty()) out += separator;
    out += im.name();
  }
  return out;
}

std::optional<KernelImage> image_for(ComputeCapability cc, const std::vector<KernelImage>& images) {
  std::optional<KernelImage> best;
  for (const KernelImage& image : images) {  // the newest SASS that runs here
    if (!image.ptx && sass_runs_on(image, cc) && (!best || image.arch > best->arch)) best = image;
  }
  if (best) return best;
  for (const KernelImage& image : images) {  // else the newest PTX the driver can JIT here
    if (image.ptx && image.arch <= capability_number(cc) && (!best || image.arch > best->arch)) {
      best = image;
    }
  }
  return best;
}

std::string_view to_string(PrenormKernel k) {
  switch (k) {
    case PrenormKernel::mma16:
      return "mma16";
    case PrenormKernel::mma64:
      return "mma64";
    case PrenormKernel::tma128:
      return "tma128";
  }
  return "?";
}

int rows_per_tile(PrenormKernel k) {
  return k == PrenormKernel::mma16 ? 16 : k == PrenormKernel::mma64 ? 64 : 128;
}

PrenormKernel parse_prenorm_kernel(std::string_view s) {
  for (PrenormKernel k : {PrenormKernel::mma16, PrenormKernel::mma64, PrenormKernel::tma128}) {
    if (s == to_string(k)) return k;
  }
  throw Error(fmt::format("unknown prenorm kernel '{}' (known: mma16, mma64, tma128)", s));
}

std::string_view to_string(OverlapAvailability a) {
  switch (a) {
    case OverlapAvailability::automatic:
      return "automatic";
    case OverlapAvailability::opt_in:
      return "opt-in";
    case OverlapAvailability::never:
      return "never";
  }
  return "?";
}

ArchRules rules_for(ComputeCapability cc, const std::optional<KernelImage>& image) {
  if (cc.is_sm90()) return sm90_rules();
  if (cc.is_sm100_family()) {
    if (image && !image->ptx && image->arch / 10 == 10) return sm100_rules();
    // Only PTX for this GPU: the driver JIT-compiles the portable kernels at load, a path
    // measured nowhere, so the overlap is not switched on by itself.
    ArchRules r = sm100_rules();
    r.name = "sm100-jit";
    r.measured = "no SM100 code in this binary: the portable kernels JIT-compiled, unmeasured";
    r.overlap = OverlapAvailability::opt_in;
    return r;
  }
  return sm80_rules();
}

KernelPlan make_plan(ComputeCapability cc, int sm_count, std::optional<KernelImage> image,
                     bool image_queried, const std::vector<KernelImage>& built,
                     const KernelConfig& config) {
  if (sm_count < 1) throw Error(fmt::format("kernel plan: sm_count={} must be >= 1", sm_count));
  KernelPlan plan;
  plan.capability = cc;
  plan.sm_count = sm_count;
  plan.built = built;
  plan.image = image;
  plan.image_queried = image_queried;
  plan.projection = config.projection;
  plan.rules = rules_for(cc, image);
  plan.tma128_available = image && image->has_wgmma();  // its body is in sm_90a only
  plan.pdl = plan.rules.pdl && image && image->has_sm90_instructions();
  plan.prenorm = auto_ranges(plan.rules, plan.tma128_available);
  plan.prenorm_source = fmt::format("built-in rules of {}", plan.rules.name);
  plan.fused_input_max_tokens = plan.rules.fused_input_max_tokens;
  plan.folded_post_max_tokens = plan.rules.folded_post_max_tokens;
  const bool clusters = image && image->has_sm90_instructions();
  plan.cluster_post_max_tokens = clusters ? plan.rules.cluster_post_max_tokens : 0;
  plan.post_columns_max_tokens = plan.rules.post_columns_max_tokens;
  plan.flagged_partials_max_tokens = image ? plan.rules.flagged_partials_max_tokens : 0;
  plan.fused_boundary_min_tokens = plan.tma128_available ? plan.rules.fused_boundary_min_tokens : 0;
  plan.fused_boundary_min_hidden = plan.rules.fused_boundary_min_hidden;
  plan.fused_boundary_streams = plan.rules.fused_boundary_streams;
  plan.fused_boundary_wide = plan.rules.fused_boundary_wide;
  plan.tma_cluster_epilogue = plan.tma128_available && plan.rules.tma_cluster_epilogue;
  plan.overlap_side_ctas = image ? plan.rules.overlap_side_ctas : 0;
  plan.overlap = image ? plan.rules.overlap : OverlapAvailability::never;
  apply_threshold(plan, config);
  apply_prenorm_tactics(plan, config);
  apply_boundary_tactics(plan, config);
  apply_switches(plan, config);
  if (config.batch_invariant) apply_batch_invariance(plan, config);
  return plan;
}

KernelPlan simulated_plan(ComputeCapability cc, int sm_count, const std::vector<KernelImage>& built,
                          const KernelConfig& config) {
  return make_plan(cc, sm_count, image_for(cc, built), false, built, config);
}

bool KernelPlan::fuses_boundary(int hidden, int streams, int64_t tokens) const {
  return boundary_rule_holds(fused_boundary_min_tokens, fused_boundary_min_hidden,
                             fused_boundary_streams, fused_boundary_wide, hidden, streams, tokens);
}

PrenormKernel KernelPlan::prenorm_kernel(int64_t tokens) const {
  return prenorm_range(tokens).kernel;
}

PrenormRange KernelPlan::prenorm_range(int64_t tokens) const {
  for (const PrenormRange& r : prenorm) {
    if (tokens <= r.max_tokens) return r;
  }
  return prenorm.empty() ? PrenormRange{} : prenorm.back();
}

PrenormChoice KernelPlan::prenorm_choice(int64_t tokens, int64_t k) const {
  PrenormChoice c;
  const PrenormRange range = prenorm_range(tokens);
  c.kernel = range.kernel;
  const int max_splits =
      static_cast<int>(std::max<int64_t>(1, k / (kPrenormChunkK * kPrenormGemmWarps)));
  int64_t decode_cap = rules.decode_max_splits;
  if (rules.decode_stage_k > 0 && tokens <= rules.decode_stage_max_tokens) {
    const int64_t one_stage = (k + rules.decode_stage_k - 1) / rules.decode_stage_k;
    decode_cap =
        std::max<int64_t>(decode_cap, std::min<int64_t>(one_stage, kPrenormDecodeSplitLimit));
  }
  const int cap = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(max_splits, decode_cap)));
  if (forced_splits || range.splits > 0) {
    c.splits = std::clamp(forced_splits.value_or(range.splits), 1, std::max(1, max_splits));
    return c;
  }
  const int64_t rows = rows_per_tile(c.kernel);
  const int64_t tiles = std::max<int64_t>(1, (tokens + rows - 1) / rows);
  c.splits = static_cast<int>(std::clamp<int64_t>(sm_count / tiles, 1, cap));
  return c;
}

int KernelPlan::side_split_ctas(int64_t tokens, int splits) const {
  if (overlap_side_ctas <= 0 || tokens < 1 || tokens > 16) return 0;
  return overlap_side_ctas < splits ? overlap_side_ctas : 0;
}

bool KernelPlan::fuses_input(int64_t tokens, PrenormKernel kernel) const {
  // The 16-row and the TMA kernel carry input-path CTAs; the 64-row one does not.
  return kernel != PrenormKernel::mma64 && tokens <= fused_input_max_tokens;
}

}  // namespace mhc
