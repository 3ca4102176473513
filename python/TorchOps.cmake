# The torch ops library mhc/_torch_ops.so (python/src/torch): torch.ops.mhc.* registered in C++ on
# PyTorch's stable ABI (docs/python.md, "The PyTorch ops"). It is built against the headers of the
# torch that the building Python imports and targets the oldest torch it supports
# (TORCH_TARGET_VERSION), so one build serves every torch from that one on. It links only
# libtorch_cpu (and libtorch_cuda with the CUDA backend) for the stable C shim, whose symbols are
# those of the torch already loaded when `import mhc` loads the library.
#
# MHC_TORCH_OPS: AUTO (the default of a wheel build) builds the ops where torch (>= the oldest
# supported) can be imported, else mhc._C alone with a warning saying how to get the ops (a plain
# `pip install .` builds in an isolated environment, which has no torch); the package then says
# the same at import (mhc/_build.py). ON fails the configure without torch, with how to fix it;
# OFF builds mhc._C alone (numpy and CuPy callers).
if(DEFINED SKBUILD)
  set(_mhc_torch_ops_default AUTO)
else()
  set(_mhc_torch_ops_default OFF)
endif()
set(MHC_TORCH_OPS ${_mhc_torch_ops_default} CACHE STRING
    "Build the torch ops library: ON (needs torch importable at build time), OFF, or AUTO (where torch is importable)")
set_property(CACHE MHC_TORCH_OPS PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${MHC_TORCH_OPS}" _mhc_torch_ops_mode)
if(NOT _mhc_torch_ops_mode MATCHES "^(AUTO|ON|OFF|TRUE|FALSE|YES|NO|1|0)$")
  message(FATAL_ERROR "mhc: MHC_TORCH_OPS=${MHC_TORCH_OPS}: expected AUTO, ON or OFF")
endif()

# What the package says at import about its torch ops (python/mhc/_build.py reads this file).
function(mhc_torch_ops_status status)
  file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/_build.py
       "# Written by the build (python/TorchOps.cmake).\nTORCH_OPS = \"${status}\"\n")
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/_build.py DESTINATION mhc COMPONENT python)
endfunction()

if(NOT _mhc_torch_ops_mode STREQUAL "AUTO" AND NOT MHC_TORCH_OPS)
  message(STATUS "mhc: torch ops library off (MHC_TORCH_OPS=OFF): mhc._C only")
  mhc_torch_ops_status("off")
  return()
endif()

# The oldest torch the library supports: the stable ABI's string arguments, torch_call_dispatcher
# and torch_library_impl arrived in 2.10.
set(MHC_TORCH_MIN_VERSION 2.10)
set(_mhc_torch_fix
    "Install torch first and build without build isolation:\n"
    "  pip install torch nanobind scikit-build-core && pip install --no-build-isolation .")
execute_process(
  COMMAND "${Python_EXECUTABLE}" -c
          "import os, torch; print(os.path.dirname(torch.__file__)); print(torch.__version__)"
  OUTPUT_VARIABLE _mhc_torch_out ERROR_VARIABLE _mhc_torch_err RESULT_VARIABLE _mhc_torch_rc
  OUTPUT_STRIP_TRAILING_WHITESPACE)
if(_mhc_torch_rc EQUAL 0)
  string(REPLACE "\n" ";" _mhc_torch_lines "${_mhc_torch_out}")
  list(GET _mhc_torch_lines 1 _mhc_torch_seen)
  string(REGEX MATCH "^[0-9]+\\.[0-9]+" _mhc_torch_seen_mm "${_mhc_torch_seen}")
  if(_mhc_torch_seen_mm VERSION_LESS MHC_TORCH_MIN_VERSION)
    set(_mhc_torch_rc 1)
    set(_mhc_torch_err "torch ${_mhc_torch_seen} is older than ${MHC_TORCH_MIN_VERSION}, the "
                       "oldest with the stable ABI the ops use")
  endif()
endif()
if(NOT _mhc_torch_rc EQUAL 0 AND _mhc_torch_ops_mode STREQUAL "AUTO")
  string(STRIP "${_mhc_torch_err}" _mhc_torch_err)
  string(REGEX REPLACE ".*\n" "" _mhc_torch_err "${_mhc_torch_err}")  # the error's last line
  message(WARNING
    "mhc: building mhc._C WITHOUT the torch ops (torch.ops.mhc.*, mhc.pre, ...): torch "
    ">= ${MHC_TORCH_MIN_VERSION} is not importable by ${Python_EXECUTABLE} "
    "(${_mhc_torch_err}); a plain `pip install .` builds in an isolated environment without "
    "torch. ${_mhc_torch_fix}\n"
    "(-Ccmake.define.MHC_TORCH_OPS=ON makes this an error; =OFF builds mhc._C alone without "
    "this warning.)")
  mhc_torch_ops_status("missing: torch was not importable at build time")
  return()
endif()
if(NOT _mhc_torch_rc EQUAL 0)
  message(FATAL_ERROR
    "mhc: the torch ops library needs torch (>= ${MHC_TORCH_MIN_VERSION}) importable by "
    "${Python_EXECUTABLE} at build time, which failed:\n${_mhc_torch_err}\n${_mhc_torch_fix}\n"
    "or build mhc._C alone (no torch ops): -Ccmake.define.MHC_TORCH_OPS=OFF")
endif()
mhc_torch_ops_status("built")
string(REPLACE "\n" ";" _mhc_torch_out "${_mhc_torch_out}")
list(GET _mhc_torch_out 0 MHC_TORCH_DIR)
list(GET _mhc_torch_out 1 MHC_TORCH_VERSION)
message(STATUS "mhc: torch ops library against torch ${MHC_TORCH_VERSION} (${MHC_TORCH_DIR}), "
               "targeting torch >= ${MHC_TORCH_MIN_VERSION}")

file(GLOB MHC_TORCH_OPS_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/torch/*.cpp)
add_library(mhc_torch_ops MODULE ${MHC_TORCH_OPS_SOURCES} ${CMAKE_CURRENT_SOURCE_DIR}/src/launch.cpp
            ${CMAKE_CURRENT_SOURCE_DIR}/src/launch_head.cpp
            ${CMAKE_CURRENT_SOURCE_DIR}/src/launch_fp8.cpp)
set_target_properties(mhc_torch_ops PROPERTIES PREFIX "" OUTPUT_NAME "_torch_ops"
                      CXX_VISIBILITY_PRESET hidden SKIP_BUILD_RPATH ON)
# Only torch/ of torch's include directory: it also holds its own fmt, which must not shadow the
# one the library is built with (and refuses TORCH_TARGET_VERSION builds).
set(_mhc_torch_include ${CMAKE_CURRENT_BINARY_DIR}/torch-include)
file(MAKE_DIRECTORY ${_mhc_torch_include})
file(CREATE_LINK ${MHC_TORCH_DIR}/include/torch ${_mhc_torch_include}/torch SYMBOLIC)
target_include_directories(mhc_torch_ops SYSTEM PRIVATE ${_mhc_torch_include})
target_compile_definitions(mhc_torch_ops PRIVATE TORCH_TARGET_VERSION=0x020a000000000000)
target_link_libraries(mhc_torch_ops PRIVATE mhc_backends ${MHC_TORCH_DIR}/lib/libtorch_cpu.so)
if(MHC_HAVE_CUDA)
  # aoti_torch_get_current_cuda_stream: torch's current stream, declared for USE_CUDA builds.
  target_compile_definitions(mhc_torch_ops PRIVATE USE_CUDA)
  target_link_libraries(mhc_torch_ops PRIVATE ${MHC_TORCH_DIR}/lib/libtorch_cuda.so)
endif()
target_link_options(mhc_torch_ops PRIVATE "LINKER:--as-needed")
install(TARGETS mhc_torch_ops LIBRARY DESTINATION mhc COMPONENT python)
