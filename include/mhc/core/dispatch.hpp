// The overlap dispatch policy (design doc, "Eligibility"), pure C++: no CUDA, no tensors.
//
// Given the situation (device, shapes, execution mode, token count, tensor parallelism) it says
// whether the coefficient path runs on the side stream, and if not, the first condition that
// failed as a stable code plus a sentence; the token threshold in force; and the all-reduce.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mhc/core/capability.hpp"
#include "mhc/core/config.hpp"

namespace mhc {

enum class ExecMode { eager, piecewise, full };
enum class AllReduce { none, nccl, fused };
std::string_view to_string(ExecMode m);
std::string_view to_string(AllReduce a);
ExecMode parse_exec_mode(std::string_view s);  // throws mhc::Error

// Tensor-parallel state as the policy sees it. An interface so that the policy's promise
// ("the fused all-reduce question is settled from the architecture before any TP state is
// consulted") can be tested with an object whose every method fails the test.
class TensorParallelInfo {
 public:
  virtual ~TensorParallelInfo() = default;
  virtual int world_size() const = 0;
  virtual bool fused_allreduce_available() const = 0;
};

struct DispatchInputs {
  ComputeCapability capability;
  // The decision reads the kernel plan (kernel_plan.hpp) made from these: the binary's images
  // (unset: this binary's own, built_images()) and the one the GPU loads (unset: the one the
  // driver would pick). A path the binary lacks is never promised.
  std::optional<std::vector<KernelImage>> images;
  std::optional<KernelImage> loaded_image;
  bool prenorm_gemm_available = true;
  int hidden = 5120;
  int n = 4;
  bool ubatching = false;
  ExecMode mode = ExecMode::full;
  int64_t tokens = 8;
  const TensorParallelInfo* tp = nullptr;  // null: TP = 1
  KernelConfig config;
};

struct DispatchDecision {
  bool overlap = false;
  std::string reason_code;  // stable identifier of the first failed condition; "" when overlapping
  std::string reason;       // one sentence for people; "" when overlapping
  int max_tokens = 0;       // the threshold in force
  std::string max_tokens_source;  // where it came from (config, tactics file, built-in default)
  AllReduce all_reduce = AllReduce::none;
  std::string describe() const;
  std::string to_json() const;  // {"overlap","reason_code","reason","max_tokens","all_reduce"}
};

// The architecture's default token threshold: 16 upstream (GB200-derived) for SM100 and the
// rest; on SM90 the value measured on an H200 (docs/tuning.md, plan_sm90.cpp). Tactics from
// `mhc tune` replace it, the config's overlap_max_tokens replaces both.
inline constexpr int kSm90OverlapMaxTokens = 32;
int default_overlap_max_tokens(ComputeCapability cc);

// Throws mhc::Error on impossible inputs (C < 1, n < 1, M < 0, negative threshold, TP size < 1).
DispatchDecision decide(const DispatchInputs& in);

}  // namespace mhc
