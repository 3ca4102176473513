// `mhc bench kernels`: per-kernel and whole-site timings on the GPU (CUDA graphs, CUDA events,
// input sets rotated past L2), with achieved bandwidth against the bytes floor. Separate from the
// tests: it validates nothing, it times. The benchmark itself lives in bench/ (mhc_bench).
#include <fmt/core.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "commands.hpp"
#include "mhc/bench/common.hpp"
#include "mhc/bench/kernels.hpp"
#include "mhc/core/config.hpp"
#include "mhc/core/error.hpp"
#include "mhc/core/params.hpp"

namespace mhc::cli {
namespace {

struct BenchOptions {
  std::string preset_name{kDefaultPreset};
  std::vector<int64_t> tokens{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096, 8192};
  int hidden = 0, hc = 0;
  int reps = 200;
  std::string projection = "tf32";
  bool sweep = false;
  std::string json_path;
  std::string commit;
};

void run_kernels(const BenchOptions& o) {
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
  k.sweep_tuning = o.sweep;
  k.commit = o.commit;
  if (k.commit.empty()) {
    if (const char* env = std::getenv("MHC_COMMIT")) k.commit = env;
  }
  bench::write_json(o.json_path, bench::bench_kernels(k));
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
  kernels->add_flag("--sweep", options->sweep, "Also sweep the prenorm GEMM's splits and tile");
  kernels->add_option("--json", options->json_path, "Write the JSON report here");
  kernels->add_option("--commit", options->commit, "Commit to record (default: env MHC_COMMIT)");
  kernels->callback([options] { run_kernels(*options); });
  add_bench_overlap(*bench);
}

}  // namespace mhc::cli
