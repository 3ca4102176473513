// The overlap benchmark behind `mhc bench overlap`: matched native vs overlap on the stand-in
// decoder stack (the StackExecutor, FULL graphs), the two schedules interleaved in one run,
// medians of many replays; the gain per token count and the crossover, from which the Hopper
// default threshold is set (docs/overlap.md). With tp > 0 the stand-in is sharded over that many
// GPUs (docs/tensor_parallel.md). Host-only declarations: the CLI compiles the same with or
// without CUDA (then bench_overlap throws).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mhc/bench/common.hpp"
#include "mhc/core/params.hpp"
#include "mhc/cpu/model.hpp"

namespace mhc::bench {

struct OverlapOptions {
  std::string preset_name{kDefaultPreset};
  int layers = 0;  // 0: the preset's
  std::vector<int64_t> tokens{1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 256, 512};
  int reps = 40;
  int attention_width = 0, ffn_width = 0;  // 0: the stand-in's defaults
  int tp = 0;                              // 0: one GPU, no NCCL
  std::string weights_dir;  // a checkpoint's mHC parameters instead of synthetic ones
  // A kernel config (JSON object) for both arms, e.g. {"cluster_post": false}; its overlap keys
  // are overridden (each arm sets its own).
  std::string kernel_config;
  // After each measured size (of each round); on one GPU (with --tp the ranks report nothing).
  Progress progress;
};

// Prints the table and the crossover on stdout and returns the JSON report. Throws mhc::Error on
// invalid options, without a GPU, or when a rank fails.
nlohmann::json bench_overlap(const OverlapOptions& options);

// The one-GPU measurement of bench_overlap for `mhc tune` and `mhc run`: `rounds` passes over
// options.tokens (in alternating order, so that a slow drift of clocks or heat favours neither
// end) on the model `w`, every pass's rows (as in bench_overlap's "rows", in options.tokens'
// order). Prints nothing. Throws mhc::Error without a GPU.
std::vector<std::vector<nlohmann::json>> overlap_rounds(const OverlapOptions& options,
                                                        const ModelWeights& w, int rounds);

}  // namespace mhc::bench
