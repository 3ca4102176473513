#include "mhc/core/tensor_parallel.hpp"

#include <fmt/core.h>

#include "mhc/core/error.hpp"

namespace mhc {

TensorParallel::TensorParallel(int world, bool fused_kernel_built)
    : world_(world), fused_(fused_kernel_built) {
  if (world < 1) throw Error(fmt::format("tensor parallelism: TP size {} must be >= 1", world));
}

ShardRange shard_range(int width, int world, int rank, std::string_view what) {
  if (world < 1) throw Error(fmt::format("tensor parallelism: TP size {} must be >= 1", world));
  if (width < 1)
    throw Error(fmt::format("tensor parallelism: {} width {} must be >= 1", what, width));
  if (width % world != 0) {
    throw Error(fmt::format(
        "tensor parallelism: TP size {} does not divide the {} width {} ({} % {} = {}); choose a "
        "TP size that divides every stand-in width, or change the width",
        world, what, width, width, world, width % world));
  }
  if (rank < 0 || rank >= world) {
    throw Error(fmt::format("tensor parallelism: rank {} outside 0..{}", rank, world - 1));
  }
  const int count = width / world;
  return {rank * count, count};
}

int64_t StandinShardPlan::weight_bytes_per_rank_per_layer(int hidden) const {
  // Two GEMMs per sublayer, [C, W/tp] and [W/tp, C], bf16.
  return 4 * int64_t(hidden) * (int64_t(attention_local) + int64_t(ffn_local));
}

std::string StandinShardPlan::describe() const {
  return fmt::format("TP={}: attention {} -> {} per rank, FFN {} -> {} per rank", world, attention,
                     attention_local, ffn, ffn_local);
}

StandinShardPlan plan_standin_shards(int world, int attention, int ffn) {
  StandinShardPlan plan;
  plan.world = world;
  plan.attention = attention;
  plan.ffn = ffn;
  plan.attention_local = shard_range(attention, world, 0, "attention stand-in").count;
  plan.ffn_local = shard_range(ffn, world, 0, "FFN stand-in").count;
  return plan;
}

void check_tp_fits(int world, int gpus) {
  if (world < 1) throw Error(fmt::format("tensor parallelism: TP size {} must be >= 1", world));
  if (world > gpus) {
    throw Error(fmt::format(
        "tensor parallelism: TP size {} needs {} GPUs (one rank per GPU), but {} {} visible", world,
        world, gpus, gpus == 1 ? "is" : "are"));
  }
}

AllReduce planned_all_reduce(ComputeCapability cc, const TensorParallelInfo& tp) {
  DispatchInputs in;
  in.capability = cc;
  in.tp = &tp;
  return decide(in).all_reduce;
}

void require_runnable(AllReduce chosen, ComputeCapability cc) {
  if (chosen == AllReduce::fused && !kFusedAllReduceKernelBuilt) {
    throw Error(fmt::format(
        "tensor parallelism: the dispatch policy chose the fused all-reduce on compute "
        "capability {}.{}, but this build has no fused all-reduce kernel; refusing to run rather "
        "than substitute NCCL under the fused label",
        cc.major, cc.minor));
  }
}

}  // namespace mhc
