// A DeepSeek-V4.1-shaped mHC stack on the GPU: every site's input path, coefficients, sublayer
// and post, on the native or the overlap schedule (mhc/schedule/two_stream.hpp), chosen per forward
// by the dispatch policy (mhc/core/dispatch.hpp).
//
// Buffers (all made in the constructor, sized for max_tokens; nothing allocates per forward):
//   x_in            the caller's streams, never written by the stack
//   x[2]            ping-pong streams: site s reads src(s) and writes dst(s)
//   pre[2]          ping-pong: site s+1's input path reads pre(s) while the side stream may
//                   already write pre(s+1)
//   post[2], comb[2] ping-pong by site parity: the folded decode layout's coefficient launch of
//                   site s+1 reads site s's while it writes its own
//   layer_input, F  main stream only
//   output          final collapse + final norm, fused into the last post
// The layouts (StackLayout, whose launches are mhc/schedule/stack_launches.hpp's): the post of
// site s forms site s+1's layer_input (or the output), so only site 0 runs a separate input path;
// or, native at decode sizes, the input path rides in the coefficient launch and the post is
// plain; or, up to the kernel plan's folded_post_max_tokens, also site s's post rides in site s+1's
// coefficient launch, so that a site is one launch besides its sublayer.
//
// Host side: the executor allocates nothing in a forward once its token count and mode have been
// seen (or prepared). The policy's decision is cached per (tokens, mode) and the launch lists per
// (tokens, overlap), built on first use or by prepare_launches(); FULL mode replays a graph
// captured by prepare_full_graph(). Proof, every layout and mode: tests/schedule/test_no_alloc.cu.
// Not thread-safe: one thread drives one executor.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <utility>

#include "mhc/core/bf16.hpp"
#include "mhc/core/config.hpp"
#include "mhc/core/dispatch.hpp"
#include "mhc/core/kernel_plan.hpp"
#include "mhc/cpu/model.hpp"
#include "mhc/schedule/stack_launches.hpp"
#include "mhc/schedule/two_stream.hpp"

namespace mhc::cuda {

struct StackOptions {
  int64_t max_tokens = 16;
  bool trace_layers = false;  // copy x after every layer into a trace buffer (validation)
  bool ubatching = false;     // reported to the dispatch policy
  // Tensor parallelism, as the dispatch policy sees it (null: TP = 1). Not owned; must outlive
  // the executor. The sublayer does the all-reduce the policy names (docs/tensor_parallel.md).
  const TensorParallelInfo* tp = nullptr;
  // How prepare_full_graph captures: global (default), or thread-local when one thread per GPU
  // captures NCCL collectives concurrently.
  cudaStreamCaptureMode capture_mode = cudaStreamCaptureModeGlobal;
  // Native schedule only: where the coefficient launch can carry the input path (decode sizes),
  // put it there and keep the post plain, the fastest single-stream layout (docs/kernels.md).
  // Off by default because its layer_input comes from another kernel than the overlap
  // schedule's, so native and overlap are then equal within tolerance, not bitwise; the overlap
  // benchmark turns it on so that the overlap is measured against the best native schedule.
  bool native_decode_schedule = false;
  // With native_decode_schedule, up to the kernel plan's folded_post_max_tokens: fold each site's
  // post into the next site's coefficient launch (StackLayout::folded_decode; the same bits as
  // decode). Off by default: behind a sublayer like a real one (no PDL, weights streamed through
  // L2) it is slower, since the unfolded layout's post hides the coefficient launch's start and
  // hc_fn loads, which nothing can hide after such a kernel (docs/decisions.md, "The folded
  // decode layout stays opt-in").
  bool fold_previous_post = false;
};

struct ForwardInfo {
  // The executor's cached decision for (tokens, mode), by reference so that returning it copies
  // no strings (no allocation per forward). Valid while the executor lives; copy it to keep it.
  const DispatchDecision& decision;
  bool overlapped = false;
  bool graph_replayed = false;
};

class StackExecutor {
 public:
  // `sublayer` null: the built-in stand-in F = bf16(gain * layer_input) (mhc/cpu/model.hpp).
  StackExecutor(const ModelWeights& weights, const KernelConfig& config,
                const StackOptions& options, SublayerFn sublayer = nullptr);
  ~StackExecutor();
  StackExecutor(const StackExecutor&) = delete;
  StackExecutor& operator=(const StackExecutor&) = delete;

  // Captures the FULL-graph forward for this token count (both schedules the policy may pick)
  // ahead of serving; forward() in full mode refuses a token count that was not prepared.
  void prepare_full_graph(int64_t tokens, cudaStream_t stream);

  // Builds what an eager or piecewise forward of this size needs on the host (the decision and
  // the launch lists), so that even the first such forward allocates nothing. Optional: forward()
  // builds them on first use. Enqueues nothing.
  void prepare_launches(int64_t tokens, ExecMode mode);

  // Enqueues one forward of `tokens` tokens on `stream`: reads x_in(), writes output().
  ForwardInfo forward(int64_t tokens, ExecMode mode, cudaStream_t stream);

  // The policy's decision for a forward, without running it.
  DispatchDecision decide(int64_t tokens, ExecMode mode) const;
  // The layout the given schedule takes at this size (overlap: always fused_post).
  StackLayout layout(int64_t tokens, bool overlap) const;

  // Enqueues the given schedule eagerly, bypassing the policy (tests and benchmarks only).
  // With an observer (e.g. a TraceRecorder) every stage is reported as it is enqueued.
  void enqueue_schedule(int64_t tokens, bool overlap, cudaStream_t stream,
                        StageObserver* observer = nullptr);
  cudaStream_t side_stream() const;
  // Fills every buffer a forward writes (output, the streams, layer_input, the coefficients, the
  // layer trace; not x_in, pre_mix_in or the workspace) with NaN bits on `stream`, so that two
  // forwards' results compared bitwise cannot agree because one of them wrote nothing (tests and
  // the TP report poison before each forward they compare). Stream-ordered, no allocation.
  void poison_results(cudaStream_t stream);

  Bf16* x_in() const;               // [max_tokens, n, C]
  float* pre_mix_in() const;        // [max_tokens, n]: one-hot on stream 0 unless overwritten
  const Bf16* output() const;       // [max_tokens, C]
  const Bf16* x_final() const;      // streams after the last site
  const float* last_pre() const;    // [max_tokens, n]
  const Bf16* layer_input() const;  // [max_tokens, C]: the last site's sublayer input
  const Bf16* layer_trace(int layer) const;  // [max_tokens, n, C]; needs trace_layers
  const MhcParams& params() const;
  // The kernel plan every launch of this executor follows (the device's, with the config's
  // switches and tactics): tile sizes, splits, fused input, folded post, the overlap threshold.
  const KernelPlan& plan() const;
  // Sites run with each schedule since construction (proves which path forwards took).
  int64_t overlapped_sites() const;
  int64_t native_sites() const;
  // Of the native sites, those run in the folded decode layout (proves the fold ran).
  int64_t folded_sites() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mhc::cuda
