// The CUDA layer, host side: checked launchers of the kernels on device pointers, device buffers,
// one site on the device, the CUDA backend, timing of device work. Kernels themselves are in the
// .cuh headers beside these (include them from .cu files only).
#pragma once
#include "mhc/core.hpp"
#include "mhc/cuda/check.hpp"
#include "mhc/cuda/cuda_backend.hpp"
#include "mhc/cuda/device_buffer.hpp"
#include "mhc/cuda/device_site.hpp"
#include "mhc/cuda/kernels.hpp"
#include "mhc/cuda/timing.hpp"
