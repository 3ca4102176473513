// `mhc run --tp N` (docs/tensor_parallel.md, "What mhc run --tp checks"): the mHC stack with the
// tensor-parallel stand-in decoder on N GPUs, one thread per GPU, validated
//   - against the same stack on one GPU (TP=1, same weights: the shards are slices of the TP=1
//     matrices) within the stack tolerances of mhc/cpu/compare.hpp, since the partial sums are
//     rounded to bf16 before the all-reduce adds them;
//   - bitwise: overlap vs native schedule on every rank (eager, and the forward the policy picks),
//     graph replays against the first forward, and every rank against rank 0.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "mhc/bench/decoder_standin.hpp"
#include "mhc/core/config.hpp"
#include "mhc/core/dispatch.hpp"
#include "mhc/core/tensor_parallel.hpp"
#include "mhc/cpu/compare.hpp"
#include "mhc/cpu/model.hpp"
#include "mhc/dist/tp_runner.hpp"
#include "mhc/schedule/stack_executor.hpp"

namespace mhc::dist {

// A forward's final streams [M, n, C], output [M, C] and last pre [M, n], on the host.
struct StackResult {
  std::vector<Bf16> x, output;
  std::vector<float> pre;
};
// Copies them from the executor after the caller has waited for the forward.
StackResult download_result(const cuda::StackExecutor& ex, int64_t tokens);
// The same bits, and finite: a NaN (the poison of a buffer a forward did not write) never passes.
bool bitwise_equal(const StackResult& a, const StackResult& b);
// One forward waited for (bounded) and downloaded: the given schedule eagerly, or the forward the
// policy picks for `mode` (FULL: a prepared graph), into results poisoned first
// (StackExecutor::poison_results).
StackResult eager_result(RankContext& ctx, cuda::StackExecutor& ex, int64_t tokens, bool overlap,
                         cudaStream_t stream);
StackResult forward_result(RankContext& ctx, cuda::StackExecutor& ex, int64_t tokens, ExecMode mode,
                           cudaStream_t stream);

// `out` against `ref` (both bf16/fp32 results of the GPU; ref widened to double).
struct ResultErrors {
  ErrorStats x, output, pre;
};
ResultErrors compare_results(const StackResult& out, const StackResult& ref);

struct TpRunConfig {
  int world = 2;
  ExecMode mode = ExecMode::full;
  cuda::StandinWidths widths;  // 0: the stand-in's defaults
  int replays = 3;             // extra forwards checked bitwise against the first
  int timing_reps = 50;        // timed forwards (rank 0's median is reported)
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};
};

struct TpRankReport {
  DispatchDecision decision;
  bool overlapped = false;
  bool graph_replayed = false;
  bool overlap_equals_native = false;  // eager overlap == eager native == the policy's forward
  bool replays_stable = false;
  double forward_us = 0;  // median of timing_reps forwards
};

struct TpRunReport {
  int world = 0;
  int64_t tokens = 0;
  int layers = 0;
  ExecMode mode = ExecMode::full;
  StandinShardPlan plan;
  std::vector<TpRankReport> ranks;
  bool ranks_identical = false;  // every rank's streams, output and pre equal rank 0's bits
  ErrorStats x, output, pre;     // TP=N rank 0 against TP=1
  double x_tolerance = 0, output_tolerance = 0, pre_tolerance = 0;

  bool passed() const;
  std::string describe() const;  // text report, PASS/FAIL per check
  std::string to_json() const;
};

// Throws mhc::Error before touching a GPU when tokens < 1, the TP size does not divide the
// stand-in widths, or there are fewer GPUs than ranks; and, from the runner, on any rank's failure.
TpRunReport run_stack_tp(const ModelWeights& w, int64_t tokens, const Bf16* x0,
                         const KernelConfig& config, const TpRunConfig& c);

}  // namespace mhc::dist
