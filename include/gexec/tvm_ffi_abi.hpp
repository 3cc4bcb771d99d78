#pragma once
// TVM-FFI's C calling convention (tvm-ffi include/tvm/ffi/c_api.h), which TVM compiles
// kernels to from v0.21 on: the value every argument is passed as, its type indices,
// and the "safe call" every exported kernel has. Declared here, with gexec's names, so
// that no tvm-ffi header is needed.

#include "config.hpp"

#include <dlpack/dlpack.h>

#include <cstdint>

extern "C" {

/// One argument or result: a type index, four bytes of padding (zero but for small
/// strings) and an eight-byte value.
typedef struct {
  std::int32_t type_index;
  std::uint32_t zero_padding;
  union {
    std::int64_t v_int64;
    double v_float64;
    void* v_ptr;
    const char* v_c_str;
    DLDataType v_dtype;
    DLDevice v_device;
    std::uint64_t v_uint64;
  };
} TVMFFIAny;
}

static_assert(sizeof(TVMFFIAny) == 16 && alignof(TVMFFIAny) == 8, "TVMFFIAny is 16 bytes in the TVM-FFI ABI");

GEXEC_NAMESPACE_BEGIN

/// A TVM-FFI kernel: `__tvm_ffi_<name>` of a library TVM >= 0.21 compiled. Returns 0,
/// or non-zero after raising an error through TVMFFIErrorSetRaisedFromCStrParts.
using tvm_ffi_safe_call = int (*)(void* self, const TVMFFIAny* args, std::int32_t num_args, TVMFFIAny* result);

/// The type indices of the values on the stack (TVMFFITypeIndex) gexec passes.
enum tvm_ffi_type_index : std::int32_t {
  ffi_none = 0,
  ffi_int = 1,
  ffi_bool = 2,
  ffi_float = 3,
  ffi_opaque_ptr = 4,
  ffi_dtype = 5,
  ffi_device = 6,
  ffi_dltensor_ptr = 7,
  ffi_raw_str = 8,
  ffi_static_object_begin = 64,  ///< indices from here on are reference-counted objects
};

/// The prefix of every function symbol a TVM-FFI library exports.
inline constexpr const char* tvm_ffi_symbol_prefix = "__tvm_ffi_";

GEXEC_NAMESPACE_END
