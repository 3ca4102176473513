// Tensor parallelism, the CPU side (docs/tensor_parallel.md): how the decoder stand-in's two GEMMs
// are split over TP ranks, the checks a TP size must pass before any GPU or NCCL state exists, the
// TensorParallelInfo the dispatch policy is given, and the guard on the policy's all-reduce answer.
// No CUDA, no NCCL: everything here is tested on machines without a GPU.
//
// Sharding (Megatron style): the first GEMM [C, W] is column-parallel, rank r holds the columns
// [r*W/tp, (r+1)*W/tp); the second GEMM [W, C] is row-parallel, rank r holds the same rows, so
// each rank's product is a partial [M, C] and one all-reduce (sum) gives the sublayer's output.
// Every rank holds the full mHC streams and runs the full mHC site, as in the real models.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "mhc/core/dispatch.hpp"

namespace mhc {

// This build has no SM100 fused all-reduce (all-reduce + post + collapse + norm in one kernel).
inline constexpr bool kFusedAllReduceKernelBuilt = false;

// A TP group as the dispatch policy sees it.
class TensorParallel final : public TensorParallelInfo {
 public:
  // Throws mhc::Error when world < 1. `fused_kernel_built` exists for tests of the guard; the
  // runner always passes the build's answer.
  explicit TensorParallel(int world, bool fused_kernel_built = kFusedAllReduceKernelBuilt);
  int world_size() const override { return world_; }
  bool fused_allreduce_available() const override { return fused_; }

 private:
  int world_;
  bool fused_;
};

// One rank's contiguous slice [offset, offset + count) of a GEMM width.
struct ShardRange {
  int offset = 0;
  int count = 0;
};

// Rank `rank`'s slice of `width` over `world` ranks. Throws mhc::Error, naming `what` and the
// sizes, when world does not divide width (no rank gets a ragged slice) or rank is out of range.
ShardRange shard_range(int width, int world, int rank, std::string_view what);

// The stand-in decoder's widths split over a TP group.
struct StandinShardPlan {
  int world = 1;
  int attention = 0, ffn = 0;              // full widths
  int attention_local = 0, ffn_local = 0;  // per rank
  // Weight bytes one rank streams per layer (bf16, two GEMMs per sublayer).
  int64_t weight_bytes_per_rank_per_layer(int hidden) const;
  // e.g. "TP=2: attention 5120 -> 2560 per rank, FFN 6400 -> 3200 per rank"
  std::string describe() const;
};

// Throws mhc::Error when world < 1, a width < 1, or world does not divide a width.
StandinShardPlan plan_standin_shards(int world, int attention, int ffn);

// Throws mhc::Error unless 1 <= world <= gpus (checked before any thread or communicator exists).
void check_tp_fits(int world, int gpus);

// The all-reduce the dispatch policy picks for this device and TP group. It does not depend on
// the token count or the execution mode (mhc::decide sets it before any overlap rule).
AllReduce planned_all_reduce(ComputeCapability cc, const TensorParallelInfo& tp);

// Throws mhc::Error for AllReduce::fused when this build has no fused kernel: a runner must
// refuse rather than silently run the ordinary all-reduce under the fused label.
void require_runnable(AllReduce chosen, ComputeCapability cc);

}  // namespace mhc
