#include "pool.hpp"

#include <fmt/core.h>
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/accelerator.h>

#include <map>
#include <mutex>
#include <tuple>

#include "../launch.hpp"
#include "device.hpp"
#include "mhc/core/error.hpp"
#include "mhc/core/params.hpp"
#include "mhc/core/workspace.hpp"

namespace mhc::torch_ops {

namespace {

using Key = std::tuple<int32_t, int32_t, int64_t, int64_t, int64_t>;  // device, C, n, slot

struct Entry {
  int64_t capacity = 0;  // tokens
  Tensor buffer;
};

struct Pool {
  std::mutex mutex;
  std::map<Key, Entry> entries;
};

Pool& pool() {
  static Pool* p = new Pool();  // never destroyed: its tensors must not outlive libtorch
  return *p;
}

// A CUDA device without an index is the current one.
Where normalised(Where device) {
  if (device.cuda() && device.index < 0) {
    device.index = torch::stable::accelerator::getCurrentDeviceIndex();
  }
  return device;
}

}  // namespace

int64_t workspace_bytes(int64_t hidden, int64_t n, int64_t tokens) {
  MhcParams p;
  p.hidden = int(hidden);
  p.n = int(n);
  p.layers = 1;
  validate(p);
  return workspace_layout(p, tokens).bytes;
}

Tensor pool_workspace(Where device, int64_t hidden, int64_t n, int64_t tokens, int64_t slot) {
  device = normalised(device);
  const Key key{device.type, device.index, hidden, n, slot};
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  auto it = p.entries.find(key);
  if (it != p.entries.end() && tokens <= it->second.capacity) return it->second.buffer;
  if (device.cuda() && capturing(current_stream(device.index))) {
    fail(
        fmt::format("mhc: no workspace for {} tokens (C={}, n={}, slot {}) on {} while a CUDA "
                    "graph is being captured; run the forward once eagerly at its largest token "
                    "count before capture, call mhc.DEFAULT_POOL.reserve(...), or pass "
                    "workspace=mhc.make_workspace(...)",
                    tokens, hidden, n, slot, device.text()));
  }
  int64_t capacity = 16;
  while (capacity < tokens) capacity *= 2;
  // The old buffer may still be in use by a launch on another stream (the overlap's side
  // stream); growing happens only in eager warm-up, so waiting here is cheap.
  if (it != p.entries.end() && device.cuda()) synchronize(device.index);
  Tensor buffer =
      new_zeros({workspace_bytes(hidden, n, capacity)}, aoti_torch_dtype_uint8(), device);
  // The zero-fill ran on the current stream; the workspace may be used first on another (a
  // side stream, a capture stream): wait for it once, here. The device's launch descriptions are
  // made now too, in this warm-up outside capture, if the first calls have not made them yet.
  if (device.cuda()) {
    synchronize(device.index);
    launch::prepare(device.index);
  }
  p.entries[key] = Entry{capacity, buffer};
  return buffer;
}

void pool_clear() {
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  p.entries.clear();
}

int64_t pool_size() {
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  return int64_t(p.entries.size());
}

}  // namespace mhc::torch_ops
