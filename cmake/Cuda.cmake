# CUDA detection. Sets MHC_HAVE_CUDA and provides mhc_cuda_target_flags(target).
#
# Every kernel variant is compiled ahead of time (no run-time compilation while serving), one
# SASS image per entry of MHC_CUDA_ARCHS plus compute_<MHC_CUDA_PTX> PTX:
#   90a   Hopper, with wgmma and the other arch-specific instructions;
#   80    the portable path (A100, and the other 8.x GPUs);
#   100f  Blackwell (10.0 and 10.3: the family target, since no 10.0-only instruction is used),
#         where the toolkit knows it; the portable kernels with the sm_90 instructions (TMA,
#         mbarriers, programmatic dependent launch), no wgmma;
#   PTX   so that GPUs without their own SASS here can still JIT-load the portable path.
# The list is compiled into the binary (MHC_CUDA_IMAGES) so that the kernel plan
# (mhc/core/kernel_plan.hpp) knows which images exist; the run-time query confirms which one loaded.
set(MHC_HAVE_CUDA OFF)
if(NOT MHC_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_ARCHITECTURES OFF)
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(MHC_HAVE_CUDA ON)
  elseif(MHC_CUDA STREQUAL "ON")
    message(FATAL_ERROR "MHC_CUDA=ON but no CUDA compiler was found")
  endif()
endif()
message(STATUS "mhc: CUDA backend ${MHC_HAVE_CUDA}")

# CMake 3.25 predates nvcc 13 and does not know its C++20 flag; tell it.
if(MHC_HAVE_CUDA)
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  list(APPEND CMAKE_CUDA_COMPILE_FEATURES cuda_std_20)
  # C++17 for CUDA sources: fmt 9's headers do not compile under nvcc in C++20 mode
  # (is_constant_evaluated calls a function FMT_CONSTEXPR leaves non-constexpr under nvcc).
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  set(mhc_default_archs 90a 80)
  if(CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.9)  # family targets (sm_100f) from 12.9
    list(APPEND mhc_default_archs 100f)
  endif()
  set(mhc_default_ptx 80)
  # A Python package build (scikit-build-core sets SKBUILD) compiles what TORCH_CUDA_ARCH_LIST
  # asks for, as PyTorch extensions do, else the Hopper image alone (cmake/TorchArchList.cmake).
  if(SKBUILD)
    if(NOT "$ENV{TORCH_CUDA_ARCH_LIST}" STREQUAL "")
      include(${CMAKE_CURRENT_LIST_DIR}/TorchArchList.cmake)
      mhc_archs_from_torch_list("$ENV{TORCH_CUDA_ARCH_LIST}" mhc_default_archs mhc_default_ptx)
    else()
      set(mhc_default_archs 90a)
      set(mhc_default_ptx "")
    endif()
  endif()
  set(MHC_CUDA_ARCHS "${mhc_default_archs}" CACHE STRING
      "SASS images to compile (e.g. 90a;80;100f or 100a): each becomes -gencode compute_X,sm_X")
  set(MHC_CUDA_PTX "${mhc_default_ptx}" CACHE STRING
      "Virtual architecture of the PTX kept for JIT (empty: none)")
  set(mhc_gencode "")
  set(mhc_images "")
  foreach(arch IN LISTS MHC_CUDA_ARCHS)
    list(APPEND mhc_gencode -gencode=arch=compute_${arch},code=sm_${arch})
    list(APPEND mhc_images sm_${arch})
  endforeach()
  if(NOT MHC_CUDA_PTX STREQUAL "")
    list(APPEND mhc_gencode -gencode=arch=compute_${MHC_CUDA_PTX},code=compute_${MHC_CUDA_PTX})
    list(APPEND mhc_images compute_${MHC_CUDA_PTX})
  endif()
  string(REPLACE ";" "," MHC_CUDA_IMAGES "${mhc_images}")
  message(STATUS "mhc: CUDA images ${MHC_CUDA_IMAGES}")
endif()

# ptxas fails the build when any kernel spills registers or uses local memory (a stack frame):
# the kernels keep every per-token array in registers (the Sinkhorn matrix, MMA fragments), and a
# change that pushes one to local memory is a slowdown that must not land silently. CI compiles
# every kernel, so it checks this without a GPU.
function(mhc_cuda_target_flags target)
  set(ptxas_checks -Xptxas=-warn-spills,-warn-lmem-usage,-Werror)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:
      ${mhc_gencode}
      --expt-relaxed-constexpr
      -lineinfo
      ${ptxas_checks}
    >)
endfunction()
