// `mhc tune`: measures on this GPU, for this model shape, up to which batch the overlap schedule
// beats the native one, and writes a tactics file (mhc/core/tactics.hpp) that
// --kernel-config '{"tactics": "FILE"}' loads. How the threshold is chosen: docs/tuning.md.
#include <fmt/core.h>

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "mhc/bench/common.hpp"
#include "mhc/bench/overlap.hpp"
#include "mhc/core/error.hpp"
#include "mhc/core/params.hpp"
#include "mhc/core/tactics.hpp"
#include "mhc/cpu/model.hpp"
#include "options.hpp"
#if MHC_WITH_CUDA
#include "mhc/cuda/cuda_backend.hpp"
#include "mhc/cuda/device_plan.hpp"
#endif

namespace mhc::cli {
namespace {

struct TuneOptions {
  std::string preset_name{kDefaultPreset};
  int layers = 0;  // 0: the preset's
  std::vector<int64_t> tokens{1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256};
  int rounds = 5;
  int reps = 40;
  std::string out_path;
};

constexpr const char* kMethod =
    "overlap_max_tokens is the largest measured size up to which the overlap won at every "
    "measured size in every round; a round is one pass over all sizes (alternating order) of the "
    "`mhc bench overlap` measurement: stand-in decoder stack, FULL CUDA graphs, native and overlap "
    "interleaved ABBA, median of the replays; a size is won when the smallest of its per-round "
    "gains is above zero";

// Per size: the gains of every round, their median and smallest, and whether the size is won.
nlohmann::json per_size(const std::vector<std::vector<nlohmann::json>>& rounds, size_t i) {
  std::vector<double> gains;
  bool bitwise = true;
  for (const auto& rows : rounds) {
    gains.push_back(rows.at(i).at("gain_percent").get<double>());
    bitwise = bitwise && rows.at(i).at("bitwise_equal").get<bool>();
  }
  std::vector<double> sorted = gains;
  std::sort(sorted.begin(), sorted.end());
  return {{"tokens", rounds.at(0).at(i).at("tokens")},
          {"gain_percent_rounds", gains},
          {"gain_percent_median", sorted[sorted.size() / 2]},
          {"gain_percent_min", sorted.front()},
          {"gain_percent_max", sorted.back()},
          {"won", sorted.front() > 0},
          {"bitwise_equal", bitwise}};
}

// The largest size up to which every measured size was won (0: the first one was lost).
int64_t threshold(const nlohmann::json& sizes) {
  int64_t up_to = 0;
  for (const auto& s : sizes) {
    if (!s.at("won").get<bool>()) break;
    up_to = s.at("tokens").get<int64_t>();
  }
  return up_to;
}

MhcParams shape(const TuneOptions& o) {
  MhcParams p = preset(o.preset_name);  // the model's shape, as `mhc bench overlap` takes it
  if (o.layers > 0) p.layers = o.layers;
  validate(p);
  return p;
}

// Sorted and without repeats (the options' checks did the ranges).
void check(TuneOptions& o) {
  std::sort(o.tokens.begin(), o.tokens.end());
  o.tokens.erase(std::unique(o.tokens.begin(), o.tokens.end()), o.tokens.end());
}

void print_sizes(const nlohmann::json& sizes) {
  fmt::print("{:>6} {:>10} {:>10} {:>10} {:>5}\n", "tokens", "gain% med", "gain% min", "gain% max",
             "won");
  for (const auto& s : sizes) {
    fmt::print("{:>6} {:>10.2f} {:>10.2f} {:>10.2f} {:>5}\n", s.at("tokens").get<int64_t>(),
               s.at("gain_percent_median").get<double>(), s.at("gain_percent_min").get<double>(),
               s.at("gain_percent_max").get<double>(), s.at("won").get<bool>() ? "yes" : "no");
  }
}

void run_tune(TuneOptions o) {
  check(o);
#if MHC_WITH_CUDA
  if (!cuda::device_present()) throw Error("mhc tune needs a CUDA GPU; none is visible");
  const MhcParams p = shape(o);
  const ModelWeights w = synthetic_model(p, 1);
  const KernelPlan& plan = cuda::default_device_plan();
  fmt::print("mhc tune: C={} n={} layers={}, {} rounds of {} sizes, {} replays each\n", p.hidden,
             p.n, p.layers, o.rounds, o.tokens.size(), o.reps);
  bench::OverlapOptions sweep;
  sweep.tokens = o.tokens;
  sweep.reps = o.reps;
  const auto rounds = bench::overlap_rounds(sweep, w, o.rounds);
  nlohmann::json doc = bench::bench_metadata();
  doc["format"] = kTacticsFormat;
  doc["arch"] = fmt::format("{}.{}", plan.capability.major, plan.capability.minor);
  doc["sm_count"] = plan.sm_count;
  doc["shape"] = {{"hidden", p.hidden}, {"n", p.n}, {"layers", p.layers}};
  doc["preset"] = o.preset_name;
  doc["plan"] = nlohmann::json::parse(plan.to_json());
  doc["method"] = kMethod;
  doc["rounds"] = rounds;
  for (size_t i = 0; i < o.tokens.size(); ++i) doc["sizes"].push_back(per_size(rounds, i));
  doc["overlap_max_tokens"] = threshold(doc["sizes"]);
  print_sizes(doc["sizes"]);
  Tactics::parse(doc.dump(), o.out_path);  // what is written must load
  write_output_file(o.out_path, doc.dump(1) + "\n");
  fmt::print(
      "overlap_max_tokens = {} (won at every measured size up to it, in all {} rounds)\n"
      "wrote {}; use it with --kernel-config '{{\"tactics\": \"{}\"}}'\n",
      doc["overlap_max_tokens"].get<int64_t>(), o.rounds, o.out_path, o.out_path);
#else
  (void)shape;
  (void)print_sizes;
  (void)per_size;
  (void)threshold;
  throw Error("mhc tune needs the CUDA backend; this build has none");
#endif
}

}  // namespace

void register_tune(CLI::App& app) {
  auto o = std::make_shared<TuneOptions>();
  auto* cmd = add_command(
      app, "tune",
      "Measure the overlap threshold on this GPU and model shape; write a tactics file",
      {"mhc tune --preset dsv41-flash --out tactics.json",
       R"(mhc run --kernel-config '{"enable_mhc_overlap": true, "tactics": "tactics.json"}')"});
  add_preset_option(cmd, o->preset_name);
  cmd->add_option("--layers", o->layers, "Decoder layers (default: the preset's)")
      ->check(integer_in(1));
  add_token_counts_option(cmd, o->tokens);
  cmd->add_option("--rounds", o->rounds, "Repeats of the whole sweep")
      ->check(integer_in(1, 100))
      ->capture_default_str();
  cmd->add_option("--reps", o->reps, "Timed replays per schedule, size and round")
      ->check(integer_in(2))
      ->capture_default_str();
  cmd->add_option("--out", o->out_path, "The tactics file to write (safely: temp file + rename)")
      ->required();
  cmd->callback([o] { run_tune(*o); });
}

}  // namespace mhc::cli
