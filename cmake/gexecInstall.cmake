# What `cmake --install` puts in place. Component devel is the library itself (headers,
# CMake package, pkg-config file, licence) and needs no build; examples is the sample
# kernel library; tools/ installs its programs itself.
include(CMakePackageConfigHelpers)

install(TARGETS gexec gexec_cuda EXPORT gexecTargets)
if(TARGET gexec_compiled)
  install(TARGETS gexec_compiled EXPORT gexecTargets COMPONENT devel)
  set(_gexec_arch_independent "")
else()
  set(_gexec_arch_independent ARCH_INDEPENDENT)
endif()
# The C API: libgexec_c.so (its one export, gexec_get_api_base) and libgexec_c_static.a,
# exported as gexec::c and gexec::c_static; c_api.h is installed with the other headers.
if(TARGET gexec_c)
  set_target_properties(gexec_c PROPERTIES EXPORT_NAME c)
  set_target_properties(gexec_c_static PROPERTIES EXPORT_NAME c_static)
  install(TARGETS gexec_c gexec_c_static EXPORT gexecTargets
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT devel
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT devel)
  set(_gexec_arch_independent "")  # the package now holds this machine's libraries
endif()
install(DIRECTORY include/gexec DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT devel)
install(FILES LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT devel)

set(GEXEC_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/gexec)
install(EXPORT gexecTargets NAMESPACE gexec:: DESTINATION ${GEXEC_CMAKE_DIR} COMPONENT devel)
configure_package_config_file(cmake/gexecConfig.cmake.in
  ${PROJECT_BINARY_DIR}/gexecConfig.cmake INSTALL_DESTINATION ${GEXEC_CMAKE_DIR})
# Headers only, one package serves every architecture; not with gexec::compiled or gexec::c.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/gexecConfigVersion.cmake
  COMPATIBILITY SameMinorVersion ${_gexec_arch_independent})
install(FILES
  ${PROJECT_BINARY_DIR}/gexecConfig.cmake
  ${PROJECT_BINARY_DIR}/gexecConfigVersion.cmake
  cmake/gexecDependencies.cmake
  cmake/gexecModel.cmake
  cmake/gexecCompilerNotes.cmake
  cmake/gexecKernelArchive.cmake
  cmake/gexecTerminateHandler.cpp
  DESTINATION ${GEXEC_CMAKE_DIR} COMPONENT devel)

# gexec.pc, for builds without CMake. Its prefix is found from where the file lies, so
# `cmake --install --prefix` and a relocated package stay right. Requires: stays empty
# (Debian ships no .pc files for Boost or DLPack); their flags are spelled out instead,
# less the directories the compiler searches anyway.
set(GEXEC_PC_PKGCONFIG_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(GEXEC_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH GEXEC_PC_PREFIX "${CMAKE_INSTALL_PREFIX}/${GEXEC_PC_PKGCONFIG_DIR}" "${CMAKE_INSTALL_PREFIX}")
  string(REGEX REPLACE "/$" "" GEXEC_PC_PREFIX "\${pcfiledir}/${GEXEC_PC_PREFIX}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(GEXEC_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(GEXEC_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
set(GEXEC_PC_CFLAGS "-DBOOST_DLL_USE_STD_FS=1")
foreach(_gexec_dependency IN ITEMS dlpack::dlpack Boost::headers)
  get_target_property(_gexec_dirs ${_gexec_dependency} INTERFACE_INCLUDE_DIRECTORIES)
  foreach(_gexec_dir IN LISTS _gexec_dirs)
    if(_gexec_dir AND NOT _gexec_dir IN_LIST CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES)
      string(APPEND GEXEC_PC_CFLAGS " -I${_gexec_dir}")
    endif()
  endforeach()
endforeach()
set(GEXEC_PC_LIBS "")
get_target_property(_gexec_boost_json Boost::json LOCATION)
if(_gexec_boost_json)
  get_filename_component(_gexec_dir "${_gexec_boost_json}" DIRECTORY)
  if(NOT _gexec_dir IN_LIST CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES)
    string(APPEND GEXEC_PC_LIBS "-L${_gexec_dir} ")
  endif()
endif()
string(APPEND GEXEC_PC_LIBS "-lboost_json")
foreach(_gexec_library IN LISTS CMAKE_DL_LIBS)
  string(APPEND GEXEC_PC_LIBS " -l${_gexec_library}")
endforeach()
string(APPEND GEXEC_PC_LIBS " -pthread")
configure_file(cmake/gexec.pc.in ${PROJECT_BINARY_DIR}/gexec.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/gexec.pc DESTINATION ${GEXEC_PC_PKGCONFIG_DIR} COMPONENT devel)

# The sample kernels (C, TVM's packed C ABI) that the bundled models call, beside
# gexec-run; tests/kernels defines them when tests, examples or benchmarks are built.
if(TARGET gexec_test_kernels)
  install(TARGETS gexec_test_kernels LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/gexec COMPONENT examples)
endif()
