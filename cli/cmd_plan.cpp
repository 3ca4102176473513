// `mhc plan`: the kernel plan (mhc/core/kernel_plan.hpp), the one launch description every
// launch goes through, for this GPU or a simulated one (--arch, --images): every prenorm kernel
// variant and the token range it serves, whether the image was compiled ahead of time, splits,
// PDL, fused input, folded post, the projection, the overlap rule and where its threshold comes
// from, and the kernel-config switches that force or disable each path. With --tokens, also each
// launch of a site of that shape resolved (KernelPlan::tuning): exactly what the launchers get.
#include <fmt/core.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.hpp"
#include "mhc/core/config.hpp"
#include "mhc/core/error.hpp"
#include "mhc/core/kernel_plan.hpp"
#include "mhc/core/params.hpp"
#include "options.hpp"
#if MHC_WITH_CUDA
#include "mhc/cuda/cuda_backend.hpp"
#include "mhc/cuda/device_plan.hpp"
#endif

namespace mhc::cli {
namespace {

struct PlanArgs {
  std::string arch;  // empty: this GPU
  std::string images = "built";
  int sm_count = 132;  // an H200's, for simulated plans
  std::string kernel_config;
  std::vector<int64_t> tokens;  // empty: the plan only
  int hidden = 5120, hc = 4;    // the shape of the resolved launches
  JsonOutput json;
};

// Each launch of a site of C = hidden, n = hc resolved at every token count asked for, as text
// lines and into doc["launches"].
std::string launch_lines(const PlanArgs& a, const KernelPlan& plan, nlohmann::json& doc) {
  MhcParams p;
  p.hidden = a.hidden;
  p.n = a.hc;
  std::string text;
  doc["launches"] = nlohmann::json::array();
  for (int64_t m : a.tokens) {
    const LaunchTuning t = plan.tuning(p, m);
    text += fmt::format("{:<17}{}\n", fmt::format("launch M={}", m), t.describe());
    doc["launches"].push_back(nlohmann::json::parse(t.to_json()));
  }
  return text;
}

// What the runtime reports for each prenorm variant on this GPU ("" when simulated).
std::string runtime_lines(nlohmann::json& doc) {
  std::string text;
#if MHC_WITH_CUDA
  for (const cuda::KernelVariantInfo& v : cuda::query_prenorm_variants()) {
    text += fmt::format("{:<17}{}: binaryVersion {} ptxVersion {}, {} registers, {} B local\n",
                        "runtime", to_string(v.kernel), v.binary_version, v.ptx_version,
                        v.registers, v.local_bytes);
    doc["runtime"].push_back({{"kernel", std::string(to_string(v.kernel))},
                              {"binary_version", v.binary_version},
                              {"ptx_version", v.ptx_version},
                              {"registers", v.registers},
                              {"local_bytes", v.local_bytes}});
  }
#else
  (void)doc;
#endif
  return text;
}

KernelPlan device_or_simulated(const PlanArgs& a, const KernelConfig& config, bool& real) {
  real = false;
  if (!a.arch.empty()) {
    const auto images = a.images == "built" ? built_images() : parse_images(a.images);
    return simulated_plan(parse_capability(a.arch), a.sm_count, images, config);
  }
  if (a.images != "built") throw Error("--images simulates a binary: give --arch too");
#if MHC_WITH_CUDA
  if (cuda::device_present()) {
    real = true;
    return cuda::device_plan(config);
  }
#endif
  throw Error(
      "no CUDA GPU is visible (or this build has no CUDA backend): give --arch to "
      "print the plan for a simulated one");
}

void run_plan(PlanArgs& a) {
  const KernelConfig config = KernelConfig::parse(a.kernel_config);
  a.json.check(files_read(config));
  bool real = false;
  const KernelPlan plan = device_or_simulated(a, config, real);
  nlohmann::json doc = nlohmann::json::parse(plan.to_json());
  const std::string runtime = real ? runtime_lines(doc) : std::string();
  const std::string launches = a.tokens.empty() ? std::string() : launch_lines(a, plan, doc);
  if (!a.json.to_stdout()) fmt::print("{}{}{}", plan.describe(), runtime, launches);
  a.json.emit(doc);
}

}  // namespace

void register_plan(CLI::App& app) {
  auto* cmd = add_command(
      app, "plan",
      "Print the kernel plan: which kernel runs at which batch size on this GPU, and why",
      {"mhc plan", "mhc plan --arch 10.0 --images sm_90a,sm_80,compute_80",
       R"(mhc plan --kernel-config '{"prenorm_kernel": "mma64"}')",
       "mhc plan --hidden 7168 --hc 4 --tokens 1,64,4096"});
  auto args = std::make_shared<PlanArgs>();
  cmd->add_option("--arch", args->arch,
                  "Simulate a GPU of this compute capability (e.g. 10.0) instead of this one");
  cmd->add_option("--images", args->images,
                  "With --arch: the kernel images of a simulated binary, e.g. "
                  "sm_90a,sm_80,sm_100f,compute_80 (default: this binary's)")
      ->capture_default_str();
  cmd->add_option("--sm-count", args->sm_count, "With --arch: multiprocessors")
      ->check(integer_in(1))
      ->capture_default_str();
  add_kernel_config_option(cmd, args->kernel_config);
  add_token_counts_option(cmd, args->tokens, "--tokens",
                          "Also print each launch of a site resolved at these token counts");
  add_hidden_option(cmd, args->hidden, "With --tokens: the site's hidden size C")
      ->capture_default_str();
  add_streams_option(cmd, args->hc, "With --tokens: the site's residual streams n")
      ->capture_default_str();
  args->json.add_to(cmd);
  cmd->callback([args] { run_plan(*args); });
}

}  // namespace mhc::cli
