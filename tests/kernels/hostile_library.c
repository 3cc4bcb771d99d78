/*
 * A kernel library for gexec's tests of what a graph may call: one legitimate
 * kernel, a kernel that looks names up through TVMBackendGetFuncFromEnv, a data
 * object, and a dependency on libm (its kernel calls cos), so that the loader can
 * find libc's abort and getpid and libm's cos through this library's handle.
 * __tvm_main__ names getpid: an entry function this library does not define.
 * Only the kernels, the data object, the context slots and __tvm_main__ are exported.
 */

#include "../tvm_c_abi.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#define HL_EXPORT __attribute__((visibility("default")))

HL_EXPORT void* __tvm_module_ctx = NULL;
HL_EXPORT TVMAPISetLastErrorSlot __TVMAPISetLastError = NULL;
HL_EXPORT TVMBackendGetFuncFromEnvSlot __TVMBackendGetFuncFromEnv = NULL;

HL_EXPORT const char __tvm_main__[] = "getpid";

/* Data, not code: a graph naming it must be refused. */
HL_EXPORT const int64_t hostile_table[4] = {1, 2, 3, 4};

static int hl_fail(const char* message) {
  if (__TVMAPISetLastError != NULL) __TVMAPISetLastError(message);
  return -1;
}

/* Binds two float32 tensors of one length: x, out. */
static int hl_bind(const char* kernel, TVMValue* args, int* codes, int n, const float** x, float** out, int64_t* len) {
  (void)kernel;
  if (n != 2 || codes[0] != kTVMDLTensorHandle || codes[1] != kTVMDLTensorHandle) return hl_fail("hostile: expected two tensors");
  const DLTensor* a = (const DLTensor*)args[0].v_handle;
  const DLTensor* b = (const DLTensor*)args[1].v_handle;
  if (a->ndim != 1 || b->ndim != 1 || a->shape[0] != b->shape[0] || a->dtype.code != kDLFloat || a->dtype.bits != 32 ||
      b->dtype.code != kDLFloat || b->dtype.bits != 32)
    return hl_fail("hostile: expected two float32 vectors of one length");
  *x = (const float*)a->data;
  *out = (float*)b->data;
  *len = a->shape[0];
  return 0;
}

/* out = x + 1 */
HL_EXPORT int hostile_add_one(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* resource) {
  (void)ret;
  (void)ret_code;
  (void)resource;
  const float* x;
  float* out;
  int64_t len;
  if (hl_bind("hostile_add_one", args, codes, n, &x, &out, &len) != 0) return -1;
  for (int64_t i = 0; i < len; ++i) out[i] = x[i] + 1.0f;
  return 0;
}

/* out = cos(x): the reason this library needs libm. */
HL_EXPORT int hostile_cos(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* resource) {
  (void)ret;
  (void)ret_code;
  (void)resource;
  const float* x;
  float* out;
  int64_t len;
  if (hl_bind("hostile_cos", args, codes, n, &x, &out, &len) != 0) return -1;
  for (int64_t i = 0; i < len; ++i) out[i] = (float)cos((double)x[i]);
  return 0;
}

/* Looks the string argument up with TVMBackendGetFuncFromEnv, as compiled code looks
 * up the functions it calls, and returns (in *ret, an int) what that returned: 0 when
 * it handed out a handle. Calls nothing it is given. */
HL_EXPORT int hostile_lookup(TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code, void* resource) {
  (void)resource;
  if (n != 1 || codes[0] != kTVMStr) return hl_fail("hostile_lookup: expected one string");
  if (__TVMBackendGetFuncFromEnv == NULL) return hl_fail("hostile_lookup: __TVMBackendGetFuncFromEnv is not set");
  void* handle = NULL;
  ret->v_int64 = __TVMBackendGetFuncFromEnv(__tvm_module_ctx, args[0].v_str, &handle);
  *ret_code = kTVMArgInt;
  return 0;
}
