# install() rules and the exported package: after `cmake --install build --prefix P`, a C++ engine
# does find_package(mhc) (with P in CMAKE_PREFIX_PATH), links mhc::mhc and includes
# <mhc/mhc.hpp>. The target carries MHC_WITH_CUDA / MHC_WITH_NCCL as the library was built.
# Everything here is the "dev" component; a wheel installs only the "python" component.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(MHC_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/mhc")
set(_mhc_installed_targets mhc_core mhc_backends mhc_all)
if(MHC_HAVE_CUDA)
  list(APPEND _mhc_installed_targets mhc_cuda)
endif()

install(TARGETS ${_mhc_installed_targets} EXPORT mhcTargets
  ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}" COMPONENT dev
  INCLUDES DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
install(DIRECTORY include/mhc DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}" COMPONENT dev)
install(FILES "${PROJECT_BINARY_DIR}/generated/include/mhc/core/version.hpp"
  DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/mhc/core" COMPONENT dev)
install(EXPORT mhcTargets NAMESPACE mhc:: DESTINATION "${MHC_INSTALL_CMAKEDIR}" COMPONENT dev)

# What mhcConfig.cmake needs to re-create the imported dependencies of the exported targets.
set(MHC_CONFIG_WITH_CUDA ${MHC_HAVE_CUDA})
set(MHC_CONFIG_WITH_NCCL ${MHC_HAVE_NCCL})
set(MHC_CONFIG_NCCL_LIBRARY "${MHC_NCCL_LIBRARY}")
set(MHC_CONFIG_NCCL_INCLUDE_DIR "${MHC_NCCL_INCLUDE_DIR}")
configure_package_config_file(cmake/mhcConfig.cmake.in "${PROJECT_BINARY_DIR}/mhcConfig.cmake"
  INSTALL_DESTINATION "${MHC_INSTALL_CMAKEDIR}")
# 0.x: a minor release may break the API, so only the same minor version is compatible.
write_basic_package_version_file("${PROJECT_BINARY_DIR}/mhcConfigVersion.cmake"
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/mhcConfig.cmake" "${PROJECT_BINARY_DIR}/mhcConfigVersion.cmake"
  DESTINATION "${MHC_INSTALL_CMAKEDIR}" COMPONENT dev)
