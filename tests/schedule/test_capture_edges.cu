// fork_from (mhc/schedule/capture_edges.hpp): the overlap's fork for callers that fork the side
// stream themselves (the Python ops). In a captured graph it must leave the side launch hanging
// off main's producers alone where the side stream's own earlier work was joined into them, and
// change nothing elsewhere; the graph must still order everything it did.
#include <gtest/gtest.h>

#include <array>
#include <string>

#include "cuda/gpu_test_util.hpp"
#include "mhc/core/params.hpp"
#include "mhc/cuda/check.hpp"
#include "mhc/cuda/device_buffer.hpp"
#include "mhc/cuda/kernels.hpp"
#include "mhc/schedule/capture_edges.hpp"

// Another library's kernel (outside namespace mhc): launched with PDL, it might finish before
// its own producers, so fork_from must not drop an edge on its word.
__global__ void foreign_add_one(const float* in, float* out) {
  if (threadIdx.x == 0) out[0] = in[0] + 1.0f;
}

namespace mhc::cuda::test {
namespace {

// Like the library's kernels: waits for its programmatic producers before it reads, and lets its
// own dependents start at once.
__global__ void add_one(const float* in, float* out) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;");
#endif
  if (threadIdx.x == 0) out[0] = in[0] + 1.0f;
}

using Kernel = void (*)(const float*, float*);

// A kernel launched with programmatic stream serialization, as the library launches its kernels.
void launch_pdl(cudaStream_t stream, const float* in, float* out, Kernel kernel = add_one) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(1);
  config.blockDim = dim3(32);
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attribute;
  config.numAttrs = 1;
  MHC_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, in, out));
}

// The edges into a node: how many, and how many of them programmatic.
struct InEdges {
  size_t total = 0, programmatic = 0;
};

InEdges in_edges(cudaGraphNode_t node) {
  InEdges e;
  MHC_CUDA_CHECK(cudaGraphNodeGetDependencies(node, nullptr, nullptr, &e.total));
  std::array<cudaGraphNode_t, 8> from{};
  std::array<cudaGraphEdgeData, 8> data{};
  EXPECT_LE(e.total, from.size());
  MHC_CUDA_CHECK(cudaGraphNodeGetDependencies(node, from.data(), data.data(), &e.total));
  for (size_t i = 0; i < e.total; ++i) {
    e.programmatic += data[i].type == cudaGraphDependencyTypeProgrammatic ? 1 : 0;
  }
  return e;
}

// The node captured last on `stream`.
cudaGraphNode_t last_node(cudaStream_t stream) {
  const CaptureDependencies d = capture_dependencies(stream);
  EXPECT_EQ(d.count, 1u);
  return d.nodes[0];
}

class CaptureEdgesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MHC_SKIP_WITHOUT_GPU();
    MHC_CUDA_CHECK(cudaStreamCreateWithFlags(&main_, cudaStreamNonBlocking));
    MHC_CUDA_CHECK(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking));
    for (cudaEvent_t* e : {&forked_, &joined_, &first_}) {
      MHC_CUDA_CHECK(cudaEventCreateWithFlags(e, cudaEventDisableTiming));
    }
    MHC_CUDA_CHECK(cudaMalloc(&buf_, 4 * sizeof(float)));
  }
  void TearDown() override {
    if (buf_) cudaFree(buf_);
    for (cudaEvent_t e : {forked_, joined_, first_}) {
      if (e) cudaEventDestroy(e);
    }
    if (side_) cudaStreamDestroy(side_);
    if (main_) cudaStreamDestroy(main_);
  }

  // The side stream waits for main, fork_from, then the side launch; returns its node.
  cudaGraphNode_t fork_and_launch(bool* forked) {
    MHC_CUDA_CHECK(cudaEventRecord(forked_, main_));
    MHC_CUDA_CHECK(cudaStreamWaitEvent(side_, forked_, 0));
    *forked = fork_from(main_, side_);
    launch_pdl(side_, buf_ + 1, buf_ + 2);  // buf[2] = buf[1] + 1
    return last_node(side_);
  }

  // Ends the capture (main joins the side stream first), runs the graph from buf = {0, ...} and
  // returns buf[2]: 3 when every launch ran in order.
  float finish(cudaGraph_t* graph) {
    MHC_CUDA_CHECK(cudaEventRecord(joined_, side_));
    MHC_CUDA_CHECK(cudaStreamWaitEvent(main_, joined_, 0));
    MHC_CUDA_CHECK(cudaStreamEndCapture(main_, graph));
    cudaGraphExec_t exec = nullptr;
    MHC_CUDA_CHECK(cudaGraphInstantiate(&exec, *graph, 0));
    MHC_CUDA_CHECK(cudaMemset(buf_, 0, 4 * sizeof(float)));
    MHC_CUDA_CHECK(cudaGraphLaunch(exec, main_));
    float out[4] = {};
    MHC_CUDA_CHECK(cudaMemcpyAsync(out, buf_, sizeof(out), cudaMemcpyDeviceToHost, main_));
    MHC_CUDA_CHECK(cudaStreamSynchronize(main_));
    MHC_CUDA_CHECK(cudaGraphExecDestroy(exec));
    return out[2];
  }

  // side: first launch (buf[3] = buf[0] + 1); [main joins it]; main: producer (buf[1] = buf[3]
  // + 1, or buf[0] + 1 without the join), then `extra` kernels (buf[1] += 1 each); fork; side
  // launch. Returns the side launch's in-edges.
  InEdges capture(bool join_before_producer, bool* forked, float* result, int extra = 0,
                  Kernel kernel = add_one) {
    cudaGraph_t graph = nullptr;
    MHC_CUDA_CHECK(cudaStreamBeginCapture(main_, cudaStreamCaptureModeGlobal));
    MHC_CUDA_CHECK(cudaEventRecord(first_, main_));
    MHC_CUDA_CHECK(cudaStreamWaitEvent(side_, first_, 0));
    launch_pdl(side_, buf_, buf_ + 3);
    if (join_before_producer) {
      MHC_CUDA_CHECK(cudaEventRecord(joined_, side_));
      MHC_CUDA_CHECK(cudaStreamWaitEvent(main_, joined_, 0));
    }
    launch_pdl(main_, join_before_producer ? buf_ + 3 : buf_, buf_ + 1);
    for (int i = 0; i < extra; ++i) launch_pdl(main_, buf_ + 1, buf_ + 1, kernel);
    const InEdges e = in_edges(fork_and_launch(forked));
    *result = finish(&graph);
    MHC_CUDA_CHECK(cudaGraphDestroy(graph));
    return e;
  }

  cudaStream_t main_ = nullptr, side_ = nullptr;
  cudaEvent_t forked_ = nullptr, joined_ = nullptr, first_ = nullptr;
  float* buf_ = nullptr;
};

TEST_F(CaptureEdgesTest, NothingOutsideCapture) {
  launch_pdl(main_, buf_, buf_ + 1);
  MHC_CUDA_CHECK(cudaEventRecord(forked_, main_));
  MHC_CUDA_CHECK(cudaStreamWaitEvent(side_, forked_, 0));
  EXPECT_FALSE(fork_from(main_, side_));
  MHC_CUDA_CHECK(cudaDeviceSynchronize());
}

// The case fork_from exists for: without it the side launch would take programmatic edges from
// both streams (the control below), with it one edge from main's producer.
TEST_F(CaptureEdgesTest, DropsTheSideStreamsJoinedEdge) {
  bool forked = false;
  float result = 0;
  const InEdges e = capture(/*join_before_producer=*/true, &forked, &result);
  EXPECT_TRUE(forked);
  EXPECT_EQ(e.total, 1u);
  EXPECT_EQ(e.programmatic, 1u);
  EXPECT_EQ(result, 3.0f);
}

TEST_F(CaptureEdgesTest, KeepsAnEdgeNotJoinedIntoMain) {
  bool forked = true;
  float result = 0;
  const InEdges e = capture(/*join_before_producer=*/false, &forked, &result);
  EXPECT_FALSE(forked);
  EXPECT_EQ(e.total, 2u);         // the side stream's own first launch and main's producer
  EXPECT_EQ(e.programmatic, 2u);  // both made programmatic by the launch itself
  EXPECT_EQ(result, 2.0f);
}

// A second kernel of the library between the join and the fork (the pre_overlap recipe: post,
// then the input path) is followed back; a third, or another library's, is not.
TEST_F(CaptureEdgesTest, FollowsOneMoreOfItsOwnKernelsBack) {
  struct Case {
    int extra;
    Kernel kernel;
    bool forked;
  };
  for (const Case c :
       {Case{1, add_one, true}, Case{2, add_one, false}, Case{1, foreign_add_one, false}}) {
    bool forked = !c.forked;
    float result = 0;
    const InEdges e = capture(/*join_before_producer=*/true, &forked, &result, c.extra, c.kernel);
    EXPECT_EQ(forked, c.forked) << c.extra << " extra";
    EXPECT_EQ(e.total, c.forked ? 1u : 2u) << c.extra << " extra";
    EXPECT_EQ(result, 3.0f + float(c.extra)) << c.extra << " extra";
  }
}

TEST_F(CaptureEdgesTest, FirstForkHasNothingToDrop) {
  cudaGraph_t graph = nullptr;
  MHC_CUDA_CHECK(cudaStreamBeginCapture(main_, cudaStreamCaptureModeGlobal));
  launch_pdl(main_, buf_, buf_ + 1);
  bool forked = true;
  const InEdges e = in_edges(fork_and_launch(&forked));
  EXPECT_FALSE(forked);
  EXPECT_EQ(e.total, 1u);
  EXPECT_EQ(finish(&graph), 2.0f);
  MHC_CUDA_CHECK(cudaGraphDestroy(graph));
}

// Behind the library's own post + next input launch (the Python recipe's post_pre: a thread block
// cluster per token at decode sizes, one CTA per token above), joined with the side stream.
TEST_F(CaptureEdgesTest, BehindThePostKernels) {
  MhcParams p;
  p.hidden = 512;
  p.n = 4;
  for (int64_t tokens : {1, 16, 100}) {
    DeviceBuffer<Bf16> x(tokens * p.n * p.hidden), x_next(tokens * p.n * p.hidden),
        f(tokens * p.hidden), layer_input(tokens * p.hidden);
    DeviceBuffer<float> post_coef(tokens * p.n), comb(tokens * p.n * p.n), pre_mix(tokens * p.n);
    MHC_CUDA_CHECK(cudaMemset(x.get(), 0, x.size() * sizeof(Bf16)));
    MHC_CUDA_CHECK(cudaMemset(f.get(), 0, f.size() * sizeof(Bf16)));
    MHC_CUDA_CHECK(cudaMemset(post_coef.get(), 0, post_coef.size() * sizeof(float)));
    MHC_CUDA_CHECK(cudaMemset(comb.get(), 0, comb.size() * sizeof(float)));
    MHC_CUDA_CHECK(cudaMemset(pre_mix.get(), 0, pre_mix.size() * sizeof(float)));
    const NextInput next{pre_mix.get(), nullptr, layer_input.get()};
    cudaGraph_t graph = nullptr;
    MHC_CUDA_CHECK(cudaStreamBeginCapture(main_, cudaStreamCaptureModeGlobal));
    MHC_CUDA_CHECK(cudaEventRecord(first_, main_));
    MHC_CUDA_CHECK(cudaStreamWaitEvent(side_, first_, 0));
    launch_pdl(side_, buf_, buf_ + 3);
    MHC_CUDA_CHECK(cudaEventRecord(joined_, side_));
    MHC_CUDA_CHECK(cudaStreamWaitEvent(main_, joined_, 0));
    cuda::post(p, tokens, x.get(), post_coef.get(), comb.get(), f.get(), x_next.get(), &next,
               ::mhc::test::tuning(p, tokens), main_);
    bool forked = false;
    const InEdges e = in_edges(fork_and_launch(&forked));
    EXPECT_TRUE(forked) << tokens << " tokens";
    EXPECT_EQ(e.total, 1u) << tokens << " tokens";
    EXPECT_EQ(finish(&graph), 1.0f) << tokens << " tokens";  // buf[2] = buf[1] (0) + 1
    MHC_CUDA_CHECK(cudaGraphDestroy(graph));
  }
}

}  // namespace
}  // namespace mhc::cuda::test
