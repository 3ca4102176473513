// The tensor-parallel stack on two GPUs (skips without them): TP=2 equals TP=1 within the stack
// tolerances; on every rank the overlap schedule equals the native one bitwise, eagerly and in
// FULL-graph replays that contain the NCCL all-reduce (overlap on and off), with inputs changed
// between replays; every rank holds the same bits; the policy's all-reduce is NCCL on Hopper and
// never the fused one.
#include "tp_test_util.hpp"

namespace mhc::dist {
namespace {

struct Outcome {
  StackResult native, overlap, full;
  DispatchDecision decision;
  AllReduce sublayer_all_reduce = AllReduce::none;
  bool graph_replayed = false;
};

// Eager native and overlap, then the FULL graph the policy picks, on every rank of `world`.
std::vector<Outcome> run_world(int world, const ModelWeights& w, int64_t tokens, bool overlap) {
  std::vector<Outcome> out(static_cast<size_t>(world));
  run_ranks(test::ranks(world), [&](RankContext& ctx) {
    cuda::StackOptions opt;
    opt.max_tokens = tokens;
    TpStack stack(ctx, w, test::overlap_config(overlap), {}, opt);
    cuda::StackExecutor& ex = stack.executor();
    RankStream st;
    Outcome& o = out[size_t(ctx.rank())];
    test::load_inputs(ex, tokens, 5, st.get());
    o.native = eager_result(ctx, ex, tokens, false, st.get());
    o.overlap = eager_result(ctx, ex, tokens, true, st.get());
    prepare_tp_graph(ctx, ex, tokens, st.get());
    const cuda::ForwardInfo info = ex.forward(tokens, ExecMode::full, st.get());
    ctx.wait(st.get());
    o.full = download_result(ex, tokens);
    o.decision = info.decision;
    o.graph_replayed = info.graph_replayed;
    o.sublayer_all_reduce = stack.sublayer().all_reduce();
  });
  return out;
}

class TpStackTest : public ::testing::TestWithParam<int64_t> {
 protected:
  void SetUp() override { MHC_SKIP_WITHOUT_GPUS(2); }
};

TEST_P(TpStackTest, Tp2MatchesTp1WithinTheStackTolerances) {
  const int64_t tokens = GetParam();
  const MhcParams p = test::small_stack(1024, 2);
  const ModelWeights w = synthetic_model(p, 3);
  const std::vector<Outcome> tp1 = run_world(1, w, tokens, true);
  const std::vector<Outcome> tp2 = run_world(2, w, tokens, true);
  EXPECT_EQ(tp1[0].decision.all_reduce, AllReduce::none);
  for (const StackResult* r : {&tp2[0].native, &tp2[0].full}) {
    const ResultErrors e = compare_results(*r, tp1[0].full);
    EXPECT_TRUE(e.x.passes(stack_x_tolerance(p.layers))) << "x: " << e.x.describe();
    EXPECT_TRUE(e.output.passes(kStackOutputTolerance)) << "output: " << e.output.describe();
    EXPECT_TRUE(e.pre.passes(kStackPreTolerance)) << "pre: " << e.pre.describe();
    // Not bitwise: the partial sums are rounded to bf16 before the all-reduce adds them.
  }
  EXPECT_TRUE(bitwise_equal(tp2[0].full, tp2[1].full)) << "ranks disagree";
}

TEST_P(TpStackTest, OverlapBitwiseEqualsNativeOnEveryRankInFullGraphs) {
  const int64_t tokens = GetParam();
  const MhcParams p = test::small_stack(1024, 2);
  const ModelWeights w = synthetic_model(p, 4);
  for (bool overlap : {true, false}) {
    const std::vector<Outcome> out = run_world(2, w, tokens, overlap);
    for (size_t r = 0; r < out.size(); ++r) {
      const Outcome& o = out[r];
      EXPECT_EQ(o.decision.overlap, overlap) << "rank " << r << ": " << o.decision.describe();
      EXPECT_TRUE(o.graph_replayed);
      EXPECT_EQ(o.decision.all_reduce, AllReduce::nccl);
      EXPECT_EQ(o.sublayer_all_reduce, AllReduce::nccl);
      EXPECT_TRUE(bitwise_equal(o.native, o.overlap)) << "rank " << r << ": eager schedules differ";
      EXPECT_TRUE(bitwise_equal(o.native, o.full)) << "rank " << r << ": FULL graph differs";
      EXPECT_TRUE(bitwise_equal(o.full, out[0].full)) << "rank " << r << " differs from rank 0";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tokens, TpStackTest, ::testing::Values(1, 8, 16),
                         [](const auto& info) { return fmt::format("M{}", info.param); });

class TpGraphTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override { MHC_SKIP_WITHOUT_GPUS(2); }
};

// FULL graphs with the all-reduce inside, replayed with new inputs each time: every replay equals
// an eager native forward of the same inputs, and a replay of unchanged inputs repeats its bits.
TEST_P(TpGraphTest, ReplaysWithChangingInputsStayBitwiseEqualToEagerNative) {
  const bool overlap = GetParam();
  const int64_t tokens = 8;
  const MhcParams p = test::small_stack(1024, 2);
  const ModelWeights w = synthetic_model(p, 6);
  std::vector<int> mismatches(2, 0), unstable(2, 0);
  run_ranks(test::ranks(2), [&](RankContext& ctx) {
    cuda::StackOptions opt;
    opt.max_tokens = tokens;
    TpStack stack(ctx, w, test::overlap_config(overlap), {}, opt);
    cuda::StackExecutor& ex = stack.executor();
    RankStream st;
    test::load_inputs(ex, tokens, 1, st.get());
    prepare_tp_graph(ctx, ex, tokens, st.get());
    for (uint64_t replay = 0; replay < 6; ++replay) {
      test::load_inputs(ex, tokens, 100 + replay, st.get());
      const StackResult expect = eager_result(ctx, ex, tokens, false, st.get());
      const StackResult got = forward_result(ctx, ex, tokens, ExecMode::full, st.get());
      const StackResult again = forward_result(ctx, ex, tokens, ExecMode::full, st.get());
      mismatches[size_t(ctx.rank())] += !bitwise_equal(expect, got);
      unstable[size_t(ctx.rank())] += !bitwise_equal(got, again);
    }
  });
  EXPECT_EQ(mismatches, std::vector<int>(2, 0));
  EXPECT_EQ(unstable, std::vector<int>(2, 0));
}

INSTANTIATE_TEST_SUITE_P(Overlap, TpGraphTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "overlap" : "native"; });

// On Hopper the policy's all-reduce is NCCL for every mode and size, never the fused one.
TEST(TpPolicy, FusedAllReduceIsNeverChosenOnSm90) {
  MHC_SKIP_WITHOUT_GPUS(2);
  const MhcParams p = test::small_stack(1024, 1);
  const ModelWeights w = synthetic_model(p, 1);
  std::vector<int> sm90(2, 0), wrong(2, 0);
  run_ranks(test::ranks(2), [&](RankContext& ctx) {
    cudaDeviceProp prop{};
    MHC_CUDA_CHECK(cudaGetDeviceProperties(&prop, ctx.device()));
    sm90[size_t(ctx.rank())] = prop.major == 9 && prop.minor == 0;
    cuda::StackOptions opt;
    opt.max_tokens = 64;
    TpStack stack(ctx, w, test::overlap_config(true), {}, opt);
    for (ExecMode mode : {ExecMode::eager, ExecMode::piecewise, ExecMode::full})
      for (int64_t tokens : {0, 1, 16, 64})
        wrong[size_t(ctx.rank())] +=
            stack.executor().decide(tokens, mode).all_reduce != AllReduce::nccl;
  });
  EXPECT_EQ(wrong, std::vector<int>(2, 0));
  if (sm90 != std::vector<int>(2, 1)) GTEST_SKIP() << "checked the policy, but not on SM90 GPUs";
}

// `mhc run --tp 2`'s library entry: its report passes on a small stack.
TEST(TpRun, ReportPassesOnASmallStack) {
  MHC_SKIP_WITHOUT_GPUS(2);
  const MhcParams p = test::small_stack(1024, 2);
  const ModelWeights w = synthetic_model(p, 2);
  const auto x0 = synthetic_embeddings(p, 8, 3);
  TpRunConfig c;
  c.world = 2;
  c.timing_reps = 5;
  c.timeout = std::chrono::seconds(60);
  const TpRunReport r = run_stack_tp(w, 8, x0.data(), test::overlap_config(true), c);
  EXPECT_TRUE(r.passed()) << r.describe();
  ASSERT_EQ(r.ranks.size(), 2u);
  EXPECT_TRUE(r.ranks[0].overlapped);
  EXPECT_TRUE(r.ranks[0].graph_replayed);
}

}  // namespace
}  // namespace mhc::dist
