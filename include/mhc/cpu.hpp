// The CPU layer: the fp32 CPU backend, the float64 reference, error metrics against it, the
// synthetic model.
#pragma once
#include "mhc/core.hpp"
#include "mhc/cpu/compare.hpp"
#include "mhc/cpu/cpu_backend.hpp"
#include "mhc/cpu/fp32_site.hpp"
#include "mhc/cpu/model.hpp"
#include "mhc/cpu/reference.hpp"
