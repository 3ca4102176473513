# NCCL detection for tensor parallelism (docs/tensor_parallel.md). Sets MHC_HAVE_NCCL and, when
# found, the imported target mhc::nccl. MHC_NCCL=AUTO|ON|OFF.
#
# Roots are tried in order, and the first one holding BOTH nccl.h and the library wins, so a
# header of one NCCL is never paired with the library of another:
#   1. NCCL_ROOT (CMake or environment variable);
#   2. the CUDA toolkit (nccl.h and libnccl.so next to the toolkit, /usr/local/cuda);
#   3. the system (/usr, /usr/local: Debian's libnccl-dev);
#   4. Python's nvidia-nccl wheel (site-packages/nvidia/nccl/{include,lib}), which is where the GPU
#      machines have it: asked of python3 itself, then a few usual virtual-environment paths.
# The wheel ships only libnccl.so.2 (no unversioned libnccl.so), so both names are searched.
set(MHC_NCCL "AUTO" CACHE STRING "Build tensor parallelism with NCCL (AUTO, ON, OFF)")
set(NCCL_ROOT "" CACHE PATH "NCCL installation prefix (include/nccl.h, lib/libnccl.so*)")
set(MHC_HAVE_NCCL OFF)

function(_mhc_nccl_python_roots out)
  set(roots "")
  find_program(_mhc_python3 NAMES python3)
  if(_mhc_python3)
    execute_process(
      COMMAND "${_mhc_python3}" -c "import nvidia.nccl as m; print(list(m.__path__)[0])"
      OUTPUT_VARIABLE py_root OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
    if(rc EQUAL 0 AND py_root)
      list(APPEND roots "${py_root}")
    endif()
  endif()
  file(GLOB globbed /opt/torch/.venv/lib/python3*/site-packages/nvidia/nccl
                    /usr/local/lib/python3*/dist-packages/nvidia/nccl
                    /usr/lib/python3/dist-packages/nvidia/nccl)
  list(APPEND roots ${globbed})
  set(${out} "${roots}" PARENT_SCOPE)
endfunction()

function(_mhc_find_nccl)
  set(roots ${NCCL_ROOT} $ENV{NCCL_ROOT})
  if(CUDAToolkit_LIBRARY_ROOT)
    list(APPEND roots "${CUDAToolkit_LIBRARY_ROOT}")
  endif()
  list(APPEND roots /usr/local/cuda /usr /usr/local)
  _mhc_nccl_python_roots(py_roots)
  list(APPEND roots ${py_roots})
  foreach(root IN LISTS roots)
    find_path(inc nccl.h PATHS "${root}" PATH_SUFFIXES include NO_DEFAULT_PATH NO_CACHE)
    find_library(lib NAMES nccl libnccl.so.2 PATHS "${root}"
                 PATH_SUFFIXES lib lib64 lib/x86_64-linux-gnu lib/aarch64-linux-gnu
                 NO_DEFAULT_PATH NO_CACHE)
    if(inc AND lib)
      set(MHC_NCCL_INCLUDE_DIR "${inc}" PARENT_SCOPE)
      set(MHC_NCCL_LIBRARY "${lib}" PARENT_SCOPE)
      return()
    endif()
    unset(inc)
    unset(lib)
  endforeach()
endfunction()

if(MHC_HAVE_CUDA AND NOT MHC_NCCL STREQUAL "OFF")
  _mhc_find_nccl()
  if(MHC_NCCL_INCLUDE_DIR AND MHC_NCCL_LIBRARY)
    add_library(mhc::nccl SHARED IMPORTED)
    set_target_properties(mhc::nccl PROPERTIES
      IMPORTED_LOCATION "${MHC_NCCL_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${MHC_NCCL_INCLUDE_DIR}")
    set(MHC_HAVE_NCCL ON)
  elseif(MHC_NCCL STREQUAL "ON")
    message(FATAL_ERROR "MHC_NCCL=ON but NCCL was not found; set NCCL_ROOT to its prefix")
  endif()
elseif(MHC_NCCL STREQUAL "ON")
  message(FATAL_ERROR "MHC_NCCL=ON needs the CUDA backend")
endif()
if(MHC_HAVE_NCCL)
  message(STATUS "mhc: NCCL (tensor parallelism) ON: ${MHC_NCCL_LIBRARY}")
else()
  message(STATUS "mhc: NCCL (tensor parallelism) OFF")
endif()
