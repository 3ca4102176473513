// Helpers of the kernel plan tests (test_kernel_plan.cpp, test_kernel_plan_tactics.cpp): plans of
// simulated GPUs and binaries.
#pragma once
#include <string>

#include "mhc/core/config.hpp"
#include "mhc/core/kernel_plan.hpp"

namespace mhc::plan_test {

inline constexpr int kH200Sms = 132;
inline constexpr const char* kWithSm100 = "sm_90a,sm_80,sm_100f,compute_80";
inline constexpr const char* kWithoutSm100 = "sm_90a,sm_80,compute_80";

// The plan of a simulated GPU of compute capability `arch` with kH200Sms SMs running a binary of
// these images, under this kernel config (JSON text; empty: the defaults).
inline KernelPlan plan(const char* arch, const char* images, const char* config = "") {
  return simulated_plan(parse_capability(arch), kH200Sms, parse_images(images),
                        KernelConfig::parse(config));
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace mhc::plan_test
