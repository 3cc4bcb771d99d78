# What gexec's headers need: Boost.JSON and Boost's headers, DLPack, threads and the
# dynamic loader. The source tree and the installed gexecConfig.cmake both include this
# file, so an installed gexec finds what the source tree found, and a project that adds
# gexec with add_subdirectory or FetchContent finds none of these itself.
#
# From gexecConfig.cmake (GEXEC_FINDING_INSTALLED set) a missing dependency makes
# find_package(gexec) fail with its message; from the source tree it stops the configure.
include(CMakeFindDependencyMacro)
if(GEXEC_FINDING_INSTALLED)
  find_dependency(Boost 1.75 CONFIG COMPONENTS json)
  find_dependency(Threads)
elseif(GEXEC_BOOST_JSON_HEADER_ONLY)
  # Boost's headers alone: Boost.JSON's sources are compiled into gexec_boost_json (see
  # CMakeLists.txt), for targets that have no Boost.JSON library, as cross builds may not,
  # and for the Python wheel, which compiles them into its extension.
  if(NOT GEXEC_BOOST_INCLUDE_DIR)
    find_package(Boost 1.75 CONFIG QUIET)
  else()
    # Boost's headers from a folder, without Boost's CMake package: PyPI's boost-headers
    # (python -c "import boost_headers; print(boost_headers.get_include())") installs only these.
    set(_gexec_boost_version "")
    if(EXISTS "${GEXEC_BOOST_INCLUDE_DIR}/boost/version.hpp")
      file(STRINGS "${GEXEC_BOOST_INCLUDE_DIR}/boost/version.hpp" _gexec_boost_version REGEX "#define BOOST_VERSION [0-9]+")
    endif()
    string(REGEX REPLACE ".* ([0-9]+)$" "\\1" _gexec_boost_version "${_gexec_boost_version}")
    if(NOT _gexec_boost_version)
      message(FATAL_ERROR "GEXEC_BOOST_INCLUDE_DIR=${GEXEC_BOOST_INCLUDE_DIR} holds no boost/version.hpp")
    elseif(_gexec_boost_version LESS 107500)
      message(FATAL_ERROR "GEXEC_BOOST_INCLUDE_DIR=${GEXEC_BOOST_INCLUDE_DIR} holds Boost ${_gexec_boost_version} \
(BOOST_VERSION): gexec needs 1.75 or newer, the first with Boost.JSON (pip install boost-headers installs newer headers)")
    endif()
    add_library(Boost::headers INTERFACE IMPORTED)
    set_target_properties(Boost::headers PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${GEXEC_BOOST_INCLUDE_DIR}")
    set(Boost_FOUND TRUE)
  endif()
  find_package(Threads REQUIRED)
else()
  find_package(Boost 1.75 CONFIG QUIET COMPONENTS json)
  find_package(Threads REQUIRED)
endif()
if(NOT GEXEC_FINDING_INSTALLED AND NOT Boost_FOUND)
  # CMake's own message names BoostConfig.cmake, not what to install.
  if(GEXEC_BOOST_JSON_HEADER_ONLY)
    set(_gexec_boost_what "Boost's headers, 1.75 or newer (Debian 12: apt-get install libboost1.81-dev; Ubuntu 24.04: \
libboost1.83-dev; Ubuntu 22.04's Boost 1.74 has no Boost.JSON: pip install boost-headers there, as below), or any \
Boost 1.75+ headers folder given as -DGEXEC_BOOST_INCLUDE_DIR=<dir> (pip install boost-headers, then \
pip install . -C cmake.define.GEXEC_BOOST_INCLUDE_DIR=$(python -c 'import boost_headers; print(boost_headers.get_include())'))")
  else()
    set(_gexec_boost_what "Boost 1.75 or newer with the Boost.JSON library (Debian 12: apt-get install libboost1.81-dev \
libboost-json1.81-dev; Ubuntu 24.04: libboost1.83-dev libboost-json1.83-dev; Ubuntu 22.04's Boost 1.74 has no \
Boost.JSON), or configure with \
-DGEXEC_BOOST_JSON_HEADER_ONLY=ON -DGEXEC_INSTALL=OFF to compile Boost.JSON from Boost's headers (Ubuntu 22.04: \
pip install boost-headers and add -DGEXEC_BOOST_INCLUDE_DIR=$(python -c 'import boost_headers; print(boost_headers.get_include())'))")
  endif()
  if(Boost_CONSIDERED_VERSIONS)
    set(_gexec_boost_found " (found Boost ${Boost_CONSIDERED_VERSIONS} at ${Boost_CONSIDERED_CONFIGS})")
  elseif(Boost_VERSION)
    set(_gexec_boost_found " (found Boost ${Boost_VERSION} without the Boost.JSON library)")
  endif()
  message(FATAL_ERROR "gexec needs ${_gexec_boost_what}${_gexec_boost_found}. scripts/deps.sh installs what the \
build needs on Debian 12; a Boost installed elsewhere is found with -DBoost_DIR=<prefix>/lib/cmake/Boost-<version>.")
endif()

# DLPack is one header. Debian's libdlpack-dev installs a CMake package for it; where
# none is installed, an interface target over the directory that holds dlpack/dlpack.h
# stands in (GEXEC_DLPACK_INCLUDE_DIR points at it when it is not on the search path).
if(NOT TARGET dlpack::dlpack)
  find_package(dlpack CONFIG QUIET)
endif()
if(NOT TARGET dlpack::dlpack)
  find_path(GEXEC_DLPACK_INCLUDE_DIR dlpack/dlpack.h DOC "Directory holding dlpack/dlpack.h")
  if(GEXEC_DLPACK_INCLUDE_DIR)
    add_library(dlpack::dlpack INTERFACE IMPORTED)
    set_target_properties(dlpack::dlpack PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${GEXEC_DLPACK_INCLUDE_DIR}")
  endif()
endif()
if(NOT TARGET dlpack::dlpack)
  set(_gexec_dlpack_missing "gexec needs DLPack: install its CMake package (Debian: libdlpack-dev) or set \
GEXEC_DLPACK_INCLUDE_DIR to the directory that holds dlpack/dlpack.h")
  if(GEXEC_FINDING_INSTALLED)
    set(gexec_NOT_FOUND_MESSAGE "${_gexec_dlpack_missing}")
    set(gexec_FOUND FALSE)
  else()
    message(FATAL_ERROR "${_gexec_dlpack_missing}")
  endif()
  unset(_gexec_dlpack_missing)
endif()
