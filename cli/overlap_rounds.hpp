// The matched native-vs-overlap measurement of `mhc bench overlap` on one GPU (stand-in decoder,
// FULL graphs, the two schedules interleaved ABBA), for the commands that need its numbers
// (`mhc tune`, `mhc run`).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "mhc/core/params.hpp"
#include "mhc/cpu/model.hpp"

namespace mhc::cli {

struct OverlapSweep {
  std::vector<int64_t> tokens;
  int reps = 40;   // timed replays per schedule and size
  int rounds = 1;  // repeats of the whole sweep (sizes in alternating order)
  int attention_width = 0, ffn_width = 0;  // stand-in widths (0: the defaults)
};

// rounds x sizes rows, each as in the bench's JSON ("tokens", "native_us_per_layer",
// "overlap_us_per_layer", "gain_percent", "bitwise_equal", ...). Throws without CUDA.
std::vector<std::vector<nlohmann::json>> measure_overlap_rounds(const MhcParams& p,
                                                                const ModelWeights& w,
                                                                const OverlapSweep& sweep);

}  // namespace mhc::cli
