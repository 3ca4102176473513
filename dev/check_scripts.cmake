# Fails when a lab script no longer parses: bash -n on dev/scripts/*.sh, py_compile on
# dev/scripts/*.py (compiled in memory, nothing written beside the sources). Run by ctest
# (dev/CMakeLists.txt, label lab):
#   cmake -DBASH=... -DPYTHON=... -DSCRIPTS=.../dev/scripts -P check_scripts.cmake
foreach(var BASH PYTHON SCRIPTS)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_scripts.cmake: -D${var}=... is required")
  endif()
endforeach()
file(GLOB shell_scripts "${SCRIPTS}/*.sh")
file(GLOB python_scripts "${SCRIPTS}/*.py")
if(NOT shell_scripts OR NOT python_scripts)
  message(FATAL_ERROR "check_scripts.cmake: no scripts found under ${SCRIPTS}")
endif()
set(failed "")
foreach(script IN LISTS shell_scripts)
  execute_process(COMMAND "${BASH}" -n "${script}" RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    list(APPEND failed "${script}: ${err}")
  endif()
endforeach()
foreach(script IN LISTS python_scripts)
  execute_process(
    COMMAND "${PYTHON}" -c "import sys; compile(open(sys.argv[1]).read(), sys.argv[1], 'exec')"
            "${script}"
    RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    list(APPEND failed "${script}: ${err}")
  endif()
endforeach()
if(failed)
  string(REPLACE ";" "\n" report "${failed}")
  message(FATAL_ERROR "lab scripts that do not parse:\n${report}")
endif()
list(LENGTH shell_scripts n_sh)
list(LENGTH python_scripts n_py)
message(STATUS "lab scripts parse: ${n_sh} shell, ${n_py} Python")
