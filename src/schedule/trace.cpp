#include "mhc/schedule/trace.hpp"

#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "mhc/cuda/check.hpp"
#include "mhc/io/safe_file.hpp"

namespace mhc::cuda {

constexpr int kStages = 4;

TraceRecorder::TraceRecorder(int sites, cudaStream_t main, cudaStream_t side)
    : sites_(sites), main_(main), side_(side), slots_(size_t(sites) * kStages) {
  MHC_CUDA_CHECK(cudaEventCreate(&origin_));
  for (auto& s : slots_) {
    MHC_CUDA_CHECK(cudaEventCreate(&s.begin));
    MHC_CUDA_CHECK(cudaEventCreate(&s.end));
  }
}

TraceRecorder::~TraceRecorder() {
  for (auto& s : slots_) {
    cudaEventDestroy(s.begin);
    cudaEventDestroy(s.end);
  }
  cudaEventDestroy(origin_);
}

TraceRecorder::Slot& TraceRecorder::slot(Stage stage, int site) {
  if (site < 0 || site >= sites_)
    throw Error(fmt::format("TraceRecorder: site {} of {}", site, sites_));
  return slots_[size_t(site) * kStages + size_t(stage)];
}

void TraceRecorder::start(cudaStream_t main) {
  for (auto& s : slots_) s.used = false;
  MHC_CUDA_CHECK(cudaEventRecord(origin_, main));
}

void TraceRecorder::begin(Stage stage, int site, cudaStream_t stream) {
  Slot& s = slot(stage, site);
  s.stream = stream;
  s.used = true;
  MHC_CUDA_CHECK(cudaEventRecord(s.begin, stream));
}

void TraceRecorder::end(Stage stage, int site, cudaStream_t stream) {
  MHC_CUDA_CHECK(cudaEventRecord(slot(stage, site).end, stream));
}

void TraceRecorder::write(const std::string& path) const {
  MHC_CUDA_CHECK(cudaDeviceSynchronize());
  nlohmann::json events = nlohmann::json::array();
  for (const auto& [tid, name] : {std::pair{0, "main stream"}, std::pair{1, "side stream"}}) {
    events.push_back({{"ph", "M"},
                      {"name", "thread_name"},
                      {"pid", 0},
                      {"tid", tid},
                      {"args", {{"name", name}}}});
  }
  for (int site = 0; site < sites_; ++site) {
    for (int st = 0; st < kStages; ++st) {
      const Slot& s = slots_[size_t(site) * kStages + size_t(st)];
      if (!s.used) continue;
      float start_ms = 0, dur_ms = 0;
      MHC_CUDA_CHECK(cudaEventElapsedTime(&start_ms, origin_, s.begin));
      MHC_CUDA_CHECK(cudaEventElapsedTime(&dur_ms, s.begin, s.end));
      events.push_back({{"name", fmt::format("{} {}", stage_name(Stage(st)), site)},
                        {"cat", stage_name(Stage(st))},
                        {"ph", "X"},
                        {"pid", 0},
                        {"tid", s.stream == side_ ? 1 : 0},
                        {"ts", double(start_ms) * 1000.0},
                        {"dur", double(dur_ms) * 1000.0},
                        {"args", {{"site", site}, {"layer", site / 2}}}});
    }
  }
  io::write_file(path,
                 nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ns"}}.dump() + "\n");
}

}  // namespace mhc::cuda
