# Fails when a C++ or CUDA source under the given roots differs from what clang-format makes of it
# (.clang-format at the repository root). Run by ctest (tests/CMakeLists.txt):
#   cmake -DCLANG_FORMAT=... -DSOURCE_DIR=... -DROOTS=include,src,... -P check_format.cmake
# A root may also be a single file, which is how the test of this check feeds it a bad one.
foreach(var CLANG_FORMAT SOURCE_DIR ROOTS)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_format.cmake: -D${var}=... is required")
  endif()
endforeach()

set(files "")
string(REPLACE "," ";" roots "${ROOTS}")
foreach(root IN LISTS roots)
  set(path "${SOURCE_DIR}/${root}")
  if(IS_DIRECTORY "${path}")
    file(GLOB_RECURSE found LIST_DIRECTORIES false
         "${path}/*.h" "${path}/*.hpp" "${path}/*.cpp" "${path}/*.cc" "${path}/*.cu"
         "${path}/*.cuh")
    # The fixture of this check's own test is misformatted on purpose.
    list(FILTER found EXCLUDE REGEX "/tests/format/")
    list(APPEND files ${found})
  elseif(EXISTS "${path}")
    list(APPEND files "${path}")
  else()
    message(FATAL_ERROR "check_format.cmake: no such file or directory: ${path}")
  endif()
endforeach()
list(LENGTH files count)
if(count EQUAL 0)
  message(FATAL_ERROR "check_format.cmake: no sources found under ${ROOTS}")
endif()

# --style=file:<path> pins the style to the repository's file whatever directory a source is in
# (a fixture outside the tree included).
execute_process(
  COMMAND "${CLANG_FORMAT}" --dry-run --Werror "--style=file:${SOURCE_DIR}/.clang-format" ${files}
  RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_VARIABLE out)
if(NOT rc EQUAL 0)
  # NOTICE prints clang-format's report as it is; FATAL_ERROR would rewrap it.
  message(NOTICE "${err}${out}")
  message(FATAL_ERROR "clang-format would change the sources above (run clang-format-14 -i)")
endif()
message(STATUS "clang-format: ${count} sources clean")
