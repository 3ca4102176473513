# Build-time options that change how the host C++ is compiled, never what it does.
#
# Unity builds for the command-line tool and its tests: their sources each instantiate the same
# CLI11, fmt and nlohmann::json templates, and optimising those copies once per source is most of
# their compile time. In batches of 8 sources (two per target, to keep two cores busy), g++ 12 at
# -O3 took 46 s of CPU for the 16 sources of `mhc` instead of 186 s, and 35 s instead of 91 s for
# the 16 of test_cli (measured one compile at a time). Only targets whose sources compile together
# are listed: the other test areas have file-local helpers of the same name (tests/core, tests/cpu,
# tests/io). In these two, a file-local name defined twice with the same signature fails to
# compile; overloads of one name must take distinct types (cli/'s two report_json do), so no call
# silently picks another file's helper. Pure C++ in every configuration, so CUDA builds compile
# these targets the same way. OFF gives one object per source (a developer who edits one CLI file
# and rebuilds often may prefer it).
option(MHC_UNITY_BUILD "Compile the CLI and its tests as unity builds (faster from scratch)" ON)
if(MHC_UNITY_BUILD)
  foreach(_mhc_target mhc test_cli)
    if(TARGET ${_mhc_target})
      set_target_properties(${_mhc_target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
    endif()
  endforeach()
endif()

# A compiler cache (ccache) for the two libraries that both the C++ build and the Python package's
# build compile, with the same flags (scripts/test.sh sets MHC_COMPILER_CACHE): pip's build, in a
# directory of its own, then takes build/'s objects instead of compiling them again (38 of the 41
# compiles, found by ccache's preprocessor mode since the generated headers' directory differs;
# the three whose defines change with the CUDA backend compile again). Only these two targets, so
# the other sources pay no cache look-up. Read from the environment at the first
# configure and kept in the cache, so a later configure without it does not change the commands.
set(MHC_COMPILER_CACHE "$ENV{MHC_COMPILER_CACHE}" CACHE STRING
    "Compiler launcher (e.g. ccache) for mhc_core and mhc_backends; empty for none")
if(MHC_COMPILER_CACHE)
  # Looked up at every configure: a cache named here but no longer installed is left out (with a
  # warning) instead of failing every compile.
  find_program(_mhc_compiler_cache NAMES "${MHC_COMPILER_CACHE}" NO_CACHE)
  if(_mhc_compiler_cache)
    set_target_properties(mhc_core mhc_backends PROPERTIES CXX_COMPILER_LAUNCHER "${_mhc_compiler_cache}")
  else()
    message(WARNING "MHC_COMPILER_CACHE=${MHC_COMPILER_CACHE} not found: compiling without it")
  endif()
endif()
