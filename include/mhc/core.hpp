// The policy layer (no CUDA): shapes and presets, host views of a site, kernel configuration, the
// overlap dispatch policy, tensor-parallel checks, the backend interface, the version.
#pragma once
#include "mhc/core/backend.hpp"
#include "mhc/core/bf16.hpp"
#include "mhc/core/capability.hpp"
#include "mhc/core/config.hpp"
#include "mhc/core/dispatch.hpp"
#include "mhc/core/error.hpp"
#include "mhc/core/kernel_plan.hpp"
#include "mhc/core/params.hpp"
#include "mhc/core/site_views.hpp"
#include "mhc/core/tactics.hpp"
#include "mhc/core/tensor_parallel.hpp"
#include "mhc/core/version.hpp"
#include "mhc/core/workspace.hpp"
