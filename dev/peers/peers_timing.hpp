// The one timing method of the side-by-side benchmark, the same for every implementation: each
// item captured in a CUDA graph per input set (sets rotated past L2), CUDA events between
// consecutive replays, and rounds interleaved across items (round r starts at item r), so that
// drift of the GPU's clocks falls on every item alike. An item's time: the median of its rounds'
// medians.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace peers {

struct Item {
  std::string name;
  std::function<void(int set, cudaStream_t)> enqueue;  // one call on input set `set`
  bool timed = true;                                   // false: its check failed, not timed
};

struct Timed {
  double median_us = 0;          // median of the rounds' medians
  double min_us = 0;             // fastest replay seen
  std::vector<double> round_us;  // each round's median
};

struct TimingOptions {
  int rounds = 5;
  int reps = 30;   // timed replays per item per round
  int warmup = 6;  // untimed replays per item per round (at least one per set)
};

// Times items[i] for every i with timed set; the result has one entry per item (zeros where not
// timed). Throws std::runtime_error on a CUDA error, naming the item.
std::vector<Timed> time_interleaved(std::vector<Item>& items, int sets, cudaStream_t stream,
                                    const TimingOptions& o);

// Input sets the rotation needs: enough that a set is cold in L2 when it comes back.
int rotation_sets(int64_t set_bytes, int64_t l2_bytes);

// Deterministic device fills (a hash of index and seed): bf16 uniform in [-1, 1), f32 in [lo, hi).
void fill_bf16(void* out, int64_t count, uint64_t seed, cudaStream_t s);
void fill_f32(float* out, int64_t count, float lo, float hi, uint64_t seed, cudaStream_t s);

void check_cuda(cudaError_t e, const std::string& what);

}  // namespace peers
