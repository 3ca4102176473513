// The whole public API of mhc, for engines that link mhc::mhc: every layer's umbrella header.
// The CUDA layers are included when the library was built with them (MHC_WITH_CUDA and
// MHC_WITH_NCCL are set by the mhc::mhc target for its users).
#pragma once
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
