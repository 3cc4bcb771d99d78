#pragma once
// TVM's packed C calling convention (v0.19 c_runtime_api.h / c_backend_api.h): the
// types compiled kernels are called with and the hooks they call back through.
// Declared here, with gexec's names, so that no TVM header is needed.

#include "config.hpp"

#include <dlpack/dlpack.h>

#include <cstdint>

extern "C" {

/// One packed argument or return value.
typedef union {
  std::int64_t v_int64;
  double v_float64;
  void* v_handle;
  const char* v_str;
  DLDataType v_type;
  DLDevice v_device;
} TVMValue;

/// Shared by the tasks of one TVMBackendParallelLaunch.
typedef struct {
  void* sync_handle;
  std::int32_t num_task;
} TVMParallelGroupEnv;

typedef int (*FTVMParallelLambda)(int task_id, TVMParallelGroupEnv* penv, void* cdata);
}

GEXEC_NAMESPACE_BEGIN

/// TVMBackendPackedCFunc: every kernel a TVM-compiled library exports has this type.
using packed_c_func = int (*)(TVMValue* args, int* type_codes, int num_args, TVMValue* out_ret_value,
                              int* out_ret_tcode, void* resource_handle);

/// A packed function and the resource handle it is called with.
struct packed_function {
  packed_c_func fn = nullptr;
  void* resource_handle = nullptr;
  [[nodiscard]] explicit operator bool() const noexcept { return fn != nullptr; }
};

/// Argument type codes of the packed ABI (TVMArgTypeCode).
enum type_code : int {
  tc_int = 0,
  tc_uint = 1,
  tc_float = 2,
  tc_handle = 3,
  tc_null = 4,
  tc_dtype = 5,
  tc_device = 6,
  tc_dltensor = 7,
  tc_object = 8,
  tc_module = 9,
  tc_packed_func = 10,
  tc_str = 11,
  tc_bytes = 12,
  tc_ndarray = 13,
};

GEXEC_NAMESPACE_END
