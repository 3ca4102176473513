// The CUDA implementation of mhc::Backend. Host-only declarations (no CUDA headers), so the
// registry and the CLI compile the same with or without CUDA.
#pragma once
#include <memory>
#include <string>

#include "mhc/core/backend.hpp"

namespace mhc::cuda {
// True when the CUDA runtime sees at least one device. Never throws.
bool device_present();
// Throws mhc::Error when no GPU is present or the GPU is unsupported (below sm_80).
std::unique_ptr<Backend> make_backend(const KernelConfig& config);
}  // namespace mhc::cuda
