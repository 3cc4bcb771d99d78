#pragma once
// gexec's version, its ABI namespace, and the settings its dependencies need. Every
// gexec header includes this first, so a plain compiler invocation builds the same
// program as the CMake target does.

/// The version of these headers; CMake's project version is read from here.
#define GEXEC_VERSION_MAJOR 0
#define GEXEC_VERSION_MINOR 5
#define GEXEC_VERSION_PATCH 0
#define GEXEC_VERSION (GEXEC_VERSION_MAJOR * 10000 + GEXEC_VERSION_MINOR * 100 + GEXEC_VERSION_PATCH)
/// "MAJOR.MINOR.PATCH", spelled from the three numbers above so that it cannot drift.
#define GEXEC_VERSION_STRING \
  GEXEC_DETAIL_STRINGIZE(GEXEC_VERSION_MAJOR) "." GEXEC_DETAIL_STRINGIZE(GEXEC_VERSION_MINOR) "." GEXEC_DETAIL_STRINGIZE(GEXEC_VERSION_PATCH)
#define GEXEC_DETAIL_STRINGIZE(x) GEXEC_DETAIL_STRINGIZE_(x)
#define GEXEC_DETAIL_STRINGIZE_(x) #x

// Everything gexec defines lives in an inline namespace named after its version, so
// two copies of gexec of different versions in one process (two plugins, say) never
// share a symbol, a singleton or a thread pool by accident.
#define GEXEC_ABI_NAMESPACE v0_5
#define GEXEC_NAMESPACE_BEGIN \
  namespace gexec {           \
  inline namespace GEXEC_ABI_NAMESPACE {
#define GEXEC_NAMESPACE_END \
  }                         \
  }

// Boost.DLL on std::filesystem keeps Boost.Filesystem out of users' link lines. It must
// be set the same way in every translation unit of a program (else Boost.DLL's inline
// functions differ between them), so it is set here rather than by the build system.
#ifndef BOOST_DLL_USE_STD_FS
#if defined(BOOST_DLL_SHARED_LIBRARY_HPP)
#error "gexec: include <gexec/...> before <boost/dll/...>, or define BOOST_DLL_USE_STD_FS for the whole program"
#endif
#define BOOST_DLL_USE_STD_FS 1
#endif

// Compiled mode (the CMake target gexec::compiled sets GEXEC_COMPILED for the library
// and its users): the functions that need Boost.JSON or Boost.DLL, and the common
// instantiations of the model and executor, are compiled once in the library; headers
// declare them and leave Boost out. Header-only (the default) defines everything in the
// headers. One program uses one mode. A header X.hpp with such functions declares them
// with GEXEC_DECL; X_impl.hpp defines them, included by X.hpp when header-only and by
// the library's sources (src/) when compiled.
#ifdef GEXEC_COMPILED
#define GEXEC_HEADER_ONLY() 0
#define GEXEC_DECL
#else
#define GEXEC_HEADER_ONLY() 1
#define GEXEC_DECL inline
#endif

// The scanner's loops over nodes and attributes inline everything they call when built
// for speed; built for size (-Os), a static program keeps the calls instead (tens of KB).
#ifdef __OPTIMIZE_SIZE__
#define GEXEC_DETAIL_FLATTEN
#else
#define GEXEC_DETAIL_FLATTEN [[gnu::flatten]]
#endif
