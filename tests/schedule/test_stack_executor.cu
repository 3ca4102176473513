// The stack executor on real mHC kernels: overlap and native bitwise equal (eager and in FULL
// graph replays, with changing inputs and delayed streams), the policy's choice per mode proven
// by counters, and the whole 40-layer stack against the float64 reference.
#include <gtest/gtest.h>

#include <cstring>
#include <utility>
#include <vector>

#include "cuda/gpu_test_util.hpp"
#include "mhc/core/kernel_plan.hpp"
#include "mhc/cpu/compare.hpp"
#include "mhc/cpu/model.hpp"
#include "mhc/cuda/check.hpp"
#include "mhc/schedule/stack_executor.hpp"
#include "schedule/delay_observer.hpp"
#include "schedule/stack_test_util.hpp"

namespace mhc::cuda {
namespace {

using test::DelayObserver;
using test::expect_within_stack_bounds;
using test::load_inputs;
using test::overlap_everywhere;
using test::results;
using test::results_of;
using test::small_stack;
using test::WithStream;

struct Case {
  int hidden, n;
  int64_t tokens;
  bool carried;  // entry with a carried pre_mix instead of the one-hot first site
};

class StackExecutorTest : public WithStream<::testing::TestWithParam<Case>> {};

TEST_P(StackExecutorTest, OverlapBitwiseEqualsNativeEagerAndInGraphs) {
  const Case c = GetParam();
  const MhcParams p = small_stack(c.hidden, c.n, 3);
  const ModelWeights w = synthetic_model(p, 7);
  StackOptions opt;
  opt.max_tokens = std::max<int64_t>(c.tokens, 1);
  StackExecutor ex(w, overlap_everywhere(), opt);
  if (c.tokens == 0) {
    const ForwardInfo info = ex.forward(0, ExecMode::full, stream_);
    EXPECT_FALSE(info.overlapped);
    EXPECT_EQ(info.decision.reason_code, "zero_tokens");
    return;
  }
  // Eager: both schedules, forced.
  load_inputs(ex, c.tokens, 11, c.carried, stream_);
  const auto native =
      results_of(ex, c.tokens, stream_, [&] { ex.enqueue_schedule(c.tokens, false, stream_); });
  EXPECT_EQ(
      results_of(ex, c.tokens, stream_, [&] { ex.enqueue_schedule(c.tokens, true, stream_); }),
      native)
      << "eager overlap differs from native";

  // FULL graph: the policy picks the overlap; replays with inputs changed between them.
  ex.prepare_full_graph(c.tokens, stream_);
  for (uint64_t replay = 0; replay < 5; ++replay) {
    load_inputs(ex, c.tokens, 100 + replay, c.carried, stream_);
    const auto expect =
        results_of(ex, c.tokens, stream_, [&] { ex.enqueue_schedule(c.tokens, false, stream_); });
    ex.poison_results(stream_);
    const ForwardInfo info = ex.forward(c.tokens, ExecMode::full, stream_);
    ASSERT_TRUE(info.overlapped && info.graph_replayed) << info.decision.describe();
    const auto replayed = results(ex, c.tokens, stream_);
    EXPECT_EQ(replayed, expect) << "replay " << replay;
  }
}

std::vector<Case> matrix() {
  std::vector<Case> cases;
  for (int hidden : {4096, 5120, 7168})
    for (int n : ::mhc::test::built_streams())
      for (int64_t tokens : {0, 1, 8, 9, 16, 17, 32, 128, 256})
        for (bool carried : {false, true}) cases.push_back({hidden, n, tokens, carried});
  return cases;
}

std::string name_of(const Case& c) {
  return "C" + std::to_string(c.hidden) + "_n" + std::to_string(c.n) + "_M" +
         std::to_string(c.tokens) + (c.carried ? "_carried" : "_onehot");
}
void PrintTo(const Case& c, std::ostream* os) { *os << name_of(c); }

INSTANTIATE_TEST_SUITE_P(Matrix, StackExecutorTest, ::testing::ValuesIn(matrix()),
                         [](const auto& info) { return name_of(info.param); });

class StackStressTest : public StackExecutorTest {};

// Delaying either stream must not change a bit: any missing edge lets the post read stale
// coefficients or the side stream read overwritten streams. Eagerly, and in a CUDA graph of the
// delayed schedule (captured here: the executor's own graphs carry no test delays).
TEST_F(StackStressTest, DelayedStreamsStayBitwiseEqual) {
  const MhcParams p = small_stack(5120, 4, 4);
  const ModelWeights w = synthetic_model(p, 3);
  for (DelayObserver d : {DelayObserver(2'000'000, 0), DelayObserver(0, 2'000'000)}) {
    StackOptions opt;
    opt.max_tokens = 8;
    StackExecutor ex(w, overlap_everywhere(), opt);
    load_inputs(ex, 8, 5, true, stream_);
    const auto native = results_of(ex, 8, stream_, [&] { ex.enqueue_schedule(8, false, stream_); });
    EXPECT_EQ(results_of(ex, 8, stream_, [&] { ex.enqueue_schedule(8, true, stream_, &d); }),
              native)
        << "eager, side " << d.side_cycles();
    const CapturedGraph graph(stream_,
                              [&](cudaStream_t st) { ex.enqueue_schedule(8, true, st, &d); });
    for (int replay = 0; replay < 5; ++replay) {
      EXPECT_EQ(results_of(ex, 8, stream_, [&] { graph.replay(stream_); }), native)
          << "replay " << replay << ", side " << d.side_cycles();
    }
  }
}

// The comparisons above can fail: results poisoned and not written by a forward are NaN, differ
// from a forward's and are flagged as not finite (results() fails a test on them).
TEST_F(StackStressTest, PoisonedResultsAreNotAForwardsResults) {
  const MhcParams p = small_stack(4096, 4, 2);
  StackOptions opt;
  opt.max_tokens = 9;
  StackExecutor ex(synthetic_model(p, 5), overlap_everywhere(), opt);
  load_inputs(ex, 9, 6, false, stream_);
  const auto native = results_of(ex, 9, stream_, [&] { ex.enqueue_schedule(9, false, stream_); });
  ex.poison_results(stream_);
  const auto unwritten = test::raw_results(ex, 9, stream_);
  EXPECT_NE(unwritten, native);
  EXPECT_EQ(test::not_finite(unwritten, p, 9), size_t(9 * (p.k() + p.hidden + p.n)));
  ex.enqueue_schedule(9, true, stream_);
  EXPECT_EQ(test::raw_results(ex, 9, stream_), native) << "the overlap writes every result";
}

// Eager, piecewise and large forwards never take the overlap path; the counters prove it.
TEST_F(StackStressTest, PolicyKeepsEagerPiecewiseAndLargeBatchesNative) {
  const MhcParams p = small_stack(4096, 4, 2);
  const ModelWeights w = synthetic_model(p, 9);
  StackOptions opt;
  const int64_t large = kSm90OverlapMaxTokens + 1;  // above every architecture's default
  opt.max_tokens = large;
  StackExecutor ex(w, KernelConfig::parse(R"({"enable_mhc_overlap": true})"), opt);
  load_inputs(ex, large, 1, false, stream_);
  EXPECT_FALSE(ex.forward(8, ExecMode::eager, stream_).overlapped);
  EXPECT_FALSE(ex.forward(8, ExecMode::piecewise, stream_).overlapped);
  ex.prepare_full_graph(large, stream_);
  EXPECT_FALSE(ex.forward(large, ExecMode::full, stream_).overlapped);
  MHC_CUDA_CHECK(cudaStreamSynchronize(stream_));
  EXPECT_EQ(ex.overlapped_sites(), 0);
  EXPECT_EQ(ex.native_sites(), 3 * p.sites());
  ex.prepare_full_graph(8, stream_);
  EXPECT_TRUE(ex.forward(8, ExecMode::full, stream_).overlapped);
  EXPECT_EQ(ex.overlapped_sites(), p.sites());
}

// The fastest single-stream layouts (input path inside the coefficient launch at decode sizes,
// up to 16 tokens with each post folded into the next launch) compute the same stack: within the
// stack bounds of the float64 reference at every layer.
TEST_F(StackStressTest, NativeDecodeScheduleMatchesFloat64Reference) {
  MhcParams p = preset("dsv41-flash");
  p.layers = 8;
  const std::pair<int64_t, StackLayout> sizes[] = {{1, StackLayout::folded_decode},
                                                   {13, StackLayout::folded_decode},
                                                   {64, StackLayout::decode},
                                                   {65, StackLayout::fused_post}};
  for (const auto& [tokens, layout] : sizes) {
    const ModelWeights w = synthetic_model(p, 12);
    StackOptions opt;
    opt.max_tokens = tokens;
    opt.trace_layers = true;
    opt.native_decode_schedule = true;
    opt.fold_previous_post = true;  // off by default (docs/overlap.md)
    StackExecutor ex(w, KernelConfig::parse(R"({"enable_mhc_overlap": false})"), opt);
    EXPECT_STREQ(to_string(ex.layout(tokens, false)), to_string(layout)) << tokens << " tokens";
    const auto x0 = synthetic_embeddings(p, tokens, 13);
    MHC_CUDA_CHECK(cudaMemcpy(ex.x_in(), x0.data(), x0.size() * 2, cudaMemcpyHostToDevice));
    MHC_CUDA_CHECK(cudaDeviceSynchronize());  // pageable copies land asynchronously
    ex.prepare_full_graph(tokens, stream_);
    ex.poison_results(stream_);  // the bounds below see this forward's results alone
    ASSERT_FALSE(ex.forward(tokens, ExecMode::full, stream_).overlapped);
    MHC_CUDA_CHECK(cudaStreamSynchronize(stream_));
    expect_within_stack_bounds(ex, w, tokens, x0);
  }
}

// The fused boundary layout (kernel config fused_boundary): above the decode
// sizes each site after the first is one launch besides its sublayer. Within the stack bounds of
// the float64 reference at every layer, and a FULL-graph replay gives the eager forward's bits.
TEST_F(StackStressTest, FusedBoundaryLayoutMatchesFloat64Reference) {
  MHC_SKIP_WITHOUT_SM90A_KERNELS("the fused boundary");
  MhcParams p = preset("dsv41-flash");
  p.layers = 4;
  const ModelWeights w = synthetic_model(p, 14);
  for (int64_t tokens : {65, 300}) {
    StackOptions opt;
    opt.max_tokens = tokens;
    opt.trace_layers = true;
    StackExecutor ex(
        w, KernelConfig::parse(R"({"enable_mhc_overlap": false, "fused_boundary": true})"), opt);
    ASSERT_STREQ(to_string(ex.layout(tokens, false)), "fused_boundary") << tokens << " tokens";
    EXPECT_STREQ(to_string(ex.layout(16, false)), "fused_post") << "decode sizes keep theirs";
    const auto x0 = synthetic_embeddings(p, tokens, 15);
    MHC_CUDA_CHECK(cudaMemcpy(ex.x_in(), x0.data(), x0.size() * 2, cudaMemcpyHostToDevice));
    MHC_CUDA_CHECK(cudaDeviceSynchronize());  // pageable copies land asynchronously
    const std::vector<uint16_t> eager =
        results_of(ex, tokens, stream_, [&] { ex.forward(tokens, ExecMode::eager, stream_); });
    expect_within_stack_bounds(ex, w, tokens, x0);
    ex.prepare_full_graph(tokens, stream_);
    bool overlapped = true;
    const auto replayed = results_of(ex, tokens, stream_, [&] {
      overlapped = ex.forward(tokens, ExecMode::full, stream_).overlapped;
    });
    ASSERT_FALSE(overlapped);
    EXPECT_EQ(replayed, eager) << tokens << " tokens: graph vs eager";
  }
}

// The built-in plan's fused boundary: the native schedule takes it exactly where the sm90 rule
// holds (n = 4 from the rule's token count at C >= 4096, fewer at wider C) and never at sizes the
// overlap threshold covers (the overlap's launches are the unfused ones); at that token count
// DeepSeek-V4-Pro- and V4.1-Flash-sized stacks within the float64 reference's bounds.
TEST_F(StackStressTest, PlanFusesTheBoundaryWhereItWins) {
  MHC_SKIP_WITHOUT_SM90A_KERNELS("the fused boundary");
  const int64_t tokens = sm90_rules().fused_boundary_min_tokens;
  ASSERT_GT(tokens, 64) << "above the decode sizes, where the input path rides elsewhere";
  StackOptions opt;
  opt.max_tokens = 4097;
  opt.trace_layers = true;
  const auto layout = [&](int hidden, int n, const char* config, int64_t m) {
    MhcParams p = small_stack(hidden, n, 2);
    StackExecutor ex(synthetic_model(p, 4), KernelConfig::parse(config), opt);
    return std::string(to_string(ex.layout(m, false)));
  };
  const char* plain = R"({"enable_mhc_overlap": false})";
  const ArchRules rules = sm90_rules();
  for (int hidden : {4096, 5120, 7168}) {
    int64_t from = 1;  // the rule's first fused size at this C
    while (!boundary_rule_holds(rules.fused_boundary_min_tokens, rules.fused_boundary_min_hidden,
                                rules.fused_boundary_streams, rules.fused_boundary_wide, hidden, 4,
                                from)) {
      ASSERT_LT(++from, tokens + 1) << hidden;
    }
    ASSERT_GT(from, 64) << hidden;
    EXPECT_EQ(layout(hidden, 4, plain, from - 1), "fused_post") << hidden;
    EXPECT_EQ(layout(hidden, 4, plain, from), "fused_boundary") << hidden;
    EXPECT_EQ(layout(hidden, 4, plain, 4097), "fused_boundary") << hidden;
  }
  EXPECT_EQ(layout(4032, 4, plain, 4097), "fused_post") << "below the measured hidden sizes";
  EXPECT_EQ(layout(7168, 2, plain, tokens), "fused_post");
  EXPECT_EQ(layout(7168, 4, R"({"enable_mhc_overlap": true, "overlap_max_tokens": 2048})", tokens),
            "fused_post");

  for (const char* name : {"dsv4-pro", "dsv41-flash"}) {  // C = 7168 and 5120
    SCOPED_TRACE(name);
    MhcParams p = preset(name);
    p.layers = 2;
    const ModelWeights w = synthetic_model(p, 16);
    StackOptions one_size = opt;
    one_size.max_tokens = tokens;
    StackExecutor ex(w, KernelConfig::parse(plain), one_size);
    ASSERT_STREQ(to_string(ex.layout(tokens, false)), "fused_boundary");
    const auto x0 = synthetic_embeddings(p, tokens, 17);
    MHC_CUDA_CHECK(cudaMemcpy(ex.x_in(), x0.data(), x0.size() * 2, cudaMemcpyHostToDevice));
    MHC_CUDA_CHECK(cudaDeviceSynchronize());  // pageable copies land asynchronously
    ex.forward(tokens, ExecMode::eager, stream_);
    expect_within_stack_bounds(ex, w, tokens, x0);
  }
}

// The 80-site DeepSeek-V4.1-Flash stack, FULL graph with overlap, against float64 per layer.
TEST_F(StackStressTest, FortyLayerStackMatchesFloat64Reference) {
  const MhcParams p = preset("dsv41-flash");
  const int64_t tokens = 4;
  const ModelWeights w = synthetic_model(p, 1);
  StackOptions opt;
  opt.max_tokens = tokens;
  opt.trace_layers = true;
  StackExecutor ex(w, KernelConfig::parse(R"({"enable_mhc_overlap": true})"), opt);
  const auto x0 = synthetic_embeddings(p, tokens, 2);
  MHC_CUDA_CHECK(cudaMemcpy(ex.x_in(), x0.data(), x0.size() * 2, cudaMemcpyHostToDevice));
  MHC_CUDA_CHECK(cudaDeviceSynchronize());  // pageable copies land asynchronously
  ex.prepare_full_graph(tokens, stream_);
  ex.poison_results(stream_);  // the bounds below see this forward's results alone
  ASSERT_TRUE(ex.forward(tokens, ExecMode::full, stream_).overlapped);
  MHC_CUDA_CHECK(cudaStreamSynchronize(stream_));
  expect_within_stack_bounds(ex, w, tokens, x0);
}

}  // namespace
}  // namespace mhc::cuda
