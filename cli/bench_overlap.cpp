// `mhc bench overlap`: its options; the benchmark itself is bench/overlap.cpp (mhc_bench).
#include "commands.hpp"
#include "mhc/bench/common.hpp"
#include "mhc/bench/overlap.hpp"

namespace mhc::cli {
namespace {

// The benchmark's options (bench/), and where the CLI writes its report.
struct OverlapOptions : bench::OverlapOptions {
  std::string json_path;
};

void run(const OverlapOptions& o) { bench::write_json(o.json_path, bench::bench_overlap(o)); }

}  // namespace

void add_bench_overlap(CLI::App& bench) {
  auto o = std::make_shared<OverlapOptions>();
  auto* cmd = bench.add_subcommand(
      "overlap", "Native vs overlap schedule on the stand-in decoder stack (FULL CUDA graphs)");
  cmd->add_option("--preset", o->preset_name, "Model preset")->capture_default_str();
  cmd->add_option("--layers", o->layers, "Decoder layers (default: the preset's)");
  cmd->add_option("--tokens", o->tokens, "Token counts")->delimiter(',')->capture_default_str();
  cmd->add_option("--reps", o->reps, "Timed replays per arm and size")->capture_default_str();
  cmd->add_option("--attn-width", o->attention_width, "Stand-in attention width (default C)");
  cmd->add_option("--ffn-width", o->ffn_width, "Stand-in MoE width (default 5C/4)");
  cmd->add_option("--json", o->json_path, "Also write the results to this JSON file");
  cmd->add_option("--tp", o->tp,
                  "Shard the stand-in over N GPUs (one thread each, NCCL all-reduce in every "
                  "sublayer); reports rank 0's timings");
  cmd->add_option("--weights", o->weights_dir,
                  "Checkpoint directory: its mHC parameters instead of synthetic ones");
  cmd->callback([o] { run(*o); });
}

}  // namespace mhc::cli
