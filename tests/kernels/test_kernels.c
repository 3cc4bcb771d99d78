/*
 * gexec test kernels.
 *
 * A small library of host kernels that follow the packed C calling convention
 * used by TVM's LLVM backend (TVM v0.19), so that gexec's tests can load and
 * run real packed-ABI code without TVM.
 *
 * Like a library produced by TVM, this one does not link any runtime. It
 * exports "context slots" instead: global function pointers, initially NULL,
 * that the loader fills right after loading the library and before the first
 * kernel call. Kernels reach the runtime only through these slots, and a
 * kernel that needs a slot that is still NULL fails cleanly.
 *
 * Every kernel validates its arguments the way generated code does (argument
 * count, type codes, ndim, dtype, every shape dimension, compact strides,
 * byte_offset, device, data pointer and its alignment). A failed check is
 * reported through __TVMAPISetLastError and the kernel returns -1. Messages
 * about one argument have the form
 *
 *     "<kernel>: arg <index> (<name>): <what is wrong>"
 *
 * and all others start with "<kernel>: ". Outputs are never written before
 * every check has passed.
 */

#include "../tvm_c_abi.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#if defined(__GNUC__) || defined(__clang__)
#define TK_EXPORT __attribute__((visibility("default")))
#define TK_PRINTF(fmt_index, first_arg) __attribute__((format(printf, fmt_index, first_arg)))
#else
#define TK_EXPORT
#define TK_PRINTF(fmt_index, first_arg)
#endif

/* ------------------------------------------------------------------------- */
/* Packed ABI types                                                           */
/* ------------------------------------------------------------------------- */

#define TK_ALIGNMENT TVM_TEST_ALIGNMENT

/* ------------------------------------------------------------------------- */
/* Context slots, filled by the loader                                        */
/* ------------------------------------------------------------------------- */

TK_EXPORT void* __tvm_module_ctx = NULL;

TK_EXPORT TVMFuncCallSlot __TVMFuncCall = NULL;

TK_EXPORT TVMAPISetLastErrorSlot __TVMAPISetLastError = NULL;

TK_EXPORT TVMBackendGetFuncFromEnvSlot __TVMBackendGetFuncFromEnv = NULL;

TK_EXPORT TVMBackendAllocWorkspaceSlot __TVMBackendAllocWorkspace = NULL;

TK_EXPORT TVMBackendFreeWorkspaceSlot __TVMBackendFreeWorkspace = NULL;

TK_EXPORT TVMBackendParallelLaunchSlot __TVMBackendParallelLaunch = NULL;

#if defined(TK_NO_BARRIER)
/* Built as libgexec_test_kernels_independent: like TVM's libraries, it exports no barrier
 * slot, so gexec runs its parallel tasks as independent ones (test_parallel_scale2, which
 * needs the barrier, reports the slot missing). */
static TVMBackendParallelBarrierSlot __TVMBackendParallelBarrier = NULL;
#else
TK_EXPORT TVMBackendParallelBarrierSlot __TVMBackendParallelBarrier = NULL;
#endif

/* Name of the library's entry function. */
TK_EXPORT const char __tvm_main__[] = "test_add";

/* ------------------------------------------------------------------------- */
/* Error reporting                                                            */
/* ------------------------------------------------------------------------- */

/* Formats a message and hands it to __TVMAPISetLastError (when it is set).
 * Always returns -1 so callers can write `return tk_error(...)`. */
TK_PRINTF(1, 2) static int tk_error(const char* fmt, ...) {
  void (*set_last_error)(const char*) = __TVMAPISetLastError;
  if (set_last_error != NULL) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    set_last_error(msg);
  }
  return -1;
}

/* Reports "<kernel>: arg <index> (<name>): <detail>" and returns -1. */
TK_PRINTF(4, 5)
static int tk_arg_error(const char* kernel, int index, const char* name, const char* fmt, ...) {
  if (__TVMAPISetLastError == NULL) return -1;
  char detail[384];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof(detail), fmt, ap);
  va_end(ap);
  return tk_error("%s: arg %d (%s): %s", kernel, index, name, detail);
}

static int tk_missing_slot(const char* kernel, const char* slot) {
  return tk_error("%s: %s is not set", kernel, slot);
}

static int tk_check_num_args(const char* kernel, int num_args, int expected) {
  if (num_args != expected) {
    return tk_error("%s: expected %d arguments, got %d", kernel, expected, num_args);
  }
  return 0;
}

/* Writes a dtype as TVM spells it: "float32", "int8", "float32x4", ... */
static void tk_format_dtype(DLDataType t, char* buf, size_t size) {
  const char* base = NULL;
  switch (t.code) {
    case kDLInt: base = "int"; break;
    case kDLUInt: base = "uint"; break;
    case kDLFloat: base = "float"; break;
    case kDLOpaqueHandle: base = "handle"; break;
    case kDLBfloat: base = "bfloat"; break;
    case kDLComplex: base = "complex"; break;
    default: break;
  }
  int used;
  if (base != NULL) {
    used = snprintf(buf, size, "%s%u", base, (unsigned)t.bits);
  } else {
    used = snprintf(buf, size, "code%u_%u", (unsigned)t.code, (unsigned)t.bits);
  }
  if (t.lanes != 1 && used >= 0 && (size_t)used < size) {
    snprintf(buf + used, size - (size_t)used, "x%u", (unsigned)t.lanes);
  }
}

/* ------------------------------------------------------------------------- */
/* Argument binding                                                           */
/* ------------------------------------------------------------------------- */

static const DLDataType tk_float32 = {kDLFloat, 32, 1};
static const DLDataType tk_int32 = {kDLInt, 32, 1};

/* What a tensor argument must look like. */
typedef struct {
  DLDataType dtype;
  int ndim;              /* exact ndim, or -1 for "any ndim >= min_ndim" */
  int min_ndim;          /* only used when ndim is -1 */
  const int64_t* shape;  /* expected extents (ndim entries) or NULL for any;
                            a negative entry leaves that dimension free */
  int64_t dim0;          /* when >= 0, overrides the expected shape[0] */
} tk_expect;

static int64_t tk_numel(const DLTensor* t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; ++d) n *= t->shape[d];
  return n;
}

/* Validates args[index] against `want` and returns its DLTensor in *out.
 * Checks, in order: type code, handle, ndim, dtype, shape, strides,
 * byte_offset, device type, data pointer, data alignment. */
static int tk_bind_tensor(const char* kernel, const TVMValue* args, const int* type_codes,
                          int index, const char* name, const tk_expect* want, DLTensor** out) {
  const int code = type_codes[index];
  if (code != kTVMDLTensorHandle && code != kTVMOpaqueHandle && code != kTVMNDArrayHandle) {
    return tk_arg_error(kernel, index, name,
                        "expected a DLTensor (type code 7, 3 or 13), got type code %d", code);
  }
  DLTensor* t = (DLTensor*)args[index].v_handle;
  if (t == NULL) return tk_arg_error(kernel, index, name, "DLTensor handle is NULL");

  if (want->ndim >= 0) {
    if (t->ndim != want->ndim) {
      return tk_arg_error(kernel, index, name, "ndim is %d, expected %d", t->ndim, want->ndim);
    }
  } else if (t->ndim < want->min_ndim) {
    return tk_arg_error(kernel, index, name, "ndim is %d, expected at least %d", t->ndim,
                        want->min_ndim);
  }
  if (t->ndim < 0) {
    return tk_arg_error(kernel, index, name, "ndim is %d, expected a non-negative value", t->ndim);
  }

  if (t->dtype.code != want->dtype.code || t->dtype.bits != want->dtype.bits ||
      t->dtype.lanes != want->dtype.lanes) {
    char expected[32];
    char got[32];
    tk_format_dtype(want->dtype, expected, sizeof(expected));
    tk_format_dtype(t->dtype, got, sizeof(got));
    return tk_arg_error(kernel, index, name, "expected dtype %s, got %s", expected, got);
  }

  if (t->ndim > 0 && t->shape == NULL) {
    return tk_arg_error(kernel, index, name, "shape is NULL");
  }
  for (int d = 0; d < t->ndim; ++d) {
    const int64_t extent = t->shape[d];
    int64_t expected = want->shape != NULL ? want->shape[d] : -1;
    if (d == 0 && want->dim0 >= 0) expected = want->dim0;
    if (expected >= 0 && extent != expected) {
      return tk_arg_error(kernel, index, name, "shape[%d] is %" PRId64 ", expected %" PRId64, d,
                          extent, expected);
    }
    if (extent < 0) {
      return tk_arg_error(kernel, index, name, "shape[%d] is %" PRId64 ", expected >= 0", d,
                          extent);
    }
  }

  if (t->strides != NULL) {
    /* Compact row-major strides are accepted; a dimension of extent 1 may
     * carry any stride since it is never stepped over. */
    int64_t expected = 1;
    for (int d = t->ndim - 1; d >= 0; --d) {
      if (t->shape[d] != 1 && t->strides[d] != expected) {
        return tk_arg_error(kernel, index, name,
                            "strides[%d] is %" PRId64 ", expected %" PRId64
                            " (compact row-major layout)",
                            d, t->strides[d], expected);
      }
      expected *= t->shape[d];
    }
  }

  if (t->byte_offset != 0) {
    return tk_arg_error(kernel, index, name, "byte_offset is %" PRIu64 ", expected 0",
                        (uint64_t)t->byte_offset);
  }

  if (t->device.device_type != kDLCPU) {
    return tk_arg_error(kernel, index, name, "device_type is %d, expected 1 (kDLCPU)",
                        (int)t->device.device_type);
  }

  /* A tensor without elements may have a NULL data pointer. */
  if (t->data == NULL && tk_numel(t) != 0) {
    return tk_arg_error(kernel, index, name, "data is NULL");
  }
  if (((uintptr_t)t->data % TK_ALIGNMENT) != 0) {
    return tk_arg_error(kernel, index, name, "data pointer %p is not %d-byte aligned", t->data,
                        TK_ALIGNMENT);
  }

  *out = t;
  return 0;
}

/* Binds `count` tensor arguments that all share the dtype and the shape of
 * the first one; the first one may have any shape with ndim >= min_ndim. */
static int tk_bind_same_shape(const char* kernel, const TVMValue* args, const int* type_codes,
                              int num_args, int count, const char* const* names, DLDataType dtype,
                              int min_ndim, DLTensor** tensors) {
  if (tk_check_num_args(kernel, num_args, count) != 0) return -1;
  tk_expect want = {dtype, -1, min_ndim, NULL, -1};
  if (tk_bind_tensor(kernel, args, type_codes, 0, names[0], &want, &tensors[0]) != 0) return -1;
  want.ndim = tensors[0]->ndim;
  want.shape = tensors[0]->shape;
  for (int i = 1; i < count; ++i) {
    if (tk_bind_tensor(kernel, args, type_codes, i, names[i], &want, &tensors[i]) != 0) return -1;
  }
  return 0;
}

static const char* const tk_names_x_out[] = {"x", "out"};
static const char* const tk_names_a_b_out[] = {"a", "b", "out"};

#define TK_KERNEL(name)                                                                    \
  TK_EXPORT int name(TVMValue* args, int* type_codes, int num_args, TVMValue* out_ret_value, \
                     int* out_ret_tcode, void* resource_handle)

#define TK_UNUSED_TAIL()   \
  (void)out_ret_value;     \
  (void)out_ret_tcode;     \
  (void)resource_handle

TK_KERNEL(test_noop);
TK_KERNEL(test_add_one);
TK_KERNEL(test_add_one_16);
TK_KERNEL(test_add);
TK_KERNEL(test_multiply);
TK_KERNEL(test_add_int32);
TK_KERNEL(test_relu);
TK_KERNEL(test_softmax);
TK_KERNEL(test_dense);
TK_KERNEL(test_split);
TK_KERNEL(test_reverse_ws);
TK_KERNEL(test_parallel_scale2);
TK_KERNEL(test_parallel_fail);
TK_KERNEL(test_call_env);
TK_KERNEL(test_call_own);
TK_KERNEL(test_parallel_heavy);
TK_KERNEL(test_parallel_thirds);
TK_KERNEL(test_num_task);
TK_KERNEL(test_fail);

/* ------------------------------------------------------------------------- */
/* Kernels                                                                    */
/* ------------------------------------------------------------------------- */

/* Accepts any arguments and does nothing. */
TK_KERNEL(test_noop) {
  (void)args;
  (void)type_codes;
  (void)num_args;
  TK_UNUSED_TAIL();
  return 0;
}

/* out = x + 1; float32, any shape. */
TK_KERNEL(test_add_one) {
  TK_UNUSED_TAIL();
  DLTensor* t[2];
  if (tk_bind_same_shape("test_add_one", args, type_codes, num_args, 2, tk_names_x_out,
                         tk_float32, 0, t) != 0) {
    return -1;
  }
  const float* x = (const float*)t[0]->data;
  float* out = (float*)t[1]->data;
  const int64_t n = tk_numel(t[0]);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] + 1.0f;
  return 0;
}

/* out = x + 1; float32, compiled for the fixed shape [16]. */
TK_KERNEL(test_add_one_16) {
  TK_UNUSED_TAIL();
  static const char kernel[] = "test_add_one_16";
  static const int64_t shape[1] = {16};
  if (tk_check_num_args(kernel, num_args, 2) != 0) return -1;
  const tk_expect want = {tk_float32, 1, 1, shape, -1};
  DLTensor* xt;
  DLTensor* ot;
  if (tk_bind_tensor(kernel, args, type_codes, 0, "x", &want, &xt) != 0) return -1;
  if (tk_bind_tensor(kernel, args, type_codes, 1, "out", &want, &ot) != 0) return -1;
  const float* x = (const float*)xt->data;
  float* out = (float*)ot->data;
  for (int i = 0; i < 16; ++i) out[i] = x[i] + 1.0f;
  return 0;
}

/* out = a + b; float32, all three the same shape (ndim 0 allowed). */
TK_KERNEL(test_add) {
  TK_UNUSED_TAIL();
  DLTensor* t[3];
  if (tk_bind_same_shape("test_add", args, type_codes, num_args, 3, tk_names_a_b_out, tk_float32,
                         0, t) != 0) {
    return -1;
  }
  const float* a = (const float*)t[0]->data;
  const float* b = (const float*)t[1]->data;
  float* out = (float*)t[2]->data;
  const int64_t n = tk_numel(t[0]);
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
  return 0;
}

/* out = a * b; float32, all three the same shape (ndim 0 allowed). */
TK_KERNEL(test_multiply) {
  TK_UNUSED_TAIL();
  DLTensor* t[3];
  if (tk_bind_same_shape("test_multiply", args, type_codes, num_args, 3, tk_names_a_b_out,
                         tk_float32, 0, t) != 0) {
    return -1;
  }
  const float* a = (const float*)t[0]->data;
  const float* b = (const float*)t[1]->data;
  float* out = (float*)t[2]->data;
  const int64_t n = tk_numel(t[0]);
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] * b[i];
  return 0;
}

/* out = a + b; int32 (wrapping), all three the same shape (ndim 0 allowed). */
TK_KERNEL(test_add_int32) {
  TK_UNUSED_TAIL();
  DLTensor* t[3];
  if (tk_bind_same_shape("test_add_int32", args, type_codes, num_args, 3, tk_names_a_b_out,
                         tk_int32, 0, t) != 0) {
    return -1;
  }
  const int32_t* a = (const int32_t*)t[0]->data;
  const int32_t* b = (const int32_t*)t[1]->data;
  int32_t* out = (int32_t*)t[2]->data;
  const int64_t n = tk_numel(t[0]);
  for (int64_t i = 0; i < n; ++i) {
    out[i] = (int32_t)((uint32_t)a[i] + (uint32_t)b[i]);
  }
  return 0;
}

/* out = max(x, 0); float32, any shape. */
TK_KERNEL(test_relu) {
  TK_UNUSED_TAIL();
  DLTensor* t[2];
  if (tk_bind_same_shape("test_relu", args, type_codes, num_args, 2, tk_names_x_out, tk_float32,
                         0, t) != 0) {
    return -1;
  }
  const float* x = (const float*)t[0]->data;
  float* out = (float*)t[1]->data;
  const int64_t n = tk_numel(t[0]);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] > 0.0f ? x[i] : 0.0f;
  return 0;
}

/* Softmax over the last axis; float32, ndim >= 1. */
TK_KERNEL(test_softmax) {
  TK_UNUSED_TAIL();
  DLTensor* t[2];
  if (tk_bind_same_shape("test_softmax", args, type_codes, num_args, 2, tk_names_x_out,
                         tk_float32, 1, t) != 0) {
    return -1;
  }
  const int64_t inner = t[0]->shape[t[0]->ndim - 1];
  const int64_t n = tk_numel(t[0]);
  if (n == 0) return 0;
  const int64_t rows = n / inner;
  const float* x = (const float*)t[0]->data;
  float* out = (float*)t[1]->data;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * inner;
    float* orow = out + r * inner;
    float max_value = xr[0];
    for (int64_t i = 1; i < inner; ++i) {
      if (xr[i] > max_value) max_value = xr[i];
    }
    float sum = 0.0f;
    for (int64_t i = 0; i < inner; ++i) {
      const float e = expf(xr[i] - max_value);
      orow[i] = e;
      sum += e;
    }
    for (int64_t i = 0; i < inner; ++i) orow[i] /= sum;
  }
  return 0;
}

/* out[M, N] = x[M, K] . w[N, K]^T; float32. */
TK_KERNEL(test_dense) {
  TK_UNUSED_TAIL();
  static const char kernel[] = "test_dense";
  if (tk_check_num_args(kernel, num_args, 3) != 0) return -1;
  DLTensor* xt;
  DLTensor* wt;
  DLTensor* ot;
  const tk_expect want_x = {tk_float32, 2, 2, NULL, -1};
  if (tk_bind_tensor(kernel, args, type_codes, 0, "x", &want_x, &xt) != 0) return -1;
  const int64_t m = xt->shape[0];
  const int64_t k = xt->shape[1];
  const int64_t w_shape[2] = {-1, k};
  const tk_expect want_w = {tk_float32, 2, 2, w_shape, -1};
  if (tk_bind_tensor(kernel, args, type_codes, 1, "w", &want_w, &wt) != 0) return -1;
  const int64_t n = wt->shape[0];
  const int64_t out_shape[2] = {m, n};
  const tk_expect want_out = {tk_float32, 2, 2, out_shape, -1};
  if (tk_bind_tensor(kernel, args, type_codes, 2, "out", &want_out, &ot) != 0) return -1;

  const float* x = (const float*)xt->data;
  const float* w = (const float*)wt->data;
  float* out = (float*)ot->data;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (int64_t p = 0; p < k; ++p) acc += x[i * k + p] * w[j * k + p];
      out[i * n + j] = acc;
    }
  }
  return 0;
}

/* Splits x along axis 0 into num_args - 1 equal parts; float32, ndim >= 1. */
TK_KERNEL(test_split) {
  TK_UNUSED_TAIL();
  static const char kernel[] = "test_split";
  if (num_args < 2) {
    return tk_error("%s: expected at least 2 arguments, got %d", kernel, num_args);
  }
  const int parts = num_args - 1;
  DLTensor* xt;
  const tk_expect want_x = {tk_float32, -1, 1, NULL, -1};
  if (tk_bind_tensor(kernel, args, type_codes, 0, "x", &want_x, &xt) != 0) return -1;
  if (xt->shape[0] % parts != 0) {
    return tk_arg_error(kernel, 0, "x", "shape[0] is %" PRId64 ", not divisible into %d parts",
                        xt->shape[0], parts);
  }
  const tk_expect want_out = {tk_float32, xt->ndim, xt->ndim, xt->shape, xt->shape[0] / parts};
  for (int i = 1; i <= parts; ++i) {
    char name[24];
    snprintf(name, sizeof(name), "out%d", i - 1);
    DLTensor* ot;
    if (tk_bind_tensor(kernel, args, type_codes, i, name, &want_out, &ot) != 0) return -1;
  }

  const size_t part_bytes = (size_t)(tk_numel(xt) / parts) * sizeof(float);
  if (part_bytes == 0) return 0;
  const char* src = (const char*)xt->data;
  for (int i = 1; i <= parts; ++i) {
    const DLTensor* ot = (const DLTensor*)args[i].v_handle;
    memcpy(ot->data, src + (size_t)(i - 1) * part_bytes, part_bytes);
  }
  return 0;
}

/* Returns 0 when a workspace pointer is usable, else -1 (without reporting). */
static int tk_workspace_ok(const void* ptr) {
  return ptr != NULL && ((uintptr_t)ptr % TK_ALIGNMENT) == 0 ? 0 : -1;
}

static int tk_workspace_error(const char* kernel, const void* ptr, uint64_t nbytes) {
  if (ptr == NULL) {
    return tk_error("%s: workspace allocation of %" PRIu64 " bytes failed", kernel, nbytes);
  }
  return tk_error("%s: workspace %p is not %d-byte aligned", kernel, ptr, TK_ALIGNMENT);
}

/* out = x reversed (flat order), staged through two nested workspace buffers:
 * the outer one receives x reversed, the inner one (allocated while the outer
 * one is live) receives a copy of the outer one and is copied to out. Both
 * are freed in LIFO order. float32, any shape. */
TK_KERNEL(test_reverse_ws) {
  TK_UNUSED_TAIL();
  static const char kernel[] = "test_reverse_ws";
  DLTensor* t[2];
  if (tk_bind_same_shape(kernel, args, type_codes, num_args, 2, tk_names_x_out, tk_float32, 0, t) !=
      0) {
    return -1;
  }
  void* (*alloc_ws)(int, int, uint64_t, int, int) = __TVMBackendAllocWorkspace;
  int (*free_ws)(int, int, void*) = __TVMBackendFreeWorkspace;
  if (alloc_ws == NULL) return tk_missing_slot(kernel, "__TVMBackendAllocWorkspace");
  if (free_ws == NULL) return tk_missing_slot(kernel, "__TVMBackendFreeWorkspace");

  const int64_t n = tk_numel(t[0]);
  const uint64_t nbytes = (uint64_t)n * sizeof(float);
  /* An empty tensor still requests one element so every request is non-empty. */
  const uint64_t request = nbytes != 0 ? nbytes : sizeof(float);
  const float* x = (const float*)t[0]->data;
  float* out = (float*)t[1]->data;

  /* On failure, buffers are released before the error is reported so that
   * the kernel's message is the one left behind. */
  float* outer = (float*)alloc_ws(kDLCPU, 0, request, kDLFloat, 32);
  if (tk_workspace_ok(outer) != 0) {
    if (outer != NULL) free_ws(kDLCPU, 0, outer);
    return tk_workspace_error(kernel, outer, request);
  }
  for (int64_t i = 0; i < n; ++i) outer[i] = x[n - 1 - i];

  float* inner = (float*)alloc_ws(kDLCPU, 0, request, kDLFloat, 32);
  if (tk_workspace_ok(inner) != 0) {
    if (inner != NULL) free_ws(kDLCPU, 0, inner);
    free_ws(kDLCPU, 0, outer);
    return tk_workspace_error(kernel, inner, request);
  }
  const uintptr_t a = (uintptr_t)outer;
  const uintptr_t b = (uintptr_t)inner;
  if (a < b + request && b < a + request) {
    free_ws(kDLCPU, 0, inner);
    free_ws(kDLCPU, 0, outer);
    return tk_error("%s: workspace buffers %p and %p overlap", kernel, (void*)outer,
                    (void*)inner);
  }
  for (int64_t i = 0; i < n; ++i) inner[i] = outer[i];
  if (nbytes != 0) memcpy(out, inner, (size_t)nbytes);

  if (free_ws(kDLCPU, 0, inner) != 0) {
    free_ws(kDLCPU, 0, outer);
    return tk_error("%s: __TVMBackendFreeWorkspace failed for %p", kernel, (void*)inner);
  }
  if (free_ws(kDLCPU, 0, outer) != 0) {
    return tk_error("%s: __TVMBackendFreeWorkspace failed for %p", kernel, (void*)outer);
  }
  return 0;
}

/* [begin, end) of the chunk that task `task` of `num_task` owns. */
static void tk_task_range(int64_t n, int task, int num_task, int64_t* begin, int64_t* end) {
  *begin = (int64_t)task * n / num_task;
  *end = ((int64_t)task + 1) * n / num_task;
}

typedef struct {
  const float* x;
  float* out;
  int64_t n;
  int (*barrier)(int, TVMParallelGroupEnv*);
} tk_scale2_closure;

static int tk_check_task(const char* kernel, int task_id, const TVMParallelGroupEnv* penv) {
  if (penv == NULL) return tk_error("%s: task %d got a NULL group environment", kernel, task_id);
  if (penv->num_task < 1 || task_id < 0 || task_id >= penv->num_task) {
    return tk_error("%s: invalid task id %d for num_task %d", kernel, task_id,
                    (int)penv->num_task);
  }
  return 0;
}

/* Phase 1: copy the own chunk of x into out. Barrier. Phase 2: double the
 * chunk written by the next task, after checking that its phase-one result
 * is visible. A barrier that does not synchronise yields an error or a wrong
 * result. */
static int tk_scale2_task(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  static const char kernel[] = "test_parallel_scale2";
  const tk_scale2_closure* c = (const tk_scale2_closure*)cdata;
  if (tk_check_task(kernel, task_id, penv) != 0) return -1;
  const int num_task = (int)penv->num_task;

  int64_t begin;
  int64_t end;
  tk_task_range(c->n, task_id, num_task, &begin, &end);
  for (int64_t i = begin; i < end; ++i) c->out[i] = c->x[i];

  if (c->barrier(task_id, penv) != 0) {
    return tk_error("%s: task %d: __TVMBackendParallelBarrier failed", kernel, task_id);
  }

  const int other = (task_id + 1) % num_task;
  tk_task_range(c->n, other, num_task, &begin, &end);
  for (int64_t i = begin; i < end; ++i) {
    uint32_t seen;
    uint32_t expected;
    memcpy(&seen, &c->out[i], sizeof(seen));
    memcpy(&expected, &c->x[i], sizeof(expected));
    if (seen != expected) {
      return tk_error("%s: task %d: result of task %d at index %" PRId64
                      " is not visible after the barrier",
                      kernel, task_id, other, i);
    }
  }
  for (int64_t i = begin; i < end; ++i) c->out[i] = 2.0f * c->out[i];
  return 0;
}

/* out = 2 * x computed by parallel tasks; float32, any shape. */
TK_KERNEL(test_parallel_scale2) {
  TK_UNUSED_TAIL();
  static const char kernel[] = "test_parallel_scale2";
  DLTensor* t[2];
  if (tk_bind_same_shape(kernel, args, type_codes, num_args, 2, tk_names_x_out, tk_float32, 0, t) !=
      0) {
    return -1;
  }
  int (*launch)(FTVMParallelLambda, void*, int) = __TVMBackendParallelLaunch;
  int (*barrier)(int, TVMParallelGroupEnv*) = __TVMBackendParallelBarrier;
  if (launch == NULL) return tk_missing_slot(kernel, "__TVMBackendParallelLaunch");
  if (barrier == NULL) return tk_missing_slot(kernel, "__TVMBackendParallelBarrier");
  tk_scale2_closure closure = {(const float*)t[0]->data, (float*)t[1]->data, tk_numel(t[0]),
                               barrier};
  if (launch(tk_scale2_task, &closure, 0) != 0) return -1;
  return 0;
}

/* x, out and their element count: what a parallel task over two float32 tensors reads. */
typedef struct {
  const float* x;
  float* out;
  int64_t n;
} tk_xy_closure;

/* Binds (x, out) of one float32 shape and runs `task` over them in parallel tasks;
 * returns what the launch returns. */
static int tk_parallel_xy(const char* kernel, TVMValue* args, int* type_codes, int num_args,
                          FTVMParallelLambda task) {
  DLTensor* t[2];
  if (tk_bind_same_shape(kernel, args, type_codes, num_args, 2, tk_names_x_out, tk_float32, 0, t) !=
      0) {
    return -1;
  }
  int (*launch)(FTVMParallelLambda, void*, int) = __TVMBackendParallelLaunch;
  if (launch == NULL) return tk_missing_slot(kernel, "__TVMBackendParallelLaunch");
  tk_xy_closure closure = {(const float*)t[0]->data, (float*)t[1]->data, tk_numel(t[0])};
  return launch(task, &closure, 0);
}

/* Task 1 (or the only task) fails; the others copy their chunk of x to out. */
static int tk_fail_task(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  static const char kernel[] = "test_parallel_fail";
  const tk_xy_closure* c = (const tk_xy_closure*)cdata;
  if (tk_check_task(kernel, task_id, penv) != 0) return -1;
  const int failing = penv->num_task > 1 ? 1 : 0;
  if (task_id == failing) return tk_error("test_parallel_fail: task failed");
  int64_t begin;
  int64_t end;
  tk_task_range(c->n, task_id, (int)penv->num_task, &begin, &end);
  for (int64_t i = begin; i < end; ++i) c->out[i] = c->x[i];
  return 0;
}

/* Launches tasks of which one fails; returns what the launch returns.
 * float32, any shape. */
TK_KERNEL(test_parallel_fail) {
  TK_UNUSED_TAIL();
  return tk_parallel_xy("test_parallel_fail", args, type_codes, num_args, tk_fail_task);
}

/* Handle of "gexec.test.scale", looked up on first use and kept, as generated
 * code does. */
static _Atomic(void*) tk_scale_func = NULL;

/* The handle of function `name` from __TVMBackendGetFuncFromEnv, looked up on first
 * use and cached in *cache, as TVM-compiled host code caches it in a global. */
static int tk_env_func(const char* kernel, _Atomic(void*)* cache, const char* name, void** func) {
  *func = atomic_load_explicit(cache, memory_order_acquire);
  if (*func != NULL) return 0;
  int (*get_func)(void*, const char*, void**) = __TVMBackendGetFuncFromEnv;
  if (get_func == NULL) return tk_missing_slot(kernel, "__TVMBackendGetFuncFromEnv");
  if (__tvm_module_ctx == NULL) return tk_missing_slot(kernel, "__tvm_module_ctx");
  /* On failure the runtime has already recorded the error. */
  if (get_func(__tvm_module_ctx, name, func) != 0) return -1;
  if (*func == NULL) return tk_error("%s: function %s not found", kernel, name);
  atomic_store_explicit(cache, *func, memory_order_release);
  return 0;
}

/* Calls the environment function gexec.test.scale(x, out, 3.0); float32,
 * any shape. */
TK_KERNEL(test_call_env) {
  TK_UNUSED_TAIL();
  static const char kernel[] = "test_call_env";
  static const char func_name[] = "gexec.test.scale";
  DLTensor* t[2];
  if (tk_bind_same_shape(kernel, args, type_codes, num_args, 2, tk_names_x_out, tk_float32, 0, t) !=
      0) {
    return -1;
  }
  int (*call)(void*, TVMValue*, int*, int, TVMValue*, int*) = __TVMFuncCall;
  if (call == NULL) return tk_missing_slot(kernel, "__TVMFuncCall");

  void* func = NULL;
  if (tk_env_func(kernel, &tk_scale_func, func_name, &func) != 0) return -1;

  TVMValue values[3];
  int codes[3];
  values[0].v_handle = t[0];
  codes[0] = kTVMDLTensorHandle;
  values[1].v_handle = t[1];
  codes[1] = kTVMDLTensorHandle;
  values[2].v_float64 = 3.0;
  codes[2] = kTVMArgFloat;
  TVMValue ret;
  ret.v_handle = NULL;
  int ret_code = kTVMNullptr;
  if (call(func, values, codes, 3, &ret, &ret_code) != 0) return -1;
  return 0;
}

/* Always fails, whatever its arguments. */
TK_KERNEL(test_fail) {
  (void)args;
  (void)type_codes;
  (void)num_args;
  TK_UNUSED_TAIL();
  return tk_error("test_fail: deliberate failure");
}

/* out = x + 1 through the library's own test_add_one, found with
 * __TVMBackendGetFuncFromEnv and called with __TVMFuncCall. The handle is cached
 * in a library global on first use, as TVM's CUDA host code caches its kernels:
 * it must stay valid however often the library is loaded and unloaded. */
static _Atomic(void*) tk_own_func = NULL;

TK_KERNEL(test_call_own) {
  TK_UNUSED_TAIL();
  static const char kernel[] = "test_call_own";
  DLTensor* t[2];
  if (tk_bind_same_shape(kernel, args, type_codes, num_args, 2, tk_names_x_out, tk_float32, 0, t) !=
      0) {
    return -1;
  }
  int (*call)(void*, TVMValue*, int*, int, TVMValue*, int*) = __TVMFuncCall;
  if (call == NULL) return tk_missing_slot(kernel, "__TVMFuncCall");
  void* func = NULL;
  if (tk_env_func(kernel, &tk_own_func, "test_add_one", &func) != 0) return -1;
  TVMValue ret;
  ret.v_handle = NULL;
  int ret_code = kTVMNullptr;
  return call(func, args, type_codes, 2, &ret, &ret_code) != 0 ? -1 : 0;
}


/* Each element goes through 256 rounds of a multiply-add: compute-bound work whose
 * result depends on every round, split over the tasks. */
static int tk_heavy_task(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  const tk_xy_closure* c = (const tk_xy_closure*)cdata;
  if (tk_check_task("test_parallel_heavy", task_id, penv) != 0) return -1;
  int64_t begin;
  int64_t end;
  tk_task_range(c->n, task_id, (int)penv->num_task, &begin, &end);
  for (int64_t i = begin; i < end; ++i) {
    float v = c->x[i];
    for (int r = 0; r < 256; ++r) v = v * 0.999f + 0.5f;
    c->out[i] = v;
  }
  return 0;
}

/* out[i] = f^256(x[i]) with f(v) = 0.999 v + 0.5; float32, any shape; parallel. */
TK_KERNEL(test_parallel_heavy) {
  TK_UNUSED_TAIL();
  return tk_parallel_xy("test_parallel_heavy", args, type_codes, num_args, tk_heavy_task) != 0 ? -1 : 0;
}

/* The same work, its parallel loop over three blocks (as TVM's is over a small outer
 * extent): two threads finish it in two blocks' time, not one and a half. */
static int tk_thirds_task(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  const tk_xy_closure* c = (const tk_xy_closure*)cdata;
  if (tk_check_task("test_parallel_thirds", task_id, penv) != 0) return -1;
  int64_t first;
  int64_t last;
  tk_task_range(3, task_id, (int)penv->num_task, &first, &last);
  for (int64_t block = first; block < last; ++block) {
    for (int64_t i = c->n * block / 3; i < c->n * (block + 1) / 3; ++i) {
      float v = c->x[i];
      for (int r = 0; r < 256; ++r) v = v * 0.999f + 0.5f;
      c->out[i] = v;
    }
  }
  return 0;
}

/* Task t writes the number of tasks to out[t]. */
static int tk_num_task_task(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  const tk_xy_closure* c = (const tk_xy_closure*)cdata;
  if (tk_check_task("test_num_task", task_id, penv) != 0) return -1;
  if (task_id < c->n) c->out[task_id] = (float)penv->num_task;
  return 0;
}

/* out[t] = the number of tasks the kernel's one launch ran, for each task t (the rest of
 * out is left as it was); float32, any shape. */
TK_KERNEL(test_num_task) {
  TK_UNUSED_TAIL();
  return tk_parallel_xy("test_num_task", args, type_codes, num_args, tk_num_task_task) != 0 ? -1 : 0;
}

/* out[i] = f^256(x[i]) as test_parallel_heavy, in parallel over three blocks. */
TK_KERNEL(test_parallel_thirds) {
  TK_UNUSED_TAIL();
  return tk_parallel_xy("test_parallel_thirds", args, type_codes, num_args, tk_thirds_task) != 0 ? -1 : 0;
}
