#include "mhc/dist/nccl_comm.hpp"

#include <fmt/core.h>

#include <thread>

#include "mhc/core/error.hpp"
#include "mhc/cuda/check.hpp"

// Non-blocking communicators and ncclCommGetAsyncError's ncclInProgress state came with 2.14.
#if NCCL_VERSION_CODE < NCCL_VERSION(2, 14, 0)
#error "mhc tensor parallelism needs NCCL 2.14 or newer (non-blocking communicators)"
#endif

namespace mhc::dist {
namespace {

// Poll interval of every bounded wait: short against a collective's microseconds would only burn
// a CPU core; short against the deadline (seconds) keeps the timeout exact enough.
constexpr auto kPoll = std::chrono::microseconds(200);

// Makes `device` current for the scope (abort and destroy may run on the watchdog's thread).
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    if (cudaGetDevice(&saved_) != cudaSuccess) saved_ = -1;
    if (saved_ != device) cudaSetDevice(device);
  }
  ~DeviceScope() {
    if (saved_ >= 0) cudaSetDevice(saved_);
  }

 private:
  int saved_ = -1;
};

}  // namespace

RankComm::RankComm(const ncclUniqueId& id, int world, int rank, std::chrono::milliseconds timeout,
                   RankHooks hooks)
    : world_(world),
      rank_(rank),
      owner_(std::this_thread::get_id()),
      timeout_(timeout),
      hooks_(std::move(hooks)) {
  MHC_CUDA_CHECK(cudaGetDevice(&device_));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // every call returns at once; waits are ours, bounded and cancellable
  const ncclResult_t r = ncclCommInitRankConfig(&comm_, world, id, rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    const std::string message = describe(r, "ncclCommInitRankConfig");
    if (comm_ != nullptr) ncclCommAbort(comm_);
    comm_ = nullptr;
    aborted_ = true;
    fail(message);
  }
}

RankComm::~RankComm() {
  if (comm_ != nullptr && !finalized_) abort();
}

std::string RankComm::describe(ncclResult_t r, const char* call) {
  const char* last = comm_ != nullptr && !aborted_ ? ncclGetLastError(comm_) : nullptr;
  return fmt::format("NCCL error {} ({}) in {}{}{}", int(r), ncclGetErrorString(r), call,
                     last != nullptr && *last != '\0' ? ": " : "", last != nullptr ? last : "");
}

void RankComm::fail(const std::string& message) {
  if (hooks_.report) hooks_.report(message);
  // The rank's own thread waits here for the group's abort before unwinding; the watchdog (which
  // calls start_finalize / finish_finalize) must not wait for itself.
  if (hooks_.stop && std::this_thread::get_id() == owner_) hooks_.stop();
  throw Error(fmt::format("rank {}: {}", rank_, message));
}

void RankComm::wait_ready(const std::string& what) {
  const Clock::time_point deadline = Clock::now() + timeout_;
  for (;;) {
    std::string problem;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ncclResult_t state = ncclSuccess;
      if (aborted_) {
        problem = what + ": the communicator was aborted (another rank failed)";
      } else if (const ncclResult_t r = ncclCommGetAsyncError(comm_, &state); r != ncclSuccess) {
        problem = describe(r, "ncclCommGetAsyncError");
      } else if (state == ncclSuccess) {
        return;
      } else if (state != ncclInProgress) {
        problem = describe(state, what.c_str());
      }
    }
    if (!problem.empty()) fail(problem);
    if (hooks_.cancelled && hooks_.cancelled()) {
      fail(fmt::format("gave up waiting for {}: another rank failed", what));
    }
    if (Clock::now() > deadline) {
      fail(
          fmt::format("{} did not complete within {:.1f} s (a rank that never started or never "
                      "joined, or a broken NCCL setup)",
                      what, std::chrono::duration<double>(timeout_).count()));
    }
    std::this_thread::sleep_for(kPoll);
  }
}

void RankComm::all_reduce_sum_bf16(void* buffer, size_t count, cudaStream_t stream) {
  all_reduce(buffer, buffer, count, ncclBfloat16, ncclSum, stream);
}

void RankComm::all_reduce(const void* send, void* recv, size_t count, ncclDataType_t type,
                          ncclRedOp_t op, cudaStream_t stream) {
  std::string problem;
  ncclResult_t r = ncclSuccess;
  if (hooks_.cancelled && hooks_.cancelled()) {
    fail("ncclAllReduce not issued: another rank failed");
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_) {
      problem = "ncclAllReduce on an aborted communicator (another rank failed)";
    } else {
      r = ncclAllReduce(send, recv, count, type, op, comm_, stream);
      if (r != ncclSuccess && r != ncclInProgress) problem = describe(r, "ncclAllReduce");
    }
  }
  if (!problem.empty()) fail(problem);
  // Non-blocking: NCCL may finish the launch on a thread of its own (first use of a connection);
  // nothing may be enqueued on the stream before it says it is done.
  if (r == ncclInProgress) wait_ready("ncclAllReduce");
}

ncclResult_t RankComm::async_error() {
  std::lock_guard<std::mutex> lock(mu_);
  if (aborted_) return ncclInvalidUsage;
  ncclResult_t state = ncclSuccess;
  const ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
  return r != ncclSuccess ? r : state;
}

void RankComm::abort() {
  std::lock_guard<std::mutex> lock(mu_);
  if (aborted_ || finalized_ || comm_ == nullptr) return;
  DeviceScope scope(device_);
  ncclCommAbort(comm_);  // its result cannot help: the communicator is gone either way
  comm_ = nullptr;
  aborted_ = true;
}

bool RankComm::aborted() {
  std::lock_guard<std::mutex> lock(mu_);
  return aborted_;
}

void RankComm::start_finalize() {
  std::string problem;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_) {
      problem = "ncclCommFinalize on an aborted communicator";
    } else {
      DeviceScope scope(device_);
      const ncclResult_t r = ncclCommFinalize(comm_);
      if (r != ncclSuccess && r != ncclInProgress) problem = describe(r, "ncclCommFinalize");
    }
  }
  if (!problem.empty()) fail(problem);
}

void RankComm::finish_finalize() {
  wait_ready("ncclCommFinalize");
  std::lock_guard<std::mutex> lock(mu_);
  DeviceScope scope(device_);
  ncclCommDestroy(comm_);  // local after a completed finalize
  comm_ = nullptr;
  finalized_ = true;
}

}  // namespace mhc::dist
