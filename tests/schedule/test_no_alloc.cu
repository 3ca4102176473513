// No host allocation inside a forward pass. Global operator new is replaced in this test binary
// by one that counts its calls (alloc_counter.cpp), and the second forward of a given size (the
// first builds the executor's caches) must not call it at all.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "cuda/gpu_test_util.hpp"
#include "mhc/cpu/model.hpp"
#include "mhc/cuda/check.hpp"
#include "mhc/cuda/device_buffer.hpp"
#include "mhc/schedule/stack_executor.hpp"
#include "mhc/schedule/trace.hpp"
#include "mhc/schedule/two_stream.hpp"
#include "schedule/alloc_counter.hpp"
#include "schedule/delay_observer.hpp"
#include "schedule/stack_test_util.hpp"

namespace mhc::cuda {
namespace {

using ::mhc::test::allocations_in;
using test::WithStream;

// The counter must be live in this binary, or every zero below would prove nothing. The
// memory escapes through a volatile pointer so that the compiler may not elide the allocations.
TEST(AllocationCounter, SeesAllocations) {
  const void* volatile sink = nullptr;
  void* raw = nullptr;
  EXPECT_EQ(allocations_in([&] { raw = ::operator new(64); }), 1);
  sink = raw;
  ::operator delete(raw);
  std::vector<int> v;
  EXPECT_EQ(allocations_in([&] { v.resize(1000); }), 1);
  sink = v.data();
  std::string s;
  EXPECT_EQ(allocations_in([&] { s = std::string(100, 'x'); }), 1);
  sink = s.data();
  (void)sink;
}

__global__ void bump(float* v) { v[threadIdx.x] += 1.0f; }

// A toy site list whose every stage is one small kernel on its own slot of `v`.
std::vector<SiteLaunches> toy_launches(float* v, int sites) {
  std::vector<SiteLaunches> all(static_cast<size_t>(sites));
  for (auto& l : all) {
    l.input_path = [v](cudaStream_t st) { bump<<<1, 32, 0, st>>>(v); };
    l.coefficients = [v](cudaStream_t st) { bump<<<1, 32, 0, st>>>(v + 32); };
    l.sublayer = [v](cudaStream_t st) { bump<<<1, 32, 0, st>>>(v + 64); };
    l.post = [v](cudaStream_t st) { bump<<<1, 32, 0, st>>>(v + 96); };
  }
  return all;
}

MhcParams two_layers() {
  MhcParams p = preset("dsv41-flash");
  p.hidden = 4096;
  p.layers = 2;
  return p;
}

class NoAllocationGpu : public WithStream<> {};

// Both schedules, with the test delays and with a trace observer: enqueueing a prebuilt site list
// allocates nothing (the NVTX range names are made in the constructor).
TEST_F(NoAllocationGpu, ScheduleEnqueueAllocatesNothing) {
  const int sites = 4;
  StackSchedule schedule(sites);
  DeviceBuffer<float> v(128);
  v.fill_bytes(0);
  const auto launches = toy_launches(v.get(), sites);
  TraceRecorder recorder(sites, stream_, schedule.side_stream());
  test::DelayObserver delays(1000, 1000);
  for (bool overlap : {false, true}) {
    // The first enqueue loads the kernels; only later ones count.
    schedule.enqueue(stream_, overlap, launches, &delays);
    EXPECT_EQ(allocations_in([&] { schedule.enqueue(stream_, overlap, launches, &delays); }), 0)
        << "overlap " << overlap;
    recorder.start(stream_);
    schedule.enqueue(stream_, overlap, launches, &recorder);
    recorder.start(stream_);
    EXPECT_EQ(allocations_in([&] { schedule.enqueue(stream_, overlap, launches, &recorder); }), 0)
        << "overlap " << overlap << " with a trace observer";
  }
  MHC_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

// A FULL forward replays its graph; the policy's decision comes from the executor's cache, so its
// reason strings are not formatted per forward. Both schedules: 8 tokens overlap, one above the
// threshold does not.
TEST_F(NoAllocationGpu, FullForwardAllocatesNothing) {
  const MhcParams p = two_layers();
  const ModelWeights w = synthetic_model(p, 9);
  StackOptions opt;
  opt.max_tokens = kSm90OverlapMaxTokens + 1;
  StackExecutor ex(w, KernelConfig::parse(R"({"enable_mhc_overlap": true})"), opt);
  for (int64_t tokens : {int64_t(8), opt.max_tokens, int64_t(0)}) {
    if (tokens > 0) ex.prepare_full_graph(tokens, stream_);
    ex.forward(tokens, ExecMode::full, stream_);
    bool overlapped = false;
    EXPECT_EQ(allocations_in(
                  [&] { overlapped = ex.forward(tokens, ExecMode::full, stream_).overlapped; }),
              0)
        << tokens << " tokens, overlap " << overlapped;
  }
  MHC_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

// The native decode layouts in FULL graphs: folded (8 tokens) and unfolded (17), with the layer
// trace, whose copies follow the fold. Counting the folded sites allocates nothing either.
TEST_F(NoAllocationGpu, FullForwardInDecodeLayoutsAllocatesNothing) {
  const MhcParams p = two_layers();
  const ModelWeights w = synthetic_model(p, 9);
  StackOptions opt;
  opt.max_tokens = 17;
  opt.trace_layers = true;
  opt.native_decode_schedule = true;
  opt.fold_previous_post = true;
  StackExecutor ex(w, KernelConfig{}, opt);
  for (int64_t tokens : {8, 17}) {
    ex.prepare_full_graph(tokens, stream_);
    ex.forward(tokens, ExecMode::full, stream_);
    EXPECT_EQ(allocations_in([&] { ex.forward(tokens, ExecMode::full, stream_); }), 0)
        << tokens << " tokens, layout " << to_string(ex.layout(tokens, false));
  }
  MHC_CUDA_CHECK(cudaStreamSynchronize(stream_));
  EXPECT_EQ(ex.folded_sites(), 2 * p.sites());
}

// The eager and piecewise forwards, on the three single-stream layouts: the second forward of a
// size, or the first after prepare_launches(), allocates nothing. 8 and 13 tokens take the folded
// decode layout where native_decode_schedule and fold_previous_post are on, 17 the unfolded one.
// It holds because the kernel wrappers (src/cuda/kernels.cu) format their check messages only on
// failure.
TEST_F(NoAllocationGpu, SecondEagerForwardAllocatesNothing) {
  const MhcParams p = two_layers();
  const ModelWeights w = synthetic_model(p, 9);
  // (native_decode_schedule, fold_previous_post): fused_post; decode; folded_decode up to 16.
  const std::pair<bool, bool> layouts[] = {{false, false}, {true, false}, {true, true}};
  for (const auto& [decode, fold] : layouts) {
    StackOptions opt;
    opt.max_tokens = 17;
    opt.native_decode_schedule = decode;
    opt.fold_previous_post = fold;
    StackExecutor ex(w, KernelConfig{}, opt);
    for (int64_t tokens : {8, 17}) {
      for (ExecMode mode : {ExecMode::eager, ExecMode::piecewise}) {
        ex.forward(tokens, mode, stream_);
        EXPECT_EQ(allocations_in([&] { ex.forward(tokens, mode, stream_); }), 0)
            << to_string(mode) << ", " << tokens << " tokens, layout "
            << to_string(ex.layout(tokens, false));
      }
    }
    ex.prepare_launches(13, ExecMode::eager);
    EXPECT_EQ(allocations_in([&] { ex.forward(13, ExecMode::eager, stream_); }), 0)
        << "first forward after prepare_launches, layout " << to_string(ex.layout(13, false));
    MHC_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
}

// The fused boundary layout (kernel config fused_boundary, above the decode sizes; not yet run on
// a GPU): an eager forward after the first, and a FULL replay, allocate nothing (the launcher
// encodes its tensor maps on the stack and formats messages only on failure).
TEST_F(NoAllocationGpu, FusedBoundaryLayoutAllocatesNothing) {
  MHC_SKIP_WITHOUT_SM90A_KERNELS("the fused boundary");
  const MhcParams p = two_layers();
  const ModelWeights w = synthetic_model(p, 9);
  StackOptions opt;
  opt.max_tokens = 130;
  StackExecutor ex(w, KernelConfig::parse(R"({"fused_boundary": true})"), opt);
  ASSERT_STREQ(to_string(ex.layout(130, false)), "fused_boundary");
  ex.forward(130, ExecMode::eager, stream_);
  EXPECT_EQ(allocations_in([&] { ex.forward(130, ExecMode::eager, stream_); }), 0) << "eager";
  ex.prepare_full_graph(130, stream_);
  ex.forward(130, ExecMode::full, stream_);
  EXPECT_EQ(allocations_in([&] { ex.forward(130, ExecMode::full, stream_); }), 0) << "full";
  MHC_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

}  // namespace
}  // namespace mhc::cuda
