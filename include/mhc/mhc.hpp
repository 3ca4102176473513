// The whole public API of mhc, for engines that link mhc::mhc: the engine API over device pointers
// (mhc/api.hpp, docs/cpp.md) and every layer's umbrella header.
// The CUDA layers are included when the library was built with them (MHC_WITH_CUDA and
// MHC_WITH_NCCL are set by the mhc::mhc target for its users).
#pragma once
#include "mhc/api.hpp"
#include "mhc/core.hpp"
#include "mhc/cpu.hpp"
#include "mhc/io.hpp"
#if defined(MHC_WITH_CUDA)
#include "mhc/cuda.hpp"
#include "mhc/schedule.hpp"
#endif
#if defined(MHC_WITH_NCCL)
#include "mhc/dist.hpp"
#endif
