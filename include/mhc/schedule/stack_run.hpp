// One validated forward of a whole stack on the GPU through the StackExecutor, as `mhc run` does
// it: the policy picks the schedule for the execution mode, the forward runs (FULL: captured
// first, then replayed), x after every layer is kept for comparison with the float64 reference.
// Host-only declarations, so the CLI compiles the same with or without CUDA.
#pragma once
#include <string>

#include "mhc/core/config.hpp"
#include "mhc/core/dispatch.hpp"
#include "mhc/cpu/model.hpp"

namespace mhc::cuda {

struct StackRunOptions {
  ExecMode mode = ExecMode::full;
  bool sync_check = false;  // capture the forward in global mode first: any sync is an error
  std::string trace_path;   // non-empty: also write a Chrome trace of one traced forward
  bool native_decode_schedule = false;  // see StackOptions::native_decode_schedule
};

struct StackRunResult {
  StackTrace trace;
  DispatchDecision decision;
  bool overlapped = false;
  bool graph_replayed = false;
  bool sync_checked = false;
};

StackRunResult run_stack(const ModelWeights& w, int64_t tokens, const Bf16* x0,
                         const KernelConfig& config, const StackRunOptions& options);

}  // namespace mhc::cuda
