# The CUDA architectures of a Python package build (pip install .): those TORCH_CUDA_ARCH_LIST
# asks for, read as PyTorch extensions read it, else the Hopper image alone (docs/python.md,
# "Building"). Sets mhc_default_archs and mhc_default_ptx, the defaults of MHC_CUDA_ARCHS and
# MHC_CUDA_PTX (cmake/Cuda.cmake), which -Ccmake.define.MHC_CUDA_ARCHS=... still overrides.
#
# TORCH_CUDA_ARCH_LIST holds entries such as "8.0", "9.0a", "10.0+PTX", separated by ';' or
# spaces, PyTorch's names ("Ampere", "Hopper", ...) or "native" (the architectures of the GPUs
# nvidia-smi lists); "X.Y" becomes the SASS image sm_XY and
# "+PTX" also keeps compute_XY PTX (the last such entry: one PTX is kept). 9.0 becomes sm_90a: the
# Hopper kernels use wgmma, which only the arch-specific image has. Entries below 8.0 are refused:
# the kernels need bf16 tensor cores.

# PyTorch's names (torch/utils/cpp_extension.py), combined names before the single ones.
set(_mhc_named_arches
    "Kepler+Tesla=3.7" "Kepler=3.5+PTX" "Maxwell+Tegra=5.3" "Maxwell=5.0,5.2+PTX"
    "Pascal=6.0,6.1+PTX" "Volta+Tegra=7.2" "Volta=7.0+PTX" "Turing=7.5+PTX" "Ampere+Tegra=8.7"
    "Ampere=8.0,8.6+PTX" "Ada=8.9+PTX" "Hopper=9.0+PTX" "Blackwell+Tegra=11.0"
    "Blackwell=10.0,10.3,12.0,12.1+PTX" "Rubin=10.7+PTX")

function(mhc_archs_from_torch_list text out_archs out_ptx)
  string(REPLACE " " ";" list "${text}")
  if(list STREQUAL "native")  # as PyTorch: the visible GPUs' architectures
    execute_process(COMMAND nvidia-smi --query-gpu=compute_cap --format=csv,noheader
                    OUTPUT_VARIABLE list RESULT_VARIABLE rc ERROR_QUIET)
    string(STRIP "${list}" list)
    string(REPLACE "\n" ";" list "${list}")
    if(NOT rc EQUAL 0 OR list STREQUAL "")
      message(FATAL_ERROR "TORCH_CUDA_ARCH_LIST=native: nvidia-smi lists no GPU here; name the "
                          "architectures (e.g. TORCH_CUDA_ARCH_LIST=9.0)")
    endif()
  endif()
  foreach(named IN LISTS _mhc_named_arches)
    string(REPLACE "=" ";" pair "${named}")
    list(GET pair 0 name)
    list(GET pair 1 archs)
    string(REPLACE "," ";" archs "${archs}")
    string(REPLACE "${name}" "${archs}" list "${list}")
  endforeach()
  set(archs "")
  set(ptx "")
  foreach(entry IN LISTS list)
    if(entry STREQUAL "")
      continue()
    endif()
    if(NOT entry MATCHES "^([0-9]+)\\.([0-9])([af]?)(\\+PTX)?$")
      message(FATAL_ERROR "TORCH_CUDA_ARCH_LIST: '${entry}' is not an architecture such as 9.0, "
                          "9.0a, 8.0+PTX or a name such as Hopper (TORCH_CUDA_ARCH_LIST='${text}')")
    endif()
    set(num "${CMAKE_MATCH_1}${CMAKE_MATCH_2}")
    set(suffix "${CMAKE_MATCH_3}")
    if(num LESS 80)
      message(FATAL_ERROR "TORCH_CUDA_ARCH_LIST: ${entry} is older than 8.0, which the mhc kernels "
                          "need (bf16 tensor cores); list 8.0 or newer (TORCH_CUDA_ARCH_LIST='${text}')")
    endif()
    if(num EQUAL 90 AND suffix STREQUAL "")
      set(suffix "a")
    endif()
    list(APPEND archs "${num}${suffix}")
    if(CMAKE_MATCH_4)
      set(ptx "${num}")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES archs)
  if(archs STREQUAL "")
    message(FATAL_ERROR "TORCH_CUDA_ARCH_LIST is set but names no architecture")
  endif()
  set(${out_archs} "${archs}" PARENT_SCOPE)
  set(${out_ptx} "${ptx}" PARENT_SCOPE)
endfunction()
