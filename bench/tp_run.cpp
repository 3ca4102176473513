#include "mhc/bench/tp_run.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "mhc/bench/tp_stack.hpp"
#include "mhc/core/error.hpp"
#include "mhc/cuda/check.hpp"
#include "mhc/dist/tp_runner.hpp"

namespace mhc::dist {
namespace {

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

bool all_finite(const std::vector<Bf16>& v) {
  return std::all_of(v.begin(), v.end(), [](Bf16 b) { return std::isfinite(bf16_to_float(b)); });
}
bool all_finite(const std::vector<float>& v) {
  return std::all_of(v.begin(), v.end(), [](float f) { return std::isfinite(f); });
}

template <typename T>
std::vector<T> download(const T* device, size_t count) {
  std::vector<T> host(count);
  MHC_CUDA_CHECK(cudaMemcpy(host.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost));
  return host;
}

template <typename T>
ErrorStats compare_widened(const std::vector<T>& out, const std::vector<T>& ref) {
  std::vector<double> wide(ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    if constexpr (std::is_same_v<T, Bf16>) {
      wide[i] = bf16_to_float(ref[i]);
    } else {
      wide[i] = ref[i];
    }
  }
  return compare(out.data(), wide.data(), int64_t(out.size()));
}

// CUDA events around each forward; the median of the elapsed times.
class ForwardTimer {
 public:
  ForwardTimer() {
    MHC_CUDA_CHECK(cudaEventCreate(&a_));
    MHC_CUDA_CHECK(cudaEventCreate(&b_));
  }
  ~ForwardTimer() {
    cudaEventDestroy(a_);
    cudaEventDestroy(b_);
  }
  double median_us(RankContext& ctx, cuda::StackExecutor& ex, int64_t tokens, ExecMode mode,
                   int reps, cudaStream_t st) {
    std::vector<float> us;
    for (int r = 0; r < reps; ++r) {
      MHC_CUDA_CHECK(cudaEventRecord(a_, st));
      ex.forward(tokens, mode, st);
      MHC_CUDA_CHECK(cudaEventRecord(b_, st));
      ctx.wait(st);
      float ms = 0;
      MHC_CUDA_CHECK(cudaEventElapsedTime(&ms, a_, b_));
      us.push_back(ms * 1000.0f);
    }
    if (us.empty()) return 0;
    std::nth_element(us.begin(), us.begin() + us.size() / 2, us.end());
    return us[us.size() / 2];
  }

 private:
  cudaEvent_t a_ = nullptr, b_ = nullptr;
};

struct RankRun {
  TpRankReport report;
  StackResult result;
};

// One rank: both schedules eagerly, then the forward the policy picks (FULL: captured first),
// replays, timing. Every rank runs exactly the same sequence of collectives.
void rank_run(RankContext& ctx, const ModelWeights& w, int64_t tokens, const Bf16* x0,
              const KernelConfig& config, const TpRunConfig& c, RankRun& out) {
  cuda::StackOptions opt;
  opt.max_tokens = tokens;
  TpStack stack(ctx, w, config, c.widths, opt);
  cuda::StackExecutor& ex = stack.executor();
  RankStream stream;
  const cudaStream_t st = stream.get();
  // Stream-ordered before the forwards (a plain cudaMemcpy is not ordered with this stream).
  MHC_CUDA_CHECK(cudaMemcpyAsync(ex.x_in(), x0, size_t(tokens * w.params.k()) * sizeof(Bf16),
                                 cudaMemcpyHostToDevice, st));
  const StackResult native = eager_result(ctx, ex, tokens, false, st);
  const StackResult overlapped = eager_result(ctx, ex, tokens, true, st);
  if (c.mode == ExecMode::full) prepare_tp_graph(ctx, ex, tokens, st);
  const int64_t overlapped_before = ex.overlapped_sites();
  out.result = forward_result(ctx, ex, tokens, c.mode, st);
  TpRankReport& r = out.report;
  r.decision = ex.decide(tokens, c.mode);
  r.overlapped = ex.overlapped_sites() > overlapped_before;
  r.graph_replayed = c.mode == ExecMode::full;  // forward() refuses FULL without a graph
  r.overlap_equals_native = bitwise_equal(native, overlapped) && bitwise_equal(native, out.result);
  r.replays_stable = true;
  for (int i = 0; i < c.replays; ++i) {
    r.replays_stable =
        r.replays_stable && bitwise_equal(forward_result(ctx, ex, tokens, c.mode, st), out.result);
  }
  r.forward_us = ForwardTimer().median_us(ctx, ex, tokens, c.mode, c.timing_reps, st);
}

std::vector<RankRun> run_world(int world, const ModelWeights& w, int64_t tokens, const Bf16* x0,
                               const KernelConfig& config, const TpRunConfig& c) {
  std::vector<RankRun> runs(static_cast<size_t>(world));
  TpRunOptions o;
  o.world = world;
  o.timeout = c.timeout;
  run_ranks(o, [&](RankContext& ctx) {
    rank_run(ctx, w, tokens, x0, config, c, runs[size_t(ctx.rank())]);
  });
  return runs;
}

std::string pass(bool ok) { return ok ? "PASS" : "FAIL"; }

}  // namespace

StackResult download_result(const cuda::StackExecutor& ex, int64_t tokens) {
  const MhcParams& p = ex.params();
  StackResult r;
  r.x = download(ex.x_final(), size_t(tokens * p.k()));
  r.output = download(ex.output(), size_t(tokens * p.hidden));
  r.pre = download(ex.last_pre(), size_t(tokens * p.n));
  return r;
}

bool bitwise_equal(const StackResult& a, const StackResult& b) {
  return same_bits(a.x, b.x) && same_bits(a.output, b.output) && same_bits(a.pre, b.pre) &&
         all_finite(a.x) && all_finite(a.output) && all_finite(a.pre);
}

StackResult eager_result(RankContext& ctx, cuda::StackExecutor& ex, int64_t tokens, bool overlap,
                         cudaStream_t stream) {
  ex.poison_results(stream);  // a forward that writes nothing cannot match another
  ex.enqueue_schedule(tokens, overlap, stream);
  ctx.wait(stream);
  return download_result(ex, tokens);
}

StackResult forward_result(RankContext& ctx, cuda::StackExecutor& ex, int64_t tokens, ExecMode mode,
                           cudaStream_t stream) {
  ex.poison_results(stream);
  ex.forward(tokens, mode, stream);
  ctx.wait(stream);
  return download_result(ex, tokens);
}

ResultErrors compare_results(const StackResult& out, const StackResult& ref) {
  return {compare_widened(out.x, ref.x), compare_widened(out.output, ref.output),
          compare_widened(out.pre, ref.pre)};
}

bool TpRunReport::passed() const {
  bool ok = ranks_identical && x.passes(x_tolerance) && output.passes(output_tolerance) &&
            pre.passes(pre_tolerance);
  for (const auto& r : ranks) ok = ok && r.overlap_equals_native && r.replays_stable;
  return ok;
}

std::string TpRunReport::describe() const {
  bool schedules = true, replays = true;
  std::string s = fmt::format("mhc run --tp {}: {} tokens, {} layers, mode {}\n{}\n", world, tokens,
                              layers, to_string(mode), plan.describe());
  for (size_t r = 0; r < ranks.size(); ++r) {
    const TpRankReport& k = ranks[r];
    s += fmt::format("rank {}: {}; graph replayed {}; forward {:.1f} us (median)\n", r,
                     k.decision.describe(), k.graph_replayed ? "yes" : "no", k.forward_us);
    schedules = schedules && k.overlap_equals_native;
    replays = replays && k.replays_stable;
  }
  s += pass(schedules) + " overlap == native bitwise on every rank (eager and the forward run)\n";
  s += pass(replays) + " repeated forwards bitwise stable on every rank\n";
  s += pass(ranks_identical) + " every rank holds bitwise identical streams, output and pre\n";
  s += fmt::format("{} x after the last layer vs TP=1: {} (tolerance {:.1e})\n",
                   pass(x.passes(x_tolerance)), x.describe(), x_tolerance);
  s += fmt::format("{} output vs TP=1: {} (tolerance {:.1e})\n",
                   pass(output.passes(output_tolerance)), output.describe(), output_tolerance);
  s += fmt::format("{} last pre vs TP=1: {} (tolerance {:.1e})\n", pass(pre.passes(pre_tolerance)),
                   pre.describe(), pre_tolerance);
  return s;
}

std::string TpRunReport::to_json() const {
  nlohmann::json j = {{"world", world},
                      {"tokens", tokens},
                      {"layers", layers},
                      {"mode", std::string(to_string(mode))},
                      {"shards", plan.describe()},
                      {"ranks_identical", ranks_identical},
                      {"passed", passed()}};
  for (const auto& r : ranks) {
    j["ranks"].push_back({{"decision", nlohmann::json::parse(r.decision.to_json())},
                          {"graph_replayed", r.graph_replayed},
                          {"overlap_equals_native", r.overlap_equals_native},
                          {"replays_stable", r.replays_stable},
                          {"forward_us", r.forward_us}});
  }
  auto stats = [](const ErrorStats& e, double tol) {
    return nlohmann::json{{"rel_norm", e.rel_norm},
                          {"max_abs_rel", e.max_abs_rel},
                          {"nonfinite", e.nonfinite},
                          {"tolerance", tol}};
  };
  j["vs_tp1"] = {{"x", stats(x, x_tolerance)},
                 {"output", stats(output, output_tolerance)},
                 {"pre", stats(pre, pre_tolerance)}};
  return j.dump();
}

TpRunReport run_stack_tp(const ModelWeights& w, int64_t tokens, const Bf16* x0,
                         const KernelConfig& config, const TpRunConfig& c) {
  const MhcParams& p = w.params;
  if (tokens < 1) throw Error(fmt::format("--tp needs at least 1 token (got {})", tokens));
  TpRunReport rep;
  const cuda::StandinWidths full = cuda::StandinWidths::for_params(p, c.widths);
  rep.plan = plan_standin_shards(c.world, full.attention, full.ffn);  // before any GPU work
  check_tp_fits(c.world, visible_gpus());
  rep.world = c.world;
  rep.tokens = tokens;
  rep.layers = p.layers;
  rep.mode = c.mode;
  const std::vector<RankRun> ref = run_world(1, w, tokens, x0, config, c);
  const std::vector<RankRun> runs = run_world(c.world, w, tokens, x0, config, c);
  rep.ranks_identical = true;
  for (const RankRun& r : runs) {
    rep.ranks.push_back(r.report);
    rep.ranks_identical = rep.ranks_identical && bitwise_equal(r.result, runs[0].result);
  }
  const ResultErrors e = compare_results(runs[0].result, ref[0].result);
  rep.x = e.x;
  rep.output = e.output;
  rep.pre = e.pre;
  rep.x_tolerance = stack_x_tolerance(p.layers);
  rep.output_tolerance = kStackOutputTolerance;
  rep.pre_tolerance = kStackPreTolerance;
  return rep;
}

}  // namespace mhc::dist
