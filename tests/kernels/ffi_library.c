/*
 * Kernel libraries in the TVM-FFI ABI (tvm-ffi include/tvm/ffi/c_api.h), written by
 * hand from that header so that gexec's binding is tested without a TVM install, and
 * built as TVM builds its libraries: the error function is an undefined symbol the
 * dynamic loader binds lazily, on a kernel's first error.
 *
 *   GEXEC_FFI_CASE 1  kernels: __tvm_ffi_ffi_add_one (x + 1 over float32 vectors,
 *                     checking its arguments as TVM's generated code does) and
 *                     __tvm_ffi_ffi_scale (x * s, s a float argument: never in a graph),
 *                     __tvm_ffi_ffi_noop (checks that it got two tensors, does nothing:
 *                     the dispatch benchmark's), and in gexec_test_ffi_1 alone
 *                     (GEXEC_FFI_PARALLEL) __tvm_ffi_ffi_pool_tasks (returns the number of
 *                     tasks TVMBackendParallelLaunch gives a parallel loop that leaves it
 *                     to the runtime: which thread pool serves the kernel)
 *   GEXEC_FFI_CASE 2  the same kernel with a __tvm_ffi__library_bin carrying a "cuda"
 *                     module: gexec must refuse the device module, clearly
 *   GEXEC_FFI_CASE 3  a kernel importing TVMFFIEnvGetStream, which gexec does not
 *                     provide: the library must be refused at load, not end the process
 * (gexec_test_ffi_4 is case 1 linked with -z now: dlopen() must refuse it, cleanly.)
 */

#include <dlpack/dlpack.h>

#include <stdint.h>
#include <string.h>

#define FFI_EXPORT __attribute__((visibility("default")))

typedef struct {
  int32_t type_index;
  uint32_t zero_padding;
  union {
    int64_t v_int64;
    double v_float64;
    void* v_ptr;
  };
} TVMFFIAny;

enum { kTVMFFINone = 0, kTVMFFIInt = 1, kTVMFFIFloat = 3, kTVMFFIDLTensorPtr = 7 };

/* From libtvm_ffi in TVM's world; gexec binds it when it loads the library. */
void TVMFFIErrorSetRaisedFromCStrParts(const char* kind, const char** message_parts, int32_t num_parts);

static int ffi_fail(const char* what, const char* detail) {
  const char* parts[4] = {what, NULL, " when calling ffi_add_one(x: Tensor, y: Tensor): ", detail};
  TVMFFIErrorSetRaisedFromCStrParts("ValueError", parts, 4);
  return -1;
}

static const DLTensor* float_vector(const TVMFFIAny* a) {
  if (a->type_index != kTVMFFIDLTensorPtr) return NULL;
  const DLTensor* t = (const DLTensor*)a->v_ptr;
  if (t->ndim != 1 || t->dtype.code != kDLFloat || t->dtype.bits != 32 || t->dtype.lanes != 1) return NULL;
  return t;
}

FFI_EXPORT int __tvm_ffi_ffi_add_one(void* self, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result) {
  (void)self;
  (void)result;
  if (num_args != 2) return ffi_fail("Mismatched number of arguments", "expected 2");
  const DLTensor* x = float_vector(&args[0]);
  const DLTensor* y = float_vector(&args[1]);
  if (!x) return ffi_fail("Invalid argument #0", "expected a float32 vector");
  if (!y) return ffi_fail("Invalid argument #1", "expected a float32 vector");
  if (x->shape[0] != y->shape[0]) return ffi_fail("Invalid y.shape[0]", "expected the length of x");
  const float* in = (const float*)x->data;
  float* out = (float*)y->data;
  for (int64_t i = 0; i < x->shape[0]; ++i) out[i] = in[i] + 1.0f;
  return 0;
}

FFI_EXPORT int __tvm_ffi_ffi_noop(void* self, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result) {
  (void)self;
  (void)result;
  if (num_args != 2 || args[0].type_index != kTVMFFIDLTensorPtr || args[1].type_index != kTVMFFIDLTensorPtr)
    return ffi_fail("Invalid arguments", "expected two tensors");
  return 0;
}

FFI_EXPORT int __tvm_ffi_ffi_scale(void* self, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result) {
  (void)self;
  (void)result;
  if (num_args != 3 || args[2].type_index != kTVMFFIFloat) return ffi_fail("Invalid argument #2", "expected a float");
  const DLTensor* x = float_vector(&args[0]);
  const DLTensor* y = float_vector(&args[1]);
  if (!x || !y || x->shape[0] != y->shape[0]) return ffi_fail("Invalid argument #0", "expected two float32 vectors of one length");
  for (int64_t i = 0; i < x->shape[0]; ++i) ((float*)y->data)[i] = ((const float*)x->data)[i] * (float)args[2].v_float64;
  return 0;
}

#if GEXEC_FFI_PARALLEL
/* From the runtime (TVM's c_backend_api.h), as TVM's generated parallel loops call it. */
typedef struct {
  void* sync_handle;
  int32_t num_task;
} TVMParallelGroupEnv;
typedef int (*FTVMParallelLambda)(int task_id, TVMParallelGroupEnv* penv, void* cdata);
int TVMBackendParallelLaunch(FTVMParallelLambda flambda, void* cdata, int num_task);

static int record_num_task(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  if (task_id == 0) *(int32_t*)cdata = penv->num_task;
  return 0;
}

FFI_EXPORT int __tvm_ffi_ffi_pool_tasks(void* self, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result) {
  (void)self;
  (void)args;
  (void)num_args;
  int32_t tasks = 0;
  if (TVMBackendParallelLaunch(record_num_task, &tasks, 0) != 0) return ffi_fail("TVMBackendParallelLaunch", "failed");
  result->type_index = kTVMFFIInt;
  result->zero_padding = 0;
  result->v_int64 = tasks;
  return 0;
}
#endif

#if GEXEC_FFI_CASE == 2
/* u64 payload length; import tree [0, 1, 1] / [1]; "_lib"; "cuda" with 4 bytes. */
#define U64(v) (unsigned char)(v), 0, 0, 0, 0, 0, 0, 0
FFI_EXPORT const unsigned char __tvm_ffi__library_bin[] = {
    U64(84),
    U64(3), U64(0), U64(1), U64(1),
    U64(1), U64(1),
    U64(4), '_', 'l', 'i', 'b',
    U64(4), 'c', 'u', 'd', 'a',
    U64(4), 'p', 't', 'x', '!',
};
FFI_EXPORT void* __tvm_ffi__library_ctx = NULL;
#endif

#if GEXEC_FFI_CASE == 3
int TVMFFIEnvGetStream(int32_t device_type, int32_t device_id, void** out);
FFI_EXPORT int __tvm_ffi_ffi_stream(void* self, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result) {
  (void)self;
  (void)args;
  (void)num_args;
  (void)result;
  void* stream = NULL;
  return TVMFFIEnvGetStream(kDLCPU, 0, &stream);
}
#endif
