// One rank's NCCL communicator (docs/tensor_parallel.md, "Failure handling").
//
// It is created non-blocking (ncclConfig_t::blocking = 0) so that no NCCL call can block the rank's
// thread: initialisation and any call NCCL answers with ncclInProgress are waited for by polling
// ncclCommGetAsyncError against a deadline, and the wait also gives up as soon as another rank
// has failed. After any failure the communicator is aborted (ncclCommAbort makes NCCL kernels
// that wait for a peer exit), never destroyed, since ncclCommDestroy may wait for a peer that is
// gone. abort() is called by the runner's watchdog thread, normally only once every rank's thread
// has stopped touching CUDA and NCCL (RankHooks::stop, docs/tensor_parallel.md); as a second line
// of defence every NCCL call and the abort are serialised by one mutex, held only for the
// (non-blocking) call itself.
#pragma once
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace mhc::dist {

using Clock = std::chrono::steady_clock;

// How a rank's communicator learns that the group has failed, and reports its own failure.
struct RankHooks {
  std::function<bool()> cancelled;                 // true once any rank has failed
  std::function<void(const std::string&)> report;  // called with the message before throwing
  // Called after `report`, on the thread that created the communicator only, before the throw:
  // returns once the group's communicators have been aborted, so that what the throw unwinds
  // (cudaFree, cudaStreamDestroy, ...) never runs while another thread aborts a communicator.
  std::function<void()> stop;
};

class RankComm {
 public:
  // Starts ncclCommInitRankConfig (non-blocking) for `rank` of `world` on the current device;
  // wait_ready() completes it. `timeout` bounds every later wait of this communicator.
  RankComm(const ncclUniqueId& id, int world, int rank, std::chrono::milliseconds timeout,
           RankHooks hooks);
  ~RankComm();  // aborts unless finalize() completed
  RankComm(const RankComm&) = delete;
  RankComm& operator=(const RankComm&) = delete;

  int rank() const { return rank_; }
  int world() const { return world_; }
  int device() const { return device_; }

  // Polls until the pending operation (initialisation, a call answered ncclInProgress) is done.
  // Reports and throws mhc::Error on an NCCL error, on another rank's failure, or at the deadline.
  void wait_ready(const std::string& what);

  // In-place sum of `count` bf16 values on `stream`: enqueue only, so it can be captured into a
  // CUDA graph. Reports and throws mhc::Error naming the rank on an NCCL error, and issues nothing
  // once another rank has failed.
  void all_reduce_sum_bf16(void* buffer, size_t count, cudaStream_t stream);
  // The general form (tests pass invalid arguments through it).
  void all_reduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                  cudaStream_t stream);

  // ncclSuccess, ncclInProgress, or the error of a collective that failed asynchronously.
  ncclResult_t async_error();
  // ncclCommAbort, once; thread-safe; later calls on this communicator throw.
  void abort();
  bool aborted();
  // ncclCommFinalize (non-blocking) only; finish_finalize() polls and destroys. Split so that one
  // thread can finalize every rank's communicator at once (finalize waits for all ranks).
  void start_finalize();
  void finish_finalize();

 private:
  [[noreturn]] void fail(const std::string& message);
  void check(ncclResult_t r, const char* call);  // under mu_
  std::string describe(ncclResult_t r, const char* call);

  std::mutex mu_;
  ncclComm_t comm_ = nullptr;
  bool aborted_ = false;
  bool finalized_ = false;
  int world_ = 0, rank_ = 0, device_ = 0;
  std::thread::id owner_;  // the rank's thread (the constructor's)
  std::chrono::milliseconds timeout_;
  RankHooks hooks_;
};

}  // namespace mhc::dist
