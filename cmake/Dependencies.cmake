# Every dependency comes from the system (Debian packages, installed by scripts/setup.sh) or,
# on the GPU machine which has no -dev packages, from header copies carried in .deps/
# (dev/scripts/device-deps.sh). Nothing is downloaded at build time.
set(THREADS_PREFER_PTHREAD_FLAG ON)
find_package(Threads REQUIRED)

set(MHC_DEPS_DIR "${CMAKE_SOURCE_DIR}/.deps" CACHE PATH "Carried header-only dependencies")

find_package(nlohmann_json 3.10 QUIET)
if(NOT nlohmann_json_FOUND)
  if(NOT EXISTS "${MHC_DEPS_DIR}/include/nlohmann/json.hpp")
    message(FATAL_ERROR "nlohmann-json not found: run scripts/setup.sh (Debian: nlohmann-json3-dev)")
  endif()
  add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
  target_include_directories(nlohmann_json::nlohmann_json INTERFACE "${MHC_DEPS_DIR}/include")
endif()

if(MHC_CLI)  # only the command-line tool uses CLI11
  find_package(CLI11 QUIET)
  if(NOT CLI11_FOUND)
    if(NOT EXISTS "${MHC_DEPS_DIR}/include/CLI/CLI.hpp")
      message(FATAL_ERROR "CLI11 not found: run scripts/setup.sh (Debian: libcli11-dev)")
    endif()
    add_library(CLI11::CLI11 INTERFACE IMPORTED)
    target_include_directories(CLI11::CLI11 INTERFACE "${MHC_DEPS_DIR}/include")
  endif()
endif()

# fmt: its headers from the system or .deps/, its implementation compiled once, into mhc_core
# (src/core/fmt.cpp), instead of header-only into every source that formats (about 4 s of compile
# per such source at -O2; docs/decisions.md, "fmt compiled once"). No binary or wheel depends on
# libfmt.so. Its symbols sit in an inline namespace of mhc's own (fmt::v9_mhc instead of
# fmt::v9), so that a program linking the installed static libraries and its own fmt gets no
# second definition of any fmt symbol; `fmt::` in mhc's sources is unchanged.
find_package(fmt 9 QUIET)
if(fmt_FOUND)
  get_target_property(_mhc_fmt_include fmt::fmt-header-only INTERFACE_INCLUDE_DIRECTORIES)
elseif(EXISTS "${MHC_DEPS_DIR}/include/fmt/format.h")
  set(_mhc_fmt_include "${MHC_DEPS_DIR}/include")
else()
  message(FATAL_ERROR "fmt not found: run scripts/setup.sh (Debian: libfmt-dev)")
endif()
add_library(mhc_fmt_headers INTERFACE)
target_include_directories(mhc_fmt_headers INTERFACE "${_mhc_fmt_include}")
target_compile_definitions(mhc_fmt_headers INTERFACE
  "FMT_BEGIN_NAMESPACE=namespace fmt { inline namespace v9_mhc {" "FMT_END_NAMESPACE=} }")

# GoogleTest: the system package, else the sources carried in .deps/googletest.
find_package(GTest QUIET)
if(NOT GTest_FOUND AND EXISTS "${MHC_DEPS_DIR}/googletest/CMakeLists.txt")
  set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
  add_subdirectory("${MHC_DEPS_DIR}/googletest" "${CMAKE_BINARY_DIR}/googletest" EXCLUDE_FROM_ALL)
  add_library(GTest::gtest ALIAS gtest)
  add_library(GTest::gtest_main ALIAS gtest_main)
  set(GTest_FOUND TRUE)
endif()
