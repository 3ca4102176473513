// One rank's share of a tensor-parallel mHC stack (docs/tensor_parallel.md, "Schedule").
//
// Every rank holds the full mHC streams and weights and runs every mHC site, as in the real
// models; only the sublayer is sharded. TpSublayer is the executor's SublayerFn for one rank: this
// rank's shard of the cuBLAS stand-in decoder (column-parallel first GEMM, row-parallel second),
// then an in-place ncclAllReduce (sum, bf16) of the partial [M, C] on the MAIN stream, still inside
// the sublayer stage, so the overlap schedule's join (wait for the coefficients, then the post)
// comes after it and a FULL graph captures it. The all-reduce is the one the dispatch policy
// names for this device and TP size (`nccl` on Hopper, `none` at TP=1); a `fused` answer is
// refused at construction, since this build has no fused kernel.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "mhc/bench/decoder_standin.hpp"
#include "mhc/core/tensor_parallel.hpp"
#include "mhc/cpu/model.hpp"
#include "mhc/dist/tp_runner.hpp"
#include "mhc/schedule/stack_executor.hpp"

namespace mhc::dist {

class TpSublayer {
 public:
  // Throws mhc::Error when the TP size does not divide the stand-in widths or the policy picks an
  // all-reduce this build cannot run.
  TpSublayer(RankContext& ctx, const MhcParams& p, int64_t max_tokens, cuda::StandinWidths widths);
  TpSublayer(const TpSublayer&) = delete;
  TpSublayer& operator=(const TpSublayer&) = delete;

  AllReduce all_reduce() const { return all_reduce_; }
  const TensorParallel& info() const { return info_; }
  const cuda::DecoderStandin& standin() const { return *standin_; }
  // The executor's sublayer; refers to this object, which must outlive the executor.
  cuda::SublayerFn fn();
  // `base` with the TP info for the policy and thread-local graph capture (NCCL's rule for one
  // thread per GPU) filled in.
  cuda::StackOptions stack_options(cuda::StackOptions base) const;
  // Throws unless the executor's policy names this sublayer's all-reduce (i.e. it was built with
  // stack_options()).
  void check_executor(const cuda::StackExecutor& ex) const;

 private:
  void run(int site, int64_t tokens, const Bf16* in, Bf16* out, cudaStream_t stream) const;

  RankContext& ctx_;
  MhcParams p_;
  TensorParallel info_;
  ComputeCapability capability_;
  AllReduce all_reduce_ = AllReduce::none;
  std::unique_ptr<cuda::DecoderStandin> standin_;
};

// A rank's whole stack: TpSublayer plus the executor that runs it.
class TpStack {
 public:
  TpStack(RankContext& ctx, const ModelWeights& w, const KernelConfig& config,
          cuda::StandinWidths widths, cuda::StackOptions options);
  cuda::StackExecutor& executor() { return *executor_; }
  const TpSublayer& sublayer() const { return sublayer_; }

 private:
  TpSublayer sublayer_;
  std::unique_ptr<cuda::StackExecutor> executor_;
};

// Captures the FULL graph for `tokens` on every rank (each rank calls it, in the same order): an
// eager forward of the schedule the policy picks runs first and is waited for, so that NCCL sets
// up the connections this size needs outside the capture.
void prepare_tp_graph(RankContext& ctx, cuda::StackExecutor& ex, int64_t tokens,
                      cudaStream_t stream);

}  // namespace mhc::dist
