// `mhc tune`: measures on this GPU, for this model shape, up to which batch the overlap schedule
// beats the native one, the prenorm kernel per size and from which size the fused boundary beats
// its two launches, and writes a tactics file (mhc/core/tactics.hpp) that
// --kernel-config '{"tactics": "FILE"}' loads. How the threshold is chosen: docs/tuning.md.
#include <fmt/core.h>

#include <algorithm>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "commands.hpp"
#include "mhc/bench/common.hpp"
#include "mhc/bench/kernels.hpp"
#include "mhc/bench/overlap.hpp"
#include "mhc/core/error.hpp"
#include "mhc/core/kernel_plan.hpp"
#include "mhc/core/params.hpp"
#include "mhc/core/tactics.hpp"
#include "mhc/cpu/model.hpp"
#include "mhc/io/safe_file.hpp"
#include "options.hpp"
#include "progress.hpp"
#if MHC_WITH_CUDA
#include "mhc/cuda/cuda_backend.hpp"
#include "mhc/cuda/device_plan.hpp"
#include "mhc/cuda/kernels.hpp"
#endif

namespace mhc::cli {
namespace {

struct TuneOptions {
  std::string preset_name{kDefaultPreset};
  int layers = 0;  // 0: the preset's
  std::vector<int64_t> tokens{1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256};
  int rounds = 5;
  int reps = 40;
  // The prenorm crossovers: sizes at which `mhc bench kernels --sweep` times every kernel and
  // split count; empty (--prenorm-tokens 0): keep the plan's built-in ranges.
  std::vector<int64_t> prenorm_tokens{1, 4, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192};
  int prenorm_reps = 100;
  // The fused boundary's crossover: sizes at which `mhc bench kernels` times a site in a stack
  // graph with the fused boundary and with the two launches it replaces; empty
  // (--boundary-tokens 0): keep the plan's built-in rule.
  std::vector<int64_t> boundary_tokens{256, 384, 512,  544,  576,  608,  640,  704,
                                       768, 896, 1024, 1536, 2048, 3072, 4096, 8192};
  int boundary_reps = 50;
  std::string out_path;
  bool progress = false;  // drawn on the terminal (progress.hpp)
};

constexpr const char* kMethod =
    "overlap_max_tokens is the largest measured size up to which the overlap won at every "
    "measured size in every round; a round is one pass over all sizes (alternating order) of the "
    "`mhc bench overlap` measurement: stand-in decoder stack, FULL CUDA graphs, native and overlap "
    "interleaved ABBA, median of the replays; a size is won when the smallest of its per-round "
    "gains is above zero";

// Size i of every round: its gains (for overlap_threshold).
OverlapGains gains_of(const std::vector<std::vector<nlohmann::json>>& rounds, size_t i) {
  OverlapGains g;
  g.tokens = rounds.at(0).at(i).at("tokens").get<int64_t>();
  for (const auto& rows : rounds) g.gain_percent.push_back(rows.at(i).at("gain_percent"));
  return g;
}

// Per size, for the file: the gains of every round, their median and extremes, whether it is won.
nlohmann::json per_size(const std::vector<std::vector<nlohmann::json>>& rounds,
                        const OverlapGains& g, size_t i) {
  bool bitwise = true;
  for (const auto& rows : rounds) bitwise = bitwise && rows.at(i).at("bitwise_equal").get<bool>();
  std::vector<double> sorted = g.gain_percent;
  std::sort(sorted.begin(), sorted.end());
  return {{"tokens", g.tokens},
          {"gain_percent_rounds", g.gain_percent},
          {"gain_percent_median", sorted[sorted.size() / 2]},
          {"gain_percent_min", sorted.front()},
          {"gain_percent_max", sorted.back()},
          {"won", overlap_won(g)},
          {"bitwise_equal", bitwise}};
}

constexpr const char* kPrenormMethod =
    "per size of prenorm_tokens, the prenorm coefficient launch of `mhc bench kernels --sweep` "
    "at every kernel (mma16, mma64, tma128 where the image has it) and split count, the median of "
    "CUDA-graph replays; the fastest wins the size, equal neighbours merge into one range, a "
    "range reaches up to its last measured size and the last one to every larger size";

constexpr const char* kBoundaryMethod =
    "per size of boundary_tokens, a site in a stack graph of `mhc bench kernels` with the fused "
    "boundary kernel (the plan's tile) and with the two launches it replaces, the median of "
    "CUDA-graph replays; fused_boundary_min_tokens is the smallest measured size from which the "
    "fused site won at every larger measured size (0: it lost at the largest)";

MhcParams shape(const TuneOptions& o) {
  MhcParams p = preset(o.preset_name);  // the model's shape, as `mhc bench overlap` takes it
  if (o.layers > 0) p.layers = o.layers;
  validate(p);
  return p;
}

// Sorted and without repeats (the options' checks did the ranges).
void check(TuneOptions& o) {
  for (auto* list : {&o.tokens, &o.prenorm_tokens, &o.boundary_tokens}) {
    std::sort(list->begin(), list->end());
    list->erase(std::unique(list->begin(), list->end()), list->end());
  }
  for (auto [list, name] : {std::pair{&o.prenorm_tokens, "--prenorm-tokens"},
                            std::pair{&o.boundary_tokens, "--boundary-tokens"}}) {
    if (*list == std::vector<int64_t>{0}) list->clear();
    if (!list->empty() && list->front() == 0) {
      throw Error(fmt::format("{}: 0 (skip) cannot be combined with sizes", name));
    }
  }
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

// The fastest prenorm kernel and split count per size, from the sweep rows of `mhc bench
// kernels` (the same launches, each timed as the median of CUDA-graph replays).
nlohmann::json tune_prenorm(const TuneOptions& o, const MhcParams& p, nlohmann::json& doc,
                            const std::string& step) {
  Progress progress(step + " prenorm kernels", o.progress);
  bench::KernelBenchOptions k;
  k.preset_name = o.preset_name;
  k.params = p;
  k.tokens = o.prenorm_tokens;
  k.reps = o.prenorm_reps;
  k.sweep_tuning = true;
  k.commit = doc.value("commit", "");
  k.progress = progress.hooks();
  const nlohmann::json report = bench::bench_kernels(k);
  progress.clear();
  std::vector<PrenormTiming> timings;
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : report.at("results")) {
    if (r.at("kernel") != "  coefficients sweep") continue;
    const int rows_per_tile = r.at("rows_per_tile").get<int>();
    const std::string kernel = rows_per_tile == 16   ? "mma16"
                               : rows_per_tile == 64 ? "mma64"
                                                     : "tma128";
    timings.push_back({r.at("tokens").get<int64_t>(), kernel, r.at("splits").get<int>(),
                       r.at("median_us").get<double>()});
    rows.push_back({{"tokens", timings.back().tokens},
                    {"kernel", kernel},
                    {"splits", timings.back().splits},
                    {"median_us", timings.back().median_us}});
  }
  doc["prenorm_timings"] = rows;
  nlohmann::json ranges = nlohmann::json::array();
  for (const PrenormTactic& t : fastest_prenorm(timings)) {
    ranges.push_back({{"max_tokens", t.max_tokens == kNoTokenLimit ? nlohmann::json(nullptr)
                                                                   : nlohmann::json(t.max_tokens)},
                      {"kernel", t.kernel},
                      {"splits", t.splits}});
    fmt::print(
        "prenorm up to {}: {} splits={}\n",
        t.max_tokens == kNoTokenLimit ? std::string("any size") : std::to_string(t.max_tokens),
        t.kernel, t.splits);
  }
  return ranges;
}

// The fused boundary's crossover on this GPU: per size the site in a stack graph with the fused
// boundary and with the two launches it replaces (the same graphs `mhc bench kernels` times).
// None where the shape cannot take the kernel (`mhc bench kernels` then times no fused site).
std::optional<int64_t> tune_boundary(const TuneOptions& o, const MhcParams& p, nlohmann::json& doc,
                                     const std::string& step) {
  Progress progress(step + " fused boundary", o.progress);
  bench::KernelBenchOptions k;
  k.preset_name = o.preset_name;
  k.params = p;
  k.tokens = o.boundary_tokens;
  k.reps = o.boundary_reps;
  k.commit = doc.value("commit", "");
  k.progress = progress.hooks();
  const nlohmann::json report = bench::bench_kernels(k);
  progress.clear();
  std::map<int64_t, BoundaryTiming> by_size;
  for (const auto& r : report.at("results")) {
    const int64_t tokens = r.at("tokens").get<int64_t>();
    BoundaryTiming& t = by_size[tokens];
    t.tokens = tokens;
    if (r.at("kernel") == "site in stack, fused boundary (each)") {
      t.fused_us = r.at("median_us").get<double>();
    } else if (r.at("kernel") == "site in stack, 8 per graph (each)") {
      t.unfused_us = r.at("median_us").get<double>();
    }
  }
  std::vector<BoundaryTiming> timings;
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& [tokens, t] : by_size) {
    if (t.fused_us == 0 || t.unfused_us == 0) continue;  // not timed both ways at this size
    timings.push_back(t);
    rows.push_back({{"tokens", tokens}, {"fused_us", t.fused_us}, {"unfused_us", t.unfused_us}});
    fmt::print("boundary at {:>6} tokens: fused {:8.2f} us, unfused {:8.2f} us per site\n", tokens,
               t.fused_us, t.unfused_us);
  }
  doc["boundary_timings"] = rows;
  if (timings.empty()) {
    fmt::print("fused boundary: not eligible at this shape; the plan's rule stays\n");
    return std::nullopt;
  }
  const int64_t from = fused_boundary_threshold(timings);
  fmt::print("fused_boundary_min_tokens = {}\n", from);
  return from;
}

// The overlap measurement's rounds (bench::overlap_rounds), with a progress line.
std::vector<std::vector<nlohmann::json>> measure_overlap(const TuneOptions& o,
                                                         const ModelWeights& w,
                                                         const std::string& step) {
  Progress progress(step + " overlap schedules", o.progress);
  bench::OverlapOptions sweep;
  sweep.tokens = o.tokens;
  sweep.reps = o.reps;
  sweep.progress = progress.hooks();
  return bench::overlap_rounds(sweep, w, o.rounds);
}

void run_tune(TuneOptions o) {
  check(o);
  io::check_output(o.out_path);  // a bad --out before the sweep, not after
#if MHC_WITH_CUDA
  if (!cuda::device_present()) throw Error("mhc tune needs a CUDA GPU; none is visible");
  const MhcParams p = shape(o);
  const ModelWeights w = synthetic_model(p, 1);
  const KernelPlan plan = cuda::device_plan(KernelConfig{});
  fmt::print("mhc tune: C={} n={} layers={}, {} rounds of {} sizes, {} replays each\n", p.hidden,
             p.n, p.layers, o.rounds, o.tokens.size(), o.reps);
  // The steps, for the progress line: "mhc tune [2/3] prenorm kernels".
  const bool boundary = !o.boundary_tokens.empty() && plan.tma128_available;
  const int steps = 1 + int(!o.prenorm_tokens.empty()) + int(boundary);
  int step = 0;
  const auto next_step = [&] { return fmt::format("mhc tune [{}/{}]", ++step, steps); };
  const auto rounds = measure_overlap(o, w, next_step());
  nlohmann::json doc = bench::bench_metadata();
  doc["format"] = kTacticsFormat;
  doc["arch"] = fmt::format("{}.{}", plan.capability.major, plan.capability.minor);
  doc["sm_count"] = plan.sm_count;
  doc["shape"] = {{"hidden", p.hidden}, {"n", p.n}, {"layers", p.layers}};
  doc["preset"] = o.preset_name;
  doc["plan"] = nlohmann::json::parse(plan.to_json());
  doc["method"] = kMethod;
  doc["rounds"] = rounds;
  std::vector<OverlapGains> gains;
  for (size_t i = 0; i < o.tokens.size(); ++i) {
    gains.push_back(gains_of(rounds, i));
    doc["sizes"].push_back(per_size(rounds, gains.back(), i));
  }
  doc["overlap_max_tokens"] = overlap_threshold(gains);
  print_sizes(doc["sizes"]);
  if (!o.prenorm_tokens.empty()) {
    doc["prenorm_method"] = kPrenormMethod;
    doc["prenorm"] = tune_prenorm(o, p, doc, next_step());
  }
  if (boundary) {
    if (const std::optional<int64_t> from = tune_boundary(o, p, doc, next_step())) {
      doc["boundary_method"] = kBoundaryMethod;
      doc["fused_boundary_min_tokens"] = *from;
    }
  } else if (!o.boundary_tokens.empty()) {
    fmt::print("fused boundary: not in the image this GPU loads; the plan's rule stays\n");
  }
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
  (void)gains_of;
  (void)tune_prenorm;
  (void)tune_boundary;
  (void)measure_overlap;
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
  add_layers_option(cmd, o->layers, "Decoder layers (default: the preset's)");
  add_token_counts_option(cmd, o->tokens);
  cmd->add_option("--rounds", o->rounds, "Repeats of the whole sweep")
      ->check(integer_in(1, 100))
      ->capture_default_str();
  cmd->add_option("--reps", o->reps, "Timed replays per schedule, size and round")
      ->check(integer_in(2, kMaxTimingReps))
      ->capture_default_str();
  add_token_counts_option(cmd, o->prenorm_tokens, "--prenorm-tokens",
                          "Sizes at which to time every prenorm kernel and split count (0: skip)",
                          true);
  cmd->add_option("--prenorm-reps", o->prenorm_reps, "Timed replays per prenorm variant")
      ->check(integer_in(5, kMaxTimingReps))
      ->capture_default_str();
  add_token_counts_option(
      cmd, o->boundary_tokens, "--boundary-tokens",
      "Sizes at which to time the fused boundary against its two launches (0: skip)", true);
  cmd->add_option("--boundary-reps", o->boundary_reps, "Timed replays per boundary variant")
      ->check(integer_in(5, kMaxTimingReps))
      ->capture_default_str();
  cmd->add_option("--out", o->out_path, "The tactics file to write (safely: temp file + rename)")
      ->required();
  cmd->callback([o] {
    o->progress = progress_on_terminal(false);  // no JSON report: the tactics file is the output
    run_tune(*o);
  });
}

}  // namespace mhc::cli
