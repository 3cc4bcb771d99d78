/* TVM's packed C ABI as TVM-compiled libraries see it (v0.19: include/tvm/runtime/
 * c_runtime_api.h and c_backend_api.h), declared once for the test libraries that play
 * the part of such libraries (tests/kernels, tests/cuda). C, so that those libraries are
 * built as TVM's are, without C++. gexec's own declaration is include/gexec/tvm_abi.hpp;
 * this one is written from TVM's headers independently, so that a mistake in either
 * shows up as a failing test. */
#ifndef GEXEC_TESTS_TVM_C_ABI_H
#define GEXEC_TESTS_TVM_C_ABI_H

#include <dlpack/dlpack.h>

#include <stdint.h>

#if defined(__GNUC__) || defined(__clang__)
#define TVM_TEST_EXPORT __attribute__((visibility("default")))
#else
#define TVM_TEST_EXPORT
#endif

/* One packed argument or return value. */
typedef union {
  int64_t v_int64;
  double v_float64;
  void* v_handle;
  const char* v_str;
  DLDataType v_type;
  DLDevice v_device;
} TVMValue;

/* Argument type codes (TVMArgTypeCode; 1 is DLPack's kDLUInt, which TVM never passes). */
enum {
  kTVMArgInt = 0,
  kTVMArgUInt = 1,
  kTVMArgFloat = 2,
  kTVMOpaqueHandle = 3,
  kTVMNullptr = 4,
  kTVMDLTensorHandle = 7,
  kTVMStr = 11,
  kTVMNDArrayHandle = 13
};

/* Parallel launch (c_backend_api.h). */
typedef struct {
  void* sync_handle;
  int32_t num_task;
} TVMParallelGroupEnv;
typedef int (*FTVMParallelLambda)(int task_id, TVMParallelGroupEnv* penv, void* cdata);

/* The context slots a library exports for the loader to fill, by their types. */
typedef int (*TVMFuncCallSlot)(void* func, TVMValue* arg_values, int* type_codes, int num_args, TVMValue* ret_val, int* ret_type_code);
typedef void (*TVMAPISetLastErrorSlot)(const char* msg);
typedef int (*TVMBackendGetFuncFromEnvSlot)(void* mod_node, const char* func_name, void** out);
typedef void* (*TVMBackendAllocWorkspaceSlot)(int device_type, int device_id, uint64_t nbytes, int dtype_code_hint, int dtype_bits_hint);
typedef int (*TVMBackendFreeWorkspaceSlot)(int device_type, int device_id, void* ptr);
typedef int (*TVMBackendParallelLaunchSlot)(FTVMParallelLambda flambda, void* cdata, int num_task);
typedef int (*TVMBackendParallelBarrierSlot)(int task_id, TVMParallelGroupEnv* penv);

/* The data pointer alignment generated code assumes. */
#define TVM_TEST_ALIGNMENT 64

#endif
