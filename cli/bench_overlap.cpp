// `mhc bench overlap`: matched native vs overlap on the stand-in decoder stack, FULL graph replay,
// the two schedules interleaved in one run, medians of many replays; the gain per token count
// and the crossover, from which the Hopper default threshold is set (docs/overlap.md).
#include <fmt/core.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "bench_common.hpp"
#include "commands.hpp"
#include "mhc/error.hpp"
#include "mhc/model.hpp"
#include "mhc/params.hpp"
#if MHC_WITH_CUDA
#include "mhc/cuda/check.hpp"
#include "mhc/decoder_standin.hpp"
#include "mhc/stack_executor.hpp"
#endif

namespace mhc::cli {
namespace {

struct OverlapOptions {
  std::string preset_name{kDefaultPreset};
  int layers = 0;
  std::vector<int64_t> tokens{1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 256, 512};
  int reps = 40;
  int attention_width = 0, ffn_width = 0;
  std::string json_path;
};

#if MHC_WITH_CUDA
using namespace mhc::cuda;

struct Arm {
  std::unique_ptr<StackExecutor> ex;
  std::vector<float> times_us;
};

float time_forward(StackExecutor& ex, int64_t tokens, cudaStream_t st, cudaEvent_t a,
                   cudaEvent_t b) {
  MHC_CUDA_CHECK(cudaEventRecord(a, st));
  ex.forward(tokens, ExecMode::full, st);
  MHC_CUDA_CHECK(cudaEventRecord(b, st));
  MHC_CUDA_CHECK(cudaEventSynchronize(b));
  float ms = 0;
  MHC_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  return ms * 1000.0f;
}

bool outputs_equal(const StackExecutor& a, const StackExecutor& b, int64_t tokens) {
  const MhcParams& p = a.params();
  const size_t bytes = size_t(tokens * p.k()) * 2;
  std::vector<char> ha(bytes), hb(bytes);
  MHC_CUDA_CHECK(cudaMemcpy(ha.data(), a.x_final(), bytes, cudaMemcpyDeviceToHost));
  MHC_CUDA_CHECK(cudaMemcpy(hb.data(), b.x_final(), bytes, cudaMemcpyDeviceToHost));
  return ha == hb;
}

nlohmann::json measure(const OverlapOptions& o, const MhcParams& p, Arm& native, Arm& overlap,
                       int64_t tokens, cudaStream_t st) {
  const auto x = synthetic_embeddings(p, tokens, 42 + uint64_t(tokens));
  for (Arm* arm : {&native, &overlap}) {
    MHC_CUDA_CHECK(cudaMemcpy(arm->ex->x_in(), x.data(), x.size() * 2, cudaMemcpyHostToDevice));
    arm->ex->prepare_full_graph(tokens, st);
    arm->times_us.clear();
  }
  cudaEvent_t a, b;
  MHC_CUDA_CHECK(cudaEventCreate(&a));
  MHC_CUDA_CHECK(cudaEventCreate(&b));
  for (int warm = 0; warm < 3; ++warm) {
    time_forward(*native.ex, tokens, st, a, b);
    time_forward(*overlap.ex, tokens, st, a, b);
  }
  for (int r = 0; r < o.reps; ++r) {  // ABBA interleaving: neither arm always goes first
    Arm& first = r % 2 ? overlap : native;
    Arm& second = r % 2 ? native : overlap;
    first.times_us.push_back(time_forward(*first.ex, tokens, st, a, b));
    second.times_us.push_back(time_forward(*second.ex, tokens, st, a, b));
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  const Summary sn = summarize(native.times_us), so = summarize(overlap.times_us);
  const double layers = p.layers;
  const double saved_per_layer = (sn.median - so.median) / layers;
  return {{"tokens", tokens},
          {"native_us_per_layer", sn.median / layers},
          {"overlap_us_per_layer", so.median / layers},
          {"native_p10_p90_us", {sn.p10 / layers, sn.p90 / layers}},
          {"overlap_p10_p90_us", {so.p10 / layers, so.p90 / layers}},
          {"gain_percent", 100.0 * (sn.median - so.median) / sn.median},
          {"saved_us_per_layer", saved_per_layer},
          {"saved_us_per_layer_per_token", saved_per_layer / double(tokens)},
          {"bitwise_equal", outputs_equal(*native.ex, *overlap.ex, tokens)},
          {"reps", o.reps}};
}

void run(const OverlapOptions& o) {
  MhcParams p = preset(o.preset_name);
  if (o.layers > 0) p.layers = o.layers;
  validate(p);
  int64_t max_tokens = 1;
  for (int64_t t : o.tokens) {
    if (t < 1) throw Error(fmt::format("--tokens: {} is not a positive token count", t));
    max_tokens = std::max(max_tokens, t);
  }
  const ModelWeights w = synthetic_model(p, 1);
  DecoderStandin standin(p, max_tokens, {o.attention_width, o.ffn_width});
  SublayerFn sublayer = [&standin](int s, int64_t m, const Bf16* in, Bf16* out, cudaStream_t st) {
    standin(s, m, in, out, st);
  };
  StackOptions opt;
  opt.max_tokens = max_tokens;
  Arm native, overlap;
  native.ex = std::make_unique<StackExecutor>(
      w, KernelConfig::parse(R"({"enable_mhc_overlap": false})"), opt, sublayer);
  overlap.ex = std::make_unique<StackExecutor>(
      w, KernelConfig::parse(R"({"enable_mhc_overlap": true, "overlap_max_tokens": 1048576})"),
      opt, sublayer);
  cudaStream_t st;
  MHC_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));

  nlohmann::json doc = bench_metadata();
  doc["bench"] = "overlap";
  doc["preset"] = o.preset_name;
  doc["params"] = {{"hidden", p.hidden}, {"n", p.n}, {"layers", p.layers}};
  doc["standin"] = {{"attention_width", standin.widths().attention},
                    {"ffn_width", standin.widths().ffn},
                    {"weight_bytes_per_layer", standin.widths().weight_bytes_per_layer(p)}};
  doc["method"] = "FULL CUDA graph of the whole stack per arm, CUDA events around each replay, "
                  "arms interleaved ABBA, median";
  fmt::print("mhc bench overlap: {} (C={} n={} layers={}), stand-in widths {}/{}, {} reps\n",
             o.preset_name, p.hidden, p.n, p.layers, standin.widths().attention,
             standin.widths().ffn, o.reps);
  fmt::print("{:>6} {:>12} {:>12} {:>8} {:>12} {:>14} {:>8}\n", "tokens", "native us/L",
             "overlap us/L", "gain %", "saved us/L", "saved us/L/tok", "bitwise");
  int64_t crossover = 0;  // largest token count up to which the overlap never lost
  bool lost = false;
  for (int64_t t : o.tokens) {
    nlohmann::json row = measure(o, p, native, overlap, t, st);
    fmt::print("{:>6} {:>12.2f} {:>12.2f} {:>8.2f} {:>12.2f} {:>14.3f} {:>8}\n", t,
               row["native_us_per_layer"].get<double>(), row["overlap_us_per_layer"].get<double>(),
               row["gain_percent"].get<double>(), row["saved_us_per_layer"].get<double>(),
               row["saved_us_per_layer_per_token"].get<double>(),
               row["bitwise_equal"].get<bool>() ? "yes" : "NO");
    if (!lost && row["gain_percent"].get<double>() > 0) crossover = t;
    if (row["gain_percent"].get<double>() <= 0) lost = true;
    doc["rows"].push_back(row);
  }
  doc["overlap_wins_up_to_tokens"] = crossover;
  fmt::print("overlap faster at every measured size up to {} tokens\n", crossover);
  cudaStreamDestroy(st);
  write_json(o.json_path, doc);
}
#else
void run(const OverlapOptions&) {
  throw Error("mhc bench overlap needs the CUDA backend; this build has none");
}
#endif

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
  cmd->callback([o] { run(*o); });
}

}  // namespace mhc::cli
