#pragma once
// How gexec calls a TVM-FFI kernel: as a packed C function, so that a model runs
// kernels of either ABI over one plan and one run loop. get_function() hands out
// call_tvm_ffi, which passes the packed C arguments (TVMValue and type code) as
// TVMFFIAny; an executor's plan keeps its arguments as TVMFFIAny already and calls
// call_tvm_ffi_prebuilt. Either way resource_handle is the kernel's address.

#include "../config.hpp"

#include <cstdint>
#include <exception>
#include <memory>
#include <new>
#include <string>

#include "../detail/last_error.hpp"
#include "../tvm_abi.hpp"
#include "../tvm_ffi_abi.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

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

/// Calls a TVM-FFI kernel; a C++ exception it lets out (a kernel written in C++ that
/// throws, which the C ABI does not carry) is its failure, with the exception's message,
/// as run() reports it: the caller is never ended by it.
inline int call_ffi_kernel(void* kernel, const TVMFFIAny* args, int num_args, TVMFFIAny* result) noexcept {
  try {
    return reinterpret_cast<tvm_ffi_safe_call>(kernel)(nullptr, args, num_args, result) == 0 ? 0 : -1;
  } catch (const std::exception& e) {
    set_last_error(std::string("a TVM-FFI kernel threw: ") + e.what());
  } catch (...) {
    set_last_error("a TVM-FFI kernel threw: unknown exception");
  }
  return -1;
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
  return call_ffi_kernel(kernel, ffi_args, num_args, &result);
}

/// The packed C function run() calls for a TVM-FFI kernel whose arguments the
/// executor's plan keeps as TVM-FFI values already (instance_plan::ffi_values):
/// `args` points at TVMFFIAny there, passed to the kernel as they are.
inline int call_tvm_ffi_prebuilt(TVMValue* args, int*, int num_args, TVMValue*, int*, void* kernel) noexcept {
  TVMFFIAny result;
  result.type_index = ffi_none;
  result.zero_padding = 0;
  result.v_int64 = 0;
  return call_ffi_kernel(kernel, reinterpret_cast<const TVMFFIAny*>(args), num_args, &result);
}

}  // namespace detail
GEXEC_NAMESPACE_END
