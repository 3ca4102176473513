// Shared helpers of the tensor-parallel tests: skip without enough GPUs, small stacks, inputs,
// a clock for the "nothing hangs" bounds, and the error text of a call that must fail.
#pragma once
#include <fmt/core.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "mhc/bench/tp_run.hpp"
#include "mhc/bench/tp_stack.hpp"
#include "mhc/core/error.hpp"
#include "mhc/cpu/model.hpp"
#include "mhc/cuda/check.hpp"
#include "mhc/cuda/device_buffer.hpp"
#include "mhc/dist/tp_runner.hpp"

namespace mhc::dist::test {

#define MHC_SKIP_WITHOUT_GPUS(n)         \
  if (::mhc::dist::visible_gpus() < (n)) \
  GTEST_SKIP() << "needs " << (n) << " GPUs, " << ::mhc::dist::visible_gpus() << " visible"

inline MhcParams small_stack(int hidden, int layers) {
  MhcParams p = preset("dsv41-flash");
  p.hidden = hidden;
  p.layers = layers;
  return p;
}

inline KernelConfig overlap_config(bool overlap) {
  return KernelConfig::parse(overlap ? R"({"enable_mhc_overlap": true, "overlap_max_tokens": 4096})"
                                     : R"({"enable_mhc_overlap": false})");
}

// Short timeouts for the error paths, generous ones for runs that must succeed (the first NCCL
// initialisation in a process takes seconds).
inline TpRunOptions ranks(int world, std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  TpRunOptions o;
  o.world = world;
  o.timeout = timeout;
  return o;
}

// Fresh x for the executor (the embeddings for `seed`), ordered on `st` before later work there;
// pre_mix stays one-hot.
inline void load_inputs(cuda::StackExecutor& ex, int64_t tokens, uint64_t seed, cudaStream_t st) {
  const auto x = synthetic_embeddings(ex.params(), tokens, seed);
  MHC_CUDA_CHECK(
      cudaMemcpyAsync(ex.x_in(), x.data(), x.size() * sizeof(Bf16), cudaMemcpyHostToDevice, st));
  MHC_CUDA_CHECK(cudaStreamSynchronize(st));  // x is freed on return; no collective is queued
}

// `world` ranks of which rank `bad` is given a device that does not exist: its thread fails in
// cudaSetDevice, before it creates its communicator, while the others wait for it there. A real
// failure of the runner's start-up path, with no fault injection in the library.
inline TpRunOptions ranks_with_missing_device(int world, int bad,
                                              std::chrono::milliseconds timeout) {
  TpRunOptions o = ranks(world, timeout);
  for (int r = 0; r < world; ++r) o.devices.push_back(r == bad ? visible_gpus() + 16 : r);
  return o;
}

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The mhc::Error message of `f`, or "" when it did not throw one.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

#define MHC_EXPECT_CONTAINS(text, part) \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << "in: " << (text)

}  // namespace mhc::dist::test
