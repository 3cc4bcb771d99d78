include(CMakePackageConfigHelpers)

install(TARGETS gexec EXPORT gexecTargets)
install(DIRECTORY include/gexec DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

set(GEXEC_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/gexec)
install(EXPORT gexecTargets NAMESPACE gexec:: DESTINATION ${GEXEC_CMAKE_DIR})
configure_package_config_file(cmake/gexecConfig.cmake.in
  ${PROJECT_BINARY_DIR}/gexecConfig.cmake INSTALL_DESTINATION ${GEXEC_CMAKE_DIR})
# Header-only: one package serves every architecture.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/gexecConfigVersion.cmake
  COMPATIBILITY SameMinorVersion ARCH_INDEPENDENT)
install(FILES
  ${PROJECT_BINARY_DIR}/gexecConfig.cmake
  ${PROJECT_BINARY_DIR}/gexecConfigVersion.cmake
  cmake/gexecDependencies.cmake
  DESTINATION ${GEXEC_CMAKE_DIR})
