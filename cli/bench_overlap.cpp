// `mhc bench overlap`: its options; the benchmark itself is bench/overlap.cpp (mhc_bench).
#include "commands.hpp"
#include "mhc/bench/overlap.hpp"
#include "options.hpp"
#include "progress.hpp"

namespace mhc::cli {
namespace {

// The benchmark's options (bench/), and where the CLI puts its report.
struct OverlapOptions : bench::OverlapOptions {
  JsonOutput json;
};

}  // namespace

void add_bench_overlap(CLI::App& bench) {
  auto o = std::make_shared<OverlapOptions>();
  auto* cmd = add_command(
      bench, "overlap",
      "Native vs overlap schedule on the stand-in decoder stack (FULL CUDA graphs)",
      {"mhc bench overlap --preset dsv41-flash --layers 40 --reps 30 --json overlap.json"});
  add_preset_option(cmd, o->preset_name);
  add_layers_option(cmd, o->layers, "Decoder layers (default: the preset's)");
  add_token_counts_option(cmd, o->tokens);
  cmd->add_option("--reps", o->reps, "Timed replays per arm and size")
      ->check(integer_in(1, kMaxTimingReps))
      ->capture_default_str();
  cmd->add_option("--attn-width", o->attention_width, "Stand-in attention width (default C)")
      ->check(integer_in(1, kMaxStandinWidth));
  cmd->add_option("--ffn-width", o->ffn_width, "Stand-in MoE width (default 5C/4)")
      ->check(integer_in(1, kMaxStandinWidth));
  o->json.add_to(cmd);
  add_kernel_config_option(cmd, o->kernel_config);
  cmd->add_option("--tp", o->tp,
                  "Shard the stand-in over N GPUs (one thread each, NCCL all-reduce in every "
                  "sublayer); reports rank 0's timings")
      ->check(integer_in(1));
  cmd->add_option("--weights", o->weights_dir,
                  "Checkpoint directory: its mHC parameters instead of synthetic ones")
      ->check(non_empty());
  cmd->callback([o] {
    o->json.check(o->weights_dir.empty() ? std::vector<std::string>{} : files_at(o->weights_dir));
    Progress progress("mhc bench overlap", progress_on_terminal(o->json.wanted()));
    bench::OverlapOptions run = *o;
    run.progress = progress.hooks();
    o->json.emit_from([&] { return bench::bench_overlap(run); });
  });
}

}  // namespace mhc::cli
