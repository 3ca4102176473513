// The default workspace pool (mhc.DEFAULT_POOL; docs/python.md, "Workspace"): the coefficient
// path's scratch for calls without workspace=, one uint8 tensor per (device, C, n, slot), grown
// to the largest token count asked for. Slot 0 is the current stream's; an overlap side stream's
// slot is its handle. The memory comes from torch's allocator (the caching allocator on CUDA),
// zero-filled when made. A workspace is made or grown only outside CUDA-graph capture (memory
// made during a capture belongs to the graph's private pool, and a zero-fill captured in a graph
// runs only at replay): inside one, a missing workspace is an error, not an allocation.
#pragma once
#include <cstdint>

#include "checks.hpp"

namespace mhc::torch_ops {

inline constexpr int64_t kMainSlot = 0;

// The workspace of (device, hidden, n, slot) for at least `tokens` tokens: the pool's, made or
// grown now if it is missing or smaller (growing synchronises the device once: the old buffer
// may still be in use on another stream).
Tensor pool_workspace(Where device, int64_t hidden, int64_t n, int64_t tokens, int64_t slot);
void pool_clear();
int64_t pool_size();  // how many workspaces the pool holds

// Bytes of the workspace for up to `tokens` tokens of hidden size C and n streams.
int64_t workspace_bytes(int64_t hidden, int64_t n, int64_t tokens);

}  // namespace mhc::torch_ops
