#include "mhc/bench/tp_stack.hpp"

#include <fmt/core.h>

#include "mhc/core/error.hpp"
#include "mhc/cuda/check.hpp"

namespace mhc::dist {
namespace {

ComputeCapability device_capability(int device) {
  cudaDeviceProp prop{};
  MHC_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return {prop.major, prop.minor};
}

}  // namespace

TpSublayer::TpSublayer(RankContext& ctx, const MhcParams& p, int64_t max_tokens,
                       cuda::StandinWidths widths)
    : ctx_(ctx), p_(p), info_(ctx.world()), capability_(device_capability(ctx.device())) {
  // The guard comes first: nothing is allocated for an all-reduce this build cannot run.
  all_reduce_ = planned_all_reduce(capability_, info_);
  require_runnable(all_reduce_, capability_);
  standin_ = std::make_unique<cuda::DecoderStandin>(p, max_tokens, widths,
                                                    cuda::StandinShard{ctx.rank(), ctx.world()});
}

void TpSublayer::run(int site, int64_t tokens, const Bf16* in, Bf16* out,
                     cudaStream_t stream) const {
  (*standin_)(site, tokens, in, out, stream);  // this rank's partial [tokens, C]
  if (all_reduce_ == AllReduce::nccl && tokens > 0) {
    ctx_.comm().all_reduce_sum_bf16(out, size_t(tokens) * size_t(p_.hidden), stream);
  }
}

cuda::SublayerFn TpSublayer::fn() {
  return [this](int site, int64_t tokens, const Bf16* in, Bf16* out, cudaStream_t stream) {
    run(site, tokens, in, out, stream);
  };
}

cuda::StackOptions TpSublayer::stack_options(cuda::StackOptions base) const {
  base.tp = &info_;
  base.capture_mode = cudaStreamCaptureModeThreadLocal;
  return base;
}

void TpSublayer::check_executor(const cuda::StackExecutor& ex) const {
  const AllReduce seen = ex.decide(1, ExecMode::full).all_reduce;
  if (seen != all_reduce_) {
    throw Error(fmt::format(
        "tensor parallelism: the executor's policy names the all-reduce '{}' but the sublayer "
        "runs '{}'; build the executor with TpSublayer::stack_options()",
        to_string(seen), to_string(all_reduce_)));
  }
}

TpStack::TpStack(RankContext& ctx, const ModelWeights& w, const KernelConfig& config,
                 cuda::StandinWidths widths, cuda::StackOptions options)
    : sublayer_(ctx, w.params, options.max_tokens, widths) {
  executor_ = std::make_unique<cuda::StackExecutor>(w, config, sublayer_.stack_options(options),
                                                    sublayer_.fn());
  sublayer_.check_executor(*executor_);
}

void prepare_tp_graph(RankContext& ctx, cuda::StackExecutor& ex, int64_t tokens,
                      cudaStream_t stream) {
  const bool overlap = ex.decide(tokens, ExecMode::full).overlap;
  ex.enqueue_schedule(tokens, overlap, stream);
  ctx.wait(stream);
  ex.prepare_full_graph(tokens, stream);
}

}  // namespace mhc::dist
