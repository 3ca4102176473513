// A Chrome trace of one forward, timed on the GPU: a CUDA event before and after every stage on
// the stream it ran on, all measured against one origin event. Open the file in chrome://tracing
// or ui.perfetto.dev to see the side stream's coefficients run under the main stream's sublayer.
#pragma once
#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "mhc/schedule/two_stream.hpp"

namespace mhc::cuda {

class TraceRecorder final : public StageObserver {
 public:
  // All events are created here, once: tracing a forward creates nothing.
  TraceRecorder(int sites, cudaStream_t main, cudaStream_t side);
  ~TraceRecorder() override;
  TraceRecorder(const TraceRecorder&) = delete;
  TraceRecorder& operator=(const TraceRecorder&) = delete;

  void start(cudaStream_t main);  // records the origin; call before the forward
  void begin(Stage stage, int site, cudaStream_t stream) override;
  void end(Stage stage, int site, cudaStream_t stream) override;
  // Synchronises, then writes {"traceEvents": [...]}, one complete ("X") event per stage, with
  // the main and side streams as two threads. Throws mhc::Error naming the path on failure.
  void write(const std::string& path) const;

 private:
  struct Slot {
    cudaEvent_t begin = nullptr, end = nullptr;
    cudaStream_t stream = nullptr;
    bool used = false;
  };
  Slot& slot(Stage stage, int site);
  int sites_;
  cudaStream_t main_, side_;
  cudaEvent_t origin_ = nullptr;
  std::vector<Slot> slots_;  // [site][stage]
};

}  // namespace mhc::cuda
