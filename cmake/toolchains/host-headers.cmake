# Run after project() by the toolchain files (CMAKE_PROJECT_INCLUDE): /usr/include, where
# the host's header-only packages point, is searched by the compiler after its own
# directories (-idirafter in the flags), so CMake must not add it again as -isystem.
foreach(_gexec_lang IN ITEMS C CXX)
  list(APPEND CMAKE_${_gexec_lang}_IMPLICIT_INCLUDE_DIRECTORIES /usr/include)
endforeach()
