// `mhc bench kernels`: per-kernel and whole-site timings on the GPU (CUDA graphs, CUDA events,
// input sets rotated past L2), with achieved bandwidth against the bytes floor. Separate from the
// tests: it validates nothing, it times. The benchmark itself lives in bench/ (mhc_bench).
#include <fmt/core.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.hpp"
#include "mhc/bench/kernels.hpp"
#include "mhc/core/config.hpp"
#include "mhc/core/error.hpp"
#include "mhc/core/params.hpp"
#include "options.hpp"
#include "progress.hpp"

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
  std::string only;
  JsonOutput json;
  std::string commit;
};

nlohmann::json run_kernels(const BenchOptions& o, const bench::Progress& progress) {
  bench::KernelBenchOptions k;
  k.preset_name = o.preset_name;
  k.params = preset(o.preset_name);
  if (o.hidden > 0) k.params.hidden = o.hidden;
  if (o.hc > 0) k.params.n = o.hc;
  validate(k.params);
  k.tokens = o.tokens;
  k.reps = o.reps;
  k.projection =
      KernelConfig::parse(fmt::format("{{\"projection\": \"{}\"}}", o.projection)).projection;
  // A --kernel-config's projection replaces --projection; its other kernel keys make the plan
  // the kernels run under (its overlap keys concern a schedule this does not run).
  if (!o.kernel_config.empty()) {
    k.config = KernelConfig::parse(o.kernel_config);
    if (nlohmann::json::parse(o.kernel_config).contains("projection"))
      k.projection = k.config.projection;
  }
  k.sweep_tuning = o.sweep;
  k.only = o.only;
  k.progress = progress;
  k.commit = o.commit;
  if (k.commit.empty()) {
    if (const char* env = std::getenv("MHC_COMMIT")) k.commit = env;
  }
  return bench::bench_kernels(k);
}

}  // namespace

void register_bench(CLI::App& app) {
  auto* bench = add_command(app, "bench", "Time the kernels on this machine's GPU",
                            {"mhc bench kernels --tokens 1,16,128 --json kernels.json",
                             "mhc bench overlap --layers 40 --json | jq .rows"});
  bench->require_subcommand(1);
  auto options = std::make_shared<BenchOptions>();
  auto* kernels = add_command(
      *bench, "kernels",
      "Each CUDA kernel and the whole site: us, GB/s, fraction of the bytes floor",
      {"mhc bench kernels --preset dsv41-flash --tokens 1,16,128 --reps 200 --json kernels.json"});
  add_preset_option(kernels, options->preset_name);
  add_token_counts_option(kernels, options->tokens, "--tokens", "Token counts (comma separated)");
  add_hidden_option(kernels, options->hidden, "Override the hidden size C");
  add_streams_option(kernels, options->hc, "Override the stream count n");
  kernels->add_option("--reps", options->reps, "Timed graph replays per item")
      ->check(integer_in(5, kMaxTimingReps))
      ->capture_default_str();
  kernels->add_option("--projection", options->projection, "Projection precision")
      ->check(one_of({"tf32", "fp32"}))
      ->capture_default_str();
  add_kernel_config_option(kernels, options->kernel_config);  // projection, batch_invariant, ...
  kernels->add_flag("--sweep", options->sweep, "Also sweep the prenorm GEMM's splits and tile");
  kernels
      ->add_option("--only", options->only,
                   "Time only the items whose name contains this (e.g. head), beside the "
                   "empty kernel's graph floor")
      ->check(non_empty());
  options->json.add_to(kernels);
  kernels->add_option("--commit", options->commit, "Commit to record (default: env MHC_COMMIT)");
  kernels->callback([options] {
    options->json.check();
    Progress progress("mhc bench kernels", progress_on_terminal(options->json.wanted()));
    options->json.emit_from([&] { return run_kernels(*options, progress.hooks()); });
  });
  add_bench_overlap(*bench);
}

}  // namespace mhc::cli
