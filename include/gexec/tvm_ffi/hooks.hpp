#pragma once
// gexec's side of the TVM-FFI ABI: what a library TVM >= 0.21 compiled calls back
// into (the error functions it imports, the __TVMFFI* context slots), and the
// adapter through which run() calls its kernels. The adapter takes the packed C
// arguments run() keeps (TVMValue and type code) and passes them as TVMFFIAny, so a
// model runs kernels of either ABI over one plan; resource_handle is the kernel's
// address.
//
// Like the packed C hooks, these are inline functions of gexec's ABI namespace that a
// library reaches only through what loading writes into it (its context slots, and
// the entries of its global offset table for the error functions: see imports.hpp).

#include "../config.hpp"

#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include "../detail/last_error.hpp"
#include "../tvm_abi.hpp"
#include "../tvm_ffi_abi.hpp"
#include "../packed_c/hooks.hpp"

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

/// One packed C argument as TVM-FFI passes it; false for a type code TVM-FFI kernels
/// cannot take.
inline bool to_ffi_any(const TVMValue& v, int code, TVMFFIAny& out) noexcept {
  out.zero_padding = 0;
  out.v_uint64 = 0;
  switch (code) {
    case tc_dltensor:
    case tc_ndarray: out.type_index = v.v_handle ? ffi_dltensor_ptr : ffi_none; out.v_ptr = v.v_handle; return true;
    case tc_int:
    case tc_uint: out.type_index = ffi_int; out.v_int64 = v.v_int64; return true;
    case tc_float: out.type_index = ffi_float; out.v_float64 = v.v_float64; return true;
    case tc_handle: out.type_index = v.v_handle ? ffi_opaque_ptr : ffi_none; out.v_ptr = v.v_handle; return true;
    case tc_null: out.type_index = ffi_none; return true;
    case tc_dtype: out.type_index = ffi_dtype; out.v_dtype = v.v_type; return true;
    case tc_device: out.type_index = ffi_device; out.v_device = v.v_device; return true;
    case tc_str: out.type_index = ffi_raw_str; out.v_c_str = v.v_str; return true;
    default: return false;
  }
}

/// The packed C function run() calls for a TVM-FFI kernel: `kernel` is its address.
/// A kernel returns nothing a graph node keeps; a result it boxes anyway (an object)
/// is not released, as gexec holds no TVM-FFI object runtime.
inline int call_tvm_ffi(TVMValue* args, int* codes, int num_args, TVMValue*, int*, void* kernel) noexcept {
  constexpr int on_stack = 8;
  TVMFFIAny small[on_stack];
  std::unique_ptr<TVMFFIAny[]> large;
  TVMFFIAny* ffi_args = small;
  if (num_args > on_stack) {
    large.reset(new (std::nothrow) TVMFFIAny[static_cast<std::size_t>(num_args)]);
    if (!large) {
      set_last_error("no memory for the arguments of a TVM-FFI kernel");
      return -1;
    }
    ffi_args = large.get();
  }
  for (int i = 0; i < num_args; ++i)
    if (!to_ffi_any(args[i], codes[i], ffi_args[i])) [[unlikely]] {
      set_last_error("argument " + std::to_string(i) + " has type code " + std::to_string(codes[i]) +
                     ", which gexec does not pass to TVM-FFI kernels");
      return -1;
    }
  TVMFFIAny result;
  result.type_index = ffi_none;
  result.zero_padding = 0;
  result.v_int64 = 0;
  return reinterpret_cast<tvm_ffi_safe_call>(kernel)(nullptr, ffi_args, num_args, &result) == 0 ? 0 : -1;
}

/// What gexec writes into a TVM-FFI library: a context slot (a pointer-sized data
/// symbol the library exports) or an imported function (an entry of its global offset
/// table), by symbol name.
struct provided_symbol {
  const char* symbol;
  void* value;
};

/// The __TVMFFI* context slots; the packed C ones (__TVMBackendParallelLaunch, the
/// workspace) are shared with packed C libraries (packed_c/hooks.hpp).
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
/// packed C hooks serve them).
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
