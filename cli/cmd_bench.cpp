// `mhc bench kernels`: per-kernel and whole-site timings on the GPU (CUDA graphs, CUDA events,
// input sets rotated past L2), with achieved bandwidth against the bytes floor. Separate from the
// tests: it validates nothing, it times.
#include <fmt/core.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.hpp"
#include "mhc/core/config.hpp"
#include "mhc/core/error.hpp"
#include "mhc/core/params.hpp"
#if MHC_WITH_CUDA
#include "mhc/cuda/bench.hpp"
#include "mhc/cuda/cuda_backend.hpp"
#endif

namespace mhc::cli {
namespace {

struct BenchOptions {
  std::string preset_name{kDefaultPreset};
  std::vector<int64_t> tokens{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096, 8192};
  int hidden = 0, hc = 0;
  int reps = 200;
  std::string projection = "tf32";
  std::string kernel_config;
  bool sweep = false;
  std::string json_path;
  std::string commit;
};

void run_kernels(const BenchOptions& o) {
#if MHC_WITH_CUDA
  if (!cuda::device_present()) throw Error("mhc bench kernels needs a CUDA GPU; none is visible");
  cuda::KernelBenchOptions k;
  k.preset_name = o.preset_name;
  k.params = preset(o.preset_name);
  if (o.hidden > 0) k.params.hidden = o.hidden;
  if (o.hc > 0) k.params.n = o.hc;
  validate(k.params);
  for (int64_t m : o.tokens) {
    if (m <= 0) throw Error(fmt::format("--tokens: {} is not a positive token count", m));
  }
  k.tokens = o.tokens;
  if (o.reps < 5) throw Error("--reps must be at least 5");
  k.reps = o.reps;
  k.projection =
      KernelConfig::parse(fmt::format("{{\"projection\": \"{}\"}}", o.projection)).projection;
  // Of a --kernel-config, the keys that change the kernels: projection (over --projection) and
  // batch_invariant; the overlap keys concern the stack's schedule, which this does not run.
  if (!o.kernel_config.empty()) {
    const KernelConfig cfg = KernelConfig::parse(o.kernel_config);
    if (nlohmann::json::parse(o.kernel_config).contains("projection"))
      k.projection = cfg.projection;
    k.batch_invariant = cfg.batch_invariant;
  }
  k.sweep_tuning = o.sweep;
  k.json_path = o.json_path;
  k.commit = o.commit;
  if (k.commit.empty()) {
    if (const char* env = std::getenv("MHC_COMMIT")) k.commit = env;
  }
  fmt::print("mhc bench kernels: {} ({}), projection {}{}, commit {}\n", o.preset_name,
             describe(k.params), to_string(k.projection),
             k.batch_invariant ? ", batch-invariant" : "", k.commit.empty() ? "unknown" : k.commit);
  cuda::bench_kernels(k);
#else
  (void)o;
  throw Error("mhc bench kernels needs the CUDA backend, and this build has none");
#endif
}

}  // namespace

void register_bench(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "Time the kernels on this machine's GPU");
  bench->require_subcommand(1);
  auto options = std::make_shared<BenchOptions>();
  auto* kernels = bench->add_subcommand(
      "kernels", "Each CUDA kernel and the whole site: us, GB/s, fraction of the bytes floor");
  kernels->add_option("--preset", options->preset_name, "Model preset")->capture_default_str();
  kernels->add_option("--tokens", options->tokens, "Token counts (comma separated)")
      ->delimiter(',');
  kernels->add_option("--hidden", options->hidden, "Override the hidden size C");
  kernels->add_option("--hc", options->hc, "Override the stream count n");
  kernels->add_option("--reps", options->reps, "Timed graph replays per item")
      ->capture_default_str();
  kernels->add_option("--projection", options->projection, "tf32 or fp32")->capture_default_str();
  kernels->add_option("--kernel-config", options->kernel_config,
                      R"(Kernel configuration JSON; its projection and batch_invariant apply)");
  kernels->add_flag("--sweep", options->sweep, "Also sweep the prenorm GEMM's splits and tile");
  kernels->add_option("--json", options->json_path, "Write the JSON report here");
  kernels->add_option("--commit", options->commit, "Commit to record (default: env MHC_COMMIT)");
  kernels->callback([options] { run_kernels(*options); });
  add_bench_overlap(*bench);
}

}  // namespace mhc::cli
