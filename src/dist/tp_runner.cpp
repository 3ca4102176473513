#include "mhc/dist/tp_runner.hpp"

#include <fmt/core.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include "mhc/core/error.hpp"
#include "mhc/core/tensor_parallel.hpp"
#include "mhc/cuda/check.hpp"
#include "mhc/cuda/device_buffer.hpp"

namespace mhc::dist {

constexpr auto kPoll = std::chrono::microseconds(200);

struct RankSlot {
  int device = 0;
  std::unique_ptr<RankComm> comm;  // set under Group::mu; destroyed with the group
  bool reported = false;           // this rank's failure is already recorded
  bool stopped = false;            // its thread waits in Group::stop (no CUDA or NCCL call)
  bool done = false;               // the rank's thread has left its body
};

// The ranks' shared state. Owned through shared_ptr by the calling thread and every rank thread,
// so a rank thread that has to be left behind (see collect) never outlives it.
struct Group {
  Group(const TpRunOptions& o, RankBody b)
      : world(o.world), timeout(o.timeout), body(std::move(b)), slots(o.world) {}
  const int world;
  const std::chrono::milliseconds timeout;
  const RankBody body;
  ncclUniqueId id{};
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<bool> failed{false};
  std::string first_failure;
  std::vector<std::string> later_failures;
  std::vector<RankSlot> slots;
  int done = 0;
  bool aborted = false;  // every communicator has been aborted (set by the watchdog)

  void report(int rank, const std::string& message) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (slots[size_t(rank)].reported) return;
      slots[size_t(rank)].reported = true;
      const std::string line = fmt::format("rank {}: {}", rank, message);
      if (failed) {
        later_failures.push_back(line);
      } else {
        first_failure = line;
        failed = true;
      }
    }
    cv.notify_all();
  }
  // Called by a rank's own thread after it reported a failure (or saw another rank's), before it
  // throws: the thread makes no CUDA or NCCL call until the watchdog has aborted every
  // communicator, so the abort never races the rank's unwinding (cudaFree, cudaStreamDestroy) or
  // its next NCCL call. Bounded, should the watchdog never get there.
  void stop(int rank) {
    std::unique_lock<std::mutex> lock(mu);
    slots[size_t(rank)].stopped = true;
    cv.notify_all();
    cv.wait_for(lock, 3 * timeout, [&] { return aborted; });
    slots[size_t(rank)].stopped = false;
  }
  void finish(int rank) {
    {
      std::lock_guard<std::mutex> lock(mu);
      slots[size_t(rank)].done = true;
      ++done;
    }
    cv.notify_all();
  }
  // Under mu: no rank thread is inside CUDA or NCCL (each has stopped or left).
  bool quiet() const {
    for (const auto& s : slots)
      if (!s.stopped && !s.done) return false;
    return true;
  }
  // Aborts every communicator, one after the other, from the calling thread (the watchdog). The
  // group lock is not held while aborting: ncclCommAbort can take a while, and the ranks need the
  // lock to report, stop and finish meanwhile.
  void abort_all() {
    std::vector<RankComm*> comms;
    {
      std::lock_guard<std::mutex> lock(mu);
      for (auto& s : slots)
        if (s.comm) comms.push_back(s.comm.get());
    }
    for (RankComm* c : comms) c->abort();
  }
  std::string summary() const {
    std::string s = fmt::format("tensor parallelism (TP={}) failed: {}", world, first_failure);
    for (const auto& l : later_failures) s += "\n  then " + l;
    return s;
  }
};

namespace {

// A one-element all-reduce of rank + 1: proves every communicator works end to end, under the
// deadline, before any real work starts.
void check_communicator(RankContext& ctx) {
  cuda::DeviceBuffer<float> value(1);
  const float mine = float(ctx.rank() + 1);
  RankStream stream;
  // Stream-ordered: a plain cudaMemcpy from pageable memory may return before its DMA is done,
  // and nothing orders the non-blocking stream after it.
  MHC_CUDA_CHECK(
      cudaMemcpyAsync(value.get(), &mine, sizeof mine, cudaMemcpyHostToDevice, stream.get()));
  ctx.comm().all_reduce(value.get(), value.get(), 1, ncclFloat32, ncclSum, stream.get());
  ctx.wait(stream.get());
  float sum = 0;
  value.download(&sum, 1);
  const float expect = float(ctx.world() * (ctx.world() + 1) / 2);
  if (sum != expect) {
    ctx.fail(fmt::format("the check all-reduce gave {} instead of {}", sum, expect));
  }
}

void rank_main(const std::shared_ptr<Group>& g, int rank) {
  RankSlot& slot = g->slots[size_t(rank)];
  try {
    MHC_CUDA_CHECK(cudaSetDevice(slot.device));
    // Other threads' global-mode captures must not turn this thread's CUDA calls into errors.
    cudaStreamCaptureMode mode = cudaStreamCaptureModeThreadLocal;
    MHC_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    // A raw pointer: the communicator is owned by the group, so the group outlives the hooks
    // (a shared_ptr here would make the group own itself).
    Group* group = g.get();
    RankHooks hooks{[group] { return group->failed.load(); },
                    [group, rank](const std::string& m) { group->report(rank, m); },
                    [group, rank] { group->stop(rank); }};
    auto owned = std::make_unique<RankComm>(g->id, g->world, rank, g->timeout, std::move(hooks));
    RankComm& comm = *owned;
    {
      std::lock_guard<std::mutex> lock(g->mu);
      slot.comm = std::move(owned);
    }
    comm.wait_ready("communicator initialisation");
    RankContext ctx(*g, rank, slot.device, comm);
    check_communicator(ctx);
    g->body(ctx);
  } catch (const std::exception& e) {
    g->report(rank, e.what());  // no-op when the rank reported before throwing
  } catch (...) {
    g->report(rank, "unknown exception");
  }
  g->finish(rank);
}

std::vector<int> rank_devices(const TpRunOptions& o) {
  check_tp_fits(o.world, visible_gpus());
  std::vector<int> devices = o.devices;
  if (devices.empty())
    for (int r = 0; r < o.world; ++r) devices.push_back(r);
  if (int(devices.size()) != o.world) {
    throw Error(fmt::format("tensor parallelism: {} devices given for TP size {}", devices.size(),
                            o.world));
  }
  // NCCL does not support one device as two ranks of a communicator (it may hang).
  if (std::set<int>(devices.begin(), devices.end()).size() != devices.size()) {
    throw Error("tensor parallelism: every rank needs its own GPU; a device is listed twice");
  }
  return devices;
}

// Waits until every rank is done or one has failed. After a failure, in this order:
//   1. waits (at most one timeout) until every rank thread has stopped (RankHooks::stop: it waits
//      for step 2 before unwinding) or left its body, so that no rank thread is inside CUDA or
//      NCCL;
//   2. aborts every communicator of the group, from this thread, one after the other;
//   3. lets the stopped ranks go on (they throw and unwind) and waits at most one timeout for all
//      of them to leave, aborting again for a rank that registers its communicator late.
// A rank still busy after step 1's wait is normally one blocked in a CUDA call behind a collective
// whose peer has gone (only the abort releases it); it is aborted anyway and said so. Threads of
// ranks that never leave are detached, and said so, rather than waited for forever.
void collect(Group& g, std::vector<std::thread>& threads) {
  std::unique_lock<std::mutex> lock(g.mu);
  g.cv.wait(lock, [&] { return g.done == g.world || g.failed; });
  if (g.failed) {
    const Clock::time_point quiet_by = Clock::now() + g.timeout;
    if (!g.cv.wait_until(lock, quiet_by, [&] { return g.quiet(); })) {
      for (int r = 0; r < g.world; ++r) {
        const RankSlot& s = g.slots[size_t(r)];
        if (s.stopped || s.done) continue;
        g.later_failures.push_back(fmt::format(
            "rank {}: still inside its body {:.1f} s after the failure (blocked in a CUDA call?); "
            "its communicator was aborted under it",
            r, std::chrono::duration<double>(g.timeout).count()));
      }
    }
    lock.unlock();
    g.abort_all();
    lock.lock();
    g.aborted = true;
    g.cv.notify_all();
    const Clock::time_point deadline = Clock::now() + g.timeout;
    while (g.done < g.world && Clock::now() < deadline) {
      lock.unlock();
      g.abort_all();  // no-op for communicators already aborted
      lock.lock();
      g.cv.wait_for(lock, std::chrono::milliseconds(100), [&] { return g.done == g.world; });
    }
    lock.unlock();
    g.abort_all();
    lock.lock();
  }
  for (int r = 0; r < g.world; ++r) {
    if (!threads[size_t(r)].joinable()) continue;
    if (g.slots[size_t(r)].done) {
      lock.unlock();
      threads[size_t(r)].join();
      lock.lock();
    } else {
      threads[size_t(r)].detach();
      g.later_failures.push_back(fmt::format(
          "rank {}: did not exit within {:.1f} s after the group was aborted; its thread was left "
          "behind",
          r, std::chrono::duration<double>(g.timeout).count()));
    }
  }
}

// After a clean run: every communicator is finalized at once (finalize waits for all ranks).
void finalize_all(Group& g) {
  try {
    for (auto& s : g.slots) s.comm->start_finalize();
    for (auto& s : g.slots) s.comm->finish_finalize();
  } catch (const std::exception&) {
    g.abort_all();  // the failure was reported by the communicator
  }
}

}  // namespace

RankContext::RankContext(Group& group, int rank, int device, RankComm& comm)
    : group_(group), rank_(rank), device_(device), comm_(comm) {}

int RankContext::world() const { return group_.world; }
std::chrono::milliseconds RankContext::timeout() const { return group_.timeout; }
bool RankContext::cancelled() const { return group_.failed; }

void RankContext::fail(const std::string& why) const {
  group_.report(rank_, why);
  group_.stop(rank_);  // a RankContext lives on its rank's thread
  throw Error(fmt::format("rank {}: {}", rank_, why));
}

void RankContext::wait(cudaStream_t stream) const {
  const Clock::time_point deadline = Clock::now() + group_.timeout;
  for (;;) {
    const cudaError_t q = cudaStreamQuery(stream);
    if (q == cudaSuccess) return;
    if (q != cudaErrorNotReady) {
      fail(fmt::format("CUDA error {} ({}) in the rank's stream", cudaGetErrorName(q),
                       cudaGetErrorString(q)));
    }
    if (cancelled()) fail("gave up waiting for the GPU: another rank failed");
    const ncclResult_t nccl = comm_.async_error();
    if (nccl != ncclSuccess && nccl != ncclInProgress) {
      fail(fmt::format("NCCL asynchronous error {} ({})", int(nccl), ncclGetErrorString(nccl)));
    }
    if (Clock::now() > deadline) {
      fail(
          fmt::format("GPU work did not finish within {:.1f} s (a collective that not every rank "
                      "joined, or a hung peer)",
                      std::chrono::duration<double>(group_.timeout).count()));
    }
    std::this_thread::sleep_for(kPoll);
  }
}

RankStream::RankStream() {
  MHC_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}
RankStream::~RankStream() {
  if (stream_) cudaStreamDestroy(stream_);
}

int visible_gpus() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the "no device" / "no driver" error
    return 0;
  }
  return count;
}

void run_ranks(const TpRunOptions& options, const RankBody& body) {
  const std::vector<int> devices = rank_devices(options);
  auto group = std::make_shared<Group>(options, body);
  for (int r = 0; r < options.world; ++r) group->slots[size_t(r)].device = devices[size_t(r)];
  if (const ncclResult_t r = ncclGetUniqueId(&group->id); r != ncclSuccess) {
    throw Error(fmt::format("tensor parallelism: ncclGetUniqueId failed: {} ({})", int(r),
                            ncclGetErrorString(r)));
  }
  std::vector<std::thread> threads(size_t(options.world));
  for (int r = 0; r < options.world; ++r) {
    try {
      threads[size_t(r)] = std::thread(rank_main, group, r);
    } catch (const std::exception& e) {
      group->report(r, fmt::format("could not start its thread: {}", e.what()));
      group->finish(r);
    }
  }
  collect(*group, threads);
  if (!group->failed) finalize_all(*group);
  if (group->failed) throw Error(group->summary());
}

}  // namespace mhc::dist
