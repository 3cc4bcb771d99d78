# gexec_glibc_compat(TARGET [EXECUTABLE]): binds TARGET to the oldest versions of the glibc
# functions that glibc 2.32-2.36 gave new ones (python/src/glibc_compat.cpp has the list
# and why), so that what is built on a newer glibc loads on glibc 2.28: the Python wheel's
# extension and gexec-run (manylinux_2_28), and tests/test_glibc_compat. EXECUTABLE: a
# program's start too (__libc_start_main). GEXEC_GLIBC_COMPAT_AVAILABLE says whether this
# toolchain can: Linux on x86-64, glibc, GCC or Clang; elsewhere the function does nothing.
set(GEXEC_GLIBC_COMPAT_AVAILABLE OFF)
if(CMAKE_SYSTEM_NAME STREQUAL "Linux" AND CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64)$"
   AND CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  include(CheckCXXSourceCompiles)
  check_cxx_source_compiles("#include <cstddef>\n#ifndef __GLIBC__\n#error not glibc\n#endif\nint main() { return 0; }"
                            GEXEC_HAVE_GLIBC)
  if(GEXEC_HAVE_GLIBC)
    set(GEXEC_GLIBC_COMPAT_AVAILABLE ON)
  endif()
endif()

set(gexec_glibc_compat_source ${CMAKE_CURRENT_LIST_DIR}/../python/src/glibc_compat.cpp)
set(gexec_glibc_compat_wrapped
    pthread_create pthread_join pthread_detach pthread_once pthread_key_create pthread_key_delete pthread_setspecific
    pthread_getspecific pthread_mutex_trylock pthread_attr_setstacksize pthread_setaffinity_np pthread_getaffinity_np
    dlopen dlclose dlsym dlerror dladdr dladdr1 dlinfo
    stat lstat fstat fstatat stat64 lstat64 fstat64 fstatat64 arc4random)

function(gexec_glibc_compat target)
  cmake_parse_arguments(arg "EXECUTABLE" "" "" ${ARGN})
  if(NOT GEXEC_GLIBC_COMPAT_AVAILABLE)
    return()
  endif()
  target_sources(${target} PRIVATE ${gexec_glibc_compat_source})
  set(wrapped ${gexec_glibc_compat_wrapped})
  if(arg_EXECUTABLE)
    list(APPEND wrapped __libc_start_main)
  endif()
  list(TRANSFORM wrapped PREPEND "LINKER:--wrap=")
  # Before glibc 2.34 the old versions are libpthread's and libdl's: both named, so that
  # they are there wherever the binary is loaded (empty libraries from glibc 2.34 on).
  target_link_options(${target} PRIVATE ${wrapped} "LINKER:--no-as-needed" -l:libpthread.so.0 -l:libdl.so.2 "LINKER:--as-needed")
endfunction()
