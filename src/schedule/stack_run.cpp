#include "mhc/schedule/stack_run.hpp"

#include "mhc/cuda/check.hpp"
#include "mhc/schedule/stack_executor.hpp"
#include "mhc/schedule/trace.hpp"

namespace mhc::cuda {
namespace {

StackTrace download_trace(const StackExecutor& ex, int64_t tokens) {
  const MhcParams& p = ex.params();
  StackTrace t;
  for (int layer = 0; layer < p.layers; ++layer) {
    t.x_after_layer.emplace_back(size_t(tokens * p.k()));
    MHC_CUDA_CHECK(cudaMemcpy(t.x_after_layer.back().data(), ex.layer_trace(layer),
                              t.x_after_layer.back().size() * sizeof(Bf16),
                              cudaMemcpyDeviceToHost));
  }
  t.last_pre.resize(size_t(tokens * p.n));
  MHC_CUDA_CHECK(cudaMemcpy(t.last_pre.data(), ex.last_pre(), t.last_pre.size() * sizeof(float),
                            cudaMemcpyDeviceToHost));
  t.output.resize(size_t(tokens * p.hidden));
  MHC_CUDA_CHECK(cudaMemcpy(t.output.data(), ex.output(), t.output.size() * sizeof(Bf16),
                            cudaMemcpyDeviceToHost));
  return t;
}

}  // namespace

StackRunResult run_stack(const ModelWeights& w, int64_t tokens, const Bf16* x0,
                         const KernelConfig& config, const StackRunOptions& options) {
  StackRunResult r;
  const MhcParams& p = w.params;
  StackOptions opt;
  opt.max_tokens = std::max<int64_t>(tokens, 1);
  opt.trace_layers = true;
  opt.native_decode_schedule = options.native_decode_schedule;
  StackExecutor ex(w, config, opt);
  r.decision = ex.decide(tokens, options.mode);
  if (tokens == 0) {
    r.trace.x_after_layer.assign(size_t(p.layers), {});
    return r;
  }
  cudaStream_t stream;
  MHC_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  MHC_CUDA_CHECK(
      cudaMemcpy(ex.x_in(), x0, size_t(tokens * p.k()) * sizeof(Bf16), cudaMemcpyHostToDevice));
  // From pageable memory the copy may return before its DMA lands, ordered on the legacy stream
  // only, which `stream` (non-blocking) does not wait for.
  MHC_CUDA_CHECK(cudaDeviceSynchronize());
  if (options.mode == ExecMode::full) {
    ex.prepare_full_graph(tokens, stream);  // global-mode capture: a sync in a forward fails it
    r.sync_checked = true;
  } else if (options.sync_check) {
    CapturedGraph trial(
        stream, [&](cudaStream_t st) { ex.enqueue_schedule(tokens, r.decision.overlap, st); });
    r.sync_checked = true;
  }
  const ForwardInfo info = ex.forward(tokens, options.mode, stream);
  r.overlapped = info.overlapped;
  r.graph_replayed = info.graph_replayed;
  MHC_CUDA_CHECK(cudaStreamSynchronize(stream));
  r.trace = download_trace(ex, tokens);

  if (!options.trace_path.empty()) {
    // The traced forward runs the same schedule eagerly with timing events around every stage.
    TraceRecorder recorder(p.sites(), stream, ex.side_stream());
    recorder.start(stream);
    ex.enqueue_schedule(tokens, r.decision.overlap, stream, &recorder);
    recorder.write(options.trace_path);
  }
  MHC_CUDA_CHECK(cudaStreamDestroy(stream));
  return r;
}

}  // namespace mhc::cuda
