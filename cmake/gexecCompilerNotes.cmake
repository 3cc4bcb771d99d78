# GCC on 32-bit ARM notes (-Wpsabi) that passing std::span and vector iterators of 64-bit
# elements changed ABI in GCC 7.1: true of every program built since, nothing a user of
# gexec can act on, and dozens of notes from gexec's headers in a one-file program. Only
# the command line silences it (GCC's diagnostic pragmas do not reach these notes), so
# gexec::gexec carries -Wno-psabi there. Included by the build and by gexecConfig.cmake,
# so that the consumer's target decides.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_SYSTEM_PROCESSOR MATCHES "^(arm|ARM)" AND CMAKE_SIZEOF_VOID_P EQUAL 4)
  get_target_property(_gexec_target gexec::gexec ALIASED_TARGET)
  if(NOT _gexec_target)
    set(_gexec_target gexec::gexec)
  endif()
  set_property(TARGET ${_gexec_target} APPEND PROPERTY INTERFACE_COMPILE_OPTIONS $<$<COMPILE_LANGUAGE:CXX>:-Wno-psabi>)
  unset(_gexec_target)
endif()
