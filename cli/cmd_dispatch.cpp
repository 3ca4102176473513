// `mhc dispatch`: asks the overlap policy (src/core/dispatch.cpp) what it would do for a described
// situation and prints the decision, the reason, the threshold, the all-reduce and the config.
#include <fmt/core.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "commands.hpp"
#include "mhc/core/config.hpp"
#include "mhc/core/dispatch.hpp"
#include "mhc/core/error.hpp"
#include "mhc/core/kernel_plan.hpp"
#include "mhc/core/params.hpp"
#include "options.hpp"

namespace mhc::cli {
namespace {

// The TP state as described on the command line.
struct CliTensorParallel final : TensorParallelInfo {
  int world = 1;
  bool fused = false;
  int world_size() const override { return world; }
  bool fused_allreduce_available() const override { return fused; }
};

struct DispatchArgs {
  std::string arch;
  std::string kernel_config;
  int hidden = 5120;
  int n = 4;
  int64_t tokens = 8;
  std::string mode = "full";
  bool ubatching = false;
  bool no_prenorm_gemm = false;
  int tp = 1;
  bool fused_available = false;
  JsonOutput json;
  std::string images = "built";  // the binary's own, or a list such as sm_90a,sm_80,compute_80
};

constexpr const char* kNoFusedKernel =
    "the policy selects the SM100 fused all-reduce, but this build contains no fused all-reduce "
    "kernel";

// 16 hex digits, no prefix: the form `mhc run` prints.
std::string hash_text(uint64_t h) { return fmt::format("{:016x}", h); }

std::string inputs_line(const DispatchArgs& a, const DispatchInputs& in) {
  return fmt::format("C={} n={} NMIX={} M={} mode={} ubatching={} prenorm_gemm={} tp={}{}",
                     in.hidden, in.n, int64_t{in.n} * (int64_t{in.n} + 2), in.tokens,
                     to_string(in.mode), in.ubatching ? "yes" : "no",
                     in.prenorm_gemm_available ? "yes" : "no", a.tp,
                     a.tp > 1 && a.fused_available ? " (fused all-reduce available)" : "");
}

nlohmann::json inputs_json(const DispatchArgs& a, const DispatchInputs& in) {
  return {{"arch", fmt::format("{}.{}", in.capability.major, in.capability.minor)},
          {"hidden", in.hidden},
          {"n", in.n},
          {"tokens", in.tokens},
          {"mode", std::string(to_string(in.mode))},
          {"ubatching", in.ubatching},
          {"prenorm_gemm_available", in.prenorm_gemm_available},
          {"tp", a.tp},
          {"fused_allreduce_available", a.fused_available}};
}

std::string images_text(const DispatchInputs& in) {
  const std::string names = image_names(*in.images, ",");
  return names.empty() ? "none (no CUDA backend in this binary; --images simulates one)" : names;
}

void print_text(const DispatchArgs& a, const DispatchInputs& in, const DispatchDecision& d) {
  auto line = [](std::string_view label, const std::string& value) {
    fmt::print("{:<13}{}\n", label, value);
  };
  line("arch", fmt::format("{}.{}", in.capability.major, in.capability.minor));
  line("inputs", inputs_line(a, in));
  line("decision", d.overlap ? "overlap (coefficient path on the side stream)"
                             : "no overlap (native schedule)");
  line("reason", d.overlap ? "-" : fmt::format("{}: {}", d.reason_code, d.reason));
  line("threshold", fmt::format("0 < M <= {} ({})", d.max_tokens, d.max_tokens_source));
  line("images", images_text(in));
  line("all-reduce", std::string(to_string(d.all_reduce)));
  line("config", in.config.describe());
  line("config hash", hash_text(in.config.hash()));
  if (d.all_reduce == AllReduce::fused) line("note", std::string(kNoFusedKernel) + ".");
}

nlohmann::json report_json(const DispatchArgs& a, const DispatchInputs& in,
                           const DispatchDecision& d) {
  nlohmann::json out = nlohmann::json::parse(d.to_json());
  out["config"] = nlohmann::json::parse(in.config.to_json());
  out["config_hash"] = hash_text(in.config.hash());
  out["inputs"] = inputs_json(a, in);
  out["threshold_source"] = d.max_tokens_source;
  out["images"] = images_text(in);
  if (d.all_reduce == AllReduce::fused) out["note"] = kNoFusedKernel;
  return out;
}

void run_dispatch(DispatchArgs& a) {
  DispatchInputs in;
  in.capability = parse_capability(a.arch);
  in.config = KernelConfig::parse(a.kernel_config);
  a.json.check(files_read(in.config));
  // The shape limits `run` and `site` apply (mhc::validate: C a multiple of 8 up to 2^20, n up
  // to 8), so that the policy is never asked about a shape nothing can run.
  MhcParams shape;
  shape.hidden = a.hidden;
  shape.n = a.n;
  validate(shape);
  in.hidden = a.hidden;
  in.n = a.n;
  in.tokens = a.tokens;
  in.mode = parse_exec_mode(a.mode);
  in.ubatching = a.ubatching;
  in.prenorm_gemm_available = !a.no_prenorm_gemm;
  in.images = a.images == "built" ? built_images() : parse_images(a.images);
  CliTensorParallel tp;
  tp.world = a.tp;
  tp.fused = a.fused_available;
  in.tp = &tp;
  const DispatchDecision d = decide(in);
  if (!a.json.to_stdout()) print_text(a, in, d);
  a.json.emit(report_json(a, in, d));
}

}  // namespace

void register_dispatch(CLI::App& app) {
  auto* cmd = add_command(
      app, "dispatch", "Say whether the mHC coefficient overlap would run, and why (policy only)",
      {R"(mhc dispatch --arch 9.0 --kernel-config '{"enable_mhc_overlap": true}' --tokens 8)"});
  auto args = std::make_shared<DispatchArgs>();
  cmd->add_option("--arch", args->arch, "Compute capability, e.g. 9.0 (H200) or 10.0 (B200)")
      ->required();
  add_kernel_config_option(cmd, args->kernel_config);
  add_hidden_option(cmd, args->hidden, "Hidden size C")->capture_default_str();
  add_streams_option(cmd, args->n, "Residual streams n (hc_mult)")->capture_default_str();
  add_tokens_option(cmd, args->tokens);
  add_mode_option(cmd, args->mode);
  cmd->add_flag("--ubatching", args->ubatching, "Micro-batching is on");
  cmd->add_flag("--no-prenorm-gemm", args->no_prenorm_gemm,
                "The prenorm GEMM kernel is not available for the device");
  cmd->add_option("--tp", args->tp, "Tensor-parallel world size")
      ->check(integer_in(1))
      ->capture_default_str();
  cmd->add_flag("--fused-allreduce-available", args->fused_available,
                "The TP group offers the SM100 fused all-reduce");
  cmd->add_option("--images", args->images,
                  "Kernel images of a simulated binary, e.g. sm_90a,sm_80,sm_100f,compute_80 "
                  "(default: this binary's)")
      ->check(comma_list())
      ->capture_default_str();
  args->json.add_to(cmd);
  cmd->callback([args] { run_dispatch(*args); });
}

}  // namespace mhc::cli
