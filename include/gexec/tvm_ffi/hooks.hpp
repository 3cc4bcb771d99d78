#pragma once
// gexec's side of the TVM-FFI ABI: what a library TVM >= 0.21 compiled calls back
// into (the error functions it imports, the __TVMFFI* context slots). How its kernels
// are called is tvm_ffi/call.hpp.
//
// Like the packed C hooks, these are inline functions of gexec's ABI namespace that a
// library reaches only through what loading writes into it (its context slots, and
// the entries of its global offset table for the error functions: see imports.hpp).

#include "../config.hpp"

#include <cstdint>
#include <string>

#include "../binding/backend_hooks.hpp"
#include "../detail/last_error.hpp"
#include "../tvm_abi.hpp"
#include "../tvm_ffi_abi.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

/// TVMFFIErrorSetRaisedFromCStrParts: the generated code's argument checks raise
/// "kind: part0part1..." (a null part is skipped), which becomes the last error the
/// executor reports as errc::kernel_failed naming the node.
inline void ffi_error_set_raised_from_parts(const char* kind, const char** parts, std::int32_t num_parts) noexcept {
  try {
    std::string message = kind && *kind ? std::string(kind) + ": " : std::string();
    for (std::int32_t i = 0; parts && i < num_parts; ++i)
      if (parts[i]) message += parts[i];
    set_last_error(message);
  } catch (...) {
    set_last_error("a TVM-FFI kernel raised an error (no memory to keep its message)");
  }
}

/// TVMFFIErrorSetRaisedFromCStr: the same with the message in one piece.
inline void ffi_error_set_raised_from_cstr(const char* kind, const char* message) noexcept {
  const char* parts[1] = {message};
  ffi_error_set_raised_from_parts(kind, parts, 1);
}

/// __TVMFFIFunctionCall and __TVMFFIEnvModLookupFromImports: calls from a kernel to
/// other functions (an extern library, a device kernel). gexec does not run those for
/// TVM-FFI libraries; the kernel fails cleanly with this message instead.
inline int ffi_function_call(void*, const TVMFFIAny*, std::int32_t, TVMFFIAny*) noexcept {
  set_last_error("the kernel calls another function through the TVM-FFI runtime (__TVMFFIFunctionCall), which gexec does not "
                 "provide for TVM-FFI libraries: compile it without extern calls");
  return -1;
}
inline int ffi_lookup_from_imports(void*, const char* name, void**) noexcept {
  set_last_error(std::string("the kernel looks up function \"") + (name ? name : "") +
                 "\" among its library's imports (__TVMFFIEnvModLookupFromImports), which gexec does not provide for TVM-FFI "
                 "libraries: compile it without extern calls or device kernels");
  return -1;
}

/// The __TVMFFI* context slots; the packed C ones (__TVMBackendParallelLaunch, the
/// workspace) are filled as in packed C libraries (packed_c/hooks.hpp).
inline const provided_symbol (&ffi_context_slots())[3] {
  static const provided_symbol slots[3] = {
      {"__TVMFFIFunctionCall", reinterpret_cast<void*>(&ffi_function_call)},
      {"__TVMFFIEnvModLookupFromImports", reinterpret_cast<void*>(&ffi_lookup_from_imports)},
      {"__TVMFFIErrorSetRaisedFromCStr", reinterpret_cast<void*>(&ffi_error_set_raised_from_cstr)},
  };
  return slots;
}

/// The runtime functions a TVM-FFI library's kernels import, which gexec binds to its
/// own (imports.hpp): libtvm_ffi's error functions, and the backend functions that
/// code from TVM's C target calls directly instead of through context slots (the
/// backend hooks serve them: binding/backend_hooks.hpp).
inline const provided_symbol (&ffi_imports())[6] {
  static const provided_symbol imports[6] = {
      {"TVMFFIErrorSetRaisedFromCStrParts", reinterpret_cast<void*>(&ffi_error_set_raised_from_parts)},
      {"TVMFFIErrorSetRaisedFromCStr", reinterpret_cast<void*>(&ffi_error_set_raised_from_cstr)},
      {"TVMBackendAllocWorkspace", reinterpret_cast<void*>(&backend_alloc_workspace)},
      {"TVMBackendFreeWorkspace", reinterpret_cast<void*>(&backend_free_workspace)},
      {"TVMBackendParallelLaunch", reinterpret_cast<void*>(&backend_parallel_launch)},
      {"TVMBackendParallelBarrier", reinterpret_cast<void*>(&backend_parallel_barrier)},
  };
  return imports;
}

}  // namespace detail
GEXEC_NAMESPACE_END
