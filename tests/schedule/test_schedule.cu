// The two-stream schedule on a toy stack whose every stage depends on the previous ones, so any
// missing edge shows up as a different result. Native and overlap must agree bitwise, eagerly and
// in CUDA graphs, also when either stream is delayed by a spin kernel.
#include <gtest/gtest.h>

#include <vector>

#include "cuda/gpu_test_util.hpp"
#include "mhc/cuda/check.hpp"
#include "mhc/schedule/two_stream.hpp"
#include "schedule/delay_observer.hpp"
#include "schedule/toy_stack.cuh"

namespace mhc::cuda {
namespace {

using test::bitwise_equal;
using test::DelayObserver;
using test::random_input;
using test::ToyStack;

class ScheduleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MHC_SKIP_WITHOUT_GPU();
    MHC_CUDA_CHECK(cudaStreamCreateWithFlags(&main_, cudaStreamNonBlocking));
  }
  void TearDown() override {
    if (main_) cudaStreamDestroy(main_);
  }
  cudaStream_t main_ = nullptr;
};

TEST_F(ScheduleTest, OverlapEqualsNativeEagerWithDelays) {
  ToyStack stack(8);
  StackSchedule schedule(8);
  const auto x0 = random_input(1);
  stack.reset(main_, x0);
  schedule.enqueue(main_, false, stack.launches());
  const auto native = stack.result(main_);
  for (DelayObserver d :
       {DelayObserver(0, 0), DelayObserver(2'000'000, 0), DelayObserver(0, 2'000'000)}) {
    stack.reset(main_, x0);
    schedule.enqueue(main_, true, stack.launches(), &d);
    EXPECT_TRUE(bitwise_equal(stack.result(main_), native))
        << "side delay " << d.side_cycles() << " main delay " << d.main_cycles();
  }
  EXPECT_EQ(schedule.overlapped_sites(), 3 * 8);
  EXPECT_EQ(schedule.native_sites(), 8);
}

TEST_F(ScheduleTest, OverlapEqualsNativeInGraphReplays) {
  ToyStack stack(6);
  StackSchedule schedule(6);
  const auto launches = stack.launches();
  CapturedGraph native(main_, [&](cudaStream_t st) { schedule.enqueue(st, false, launches); });
  DelayObserver side_delay(1'000'000, 0);
  CapturedGraph overlap(
      main_, [&](cudaStream_t st) { schedule.enqueue(st, true, launches, &side_delay); });
  for (unsigned replay = 0; replay < 5; ++replay) {
    const auto x0 = random_input(100 + replay);  // inputs change between replays
    stack.reset(main_, x0);
    native.replay(main_);
    const auto expect = stack.result(main_);
    stack.reset(main_, x0);
    overlap.replay(main_);
    EXPECT_TRUE(bitwise_equal(stack.result(main_), expect)) << "replay " << replay;
  }
}

// Programmatic edges of type `programmatic` in the graph.
size_t programmatic_edges(cudaGraph_t graph) {
  size_t count = 0;
  MHC_CUDA_CHECK(cudaGraphGetEdges(graph, nullptr, nullptr, nullptr, &count));
  std::vector<cudaGraphNode_t> from(count), to(count);
  std::vector<cudaGraphEdgeData> data(count);
  MHC_CUDA_CHECK(cudaGraphGetEdges(graph, from.data(), to.data(), data.data(), &count));
  size_t programmatic = 0;
  for (const cudaGraphEdgeData& e : data) {
    programmatic += e.type == cudaGraphDependencyTypeProgrammatic ? 1 : 0;
  }
  return programmatic;
}

size_t captured_programmatic_edges(cudaStream_t main, StackSchedule& schedule,
                                   const std::vector<SiteLaunches>& launches,
                                   StageObserver* observer) {
  cudaGraph_t graph = nullptr;
  MHC_CUDA_CHECK(cudaStreamBeginCapture(main, cudaStreamCaptureModeGlobal));
  schedule.enqueue(main, true, launches, observer);
  MHC_CUDA_CHECK(cudaStreamEndCapture(main, &graph));
  const size_t n = programmatic_edges(graph);
  MHC_CUDA_CHECK(cudaGraphDestroy(graph));
  return n;
}

// The programmatic fork: in a graph, each site after the first takes its coefficients' edge from
// the previous post as a programmatic one (the first site's fork has no kernel before it), none
// when the observer puts a kernel in front of the coefficients or the fork is off; and the
// overlap still gives the native bits over replays with fresh inputs.
TEST_F(ScheduleTest, ProgrammaticForkInGraphs) {
  ToyStack stack(6);
  const auto launches = stack.launches();
  StackSchedule programmatic(6, true), plain(6, false);
  DelayObserver side_delay(1'000'000, 0);
  EXPECT_EQ(captured_programmatic_edges(main_, programmatic, launches, nullptr), 5u);
  EXPECT_EQ(captured_programmatic_edges(main_, programmatic, launches, &side_delay), 0u);
  EXPECT_EQ(captured_programmatic_edges(main_, plain, launches, nullptr), 0u);

  CapturedGraph native(main_, [&](cudaStream_t st) { plain.enqueue(st, false, launches); });
  DelayObserver main_delay(0, 1'000'000);
  CapturedGraph overlap(main_, [&](cudaStream_t st) { programmatic.enqueue(st, true, launches); });
  CapturedGraph delayed(
      main_, [&](cudaStream_t st) { programmatic.enqueue(st, true, launches, &main_delay); });
  for (unsigned replay = 0; replay < 5; ++replay) {
    const auto x0 = random_input(200 + replay);
    stack.reset(main_, x0);
    native.replay(main_);
    const auto expect = stack.result(main_);
    for (const CapturedGraph* g : {&overlap, &delayed}) {
      stack.reset(main_, x0);
      g->replay(main_);
      EXPECT_TRUE(bitwise_equal(stack.result(main_), expect)) << "replay " << replay;
    }
  }
}

TEST_F(ScheduleTest, GlobalCaptureRejectsHostSync) {
  // The capture mode used for every forward must turn a host synchronisation into an error.
  EXPECT_THROW(
      CapturedGraph(main_, [](cudaStream_t st) { MHC_CUDA_CHECK(cudaStreamSynchronize(st)); }),
      Error);
  cudaGetLastError();  // clear the sticky-free capture error
}

}  // namespace
}  // namespace mhc::cuda
