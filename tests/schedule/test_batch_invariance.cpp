// Batch-invariant mode through the stack executor: a token's final streams, output and last pre
// after a whole stack are bitwise those it gets alone, at every size that crosses a tile, kernel
// or split threshold, on the native and the overlap schedule, eagerly and in FULL graph replays,
// run to run; and the stack stays within the float64 reference's bounds. Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <vector>

#include "cuda/gpu_test_util.hpp"
#include "mhc/cpu/model.hpp"
#include "mhc/cuda/check.hpp"
#include "mhc/schedule/stack_executor.hpp"
#include "schedule/stack_test_util.hpp"

namespace mhc::cuda {
namespace {

using test::WithStream;

const int64_t kSizes[] = {1,   2,   7,   8,   9,   15,   16,   17,   31,   33,   63,   64,  65,
                          127, 129, 255, 256, 257, 1000, 1535, 1536, 1537, 2048, 4097, 8192};
constexpr int64_t kMaxTokens = 8192;
// The tokens compared with their runs alone: both ends of every tile and threshold.
const int64_t kProbes[] = {0,   1,   2,    6,    7,    8,    9,    14,   15,  16,  17,
                           30,  31,  32,   62,   63,   64,   126,  127,  128, 254, 255,
                           256, 999, 1534, 1535, 1536, 2047, 4095, 4096, 8191};

// One token's results after the stack: x_final, output and last pre, as raw bytes.
using TokenBits = std::vector<uint8_t>;

TokenBits token_bits(const StackExecutor& ex, int64_t t, cudaStream_t st) {
  const MhcParams& p = ex.params();
  const size_t xs = size_t(p.k()) * 2, os = size_t(p.hidden) * 2, ps = size_t(p.n) * 4;
  TokenBits bits(xs + os + ps);
  MHC_CUDA_CHECK(cudaStreamSynchronize(st));
  MHC_CUDA_CHECK(cudaMemcpy(bits.data(), ex.x_final() + t * p.k(), xs, cudaMemcpyDeviceToHost));
  MHC_CUDA_CHECK(
      cudaMemcpy(bits.data() + xs, ex.output() + t * p.hidden, os, cudaMemcpyDeviceToHost));
  MHC_CUDA_CHECK(
      cudaMemcpy(bits.data() + xs + os, ex.last_pre() + t * p.n, ps, cudaMemcpyDeviceToHost));
  // Not finite: the poison of a result the forward did not write (load() poisons them).
  size_t not_finite = 0;
  for (size_t i = 0; i < xs + os; i += 2) {
    uint16_t b;
    std::memcpy(&b, bits.data() + i, 2);
    not_finite += (b & 0x7f80u) == 0x7f80u;
  }
  for (size_t i = xs + os; i < bits.size(); i += 4) {
    float v;
    std::memcpy(&v, bits.data() + i, 4);
    not_finite += !std::isfinite(v);
  }
  EXPECT_EQ(not_finite, 0u) << "token " << t << ": results not finite (not written?)";
  return bits;
}

class StackBatchInvariance : public WithStream<> {
 protected:
  // A 2-layer (4-site) stack; x for kMaxTokens tokens kept on the device.
  void SetUp() override {
    WithStream<>::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    p_ = test::small_stack(4096, 4, 2);
    weights_ = synthetic_model(p_, 21);
    const std::vector<Bf16> x = synthetic_embeddings(p_, 1, 22);  // one token, tiled below
    std::vector<Bf16> all(size_t(kMaxTokens * p_.k()));
    for (size_t i = 0; i < all.size(); ++i) {
      // Token t: the embedding rotated by t and scaled per token, so no two tokens are alike.
      const size_t t = i / size_t(p_.k()), e = i % size_t(p_.k());
      const float v = bf16_to_float(x[(e + t * 7) % x.size()]) * (1.f + float(t % 97) / 64.f);
      all[i] = float_to_bf16(v);
    }
    x_all_ = mhc::test::to_device(all);
  }

  StackExecutor make(bool overlap) const {
    StackOptions opt;
    opt.max_tokens = kMaxTokens;
    return StackExecutor(weights_,
                         KernelConfig::parse(overlap ? R"({"batch_invariant": true,
                                                "enable_mhc_overlap": true,
                                                "overlap_max_tokens": 8192})"
                                                     : R"({"batch_invariant": true,
                                                "enable_mhc_overlap": false})"),
                         opt);
  }

  // x_in := the first `tokens` tokens, or token `first` alone; the results poisoned, so that a
  // forward that writes nothing cannot keep an earlier run's bits.
  void load(StackExecutor& ex, int64_t tokens, int64_t first = 0) {
    ex.poison_results(stream_);
    const size_t row = size_t(p_.k()) * 2;
    MHC_CUDA_CHECK(cudaMemcpyAsync(ex.x_in(), x_all_.get() + first * p_.k(), row * size_t(tokens),
                                   cudaMemcpyDeviceToDevice, stream_));
  }

  // Every probe token run alone, eagerly on the native schedule.
  std::map<int64_t, TokenBits> alone(StackExecutor& ex) {
    std::map<int64_t, TokenBits> out;
    for (int64_t t : kProbes) {
      load(ex, 1, t);
      ex.enqueue_schedule(1, false, stream_);
      out[t] = token_bits(ex, 0, stream_);
    }
    return out;
  }

  // The probes below `tokens` in the last forward against their runs alone.
  void expect_probes_alone(const StackExecutor& ex, int64_t tokens,
                           const std::map<int64_t, TokenBits>& solo, const char* how) {
    for (int64_t t : kProbes) {
      if (t >= tokens) break;
      EXPECT_TRUE(token_bits(ex, t, stream_) == solo.at(t))
          << how << ", M=" << tokens << ": token " << t << " differs from its run alone";
    }
  }

  MhcParams p_;
  ModelWeights weights_;
  DeviceBuffer<Bf16> x_all_;
};

TEST_F(StackBatchInvariance, EagerNativeAndOverlapEqualAlone) {
  StackExecutor ex = make(true);
  const auto solo = alone(ex);
  for (int64_t m : kSizes) {
    load(ex, m);
    ex.enqueue_schedule(m, false, stream_);
    expect_probes_alone(ex, m, solo, "eager native");
    ex.poison_results(stream_);
    ex.enqueue_schedule(m, true, stream_);
    expect_probes_alone(ex, m, solo, "eager overlap");
  }
  load(ex, kMaxTokens);
  ex.enqueue_schedule(kMaxTokens, false, stream_);
  expect_probes_alone(ex, kMaxTokens, solo, "eager native, run again");
}

TEST_F(StackBatchInvariance, FullGraphReplayNativeAndOverlapEqualAlone) {
  for (bool overlap : {false, true}) {
    StackExecutor ex = make(overlap);
    const auto solo = alone(ex);
    for (int64_t m : kSizes) {
      load(ex, m);
      ex.prepare_full_graph(m, stream_);
      for (int replay = 0; replay < 2; ++replay) {
        ex.poison_results(stream_);
        const ForwardInfo info = ex.forward(m, ExecMode::full, stream_);
        ASSERT_TRUE(info.graph_replayed);
        ASSERT_EQ(info.overlapped, overlap) << info.decision.describe();
        expect_probes_alone(ex, m, solo, overlap ? "FULL overlap" : "FULL native");
      }
    }
  }
}

// The native decode layout (the input path inside the coefficient launch) is taken in this mode
// up to the plan's fused_input_max_tokens: its input-path CTAs give the bits of the separate
// launch, so a token alone (fused) equals itself in a batch above the limit (separate). The
// folded post is never taken (it needs the 16-row kernel's order).
TEST_F(StackBatchInvariance, NativeDecodeLayoutEqualsAloneEagerAndInFullGraphs) {
  StackOptions opt;
  opt.max_tokens = kMaxTokens;
  opt.native_decode_schedule = true;
  opt.fold_previous_post = true;
  StackExecutor ex(weights_, KernelConfig::parse(R"({"batch_invariant": true})"), opt);
  ASSERT_EQ(ex.layout(1, false), StackLayout::decode);
  ASSERT_EQ(ex.layout(16, false), StackLayout::decode);
  ASSERT_EQ(ex.layout(ex.plan().fused_input_max_tokens + 1, false), StackLayout::fused_post);
  const auto solo = alone(ex);
  for (int64_t m : kSizes) {
    load(ex, m);
    ex.enqueue_schedule(m, false, stream_);
    expect_probes_alone(ex, m, solo, "eager native decode layout");
    ex.prepare_full_graph(m, stream_);
    ex.poison_results(stream_);
    const ForwardInfo info = ex.forward(m, ExecMode::full, stream_);
    ASSERT_TRUE(info.graph_replayed);
    expect_probes_alone(ex, m, solo, "FULL native decode layout");
  }
}

TEST_F(StackBatchInvariance, WithinFloat64StackBounds) {
  for (int64_t m : {int64_t{9}, int64_t{257}}) {
    StackOptions opt;
    opt.max_tokens = m;
    opt.trace_layers = true;
    StackExecutor ex(weights_, KernelConfig::parse(R"({"batch_invariant": true})"), opt);
    const auto x0 = synthetic_embeddings(p_, m, 23);
    MHC_CUDA_CHECK(cudaMemcpy(ex.x_in(), x0.data(), x0.size() * 2, cudaMemcpyHostToDevice));
    MHC_CUDA_CHECK(cudaDeviceSynchronize());  // pageable copies land asynchronously
    ex.enqueue_schedule(m, false, stream_);
    MHC_CUDA_CHECK(cudaStreamSynchronize(stream_));
    test::expect_within_stack_bounds(ex, weights_, m, x0);
  }
}

}  // namespace
}  // namespace mhc::cuda
