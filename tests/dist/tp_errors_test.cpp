// Tensor-parallel error paths: every one ends with one clear mhc::Error naming the failing rank,
// every rank exits, and nothing waits longer than about one timeout. The first two need no GPU
// (the checks come before any device or NCCL state); the others need two GPUs and skip otherwise.
#include <atomic>

#include "tp_test_util.hpp"

namespace mhc::dist {
namespace {

using namespace std::chrono_literals;
using test::error_of;
using test::seconds_since;
using Clock = std::chrono::steady_clock;

TEST(TpErrors, MoreRanksThanGpusIsRefusedBeforeAnythingStarts) {
  const int world = visible_gpus() + 1;
  std::atomic<int> bodies{0};
  const std::string msg =
      error_of([&] { run_ranks(test::ranks(world), [&](RankContext&) { ++bodies; }); });
  MHC_EXPECT_CONTAINS(msg, fmt::format("TP size {} needs {} GPUs", world, world));
  EXPECT_EQ(bodies, 0);
}

TEST(TpErrors, WidthsTheTpSizeDoesNotDivideAreRefusedBeforeAnyGpuWork) {
  const MhcParams p = test::small_stack(1024, 1);  // attention width 1024, FFN 1280
  const ModelWeights w = synthetic_model(p, 1);
  const auto x0 = synthetic_embeddings(p, 1, 2);
  TpRunConfig c;
  c.world = 3;
  const std::string msg = error_of([&] { run_stack_tp(w, 1, x0.data(), {}, c); });
  MHC_EXPECT_CONTAINS(msg, "TP size 3 does not divide the attention stand-in width 1024");
  c.world = 2;
  c.widths.ffn = 1281;
  MHC_EXPECT_CONTAINS(error_of([&] { run_stack_tp(w, 1, x0.data(), {}, c); }),
                      "does not divide the FFN stand-in width 1281");
}

TEST(TpErrors, ZeroTokensAreRefused) {
  const MhcParams p = test::small_stack(1024, 1);
  const ModelWeights w = synthetic_model(p, 1);
  MHC_EXPECT_CONTAINS(error_of([&] { run_stack_tp(w, 0, nullptr, {}, TpRunConfig{}); }),
                      "at least 1 token");
}

TEST(TpErrors, RankThatFailsToStartEndsTheGroupAtOnce) {
  MHC_SKIP_WITHOUT_GPUS(2);
  TpRunOptions o = test::ranks(2, 30s);
  o.faults.fail_before_init = 1;
  std::atomic<int> bodies{0};
  const auto start = Clock::now();
  const std::string msg = error_of([&] { run_ranks(o, [&](RankContext&) { ++bodies; }); });
  MHC_EXPECT_CONTAINS(msg, "rank 1: injected failure before the communicator was created");
  EXPECT_EQ(bodies, 0) << "no body may run once a rank failed to start";
  EXPECT_LT(seconds_since(start), 25.0) << "rank 0 must give up on cancellation, not the deadline";
}

TEST(TpErrors, RankThatNeverStartsTimesOutTheOthers) {
  MHC_SKIP_WITHOUT_GPUS(2);
  TpRunOptions o = test::ranks(2, 4s);
  o.faults.stall_before_init = 1;
  const auto start = Clock::now();
  const std::string msg = error_of([&] { run_ranks(o, [](RankContext&) {}); });
  MHC_EXPECT_CONTAINS(msg, "rank 0: communicator initialisation did not complete within 4.0 s");
  EXPECT_LT(seconds_since(start), 3 * 4.0 + 5);
}

TEST(TpErrors, CollectiveThatOneRankSkipsTimesOutAndAbortsEveryRank) {
  MHC_SKIP_WITHOUT_GPUS(2);
  const auto start = Clock::now();
  const std::string msg = error_of([&] {
    run_ranks(test::ranks(2, 4s), [](RankContext& ctx) {
      if (ctx.rank() == 1) return;  // never joins the all-reduce
      cuda::DeviceBuffer<Bf16> buf(1024);
      RankStream st;
      ctx.comm().all_reduce_sum_bf16(buf.get(), buf.size(), st.get());
      ctx.wait(st.get());
    });
  });
  MHC_EXPECT_CONTAINS(msg, "rank 0: GPU work did not finish within 4.0 s");
  EXPECT_LT(seconds_since(start), 3 * 4.0 + 5);
}

TEST(TpErrors, NcclErrorOnOneRankIsReportedAndEndsTheOthers) {
  MHC_SKIP_WITHOUT_GPUS(2);
  const auto start = Clock::now();
  const std::string msg = error_of([&] {
    run_ranks(test::ranks(2, 20s), [](RankContext& ctx) {
      cuda::DeviceBuffer<float> buf(256);
      RankStream st;
      // An invalid data type: NCCL refuses the call on rank 1; rank 0's all-reduce never completes.
      const auto type = ctx.rank() == 1 ? static_cast<ncclDataType_t>(1000) : ncclFloat32;
      ctx.comm().all_reduce(buf.get(), buf.get(), buf.size(), type, ncclSum, st.get());
      ctx.wait(st.get());
    });
  });
  MHC_EXPECT_CONTAINS(msg, "rank 1: NCCL");  // the call's error, or the communicator's
  EXPECT_LT(seconds_since(start), 15.0) << "rank 0 must give up on cancellation, not the deadline";
}

// DISABLED: segfaults on two H200s (2026-11-30), an open defect in the abort path; see
// docs/tensor_parallel.md, "What was verified". Re-enable with --gtest_also_run_disabled_tests.
TEST(TpErrors, DISABLED_ExceptionInOneRanksBodyEndsTheOthers) {
  MHC_SKIP_WITHOUT_GPUS(2);
  const auto start = Clock::now();
  const std::string msg = error_of([&] {
    run_ranks(test::ranks(2, 20s), [](RankContext& ctx) {
      if (ctx.rank() == 0) throw Error("boom");
      cuda::DeviceBuffer<Bf16> buf(64);
      RankStream st;
      ctx.comm().all_reduce_sum_bf16(buf.get(), buf.size(), st.get());
      ctx.wait(st.get());
    });
  });
  MHC_EXPECT_CONTAINS(msg, "rank 0: boom");
  EXPECT_LT(seconds_since(start), 15.0);
}

TEST(TpErrors, AGroupAfterAFailedOneRunsNormally) {
  MHC_SKIP_WITHOUT_GPUS(2);
  TpRunOptions bad = test::ranks(2, 10s);
  bad.faults.fail_before_init = 0;
  EXPECT_THROW(run_ranks(bad, [](RankContext&) {}), Error);
  std::atomic<int> bodies{0};
  EXPECT_NO_THROW(run_ranks(test::ranks(2), [&](RankContext&) { ++bodies; }));
  EXPECT_EQ(bodies, 2);
}

}  // namespace
}  // namespace mhc::dist
