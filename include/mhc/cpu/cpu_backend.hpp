// The CPU implementation of mhc::Backend (fp32, see mhc/cpu/fp32_site.hpp).
#pragma once
#include <memory>

#include "mhc/core/backend.hpp"

namespace mhc::cpu {
std::unique_ptr<Backend> make_backend(const KernelConfig& config);
}
