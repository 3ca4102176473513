#include "mhc/core/dispatch.hpp"

#include <fmt/core.h>

#include <charconv>
#include <nlohmann/json.hpp>
#include <optional>

#include "mhc/core/error.hpp"
#include "mhc/core/json_input.hpp"
#include "mhc/core/kernel_plan.hpp"

namespace mhc {

namespace {

struct Failure {
  std::string code;
  std::string reason;
};

std::string cc_text(ComputeCapability cc) { return fmt::format("{}.{}", cc.major, cc.minor); }

// Impossible inputs are caller bugs, not fallback reasons: a negative n would even give a valid
// NMIX (n=-4 -> 8), so they are rejected before any rule is applied.
void check_inputs(const DispatchInputs& in) {
  if (in.hidden < 1) throw Error(fmt::format("dispatch: hidden size C={} must be >= 1", in.hidden));
  if (in.n < 1) throw Error(fmt::format("dispatch: streams n={} must be >= 1", in.n));
  if (in.tokens < 0) throw Error(fmt::format("dispatch: tokens M={} must be >= 0", in.tokens));
  if (in.config.overlap_max_tokens && *in.config.overlap_max_tokens < 0) {
    throw Error(
        fmt::format("dispatch: overlap_max_tokens={} must be >= 0", *in.config.overlap_max_tokens));
  }
}

std::string images_text(const KernelPlan& plan) {
  const std::string names = image_names(plan.built);
  return names.empty() ? "none" : names;
}

// The architecture's rule as the kernel plan states it for this binary (plan_sm*.cpp).
std::optional<Failure> config_or_arch_failure(const DispatchInputs& in, const KernelPlan& plan) {
  const auto& enable = in.config.enable_mhc_overlap;
  const ComputeCapability cc = in.capability;
  if (enable.has_value() && !*enable) {
    return Failure{"disabled_by_config",
                   "overlap is disabled by the kernel config (enable_mhc_overlap=false)."};
  }
  if (plan.rules.overlap == OverlapAvailability::never) {
    return Failure{"arch_unsupported",
                   fmt::format("compute capability {} is neither SM90 nor the SM100 family (10.0, "
                               "10.3); overlap never runs there.",
                               cc_text(cc))};
  }
  // No kernel image at all: static_failure says so.
  if (plan.overlap != OverlapAvailability::opt_in || enable.has_value()) return std::nullopt;
  if (cc.is_sm90()) {
    return Failure{"sm90_not_opted_in",
                   "overlap on SM90 (compute capability 9.0) is opt-in and the kernel config does "
                   "not set enable_mhc_overlap=true."};
  }
  return Failure{"sm100_code_missing",
                 fmt::format("this binary holds no SM100 code (images: {}), so compute capability "
                             "{} JIT-compiles the portable kernels, a path measured nowhere; the "
                             "overlap there is opt-in (enable_mhc_overlap=true).",
                             images_text(plan), cc_text(cc))};
}

std::optional<Failure> static_failure(const DispatchInputs& in, const KernelPlan& plan) {
  if (!in.prenorm_gemm_available || !plan.has_kernels()) {
    return Failure{
        "no_prenorm_gemm",
        fmt::format("the prenorm GEMM kernel is not available for compute capability {} (images "
                    "in this binary: {}).",
                    cc_text(in.capability), images_text(plan))};
  }
  if (in.hidden % 64 != 0) {
    return Failure{"hidden_not_multiple_of_64",
                   fmt::format("hidden size C={} is not a multiple of 64 (C % 64 = {}).", in.hidden,
                               in.hidden % 64)};
  }
  const int64_t nmix = int64_t{in.n} * (int64_t{in.n} + 2);
  if (!(nmix > 0 && nmix <= 32 && nmix % 8 == 0)) {
    return Failure{"nmix_out_of_range",
                   fmt::format("NMIX = n(n+2) = {} for n={}, but overlap needs 0 < NMIX <= 32 and "
                               "NMIX % 8 == 0.",
                               nmix, in.n)};
  }
  if (in.ubatching) {
    return Failure{"ubatching", "micro-batching (ubatching) is on; overlap never runs with it."};
  }
  return std::nullopt;
}

std::optional<Failure> runtime_failure(const DispatchInputs& in, int max_tokens) {
  if (in.mode != ExecMode::full) {
    return Failure{"not_full_graph",
                   fmt::format("execution mode is {}, but overlap needs a FULL CUDA-graph capture.",
                               to_string(in.mode))};
  }
  if (in.tokens == 0) {
    return Failure{"zero_tokens",
                   fmt::format("the batch has M=0 tokens; overlap needs 0 < M <= {}.", max_tokens)};
  }
  if (in.tokens > max_tokens) {
    return Failure{"too_many_tokens",
                   fmt::format("the batch has M={} tokens, above the threshold of {} (overlap "
                               "needs 0 < M <= {}).",
                               in.tokens, max_tokens, max_tokens)};
  }
  return std::nullopt;
}

// The architecture is looked at first: off the SM100 family the fused kernel is excluded before
// the TP object is consulted, and fused_allreduce_available() is never called there.
AllReduce choose_all_reduce(ComputeCapability cc, const TensorParallelInfo* tp) {
  if (tp == nullptr) return AllReduce::none;
  const bool fused_possible = cc.is_sm100_family();
  const int world = tp->world_size();
  if (world < 1) throw Error(fmt::format("dispatch: TP world size {} must be >= 1", world));
  if (world == 1) return AllReduce::none;
  if (fused_possible && tp->fused_allreduce_available()) return AllReduce::fused;
  return AllReduce::nccl;
}

}  // namespace

std::string_view to_string(ExecMode m) {
  switch (m) {
    case ExecMode::eager:
      return "eager";
    case ExecMode::piecewise:
      return "piecewise";
    case ExecMode::full:
      return "full";
  }
  return "?";
}

std::string_view to_string(AllReduce a) {
  switch (a) {
    case AllReduce::none:
      return "none";
    case AllReduce::nccl:
      return "nccl";
    case AllReduce::fused:
      return "fused";
  }
  return "?";
}

ExecMode parse_exec_mode(std::string_view s) {
  for (ExecMode m : {ExecMode::eager, ExecMode::piecewise, ExecMode::full}) {
    if (s == to_string(m)) return m;
  }
  throw Error(fmt::format("unknown execution mode '{}' (known: eager, piecewise, full)",
                          json_input::printable(s, 40)));
}

ComputeCapability parse_capability(std::string_view s) {
  // MAJOR.MINOR, one or two digits each; from_chars alone would also take a sign.
  auto digits = [](std::string_view t) {
    return !t.empty() && t.size() <= 2 && t.find_first_not_of("0123456789") == t.npos;
  };
  const auto dot = s.find('.');
  const std::string_view major_text = s.substr(0, dot);
  const std::string_view minor_text = dot == s.npos ? "" : s.substr(dot + 1);
  ComputeCapability cc;
  if (digits(major_text) && digits(minor_text)) {
    std::from_chars(major_text.data(), major_text.data() + major_text.size(), cc.major);
    std::from_chars(minor_text.data(), minor_text.data() + minor_text.size(), cc.minor);
    if (cc.major >= 1) return cc;
  }
  throw Error(fmt::format("bad compute capability '{}': expected MAJOR.MINOR such as 9.0 or 10.3",
                          json_input::printable(s, 40)));
}

int default_overlap_max_tokens(ComputeCapability cc) {
  return rules_for(cc, std::nullopt).overlap_max_tokens;
}

DispatchDecision decide(const DispatchInputs& in) {
  check_inputs(in);
  const std::vector<KernelImage>& images = in.images ? *in.images : built_images();
  const std::optional<KernelImage> image =
      in.loaded_image ? in.loaded_image : image_for(in.capability, images);
  const KernelPlan plan = make_plan(in.capability, 1, image, false, images, in.config);
  DispatchDecision d;
  d.max_tokens = plan.overlap_max_tokens;
  d.max_tokens_source = plan.overlap_max_tokens_source;
  // Independent of overlap: the sublayer's all-reduce exists whether or not overlap runs.
  d.all_reduce = choose_all_reduce(in.capability, in.tp);
  auto failure = config_or_arch_failure(in, plan);
  if (!failure) failure = static_failure(in, plan);
  if (!failure) failure = runtime_failure(in, d.max_tokens);
  d.overlap = !failure.has_value();
  if (failure) {
    d.reason_code = std::move(failure->code);
    d.reason = std::move(failure->reason);
  }
  return d;
}

std::string DispatchDecision::describe() const {
  if (overlap) {
    return fmt::format("overlap=yes max_tokens={} all_reduce={}", max_tokens,
                       to_string(all_reduce));
  }
  return fmt::format("overlap=no reason_code={} max_tokens={} all_reduce={}: {}", reason_code,
                     max_tokens, to_string(all_reduce), reason);
}

std::string DispatchDecision::to_json() const {
  const nlohmann::json j = {{"overlap", overlap},
                            {"reason_code", reason_code},
                            {"reason", reason},
                            {"max_tokens", max_tokens},
                            {"all_reduce", std::string(to_string(all_reduce))}};
  return j.dump();
}

}  // namespace mhc
