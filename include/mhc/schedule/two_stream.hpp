// The two-stream schedule of an mHC stack (design doc, "Why the overlap exists").
//
//   native:  main: [input path] [coefficients] [sublayer (+all-reduce)] [post]
//   overlap: main: [input path] --eX--> [sublayer (+all-reduce)] --wait(eCoef)--> [post]
//            side:        wait(eX) -> [coefficients] -> record(eCoef)
//
// eX is recorded on the main stream after whatever produced x (the previous post), before the
// input path, so the side stream starts as early as possible. The main stream waits for eCoef
// before the post, which both delivers the coefficients and guarantees the side stream finished
// reading x before anything later on the main stream may overwrite it. Both edges are ordinary
// event record/wait pairs, which CUDA-graph capture turns into graph edges.
//
// The side stream, every event and every NVTX range name are created once, in the constructor,
// never per forward, so they exist before any capture begins and enqueue() allocates nothing on
// the host.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace mhc::cuda {

// What one site enqueues. Each callable enqueues work on the stream it is given; none may
// allocate or synchronise with the host. Building these (std::function) allocates, so callers
// build a site list once and enqueue it many times (StackExecutor caches them per token count).
struct SiteLaunches {
  std::function<void(cudaStream_t)> input_path;    // x, pre_mix -> layer_input
  std::function<void(cudaStream_t)> coefficients;  // x -> pre, post, comb
  std::function<void(cudaStream_t)> sublayer;      // layer_input -> F (and its all-reduce)
  std::function<void(cudaStream_t)> post;          // x, post, comb, F -> x_next
};

enum class Stage { input_path, coefficients, sublayer, post };
const char* stage_name(Stage s);

// Sees every stage as it is enqueued (e.g. to record timing events around it for a trace, or, in
// the tests, to delay one stream and shake the ordering).
class StageObserver {
 public:
  virtual ~StageObserver() = default;
  virtual void begin(Stage stage, int site, cudaStream_t stream) = 0;
  virtual void end(Stage stage, int site, cudaStream_t stream) = 0;
};

struct CaptureDependencies;  // capture_edges.hpp

class StackSchedule {
 public:
  // programmatic_fork: in a captured graph, the side stream's coefficient launch depends on the
  // kernel that produced x alone, by a programmatic edge (PDL across the streams), so it starts
  // while that kernel runs and waits for it with griddepcontrol.wait; with a second programmatic
  // predecessor (the side stream's previous launch) it could not start early (docs/decisions.md,
  // "The overlap's side launch"). Only where every coefficient kernel waits
  // so (the plan's pdl).
  explicit StackSchedule(int sites, bool programmatic_fork = false);
  ~StackSchedule();
  StackSchedule(const StackSchedule&) = delete;
  StackSchedule& operator=(const StackSchedule&) = delete;

  // Enqueues all sites on `main` (and the side stream when `overlap`). Allocates nothing on the
  // host (unless it throws, or the launches or the observer do).
  // Every stage is wrapped in an NVTX range ("mhc <stage> <site>") for Nsight Systems.
  void enqueue(cudaStream_t main, bool overlap, const std::vector<SiteLaunches>& sites,
               StageObserver* observer = nullptr);

  // Sites enqueued with the overlap schedule since construction (proves which path ran).
  int64_t overlapped_sites() const { return overlapped_sites_; }
  int64_t native_sites() const { return native_sites_; }
  cudaStream_t side_stream() const { return side_; }

 private:
  void enqueue_native(cudaStream_t main, int site, const SiteLaunches& s);
  void enqueue_overlap(cudaStream_t main, int site, const SiteLaunches& s);
  void run_stage(Stage stage, int site, const std::function<void(cudaStream_t)>& fn,
                 cudaStream_t stream);
  void run_coefficients(int site, const SiteLaunches& s, const CaptureDependencies& producers);
  bool programmatic_fork_ = false;
  StageObserver* observer_ = nullptr;
  cudaStream_t side_ = nullptr;
  std::vector<cudaEvent_t> x_ready_, coef_ready_;  // one pair per site
  std::vector<std::string> range_names_;           // [site * 4 + stage]: "mhc <stage> <site>"
  int64_t overlapped_sites_ = 0;
  int64_t native_sites_ = 0;
};

// A captured CUDA graph of whatever `body` enqueues on `stream`, captured in
// cudaStreamCaptureModeGlobal so that any host synchronisation or allocation inside fails the
// capture. Replays with replay(stream). With one thread per GPU (tensor parallelism), each thread
// captures in cudaStreamCaptureModeThreadLocal instead, as NCCL requires: its own unsafe calls
// still fail the capture, the other ranks' threads are not affected by it.
class CapturedGraph {
 public:
  CapturedGraph() = default;
  CapturedGraph(cudaStream_t stream, const std::function<void(cudaStream_t)>& body,
                cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal);
  ~CapturedGraph();
  CapturedGraph(CapturedGraph&& o) noexcept;
  CapturedGraph& operator=(CapturedGraph&& o) noexcept;
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;
  void replay(cudaStream_t stream) const;
  bool valid() const { return exec_ != nullptr; }

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace mhc::cuda
