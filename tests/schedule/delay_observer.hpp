// Test-only stream delays: a StageObserver that puts a spin kernel of `side_cycles` GPU clock
// cycles in front of every site's coefficients (the side stream's work in the overlap schedule)
// and one of `main_cycles` in front of every sublayer (the main stream's), to shake the ordering
// of the two streams. Any missing edge then shows up as a different result.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "mhc/schedule/two_stream.hpp"

namespace mhc::cuda::test {

// Enqueues a kernel that spins for `cycles` GPU clock cycles (nothing when cycles <= 0).
void enqueue_spin(cudaStream_t stream, int64_t cycles);

class DelayObserver : public StageObserver {
 public:
  DelayObserver(int64_t side_cycles, int64_t main_cycles)
      : side_cycles_(side_cycles), main_cycles_(main_cycles) {}
  void begin(Stage stage, int, cudaStream_t stream) override {
    if (stage == Stage::coefficients) enqueue_spin(stream, side_cycles_);
    if (stage == Stage::sublayer) enqueue_spin(stream, main_cycles_);
  }
  void end(Stage, int, cudaStream_t) override {}
  int64_t side_cycles() const { return side_cycles_; }
  int64_t main_cycles() const { return main_cycles_; }

 private:
  int64_t side_cycles_;
  int64_t main_cycles_;
};

}  // namespace mhc::cuda::test
