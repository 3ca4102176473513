// `mhc bench overlap`: matched native vs overlap on the stand-in decoder stack, FULL graph replay,
// the two schedules interleaved in one run, medians of many replays; the gain per token count
// and the crossover, from which the Hopper default threshold is set (docs/overlap.md). With --tp N
// the same measurement runs with the stand-in sharded over N GPUs, one thread per GPU, the NCCL
// all-reduce inside every sublayer and inside the FULL graphs; rank 0's timings are reported, every
// rank runs the same graphs (docs/tensor_parallel.md).
#include "mhc/bench/overlap.hpp"

#include <cuda_runtime_api.h>
#include <fmt/core.h>

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mhc/bench/common.hpp"
#include "mhc/bench/decoder_standin.hpp"
#include "mhc/core/error.hpp"
#include "mhc/core/params.hpp"
#include "mhc/cpu/model.hpp"
#include "mhc/cuda/check.hpp"
#include "mhc/cuda/cuda_backend.hpp"
#include "mhc/io/checkpoint.hpp"
#include "mhc/schedule/stack_executor.hpp"
#if MHC_WITH_NCCL
#include "mhc/bench/tp_stack.hpp"
#include "mhc/core/tensor_parallel.hpp"
#endif

namespace mhc::bench {
namespace {

using namespace mhc::cuda;

// How the bench waits for the GPU: a stream sync on one GPU; with --tp the rank's bounded,
// abort-aware wait (a blocking sync would never return if a peer were gone).
using WaitFn = std::function<void(cudaStream_t)>;

struct Arm {
  std::unique_ptr<StackExecutor> ex;
  std::vector<float> times_us;
};

// Both arms on one GPU (or one TP rank): the same weights and stand-in, one schedule each. The
// native arm uses the fastest single-stream layout (the input path inside the coefficient launch
// at decode sizes), so the overlap is measured against the best native schedule; where that
// layout applies the two arms' outputs agree within tolerance rather than bitwise (the bitwise
// equality of the two schedules on the same kernels is what tests/schedule checks).
struct Arms {
  Arm native, overlap;
  Arms(const ModelWeights& w, const StackOptions& opt, const SublayerFn& sublayer,
       const std::string& kernel_config) {
    StackOptions native_opt = opt;
    native_opt.native_decode_schedule = true;
    native.ex = std::make_unique<StackExecutor>(
        w, arm_config(kernel_config, R"({"enable_mhc_overlap": false})"), native_opt, sublayer);
    overlap.ex = std::make_unique<StackExecutor>(
        w,
        arm_config(kernel_config, R"({"enable_mhc_overlap": true, "overlap_max_tokens": 1048576})"),
        opt, sublayer);
  }
  // The user's kernel config (may be empty) with the arm's own keys over it.
  static KernelConfig arm_config(const std::string& user, const char* arm) {
    if (user.empty()) return KernelConfig::parse(arm);
    KernelConfig::parse(user);  // the bounded parser first: it names any problem in the input
    nlohmann::json j = nlohmann::json::parse(user);
    j.update(nlohmann::json::parse(arm));
    return KernelConfig::parse(j.dump());
  }
};

// The stand-in sublayers alone, in the stack's order, in one FULL graph: a forward without any
// mHC work. (arm - sublayers) / sites is then the mHC cost per site that each schedule leaves on
// the critical path: for the overlap arm, what the main stream pays per site (its post + next
// input and the join), since the side stream's coefficient work runs beside the sublayers.
// Assumes the sublayers cost the same alone as inside the stack (they stream their weights
// from HBM either way). One GPU only: with --tp the sublayer's all-reduce needs every rank.
class SublayersAlone {
 public:
  SublayersAlone(const MhcParams& p, int64_t max_tokens, SublayerFn sublayer)
      : sites_(p.sites()), sublayer_(std::move(sublayer)) {
    const size_t bytes = size_t(max_tokens) * size_t(p.hidden) * sizeof(Bf16);
    MHC_CUDA_CHECK(cudaMalloc(&a_, bytes));
    MHC_CUDA_CHECK(cudaMalloc(&b_, bytes));
    MHC_CUDA_CHECK(cudaMemset(a_, 0, bytes));  // GEMM time does not depend on the values
    MHC_CUDA_CHECK(cudaMemset(b_, 0, bytes));
    MHC_CUDA_CHECK(cudaDeviceSynchronize());
  }
  ~SublayersAlone() {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
    cudaFree(a_);
    cudaFree(b_);
  }
  SublayersAlone(const SublayersAlone&) = delete;
  SublayersAlone& operator=(const SublayersAlone&) = delete;

  // Captures the graph for `tokens` (outside the timed loop).
  void prepare(int64_t tokens, cudaStream_t st) {
    if (exec_ != nullptr) MHC_CUDA_CHECK(cudaGraphExecDestroy(exec_));
    exec_ = nullptr;
    cudaGraph_t graph = nullptr;
    MHC_CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    try {
      for (int s = 0; s < sites_; ++s) sublayer_(s, tokens, s % 2 ? b_ : a_, s % 2 ? a_ : b_, st);
    } catch (...) {
      cudaStreamEndCapture(st, &graph);
      if (graph != nullptr) cudaGraphDestroy(graph);
      throw;
    }
    MHC_CUDA_CHECK(cudaStreamEndCapture(st, &graph));
    const cudaError_t err = cudaGraphInstantiate(&exec_, graph, 0);
    cudaGraphDestroy(graph);
    MHC_CUDA_CHECK(err);
  }
  float time(cudaStream_t st, cudaEvent_t a, cudaEvent_t b,
             const std::function<void(cudaStream_t)>& wait) {
    MHC_CUDA_CHECK(cudaEventRecord(a, st));
    MHC_CUDA_CHECK(cudaGraphLaunch(exec_, st));
    MHC_CUDA_CHECK(cudaEventRecord(b, st));
    wait(st);
    float ms = 0;
    MHC_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    return ms * 1000.0f;
  }

 private:
  int sites_;
  SublayerFn sublayer_;
  Bf16* a_ = nullptr;
  Bf16* b_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

float time_forward(StackExecutor& ex, int64_t tokens, cudaStream_t st, cudaEvent_t a, cudaEvent_t b,
                   const WaitFn& wait) {
  MHC_CUDA_CHECK(cudaEventRecord(a, st));
  ex.forward(tokens, ExecMode::full, st);
  MHC_CUDA_CHECK(cudaEventRecord(b, st));
  wait(st);
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

nlohmann::json measure(const OverlapOptions& o, const MhcParams& p, Arms& arms,
                       SublayersAlone* sublayers, int64_t tokens, cudaStream_t st,
                       const WaitFn& wait) {
  Arm& native = arms.native;
  Arm& overlap = arms.overlap;
  const auto x = synthetic_embeddings(p, tokens, 42 + uint64_t(tokens));
  for (Arm* arm : {&native, &overlap}) {
    // Stream-ordered before this arm's forwards (a plain cudaMemcpy is not ordered with `st`).
    MHC_CUDA_CHECK(
        cudaMemcpyAsync(arm->ex->x_in(), x.data(), x.size() * 2, cudaMemcpyHostToDevice, st));
    // One eager forward first: with --tp, NCCL sets up this size's connections outside capture.
    arm->ex->enqueue_schedule(tokens, arm->ex->decide(tokens, ExecMode::full).overlap, st);
    wait(st);
    arm->ex->prepare_full_graph(tokens, st);
    arm->times_us.clear();
  }
  if (sublayers != nullptr) sublayers->prepare(tokens, st);
  std::vector<float> sublayer_us;
  cudaEvent_t a, b;
  MHC_CUDA_CHECK(cudaEventCreate(&a));
  MHC_CUDA_CHECK(cudaEventCreate(&b));
  for (int warm = 0; warm < 3; ++warm) {
    time_forward(*native.ex, tokens, st, a, b, wait);
    time_forward(*overlap.ex, tokens, st, a, b, wait);
    if (sublayers != nullptr) sublayers->time(st, a, b, wait);
  }
  for (int r = 0; r < o.reps; ++r) {  // ABBA interleaving: neither arm always goes first
    Arm& first = r % 2 ? overlap : native;
    Arm& second = r % 2 ? native : overlap;
    first.times_us.push_back(time_forward(*first.ex, tokens, st, a, b, wait));
    second.times_us.push_back(time_forward(*second.ex, tokens, st, a, b, wait));
    if (sublayers != nullptr) sublayer_us.push_back(sublayers->time(st, a, b, wait));
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  const Summary sn = summarize(native.times_us), so = summarize(overlap.times_us);
  const double layers = p.layers;
  const double saved_per_layer = (sn.median - so.median) / layers;
  nlohmann::json row = {{"tokens", tokens},
                        {"native_us_per_layer", sn.median / layers},
                        {"overlap_us_per_layer", so.median / layers},
                        {"native_p10_p90_us", {sn.p10 / layers, sn.p90 / layers}},
                        {"overlap_p10_p90_us", {so.p10 / layers, so.p90 / layers}},
                        {"gain_percent", 100.0 * (sn.median - so.median) / sn.median},
                        {"saved_us_per_layer", saved_per_layer},
                        {"saved_us_per_layer_per_token", saved_per_layer / double(tokens)},
                        {"bitwise_equal", outputs_equal(*native.ex, *overlap.ex, tokens)},
                        {"reps", o.reps}};
  if (sublayers != nullptr) {
    const double alone = summarize(sublayer_us).median;
    const double sites = p.sites();
    row["sublayers_us_per_layer"] = alone / layers;
    row["native_mhc_us_per_site"] = (sn.median - alone) / sites;
    row["overlap_main_stream_us_per_site"] = (so.median - alone) / sites;
  }
  return row;
}

// Every size of o.tokens, in order; `measured` (if set) after each.
std::vector<nlohmann::json> measure_all(const OverlapOptions& o, const MhcParams& p, Arms& arms,
                                        SublayersAlone* sublayers, cudaStream_t st,
                                        const WaitFn& wait,
                                        const std::function<void(int64_t)>& measured = {}) {
  std::vector<nlohmann::json> rows;
  for (int64_t t : o.tokens) {
    rows.push_back(measure(o, p, arms, sublayers, t, st, wait));
    if (measured) measured(t);
  }
  return rows;
}

// Prints the table and the crossover and returns the report; `doc` holds the run's own fields.
nlohmann::json report(const OverlapOptions& o, const MhcParams& p, const StandinWidths& widths,
                      const std::vector<nlohmann::json>& rows, nlohmann::json doc) {
  doc["bench"] = "overlap";
  const std::string model_name =
      o.weights_dir.empty() ? o.preset_name : "checkpoint " + o.weights_dir;
  doc["preset"] = model_name;
  doc["params"] = {{"hidden", p.hidden}, {"n", p.n}, {"layers", p.layers}};
  // Both arms' config besides their own overlap keys (--kernel-config), canonical form.
  doc["kernel_config"] = nlohmann::json::parse(
      o.kernel_config.empty() ? KernelConfig{}.to_json()
                              : KernelConfig::parse(o.kernel_config).to_json());
  doc["standin"] = {{"attention_width", widths.attention},
                    {"ffn_width", widths.ffn},
                    {"weight_bytes_per_layer", widths.weight_bytes_per_layer(p)}};
  doc["method"] =
      "FULL CUDA graph of the whole stack per arm, CUDA events around each replay, "
      "arms interleaved ABBA, median";
  o.progress.clear();
  fmt::print("mhc bench overlap: {} (C={} n={} layers={}), stand-in widths {}/{}, {} reps{}\n",
             model_name, p.hidden, p.n, p.layers, widths.attention, widths.ffn, o.reps,
             o.tp > 0 ? fmt::format(", TP={} (rank 0's timings)", o.tp) : "");
  fmt::print("{:>6} {:>12} {:>12} {:>8} {:>12} {:>14} {:>8} {:>14} {:>15} {:>16}\n", "tokens",
             "native us/L", "overlap us/L", "gain %", "saved us/L", "saved us/L/tok", "bitwise",
             "sublayers us/L", "native mHC us/S", "overlap main us/S");
  int64_t crossover = 0;  // largest token count up to which the overlap never lost
  bool lost = false;
  for (const nlohmann::json& row : rows) {
    const int64_t t = row["tokens"].get<int64_t>();
    const auto optional = [&row](const char* key) {
      return row.contains(key) ? fmt::format("{:.2f}", row[key].get<double>()) : std::string("-");
    };
    fmt::print(
        "{:>6} {:>12.2f} {:>12.2f} {:>8.2f} {:>12.2f} {:>14.3f} {:>8} {:>14} {:>15} {:>16}\n", t,
        row["native_us_per_layer"].get<double>(), row["overlap_us_per_layer"].get<double>(),
        row["gain_percent"].get<double>(), row["saved_us_per_layer"].get<double>(),
        row["saved_us_per_layer_per_token"].get<double>(),
        row["bitwise_equal"].get<bool>() ? "yes" : "NO", optional("sublayers_us_per_layer"),
        optional("native_mhc_us_per_site"), optional("overlap_main_stream_us_per_site"));
    if (!lost && row["gain_percent"].get<double>() > 0) crossover = t;
    if (row["gain_percent"].get<double>() <= 0) lost = true;
    doc["rows"].push_back(row);
  }
  doc["overlap_wins_up_to_tokens"] = crossover;
  fmt::print("overlap faster at every measured size up to {} tokens\n", crossover);
  return doc;
}

// `rounds` passes over o.tokens on one GPU, in alternating order; rows in o.tokens' order.
std::vector<std::vector<nlohmann::json>> rounds_one_gpu(const OverlapOptions& o, const MhcParams& p,
                                                        const ModelWeights& w, int64_t max_tokens,
                                                        int rounds) {
  DecoderStandin standin(p, max_tokens, {o.attention_width, o.ffn_width});
  SublayerFn sublayer = [&standin](int s, int64_t m, const Bf16* in, Bf16* out, cudaStream_t st) {
    standin(s, m, in, out, st);
  };
  StackOptions opt;
  opt.max_tokens = max_tokens;
  Arms arms(w, opt, sublayer, o.kernel_config);
  SublayersAlone alone(p, max_tokens, sublayer);
  cudaStream_t st;
  MHC_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  const WaitFn wait = [](cudaStream_t s) { MHC_CUDA_CHECK(cudaStreamSynchronize(s)); };
  std::vector<std::vector<nlohmann::json>> out;
  OverlapOptions pass = o;
  const double total = double(rounds) * double(o.tokens.size());
  size_t done = 0;
  for (int r = 0; r < rounds; ++r) {
    pass.tokens = o.tokens;
    if (r % 2 == 1) std::reverse(pass.tokens.begin(), pass.tokens.end());
    const auto measured = [&](int64_t t) {
      const std::string round = rounds > 1 ? fmt::format("round {}/{}, ", r + 1, rounds) : "";
      o.progress.report(double(++done) / total, fmt::format("{}M={}", round, t));
    };
    std::vector<nlohmann::json> rows = measure_all(pass, p, arms, &alone, st, wait, measured);
    if (r % 2 == 1) std::reverse(rows.begin(), rows.end());
    out.push_back(std::move(rows));
  }
  cudaStreamDestroy(st);
  return out;
}

nlohmann::json run_one_gpu(const OverlapOptions& o, const MhcParams& p, const ModelWeights& w,
                           int64_t max_tokens) {
  const auto rounds = rounds_one_gpu(o, p, w, max_tokens, 1);
  return report(o, p, StandinWidths::for_params(p, {o.attention_width, o.ffn_width}), rounds.at(0),
                bench_metadata());
}

#if MHC_WITH_NCCL
// Every rank measures the same sequence of graphs (each replay all-reduces across the ranks);
// rank 0's timings are reported, and "bitwise_equal" must hold on every rank.
nlohmann::json run_tensor_parallel(const OverlapOptions& o, const MhcParams& p,
                                   const ModelWeights& w, int64_t max_tokens) {
  const StandinWidths widths = StandinWidths::for_params(p, {o.attention_width, o.ffn_width});
  const StandinShardPlan plan = plan_standin_shards(o.tp, widths.attention, widths.ffn);
  std::vector<std::vector<nlohmann::json>> rows(size_t(o.tp));
  dist::TpRunOptions ranks;
  ranks.world = o.tp;
  dist::run_ranks(ranks, [&](dist::RankContext& ctx) {
    dist::TpSublayer sublayer(ctx, p, max_tokens, {o.attention_width, o.ffn_width});
    StackOptions opt;
    opt.max_tokens = max_tokens;
    Arms arms(w, sublayer.stack_options(opt), sublayer.fn(), o.kernel_config);
    sublayer.check_executor(*arms.native.ex);
    dist::RankStream st;
    rows[size_t(ctx.rank())] =
        measure_all(o, p, arms, nullptr, st.get(), [&ctx](cudaStream_t s) { ctx.wait(s); });
  });
  for (size_t i = 0; i < rows[0].size(); ++i) {
    bool all = true;
    for (const auto& rank_rows : rows) all = all && rank_rows[i]["bitwise_equal"].get<bool>();
    rows[0][i]["bitwise_equal"] = all;
  }
  nlohmann::json doc = bench_metadata();
  doc["tensor_parallel"] = {{"tp", o.tp},
                            {"shards", plan.describe()},
                            {"all_reduce", "nccl, in place, bf16 sum, main stream"},
                            {"timings_of_rank", 0}};
  return report(o, p, widths, rows[0], doc);
}
#endif

// Synthetic weights for the preset, or a checkpoint's mHC parameters (whose shapes then decide).
ModelWeights bench_model(const OverlapOptions& o, MhcParams& p) {
  if (o.weights_dir.empty()) return synthetic_model(p, 1);
  if (o.layers > 0)
    throw Error("--layers cannot be combined with --weights (the checkpoint decides)");
  ckpt::LoadOptions lo;
  lo.seed = 1;
  ckpt::Loaded loaded = ckpt::load(o.weights_dir, lo);
  fmt::print("{}", ckpt::describe(loaded.report, loaded.weights.params));
  p = loaded.weights.params;
  return std::move(loaded.weights);
}

int64_t largest(const std::vector<int64_t>& tokens) {
  int64_t max_tokens = 1;
  for (int64_t t : tokens) {
    if (t < 1) throw Error(fmt::format("--tokens: {} is not a positive token count", t));
    max_tokens = std::max(max_tokens, t);
  }
  return max_tokens;
}

}  // namespace

std::vector<std::vector<nlohmann::json>> overlap_rounds(const OverlapOptions& o,
                                                        const ModelWeights& w, int rounds) {
  if (!cuda::device_present())
    throw Error("the overlap measurement needs a CUDA GPU; none is visible");
  if (rounds < 1) throw Error(fmt::format("rounds={} must be >= 1", rounds));
  return rounds_one_gpu(o, w.params, w, largest(o.tokens), rounds);
}

nlohmann::json bench_overlap(const OverlapOptions& o) {
  if (!cuda::device_present()) throw Error("mhc bench overlap needs a CUDA GPU; none is visible");
  MhcParams p = preset(o.preset_name);
  if (o.layers > 0) p.layers = o.layers;
  validate(p);
  const int64_t max_tokens = largest(o.tokens);
  if (o.tp < 0) throw Error(fmt::format("--tp {}: expected a TP size >= 1", o.tp));
  const ModelWeights w = bench_model(o, p);
  if (o.tp == 0) return run_one_gpu(o, p, w, max_tokens);
#if MHC_WITH_NCCL
  return run_tensor_parallel(o, p, w, max_tokens);
#else
  throw Error("--tp needs the CUDA backend built with NCCL; this build has none");
#endif
}

}  // namespace mhc::bench
