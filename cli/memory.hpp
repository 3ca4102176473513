// The host memory a command will allocate, computed with overflow-checked arithmetic before
// anything is allocated, and refused with a message stating it when this machine cannot give it
// (rather than std::bad_alloc half way, or a size that wrapped around).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mhc/core/params.hpp"

namespace mhc::cli {

// One named part of what a command allocates; nullopt when its size overflows 64 bits.
struct MemoryPart {
  std::string what;
  std::optional<uint64_t> bytes;
};

// The product of `factors`, or nullopt when it overflows 64 bits.
std::optional<uint64_t> checked_product(std::initializer_list<uint64_t> factors);

// A model's weights as the host holds them (ModelWeights): every site's hc_fn, hc_base, hc_scale,
// norm weight and stand-in gain, and the final norm, all f32.
std::optional<uint64_t> model_weight_bytes(const MhcParams& p);

// Throws mhc::Error stating the parts and their sum when it overflows or is more than this
// process can allocate now: MemAvailable in /proc/meminfo (else the physical memory), or less
// where a container's memory limit or ulimit -v leaves less.
void require_host_memory(std::string_view command, const std::vector<MemoryPart>& parts);

}  // namespace mhc::cli
