# Shared by the toolchain files beside it: a Linux target built with Debian's cross
# compiler for GEXEC_CROSS_TRIPLE (g++-<triple> installs /usr/bin/<triple>-g++ and the
# target's C and C++ libraries under /usr/<triple>), and run by qemu-user.
#
# gexec's dependencies are headers for the target: Boost (Boost.JSON compiled from its
# headers, GEXEC_BOOST_JSON_HEADER_ONLY), DLPack, doctest and CLI11. Headers do not
# depend on the architecture, so the host's packages serve: their directory,
# /usr/include, is searched after the cross compiler's own (-idirafter), so that
# the target's C library headers always come first and only what the cross compiler
# lacks (boost/, dlpack/, doctest/, CLI/) comes from the host. The host's CMake
# packages for them are found too (they name /usr/include and nothing built).
# Libraries (.so, .a) are only ever taken from the target's directories.
#
# Where the target's own Boost.JSON is installed (Debian multiarch:
# libboost-json1.81-dev:arm64), it is used instead and GEXEC_BOOST_JSON_HEADER_ONLY
# stays off.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR ${GEXEC_CROSS_PROCESSOR})
set(CMAKE_C_COMPILER ${GEXEC_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${GEXEC_CROSS_TRIPLE}-g++)
set(CMAKE_LIBRARY_ARCHITECTURE ${GEXEC_CROSS_TRIPLE})

set(CMAKE_FIND_ROOT_PATH /usr/${GEXEC_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)

set(CMAKE_C_FLAGS_INIT "-idirafter /usr/include")
set(CMAKE_CXX_FLAGS_INIT "-idirafter /usr/include")
# Keep the host packages' /usr/include out of -I/-isystem (which would put it before
# the target's C library headers): after project(), it counts as a directory the
# compiler searches anyway.
set(CMAKE_PROJECT_INCLUDE ${CMAKE_CURRENT_LIST_DIR}/host-headers.cmake)

if(EXISTS /usr/lib/${GEXEC_CROSS_TRIPLE}/cmake/Boost-1.81.0/BoostConfig.cmake)
  set(Boost_DIR /usr/lib/${GEXEC_CROSS_TRIPLE}/cmake/Boost-1.81.0 CACHE PATH "")
else()
  set(Boost_DIR /usr/lib/x86_64-linux-gnu/cmake/Boost-1.81.0 CACHE PATH "Boost's CMake package (the host's: headers only)")
  set(GEXEC_BOOST_JSON_HEADER_ONLY ON CACHE BOOL "")
endif()
foreach(_gexec_package IN ITEMS dlpack)
  if(NOT EXISTS /usr/lib/${GEXEC_CROSS_TRIPLE}/cmake/${_gexec_package} AND EXISTS /usr/lib/x86_64-linux-gnu/cmake/${_gexec_package})
    set(${_gexec_package}_DIR /usr/lib/x86_64-linux-gnu/cmake/${_gexec_package} CACHE PATH "")
  endif()
endforeach()

# ctest and add_test run the target's programs under qemu-user; -L names the directory
# holding the target's dynamic loader and libraries (a static program needs none).
find_program(GEXEC_QEMU qemu-${GEXEC_CROSS_QEMU})
if(GEXEC_QEMU)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${GEXEC_QEMU} -L /usr/${GEXEC_CROSS_TRIPLE})
endif()
