/*
 * Host code of gexec's CUDA test library, as TVM v0.19 generates it for a model
 * built for target "cuda" with a "llvm" host: one packed function per fused op that
 * checks its arguments, selects the device through __tvm_set_device and launches the
 * op's kernels (tests/cuda/kernels.cu) through handles it gets from
 * __TVMBackendGetFuncFromEnv. Like TVM's heterogeneous export, the library also holds
 * an op that runs on the host (fused_negative_cpu).
 *
 * The library links no runtime: it exports context slots (function pointers the
 * loader fills) and the packed functions, nothing else. The kernels' PTX or fatbin is
 * not part of this file: the build links in a generated __tvm_dev_mblob whose "cuda"
 * module holds it (tests/cuda/make_cuda_blob.cpp).
 *
 * A launch is a packed call of the kernel's handle with the kernel's arguments
 * (device pointers as handles, integers as int64, floats as float64) followed by the
 * launch extents in the order of the kernel's launch-parameter tags and, when the last
 * tag is "tir.use_dyn_shared_memory", the dynamic shared memory size.
 *
 * A failed check is reported through __TVMAPISetLastError as
 * "<op>: arg <index> (<name>): <what is wrong>" or "<op>: <what is wrong>", and the op
 * returns -1; a failed runtime call returns -1 with the runtime's message in place.
 */

#include "../tvm_c_abi.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#if defined(__GNUC__) || defined(__clang__)
#define CH_EXPORT __attribute__((visibility("default")))
#define CH_PRINTF(fmt_index, first_arg) __attribute__((format(printf, fmt_index, first_arg)))
#else
#define CH_EXPORT
#define CH_PRINTF(fmt_index, first_arg)
#endif

/* ------------------------------------------------------------------------- */
/* Packed ABI                                                                 */
/* ------------------------------------------------------------------------- */

#define CH_ALIGNMENT TVM_TEST_ALIGNMENT

/* Context slots, filled by the loader before the first call. */
CH_EXPORT void* __tvm_module_ctx = NULL;

CH_EXPORT TVMFuncCallSlot __TVMFuncCall = NULL;

CH_EXPORT TVMAPISetLastErrorSlot __TVMAPISetLastError = NULL;

CH_EXPORT TVMBackendGetFuncFromEnvSlot __TVMBackendGetFuncFromEnv = NULL;

CH_EXPORT TVMBackendAllocWorkspaceSlot __TVMBackendAllocWorkspace = NULL;

CH_EXPORT TVMBackendFreeWorkspaceSlot __TVMBackendFreeWorkspace = NULL;

/* ------------------------------------------------------------------------- */
/* Errors                                                                     */
/* ------------------------------------------------------------------------- */

/* Formats a message for __TVMAPISetLastError (when set); always returns -1. */
CH_PRINTF(1, 2) static int ch_error(const char* fmt, ...) {
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

/* Reports "<op>: arg <index> (<name>): <detail>" and returns -1. */
CH_PRINTF(4, 5)
static int ch_arg_error(const char* op, int index, const char* name, const char* fmt, ...) {
  char detail[384];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof(detail), fmt, ap);
  va_end(ap);
  return ch_error("%s: arg %d (%s): %s", op, index, name, detail);
}

/* ------------------------------------------------------------------------- */
/* Argument checks                                                            */
/* ------------------------------------------------------------------------- */

/* What one tensor argument must look like: float32 on `device_type`, `ndim`
 * dimensions (-1: any) with the extents `shape` (NULL: any; a negative entry
 * leaves that dimension free). */
typedef struct {
  int device_type;
  int ndim;
  const int64_t* shape;
} ch_expect;

static int64_t ch_numel(const DLTensor* t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; ++d) n *= t->shape[d];
  return n;
}

/* Checks args[index] against `want` and returns its DLTensor in *out. Checks, in
 * order: type code, handle, ndim, dtype, shape, strides, byte_offset, device type,
 * data pointer and its alignment. */
static int ch_bind_tensor(const char* op, const TVMValue* args, const int* type_codes, int index,
                          const char* name, const ch_expect* want, DLTensor** out) {
  const int code = type_codes[index];
  if (code != kTVMDLTensorHandle && code != kTVMOpaqueHandle && code != kTVMNDArrayHandle) {
    return ch_arg_error(op, index, name,
                        "expected a DLTensor (type code 7, 3 or 13), got type code %d", code);
  }
  DLTensor* t = (DLTensor*)args[index].v_handle;
  if (t == NULL) return ch_arg_error(op, index, name, "DLTensor handle is NULL");
  if (t->ndim < 0 || (want->ndim >= 0 && t->ndim != want->ndim)) {
    return ch_arg_error(op, index, name, "ndim is %d, expected %d", t->ndim, want->ndim);
  }
  if (t->dtype.code != kDLFloat || t->dtype.bits != 32 || t->dtype.lanes != 1) {
    return ch_arg_error(op, index, name, "expected dtype float32, got code %u bits %u lanes %u",
                        (unsigned)t->dtype.code, (unsigned)t->dtype.bits,
                        (unsigned)t->dtype.lanes);
  }
  if (t->ndim > 0 && t->shape == NULL) return ch_arg_error(op, index, name, "shape is NULL");
  for (int d = 0; d < t->ndim; ++d) {
    const int64_t expected = want->shape != NULL ? want->shape[d] : -1;
    if (t->shape[d] < 0 || (expected >= 0 && t->shape[d] != expected)) {
      return ch_arg_error(op, index, name, "shape[%d] is %" PRId64 ", expected %" PRId64, d,
                          t->shape[d], expected);
    }
  }
  if (t->strides != NULL) {
    /* Compact row-major strides; a dimension of extent 1 may carry any stride. */
    int64_t expected = 1;
    for (int d = t->ndim - 1; d >= 0; --d) {
      if (t->shape[d] != 1 && t->strides[d] != expected) {
        return ch_arg_error(op, index, name,
                            "strides[%d] is %" PRId64 ", expected %" PRId64
                            " (compact row-major layout)",
                            d, t->strides[d], expected);
      }
      expected *= t->shape[d];
    }
  }
  if (t->byte_offset != 0) {
    return ch_arg_error(op, index, name, "byte_offset is %" PRIu64 ", expected 0",
                        (uint64_t)t->byte_offset);
  }
  if ((int)t->device.device_type != want->device_type) {
    return ch_arg_error(op, index, name, "device_type is %d, expected %d",
                        (int)t->device.device_type, want->device_type);
  }
  if (t->data == NULL && ch_numel(t) != 0) return ch_arg_error(op, index, name, "data is NULL");
  if ((uintptr_t)t->data % CH_ALIGNMENT != 0) {
    return ch_arg_error(op, index, name, "data pointer %p is not %d-byte aligned", t->data,
                        CH_ALIGNMENT);
  }
  *out = t;
  return 0;
}

static int ch_check_num_args(const char* op, int num_args, int expected) {
  if (num_args != expected) {
    return ch_error("%s: expected %d arguments, got %d", op, expected, num_args);
  }
  return 0;
}

/* Checks `count` float32 tensors on `device_type` of one shape (that of the first,
 * any ndim) that is small enough for int32 indexing, the kernels' index type. */
static int ch_bind_same_shape(const char* op, const TVMValue* args, const int* type_codes,
                              int num_args, int count, const char* const* names, int device_type,
                              DLTensor** tensors) {
  if (ch_check_num_args(op, num_args, count) != 0) return -1;
  ch_expect want = {device_type, -1, NULL};
  if (ch_bind_tensor(op, args, type_codes, 0, names[0], &want, &tensors[0]) != 0) return -1;
  want.ndim = tensors[0]->ndim;
  want.shape = tensors[0]->shape;
  for (int i = 1; i < count; ++i) {
    if (ch_bind_tensor(op, args, type_codes, i, names[i], &want, &tensors[i]) != 0) return -1;
  }
  if (ch_numel(tensors[0]) > INT32_MAX) {
    return ch_error("%s: %" PRId64 " elements exceed int32 indexing", op, ch_numel(tensors[0]));
  }
  return 0;
}

static const char* const ch_names_in_out[] = {"in", "out"};
static const char* const ch_names_a_b_c[] = {"A", "B", "C"};

/* ------------------------------------------------------------------------- */
/* Runtime calls                                                              */
/* ------------------------------------------------------------------------- */

/* The handle of environment function `name`, looked up on first use and kept in
 * *cache, as generated host code keeps it in a library global. */
static int ch_env_func(const char* op, _Atomic(void*)* cache, const char* name, void** func) {
  *func = atomic_load_explicit(cache, memory_order_acquire);
  if (*func != NULL) return 0;
  int (*get_func)(void*, const char*, void**) = __TVMBackendGetFuncFromEnv;
  if (get_func == NULL) return ch_error("%s: __TVMBackendGetFuncFromEnv is not set", op);
  if (__tvm_module_ctx == NULL) return ch_error("%s: __tvm_module_ctx is not set", op);
  if (get_func(__tvm_module_ctx, name, func) != 0) return -1; /* the runtime's message */
  if (*func == NULL) return ch_error("%s: function %s not found", op, name);
  atomic_store_explicit(cache, *func, memory_order_release);
  return 0;
}

/* Packed call of `func`; the return value is discarded. */
static int ch_call(const char* op, void* func, TVMValue* values, int* codes, int num_args) {
  int (*call)(void*, TVMValue*, int*, int, TVMValue*, int*) = __TVMFuncCall;
  if (call == NULL) return ch_error("%s: __TVMFuncCall is not set", op);
  TVMValue ret;
  ret.v_handle = NULL;
  int ret_code = kTVMNullptr;
  return call(func, values, codes, num_args, &ret, &ret_code) != 0 ? -1 : 0;
}

static _Atomic(void*) ch_set_device_func = NULL;

/* __tvm_set_device(kDLCUDA, device_id), the first call of every CUDA op. */
static int ch_set_device(const char* op, int device_id) {
  void* func = NULL;
  if (ch_env_func(op, &ch_set_device_func, "__tvm_set_device", &func) != 0) return -1;
  TVMValue values[2];
  int codes[2] = {kTVMArgInt, kTVMArgInt};
  values[0].v_int64 = kDLCUDA;
  values[1].v_int64 = device_id;
  return ch_call(op, func, values, codes, 2);
}

/* Builds a kernel launch: arguments, then launch values, in packed form. */
#define CH_MAX_LAUNCH_ARGS 16
typedef struct {
  TVMValue values[CH_MAX_LAUNCH_ARGS];
  int codes[CH_MAX_LAUNCH_ARGS];
  int count;
} ch_launch;

static void ch_push_handle(ch_launch* l, void* ptr) {
  l->values[l->count].v_handle = ptr;
  l->codes[l->count++] = kTVMOpaqueHandle;
}

/* An integer argument or a launch value. */
static void ch_push_int(ch_launch* l, int64_t v) {
  l->values[l->count].v_int64 = v;
  l->codes[l->count++] = kTVMArgInt;
}

static void ch_push_float(ch_launch* l, double v) {
  l->values[l->count].v_float64 = v;
  l->codes[l->count++] = kTVMArgFloat;
}

/* Launches kernel `name` (its handle cached in *cache) with what `l` holds. */
static int ch_launch_kernel(const char* op, _Atomic(void*)* cache, const char* name,
                            ch_launch* l) {
  void* func = NULL;
  if (ch_env_func(op, cache, name, &func) != 0) return -1;
  return ch_call(op, func, l->values, l->codes, l->count);
}

static int64_t ch_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Threads per block of the 1-D kernels. */
#define CH_BLOCK 256

/* One kernel handle cache per kernel, shared by the ops that launch it. */
static _Atomic(void*) ch_vadd = NULL;
static _Atomic(void*) ch_scale_shift = NULL;
static _Atomic(void*) ch_transpose = NULL;
static _Atomic(void*) ch_row_sum = NULL;
static _Atomic(void*) ch_big_shared = NULL;
static _Atomic(void*) ch_double = NULL;
static _Atomic(void*) ch_add_ws = NULL;
static _Atomic(void*) ch_relu = NULL;
static _Atomic(void*) ch_fault = NULL;

/* ------------------------------------------------------------------------- */
/* Packed functions                                                           */
/* ------------------------------------------------------------------------- */

#define CH_OP(name)                                                                        \
  CH_EXPORT int name(TVMValue* args, int* type_codes, int num_args, TVMValue* out_ret_value, \
                     int* out_ret_tcode, void* resource_handle)

#define CH_UNUSED_TAIL()   \
  (void)out_ret_value;     \
  (void)out_ret_tcode;     \
  (void)resource_handle

CH_OP(fused_add);
CH_OP(fused_scale_shift);
CH_OP(fused_transpose);
CH_OP(fused_row_sum);
CH_OP(fused_big_shared);
CH_OP(fused_workspace);
CH_OP(fused_relu);
CH_OP(fused_fault);
CH_OP(fused_negative_cpu);
CH_OP(fused_launch_zero_dims);

/* Every CUDA op: checks, __tvm_set_device on the first tensor's device, then (unless
 * the tensors are empty, when there is nothing to launch) its kernels. */

/* C = A + B; float32, one shape (any ndim). vadd_kernel0, block 256. */
CH_OP(fused_add) {
  CH_UNUSED_TAIL();
  static const char op[] = "fused_add";
  DLTensor* t[3];
  if (ch_bind_same_shape(op, args, type_codes, num_args, 3, ch_names_a_b_c, kDLCUDA, t) != 0) {
    return -1;
  }
  if (ch_set_device(op, t[0]->device.device_id) != 0) return -1;
  const int64_t n = ch_numel(t[0]);
  if (n == 0) return 0;
  ch_launch l = {.count = 0};
  ch_push_handle(&l, t[2]->data);
  ch_push_handle(&l, t[0]->data);
  ch_push_handle(&l, t[1]->data);
  ch_push_int(&l, n);
  ch_push_int(&l, ch_ceil_div(n, CH_BLOCK)); /* blockIdx.x */
  ch_push_int(&l, CH_BLOCK);                 /* threadIdx.x */
  return ch_launch_kernel(op, &ch_vadd, "vadd_kernel0", &l);
}

/* out = in * 2 + 0.5; float32, one shape. scale_shift_kernel0 with alpha (float32),
 * beta (float64), n (int64) and stride 1 (uint32), block 256. */
CH_OP(fused_scale_shift) {
  CH_UNUSED_TAIL();
  static const char op[] = "fused_scale_shift";
  DLTensor* t[2];
  if (ch_bind_same_shape(op, args, type_codes, num_args, 2, ch_names_in_out, kDLCUDA, t) != 0) {
    return -1;
  }
  if (ch_set_device(op, t[0]->device.device_id) != 0) return -1;
  const int64_t n = ch_numel(t[0]);
  if (n == 0) return 0;
  ch_launch l = {.count = 0};
  ch_push_handle(&l, t[1]->data);
  ch_push_handle(&l, t[0]->data);
  ch_push_float(&l, 2.0); /* alpha */
  ch_push_float(&l, 0.5); /* beta */
  ch_push_int(&l, n);
  ch_push_int(&l, 1); /* stride */
  ch_push_int(&l, ch_ceil_div(n, CH_BLOCK));
  ch_push_int(&l, CH_BLOCK);
  return ch_launch_kernel(op, &ch_scale_shift, "scale_shift_kernel0", &l);
}

/* out[c, r] = in[r, c]; float32. transpose_kernel0 over 16x16 blocks, grid
 * (ceil(c/16), ceil(r/16)), passed in tag order: blockIdx.y, blockIdx.x, threadIdx.y,
 * threadIdx.x. */
CH_OP(fused_transpose) {
  CH_UNUSED_TAIL();
  static const char op[] = "fused_transpose";
  if (ch_check_num_args(op, num_args, 2) != 0) return -1;
  DLTensor* in = NULL;
  DLTensor* out = NULL;
  const ch_expect want_in = {kDLCUDA, 2, NULL};
  if (ch_bind_tensor(op, args, type_codes, 0, "in", &want_in, &in) != 0) return -1;
  const int64_t rows = in->shape[0];
  const int64_t cols = in->shape[1];
  const int64_t out_shape[2] = {cols, rows};
  const ch_expect want_out = {kDLCUDA, 2, out_shape};
  if (ch_bind_tensor(op, args, type_codes, 1, "out", &want_out, &out) != 0) return -1;
  if (ch_numel(in) > INT32_MAX) {
    return ch_error("%s: %" PRId64 " elements exceed int32 indexing", op, ch_numel(in));
  }
  if (ch_set_device(op, in->device.device_id) != 0) return -1;
  if (rows == 0 || cols == 0) return 0;
  ch_launch l = {.count = 0};
  ch_push_handle(&l, out->data);
  ch_push_handle(&l, in->data);
  ch_push_int(&l, rows);
  ch_push_int(&l, cols);
  ch_push_int(&l, ch_ceil_div(rows, 16)); /* blockIdx.y */
  ch_push_int(&l, ch_ceil_div(cols, 16)); /* blockIdx.x */
  ch_push_int(&l, 16);                    /* threadIdx.y */
  ch_push_int(&l, 16);                    /* threadIdx.x */
  return ch_launch_kernel(op, &ch_transpose, "transpose_kernel0", &l);
}

/* Threads per row of row_sum_kernel0 (a power of two). */
#define CH_ROW_SUM_BLOCK 128

/* out[r] = sum of in[r, :]; float32. row_sum_kernel0, one block of 128 threads per
 * row, 128 floats of dynamic shared memory. */
CH_OP(fused_row_sum) {
  CH_UNUSED_TAIL();
  static const char op[] = "fused_row_sum";
  if (ch_check_num_args(op, num_args, 2) != 0) return -1;
  DLTensor* in = NULL;
  DLTensor* out = NULL;
  const ch_expect want_in = {kDLCUDA, 2, NULL};
  if (ch_bind_tensor(op, args, type_codes, 0, "in", &want_in, &in) != 0) return -1;
  const int64_t rows = in->shape[0];
  const int64_t cols = in->shape[1];
  const ch_expect want_out = {kDLCUDA, 1, &in->shape[0]};
  if (ch_bind_tensor(op, args, type_codes, 1, "out", &want_out, &out) != 0) return -1;
  if (ch_numel(in) > INT32_MAX) {
    return ch_error("%s: %" PRId64 " elements exceed int32 indexing", op, ch_numel(in));
  }
  if (ch_set_device(op, in->device.device_id) != 0) return -1;
  if (rows == 0) return 0;
  ch_launch l = {.count = 0};
  ch_push_handle(&l, out->data);
  ch_push_handle(&l, in->data);
  ch_push_int(&l, cols);
  ch_push_int(&l, rows);                                    /* blockIdx.x */
  ch_push_int(&l, CH_ROW_SUM_BLOCK);                        /* threadIdx.x */
  ch_push_int(&l, CH_ROW_SUM_BLOCK * (int64_t)sizeof(float)); /* dynamic shared bytes */
  return ch_launch_kernel(op, &ch_row_sum, "row_sum_kernel0", &l);
}

/* Floats big_shared_kernel0 stages in shared memory: 64 KiB. */
#define CH_BIG_SHARED_FLOATS 16384

/* out = in reversed; float32 [n], n <= 16384. big_shared_kernel0, one block of 256
 * threads with 64 KiB of dynamic shared memory (above the default 48 KiB limit). */
CH_OP(fused_big_shared) {
  CH_UNUSED_TAIL();
  static const char op[] = "fused_big_shared";
  if (ch_check_num_args(op, num_args, 2) != 0) return -1;
  DLTensor* in = NULL;
  DLTensor* out = NULL;
  const ch_expect want_in = {kDLCUDA, 1, NULL};
  if (ch_bind_tensor(op, args, type_codes, 0, "in", &want_in, &in) != 0) return -1;
  const ch_expect want_out = {kDLCUDA, 1, in->shape};
  if (ch_bind_tensor(op, args, type_codes, 1, "out", &want_out, &out) != 0) return -1;
  const int64_t n = in->shape[0];
  if (n > CH_BIG_SHARED_FLOATS) {
    return ch_arg_error(op, 0, "in", "shape[0] is %" PRId64 ", expected at most %d", n,
                        CH_BIG_SHARED_FLOATS);
  }
  if (ch_set_device(op, in->device.device_id) != 0) return -1;
  if (n == 0) return 0;
  ch_launch l = {.count = 0};
  ch_push_handle(&l, out->data);
  ch_push_handle(&l, in->data);
  ch_push_int(&l, n);
  ch_push_int(&l, 1);                                           /* blockIdx.x */
  ch_push_int(&l, CH_BLOCK);                                    /* threadIdx.x */
  ch_push_int(&l, CH_BIG_SHARED_FLOATS * (int64_t)sizeof(float)); /* dynamic shared bytes */
  return ch_launch_kernel(op, &ch_big_shared, "big_shared_kernel0", &l);
}

/* out = 3 * in; float32, one shape. double_kernel0 writes 2 * in to a workspace of n
 * floats, add_ws_kernel0 adds in to it. The workspace is freed right after the
 * launches, which the stream orders before any later use of the memory. */
CH_OP(fused_workspace) {
  CH_UNUSED_TAIL();
  static const char op[] = "fused_workspace";
  DLTensor* t[2];
  if (ch_bind_same_shape(op, args, type_codes, num_args, 2, ch_names_in_out, kDLCUDA, t) != 0) {
    return -1;
  }
  const int device_id = t[0]->device.device_id;
  if (ch_set_device(op, device_id) != 0) return -1;
  const int64_t n = ch_numel(t[0]);
  if (n == 0) return 0;
  void* (*alloc_ws)(int, int, uint64_t, int, int) = __TVMBackendAllocWorkspace;
  int (*free_ws)(int, int, void*) = __TVMBackendFreeWorkspace;
  if (alloc_ws == NULL) return ch_error("%s: __TVMBackendAllocWorkspace is not set", op);
  if (free_ws == NULL) return ch_error("%s: __TVMBackendFreeWorkspace is not set", op);
  const uint64_t nbytes = (uint64_t)n * sizeof(float);
  void* ws = alloc_ws(kDLCUDA, device_id, nbytes, kDLFloat, 32);
  if (ws == NULL) {
    return ch_error("%s: workspace allocation of %" PRIu64 " bytes failed", op, nbytes);
  }

  ch_launch first = {.count = 0};
  ch_push_handle(&first, ws);
  ch_push_handle(&first, t[0]->data);
  ch_push_int(&first, n);
  ch_push_int(&first, ch_ceil_div(n, CH_BLOCK));
  ch_push_int(&first, CH_BLOCK);
  ch_launch second = {.count = 0};
  ch_push_handle(&second, t[1]->data);
  ch_push_handle(&second, ws);
  ch_push_handle(&second, t[0]->data);
  ch_push_int(&second, n);
  ch_push_int(&second, ch_ceil_div(n, CH_BLOCK));
  ch_push_int(&second, CH_BLOCK);
  const int launched =
      ch_launch_kernel(op, &ch_double, "double_kernel0", &first) == 0 &&
      ch_launch_kernel(op, &ch_add_ws, "add_ws_kernel0", &second) == 0;
  /* On a failed launch its message stays: the workspace is released without a new one. */
  if (free_ws(kDLCUDA, device_id, ws) != 0) return -1;
  return launched ? 0 : -1;
}

/* out = max(in, 0); float32, one shape. relu_kernel0, block 256. */
CH_OP(fused_relu) {
  CH_UNUSED_TAIL();
  static const char op[] = "fused_relu";
  DLTensor* t[2];
  if (ch_bind_same_shape(op, args, type_codes, num_args, 2, ch_names_in_out, kDLCUDA, t) != 0) {
    return -1;
  }
  if (ch_set_device(op, t[0]->device.device_id) != 0) return -1;
  const int64_t n = ch_numel(t[0]);
  if (n == 0) return 0;
  ch_launch l = {.count = 0};
  ch_push_handle(&l, t[1]->data);
  ch_push_handle(&l, t[0]->data);
  ch_push_int(&l, n);
  ch_push_int(&l, ch_ceil_div(n, CH_BLOCK));
  ch_push_int(&l, CH_BLOCK);
  return ch_launch_kernel(op, &ch_relu, "relu_kernel0", &l);
}

/* Checks (in, out) like any op, then launches fault_kernel0 on the address 0x10, which
 * no allocation holds: the launch or the next synchronization reports an illegal
 * address. */
CH_OP(fused_fault) {
  CH_UNUSED_TAIL();
  static const char op[] = "fused_fault";
  DLTensor* t[2];
  if (ch_bind_same_shape(op, args, type_codes, num_args, 2, ch_names_in_out, kDLCUDA, t) != 0) {
    return -1;
  }
  if (ch_set_device(op, t[0]->device.device_id) != 0) return -1;
  ch_launch l = {.count = 0};
  ch_push_handle(&l, (void*)(uintptr_t)0x10);
  ch_push_int(&l, 1); /* blockIdx.x */
  ch_push_int(&l, 1); /* threadIdx.x */
  return ch_launch_kernel(op, &ch_fault, "fault_kernel0", &l);
}

/* out = -in on the host; float32, one shape, kDLCPU: no CUDA call. */
CH_OP(fused_negative_cpu) {
  CH_UNUSED_TAIL();
  DLTensor* t[2];
  if (ch_bind_same_shape("fused_negative_cpu", args, type_codes, num_args, 2, ch_names_in_out,
                         kDLCPU, t) != 0) {
    return -1;
  }
  const float* in = (const float*)t[0]->data;
  float* out = (float*)t[1]->data;
  const int64_t n = ch_numel(t[0]);
  for (int64_t i = 0; i < n; ++i) out[i] = -in[i];
  return 0;
}

/* out = max(in, 0) for at most 256 elements: relu_kernel0 with a grid extent of 0,
 * which the launcher must read as 1 (TVM: extents <= 0 mean 1), and block 256. */
CH_OP(fused_launch_zero_dims) {
  CH_UNUSED_TAIL();
  static const char op[] = "fused_launch_zero_dims";
  DLTensor* t[2];
  if (ch_bind_same_shape(op, args, type_codes, num_args, 2, ch_names_in_out, kDLCUDA, t) != 0) {
    return -1;
  }
  const int64_t n = ch_numel(t[0]);
  if (n > CH_BLOCK) {
    return ch_error("%s: %" PRId64 " elements, expected at most %d", op, n, CH_BLOCK);
  }
  if (ch_set_device(op, t[0]->device.device_id) != 0) return -1;
  if (n == 0) return 0;
  ch_launch l = {.count = 0};
  ch_push_handle(&l, t[1]->data);
  ch_push_handle(&l, t[0]->data);
  ch_push_int(&l, n);
  ch_push_int(&l, 0); /* blockIdx.x: 0 means 1 */
  ch_push_int(&l, CH_BLOCK);
  return ch_launch_kernel(op, &ch_relu, "relu_kernel0", &l);
}
