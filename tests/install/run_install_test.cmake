# ctest -R install_find_package: installs the build (component "dev") to a fresh prefix, moves
# the prefix elsewhere (the package must be relocatable), builds tests/install against it with
# find_package(mhc), runs the consumer and checks what it prints, then runs the C++ API example
# (engine: a site on the GPU against the CPU backend, or a line saying it was skipped) and, where
# fmt is found, a program formatting with fmt of its own beside mhc (fmt_user).
# Inputs (-D): MHC_BUILD_DIR, MHC_CONSUMER_DIR, MHC_WORK_DIR, MHC_GENERATOR, MHC_CXX,
# MHC_EXPECTED (the line the consumer must print), MHC_CUDA_ROOT (may be empty), MHC_NM (nm, to
# check the installed libraries' symbols; may be empty).
file(REMOVE_RECURSE "${MHC_WORK_DIR}")
set(prefix "${MHC_WORK_DIR}/prefix")

function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

run_step("install" "${CMAKE_COMMAND}" --install "${MHC_BUILD_DIR}" --prefix "${prefix}.installed"
         --component dev)
file(RENAME "${prefix}.installed" "${prefix}")
# The product libraries do not link cuBLAS (only the benchmark's stand-in decoder uses it).
file(GLOB_RECURSE exported "${prefix}/*/cmake/mhc/*.cmake")
foreach(file IN LISTS exported)
  file(READ "${file}" text)
  if(text MATCHES "cublas")
    message(FATAL_ERROR "the installed package names cuBLAS (${file})")
  endif()
endforeach()
# fmt's implementation is inside mhc_core in a namespace of mhc's own (cmake/Dependencies.cmake):
# no installed library defines a symbol of fmt's own namespace (fmt::v9), which a program linking
# its own fmt would then get twice. Header-only fmt or the plain namespace would define them here.
if(MHC_NM)
  file(GLOB archives "${prefix}/*/libmhc*.a")
  if(NOT archives)
    message(FATAL_ERROR "no installed static library under ${prefix}")
  endif()
  foreach(archive IN LISTS archives)
    execute_process(COMMAND "${MHC_NM}" --defined-only "${archive}" RESULT_VARIABLE rc
                    OUTPUT_VARIABLE symbols ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "${MHC_NM} ${archive} failed (${rc}): ${err}")
    endif()
    string(REGEX MATCH " _Z[A-Z]*3fmt2v9[^\n]*" fmt_symbol "${symbols}")
    if(fmt_symbol)
      message(FATAL_ERROR "${archive} defines a symbol of fmt's own namespace:${fmt_symbol}")
    endif()
  endforeach()
endif()
set(cuda_arg "")
if(MHC_CUDA_ROOT)
  set(cuda_arg "-DCUDAToolkit_ROOT=${MHC_CUDA_ROOT}")
endif()
run_step("configure the consumer" "${CMAKE_COMMAND}" -S "${MHC_CONSUMER_DIR}"
         -B "${MHC_WORK_DIR}/build" -G "${MHC_GENERATOR}" "-DCMAKE_CXX_COMPILER=${MHC_CXX}"
         "-DCMAKE_PREFIX_PATH=${prefix}" ${cuda_arg})
run_step("build the consumer" "${CMAKE_COMMAND}" --build "${MHC_WORK_DIR}/build")
run_step("run the consumer" "${MHC_WORK_DIR}/build/consumer")
if(NOT step_output MATCHES "^${MHC_EXPECTED} ")
  message(FATAL_ERROR "the consumer printed '${step_output}', expected '${MHC_EXPECTED} ...'")
endif()
message(STATUS "consumer: ${step_output}")
run_step("run the C++ API example" "${MHC_WORK_DIR}/build/engine")
if(NOT step_output MATCHES "^engine: ")
  message(FATAL_ERROR "the C++ API example printed '${step_output}'")
endif()
message(STATUS "${step_output}")
if(EXISTS "${MHC_WORK_DIR}/build/fmt_user")
  run_step("run the program with fmt of its own" "${MHC_WORK_DIR}/build/fmt_user")
  message(STATUS "${step_output}")
else()
  message(STATUS "fmt_user: not built (no fmt where the consumer was configured)")
endif()
