// Tensor parallelism on the CPU side: the stand-in's sharding arithmetic, the TP-size checks made
// before any GPU state exists, the TensorParallelInfo implementation, and the fused all-reduce
// guard (never fused on SM90; refused rather than faked where the policy would pick it).
#include "mhc/core/tensor_parallel.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "mhc/core/dispatch.hpp"
#include "mhc/core/error.hpp"

namespace mhc {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ShardRange, SplitsEvenlyAndCoversTheWidth) {
  for (int world : {1, 2, 4, 8}) {
    int next = 0;
    for (int rank = 0; rank < world; ++rank) {
      const ShardRange r = shard_range(6400, world, rank, "FFN");
      EXPECT_EQ(r.count, 6400 / world);
      EXPECT_EQ(r.offset, next) << "slices must be contiguous and in rank order";
      next = r.offset + r.count;
    }
    EXPECT_EQ(next, 6400);
  }
}

TEST(ShardRange, TpOneIsTheIdentity) {
  const ShardRange r = shard_range(5120, 1, 0, "attention");
  EXPECT_EQ(r.offset, 0);
  EXPECT_EQ(r.count, 5120);
  const StandinShardPlan plan = plan_standin_shards(1, 5120, 6400);
  EXPECT_EQ(plan.attention_local, 5120);
  EXPECT_EQ(plan.ffn_local, 6400);
  EXPECT_EQ(plan.weight_bytes_per_rank_per_layer(5120), 4 * int64_t{5120} * (5120 + 6400));
}

TEST(ShardRange, RefusesATpSizeThatDoesNotDivide) {
  const std::string msg = error_of([] { shard_range(6400, 3, 0, "FFN stand-in"); });
  EXPECT_NE(msg.find("TP size 3 does not divide the FFN stand-in width 6400"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("6400 % 3 = 1"), std::string::npos) << msg;
}

TEST(ShardRange, RefusesImpossibleArguments) {
  EXPECT_THROW(shard_range(64, 0, 0, "x"), Error);
  EXPECT_THROW(shard_range(0, 1, 0, "x"), Error);
  EXPECT_THROW(shard_range(64, 2, 2, "x"), Error);
  EXPECT_THROW(shard_range(64, 2, -1, "x"), Error);
}

TEST(StandinShardPlan, SplitsThePresetWidths) {
  // The stand-in's defaults: attention C, FFN 5C/4 rounded up to 64 (decoder_standin.hpp).
  struct Preset {
    int c, ffn;
  };
  for (Preset p : {Preset{5120, 6400}, Preset{4096, 5120}, Preset{7168, 8960}}) {
    for (int world : {2, 4, 8}) {
      const StandinShardPlan plan = plan_standin_shards(world, p.c, p.ffn);
      EXPECT_EQ(plan.attention_local * world, p.c);
      EXPECT_EQ(plan.ffn_local * world, p.ffn);
      EXPECT_EQ(plan.weight_bytes_per_rank_per_layer(p.c) * world,
                4 * int64_t{p.c} * (p.c + p.ffn));
    }
  }
  EXPECT_EQ(plan_standin_shards(2, 5120, 6400).describe(),
            "TP=2: attention 5120 -> 2560 per rank, FFN 6400 -> 3200 per rank");
}

TEST(StandinShardPlan, NamesTheWidthThatDoesNotDivide) {
  EXPECT_NE(error_of([] { plan_standin_shards(3, 5120, 6400); }).find("attention"),
            std::string::npos);
  EXPECT_NE(error_of([] { plan_standin_shards(2, 5120, 6401); }).find("FFN"), std::string::npos);
}

TEST(CheckTpFits, RefusesMoreRanksThanGpus) {
  EXPECT_NO_THROW(check_tp_fits(1, 1));
  EXPECT_NO_THROW(check_tp_fits(2, 8));
  const std::string msg = error_of([] { check_tp_fits(4, 2); });
  EXPECT_NE(msg.find("TP size 4 needs 4 GPUs"), std::string::npos) << msg;
  EXPECT_NE(msg.find("2 are visible"), std::string::npos) << msg;
  EXPECT_NE(error_of([] { check_tp_fits(2, 0); }).find("0 are visible"), std::string::npos);
  EXPECT_THROW(check_tp_fits(0, 2), Error);
}

TEST(TensorParallel, ImplementsTheInfo) {
  const TensorParallel tp(4);
  const TensorParallelInfo& info = tp;
  EXPECT_EQ(info.world_size(), 4);
  EXPECT_EQ(info.fused_allreduce_available(), kFusedAllReduceKernelBuilt);
  EXPECT_FALSE(kFusedAllReduceKernelBuilt) << "update docs/tensor_parallel.md and this test";
  EXPECT_TRUE(TensorParallel(2, true).fused_allreduce_available());
  EXPECT_THROW(TensorParallel(0), Error);
}

TEST(PlannedAllReduce, TpOneNeedsNone) {
  EXPECT_EQ(planned_all_reduce({9, 0}, TensorParallel(1)), AllReduce::none);
  EXPECT_EQ(planned_all_reduce({10, 0}, TensorParallel(1, true)), AllReduce::none);
}

TEST(PlannedAllReduce, NeverFusedOnSm90EvenIfAKernelExisted) {
  for (bool fused_built : {false, true}) {
    EXPECT_EQ(planned_all_reduce({9, 0}, TensorParallel(2, fused_built)), AllReduce::nccl);
    EXPECT_EQ(planned_all_reduce({9, 0}, TensorParallel(8, fused_built)), AllReduce::nccl);
  }
}

TEST(PlannedAllReduce, Sm100PicksFusedOnlyWhenTheKernelExists) {
  EXPECT_EQ(planned_all_reduce({10, 0}, TensorParallel(2)), AllReduce::nccl);
  EXPECT_EQ(planned_all_reduce({10, 3}, TensorParallel(2)), AllReduce::nccl);
  EXPECT_EQ(planned_all_reduce({10, 0}, TensorParallel(2, true)), AllReduce::fused);
}

TEST(RequireRunnable, RefusesFusedInThisBuild) {
  EXPECT_NO_THROW(require_runnable(AllReduce::none, {9, 0}));
  EXPECT_NO_THROW(require_runnable(AllReduce::nccl, {9, 0}));
  // A TP group claiming a fused kernel on SM100: the policy says fused, the runner must refuse.
  const AllReduce chosen = planned_all_reduce({10, 0}, TensorParallel(2, true));
  const std::string msg = error_of([&] { require_runnable(chosen, {10, 0}); });
  EXPECT_NE(msg.find("fused all-reduce on compute capability 10.0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("no fused all-reduce kernel"), std::string::npos) << msg;
}

}  // namespace
}  // namespace mhc
