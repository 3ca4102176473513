// Tensor-parallel error paths: every one ends with one clear mhc::Error naming the failing rank,
// every rank exits, and nothing waits longer than about one timeout. The first two need no GPU
// (the checks come before any device or NCCL state); the others need two GPUs and skip otherwise.
#include <atomic>
#include <limits>
#include <thread>

#include "tp_test_util.hpp"

namespace mhc::dist {
namespace {

using namespace std::chrono_literals;
using test::error_of;
using test::seconds_since;
using Clock = std::chrono::steady_clock;

// The TP report's and tests' bitwise comparison: the same bits, and finite, so that two
// forwards that both left a result unwritten (the NaN poison of poison_results) never agree.
TEST(TpResults, BitwiseEqualNeedsTheSameFiniteBits) {
  StackResult a;
  a.x = {float_to_bf16(1.f), float_to_bf16(-2.f)};
  a.output = {float_to_bf16(0.5f)};
  a.pre = {0.25f, 0.75f};
  StackResult b = a;
  EXPECT_TRUE(bitwise_equal(a, b));
  b.pre[1] = 0.5f;
  EXPECT_FALSE(bitwise_equal(a, b));
  StackResult poisoned = a;
  poisoned.output[0] = Bf16{0xFFFF};
  EXPECT_FALSE(bitwise_equal(poisoned, poisoned)) << "NaN output";
  poisoned = a;
  poisoned.pre[0] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(bitwise_equal(poisoned, poisoned)) << "NaN pre";
  poisoned = a;
  poisoned.x[1] = float_to_bf16(std::numeric_limits<float>::infinity());
  EXPECT_FALSE(bitwise_equal(poisoned, poisoned)) << "inf x";
}

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
  const TpRunOptions o = test::ranks_with_missing_device(2, 1, 30s);
  std::atomic<int> bodies{0};
  const auto start = Clock::now();
  const std::string msg = error_of([&] { run_ranks(o, [&](RankContext&) { ++bodies; }); });
  MHC_EXPECT_CONTAINS(msg, "rank 1: CUDA error cudaErrorInvalidDevice");
  EXPECT_EQ(bodies, 0) << "no body may run once a rank failed to start";
  EXPECT_LT(seconds_since(start), 25.0) << "rank 0 must give up on cancellation, not the deadline";
}

// A rank that never joins: rank 0 of a group of two whose rank 1 is never created. Its
// initialisation must give up at the deadline, report, and throw.
TEST(TpErrors, RankThatNeverStartsTimesOutTheOthers) {
  MHC_SKIP_WITHOUT_GPUS(1);
  ncclUniqueId id{};
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  MHC_CUDA_CHECK(cudaSetDevice(0));
  std::string reported;
  RankHooks hooks{[] { return false; }, [&](const std::string& m) { reported = m; }, [] {}};
  const auto start = Clock::now();
  RankComm comm(id, 2, 0, 4s, std::move(hooks));
  const std::string msg = error_of([&] { comm.wait_ready("communicator initialisation"); });
  MHC_EXPECT_CONTAINS(msg, "rank 0: communicator initialisation did not complete within 4.0 s");
  MHC_EXPECT_CONTAINS(reported, "did not complete within 4.0 s");
  EXPECT_LT(seconds_since(start), 4.0 + 5);
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

// Rank 0 throws (at once, or after `delay`); rank 1 enters an all-reduce that rank 0 never joins,
// or finds the group failed before issuing it. The hazard: rank 1 giving up on an all-reduce that
// NCCL answered ncclInProgress and still launches on a thread of its own, and destroying the
// stream under it (docs/tensor_parallel.md, "The abort").
void exception_in_one_ranks_body(std::chrono::milliseconds timeout,
                                 std::chrono::milliseconds delay) {
  const auto start = Clock::now();
  const std::string msg = error_of([&] {
    run_ranks(test::ranks(2, timeout), [delay](RankContext& ctx) {
      if (ctx.rank() == 0) {
        std::this_thread::sleep_for(delay);
        throw Error("boom");
      }
      cuda::DeviceBuffer<Bf16> buf(64);
      RankStream st;
      ctx.comm().all_reduce_sum_bf16(buf.get(), buf.size(), st.get());
      ctx.wait(st.get());
    });
  });
  MHC_EXPECT_CONTAINS(msg, "tensor parallelism (TP=2) failed: rank 0: boom");
  EXPECT_LT(seconds_since(start), 0.75 * std::chrono::duration<double>(timeout).count())
      << "rank 1 must give up on cancellation, not the deadline";
}

TEST(TpErrors, ExceptionInOneRanksBodyEndsTheOthers) {
  MHC_SKIP_WITHOUT_GPUS(2);
  exception_in_one_ranks_body(20s, 0ms);
}

// The same once rank 1's all-reduce is certainly issued (pending in NCCL or running on the GPU).
TEST(TpErrors, ExceptionWhileThePeerIsInsideAnAllReduceEndsTheOthers) {
  MHC_SKIP_WITHOUT_GPUS(2);
  exception_in_one_ranks_body(20s, 300ms);
}

// Every kind of failed group, one after the other in one process (aborted communicators of
// earlier groups must leave nothing behind that a later group trips over), then a good group whose
// all-reduce gives the right sum on every rank.
TEST(TpErrors, SeveralFailedGroupsThenAGoodOne) {
  MHC_SKIP_WITHOUT_GPUS(2);
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(fmt::format("round {}", round));
    exception_in_one_ranks_body(20s, 0ms);
    exception_in_one_ranks_body(20s, 300ms);
    MHC_EXPECT_CONTAINS(
        error_of([&] {
          run_ranks(test::ranks(2, 20s), [](RankContext& ctx) {
            cuda::DeviceBuffer<float> buf(256);
            RankStream st;
            const auto type = ctx.rank() == 1 ? static_cast<ncclDataType_t>(1000) : ncclFloat32;
            ctx.comm().all_reduce(buf.get(), buf.get(), buf.size(), type, ncclSum, st.get());
            ctx.wait(st.get());
          });
        }),
        "rank 1: NCCL");
    const TpRunOptions o = test::ranks_with_missing_device(2, round % 2, 20s);
    MHC_EXPECT_CONTAINS(error_of([&] { run_ranks(o, [](RankContext&) {}); }),
                        fmt::format("rank {}: CUDA error cudaErrorInvalidDevice", round % 2));
  }
  // A collective one rank skips, aborted while the other's all-reduce kernel waits on the GPU.
  MHC_EXPECT_CONTAINS(error_of([&] {
                        run_ranks(test::ranks(2, 4s), [](RankContext& ctx) {
                          if (ctx.rank() == 1) return;
                          cuda::DeviceBuffer<Bf16> buf(1024);
                          RankStream st;
                          ctx.comm().all_reduce_sum_bf16(buf.get(), buf.size(), st.get());
                          ctx.wait(st.get());
                        });
                      }),
                      "rank 0: GPU work did not finish within 4.0 s");
  std::vector<float> sums(2, 0.0f);
  EXPECT_NO_THROW(run_ranks(test::ranks(2), [&](RankContext& ctx) {
    cuda::DeviceBuffer<float> buf(1000);
    std::vector<float> mine(buf.size(), float(ctx.rank() + 1));
    RankStream st;
    MHC_CUDA_CHECK(
        cudaMemcpyAsync(buf.get(), mine.data(), buf.bytes(), cudaMemcpyHostToDevice, st.get()));
    ctx.comm().all_reduce(buf.get(), buf.get(), buf.size(), ncclFloat32, ncclSum, st.get());
    ctx.wait(st.get());
    buf.download(mine.data(), mine.size());
    sums[size_t(ctx.rank())] = mine.back();
  }));
  EXPECT_EQ(sums[0], 3.0f);
  EXPECT_EQ(sums[1], 3.0f);
}

TEST(TpErrors, AGroupAfterAFailedOneRunsNormally) {
  MHC_SKIP_WITHOUT_GPUS(2);
  const TpRunOptions bad = test::ranks_with_missing_device(2, 0, 10s);
  EXPECT_THROW(run_ranks(bad, [](RankContext&) {}), Error);
  std::atomic<int> bodies{0};
  EXPECT_NO_THROW(run_ranks(test::ranks(2), [&](RankContext&) { ++bodies; }));
  EXPECT_EQ(bodies, 2);
}

}  // namespace
}  // namespace mhc::dist
