#include <nvtx3/nvToolsExt.h>

#include <string>

#include "join.hpp"
#include "mhc/cuda/check.hpp"
#include "mhc/schedule/capture_edges.hpp"
#include "mhc/schedule/two_stream.hpp"

namespace mhc::cuda {

const char* stage_name(Stage s) {
  switch (s) {
    case Stage::input_path:
      return "input_path";
    case Stage::coefficients:
      return "coefficients";
    case Stage::sublayer:
      return "sublayer";
    case Stage::post:
      return "post";
  }
  return "?";
}

constexpr int kStages = 4;

StackSchedule::StackSchedule(int sites, bool programmatic_fork)
    : programmatic_fork_(programmatic_fork), x_ready_(size_t(sites)), coef_ready_(size_t(sites)) {
  MHC_CUDA_CHECK(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking));
  // Named here once: formatting a name per stage would allocate on every forward.
  range_names_.reserve(size_t(sites) * kStages);
  for (int s = 0; s < sites; ++s) {
    for (int stage = 0; stage < kStages; ++stage) {
      range_names_.push_back(std::string("mhc ") + stage_name(Stage(stage)) + " " +
                             std::to_string(s));
    }
  }
  for (int s = 0; s < sites; ++s) {
    // Timing is not needed on these events; disabling it makes record/wait cheaper.
    MHC_CUDA_CHECK(cudaEventCreateWithFlags(&x_ready_[size_t(s)], cudaEventDisableTiming));
    MHC_CUDA_CHECK(cudaEventCreateWithFlags(&coef_ready_[size_t(s)], cudaEventDisableTiming));
  }
}

StackSchedule::~StackSchedule() {
  for (auto e : x_ready_) cudaEventDestroy(e);
  for (auto e : coef_ready_) cudaEventDestroy(e);
  if (side_) cudaStreamDestroy(side_);
}

void StackSchedule::enqueue(cudaStream_t main, bool overlap, const std::vector<SiteLaunches>& sites,
                            StageObserver* observer) {
  if (sites.size() > x_ready_.size()) {
    throw Error("StackSchedule: " + std::to_string(sites.size()) + " sites enqueued, built for " +
                std::to_string(x_ready_.size()));
  }
  observer_ = observer;
  for (size_t s = 0; s < sites.size(); ++s) {
    if (overlap) {
      enqueue_overlap(main, int(s), sites[s]);
    } else {
      enqueue_native(main, int(s), sites[s]);
    }
  }
  observer_ = nullptr;
}

void StackSchedule::run_stage(Stage stage, int site, const std::function<void(cudaStream_t)>& fn,
                              cudaStream_t stream) {
  if (!fn) return;  // e.g. the input path of a site whose previous post already formed it
  nvtxRangePushA(range_names_[size_t(site) * kStages + size_t(stage)].c_str());
  if (observer_) observer_->begin(stage, site, stream);
  fn(stream);
  if (observer_) observer_->end(stage, site, stream);
  nvtxRangePop();
}

void StackSchedule::enqueue_native(cudaStream_t main, int site, const SiteLaunches& s) {
  run_stage(Stage::input_path, site, s.input_path, main);
  run_stage(Stage::coefficients, site, s.coefficients, main);
  run_stage(Stage::sublayer, site, s.sublayer, main);
  run_stage(Stage::post, site, s.post, main);
  ++native_sites_;
}

// The side stream's coefficients of `site`. With a programmatic fork, the launch depends on the
// producers of x by programmatic edges. Only when the observer put nothing in front of it: the
// edge must reach the coefficient launch itself, whose kernels wait (PDL); a kernel in between
// that does not wait would hand the early start on without the wait. The side stream's previous
// launch, which the event wait added as well, is an ancestor of the producers (the previous post
// joined it), so replacing the set drops no ordering.
void StackSchedule::run_coefficients(int site, const SiteLaunches& s,
                                     const CaptureDependencies& producers) {
  if (!s.coefficients) return;
  nvtxRangePushA(range_names_[size_t(site) * kStages + size_t(Stage::coefficients)].c_str());
  const CaptureDependencies before = capture_dependencies(side_);
  if (observer_) observer_->begin(Stage::coefficients, site, side_);
  if (all_kernels(producers) && capture_dependencies(side_) == before) {
    depend_programmatically(side_, producers);
  }
  s.coefficients(side_);
  if (observer_) observer_->end(Stage::coefficients, site, side_);
  nvtxRangePop();
}

void StackSchedule::enqueue_overlap(cudaStream_t main, int site, const SiteLaunches& s) {
  cudaEvent_t x_ready = x_ready_[size_t(site)];
  cudaEvent_t coef_ready = coef_ready_[size_t(site)];
  // Fork: x (written by the previous post on main) is ready here.
  const CaptureDependencies producers =
      programmatic_fork_ ? capture_dependencies(main) : CaptureDependencies{};
  MHC_CUDA_CHECK(cudaEventRecord(x_ready, main));
  MHC_CUDA_CHECK(cudaStreamWaitEvent(side_, x_ready, 0));
  run_coefficients(site, s, producers);
  MHC_CUDA_CHECK(cudaEventRecord(coef_ready, side_));

  run_stage(Stage::input_path, site, s.input_path, main);
  run_stage(Stage::sublayer, site, s.sublayer, main);
  detail::join_side_stream(main, coef_ready);
  run_stage(Stage::post, site, s.post, main);
  ++overlapped_sites_;
}

CapturedGraph::CapturedGraph(cudaStream_t stream, const std::function<void(cudaStream_t)>& body,
                             cudaStreamCaptureMode mode) {
  MHC_CUDA_CHECK(cudaStreamBeginCapture(stream, mode));
  try {
    body(stream);
  } catch (...) {
    cudaGraph_t broken = nullptr;
    cudaStreamEndCapture(stream, &broken);
    if (broken) cudaGraphDestroy(broken);
    throw;
  }
  MHC_CUDA_CHECK(cudaStreamEndCapture(stream, &graph_));
  MHC_CUDA_CHECK(cudaGraphInstantiate(&exec_, graph_, 0));
}

CapturedGraph::~CapturedGraph() {
  if (exec_) cudaGraphExecDestroy(exec_);
  if (graph_) cudaGraphDestroy(graph_);
}

CapturedGraph::CapturedGraph(CapturedGraph&& o) noexcept : graph_(o.graph_), exec_(o.exec_) {
  o.graph_ = nullptr;
  o.exec_ = nullptr;
}

CapturedGraph& CapturedGraph::operator=(CapturedGraph&& o) noexcept {
  std::swap(graph_, o.graph_);
  std::swap(exec_, o.exec_);
  return *this;
}

void CapturedGraph::replay(cudaStream_t stream) const {
  if (!exec_) throw Error("CapturedGraph::replay: no graph was captured");
  MHC_CUDA_CHECK(cudaGraphLaunch(exec_, stream));
}

}  // namespace mhc::cuda
