# CUDA detection. Sets MHC_HAVE_CUDA and provides mhc_cuda_target_flags(target).
#
# Every kernel variant is compiled ahead of time (no run-time compilation while serving):
#   sm_90a  Hopper, with wgmma and the other arch-specific instructions;
#   sm_80   the portable path (A100, and the fallback the runtime picks on other GPUs);
#   compute_80 PTX so that newer GPUs without their own SASS here can still load the portable path.
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
endif()

# ptxas fails the build when any kernel spills registers or uses local memory (a stack frame):
# the kernels keep every per-token array in registers (the Sinkhorn matrix, MMA fragments), and a
# change that pushes one to local memory is a slowdown that must not land silently. CI compiles
# every kernel, so it checks this without a GPU.
function(mhc_cuda_target_flags target)
  set(ptxas_checks -Xptxas=-warn-spills,-warn-lmem-usage,-Werror)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:
      -gencode=arch=compute_90a,code=sm_90a
      -gencode=arch=compute_80,code=sm_80
      -gencode=arch=compute_80,code=compute_80
      --expt-relaxed-constexpr
      -lineinfo
      ${ptxas_checks}
    >)
endfunction()
