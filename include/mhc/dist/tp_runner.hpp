// The tensor-parallel runner: one rank per GPU, one thread per rank, all in this process
// (docs/tensor_parallel.md, "Why one thread per GPU").
//
// run_ranks() checks the TP size against the GPUs present, creates the NCCL unique id, starts one
// thread per rank (device = rank unless given), and in each: makes the device current, creates
// the rank's non-blocking communicator (bounded wait), proves it with a one-element all-reduce,
// then runs `body`. The calling thread is the watchdog: once any rank fails, every rank thread
// stops where it noticed the failure (it makes no CUDA or NCCL call and does not unwind), the
// watchdog aborts every communicator (NCCL kernels waiting for a peer exit, NCCL's own pending
// launches end), lets the ranks go, waits a bounded time for every rank to leave, and throws one
// mhc::Error naming the first failing rank and its reason (docs/tensor_parallel.md, "The abort").
// Nothing waits without a deadline: a rank that never starts, never joins a collective, or hits
// an NCCL error ends the whole group within about one timeout.
#pragma once
#include <cuda_runtime_api.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mhc/dist/nccl_comm.hpp"

namespace mhc::dist {

struct TpRunOptions {
  int world = 1;
  std::vector<int> devices;  // rank r runs on devices[r]; empty: device r
  // Bound on every wait: communicator set-up, each polled stream wait, and the ranks' exit after
  // an abort. Generous by default: the first NCCL initialisation in a process takes seconds.
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};
};

struct Group;  // shared state of the ranks (tp_runner.cpp)

// What a rank's body gets.
class RankContext {
 public:
  RankContext(Group& group, int rank, int device, RankComm& comm);
  int rank() const { return rank_; }
  int world() const;
  int device() const { return device_; }
  RankComm& comm() const { return comm_; }
  std::chrono::milliseconds timeout() const;

  // Waits until all work enqueued on `stream` is done, polling. Reports to the group and throws
  // mhc::Error on a CUDA error, an NCCL asynchronous error, another rank's failure, or when the
  // work is not done within timeout(). Use it (not cudaStreamSynchronize) after anything that
  // contains a collective: a blocking wait would never return if a peer is gone.
  void wait(cudaStream_t stream) const;
  bool cancelled() const;  // another rank has failed
  // Reports to the group, waits until the watchdog has aborted every communicator, then throws.
  [[noreturn]] void fail(const std::string& why) const;

 private:
  Group& group_;
  int rank_;
  int device_;
  RankComm& comm_;
};

// A non-blocking CUDA stream of the current device, destroyed with its owner.
class RankStream {
 public:
  RankStream();
  ~RankStream();
  RankStream(const RankStream&) = delete;
  RankStream& operator=(const RankStream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

using RankBody = std::function<void(RankContext&)>;

// Runs `body` on every rank; returns when every rank has finished and every communicator has been
// finalized, or throws mhc::Error (see above). The environment is the caller's: on machines where
// NVLink SHARP / multicast must stay off, set NCCL_NVLS_ENABLE=0 (docs/tensor_parallel.md).
void run_ranks(const TpRunOptions& options, const RankBody& body);

// GPUs visible to this process (0 when the CUDA runtime finds no device or no driver).
int visible_gpus();

}  // namespace mhc::dist
