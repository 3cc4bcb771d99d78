// Self-test of the host-emulated CUDA driver (emulated_driver.h). It uses the library the
// way gexec does: dlopen by path, then every driver function through cuGetProcAddress_v2
// by base name with CUDA 12.0 semantics. The gexec_emu_* test API comes from dlsym.
//
// Usage: test_emulated_driver [path/to/libgexec_cuda_emulated.so]

#include "emulated_driver.h"

#include <gexec/cuda/driver_api.hpp>

#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace api = gexec::cuda_api;
using api::CUcontext;
using api::CUdeviceptr;
using api::CUevent;
using api::CUfunction;
using api::CUgraph;
using api::CUgraphExec;
using api::CUmodule;
using api::CUresult;
using api::CUstream;

namespace {

int failures = 0;

#define CHECK(expr)                                                       \
  do {                                                                    \
    if (!(expr)) {                                                        \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #expr); \
      ++failures;                                                         \
    }                                                                     \
  } while (0)
#define CHECK_EQ(a, b)                                                                          \
  do {                                                                                          \
    const long long va_ = static_cast<long long>(a), vb_ = static_cast<long long>(b);           \
    if (va_ != vb_) {                                                                           \
      std::fprintf(stderr, "%s:%d: CHECK_EQ failed: %s == %s (%lld vs %lld)\n", __FILE__, __LINE__, #a, #b, va_, vb_); \
      ++failures;                                                                               \
    }                                                                                           \
  } while (0)

// The driver, as gexec sees it, and the emulator's test API.
struct Driver {
#define DRIVER_MEMBER(name, ...) api::name##_fn name = nullptr;
  GEXEC_CUDA_DRIVER_FUNCTIONS(DRIVER_MEMBER)
#undef DRIVER_MEMBER
  api::cuGetProcAddress_v2_fn cuGetProcAddress_v2 = nullptr;
  decltype(&gexec_emu_register_kernel) register_kernel = nullptr;
  decltype(&gexec_emu_host_pointer) host_pointer = nullptr;
  decltype(&gexec_emu_set_device_count) set_device_count = nullptr;
  decltype(&gexec_emu_fail) fail = nullptr;
  decltype(&gexec_emu_reset) reset = nullptr;
  decltype(&gexec_emu_get_stats) get_stats = nullptr;
  decltype(&gexec_emu_trace_enable) trace_enable = nullptr;
  decltype(&gexec_emu_trace) trace = nullptr;
  decltype(&gexec_emu_trace_clear) trace_clear = nullptr;
};
Driver d;

bool load(const char* path) {
  void* library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    std::fprintf(stderr, "cannot load %s: %s\n", path, dlerror());
    return false;
  }
  d.cuGetProcAddress_v2 = reinterpret_cast<api::cuGetProcAddress_v2_fn>(dlsym(library, "cuGetProcAddress_v2"));
  if (!d.cuGetProcAddress_v2) return false;
  bool ok = true;
#define DRIVER_RESOLVE(name, ...)                                                                                     \
  {                                                                                                                   \
    void* fn = nullptr;                                                                                               \
    int status = -1;                                                                                                  \
    if (d.cuGetProcAddress_v2(#name, &fn, api::requested_cuda_version, api::CU_GET_PROC_ADDRESS_DEFAULT, &status) || \
        !fn || status != 0) {                                                                                         \
      std::fprintf(stderr, "no %s\n", #name);                                                                         \
      ok = false;                                                                                                     \
    }                                                                                                                 \
    d.name = reinterpret_cast<api::name##_fn>(fn);                                                                    \
  }
  GEXEC_CUDA_DRIVER_FUNCTIONS(DRIVER_RESOLVE)
#undef DRIVER_RESOLVE
#define EMU_RESOLVE(member, symbol)                                           \
  d.member = reinterpret_cast<decltype(d.member)>(dlsym(library, #symbol)); \
  ok = ok && d.member;
  EMU_RESOLVE(register_kernel, gexec_emu_register_kernel)
  EMU_RESOLVE(host_pointer, gexec_emu_host_pointer)
  EMU_RESOLVE(set_device_count, gexec_emu_set_device_count)
  EMU_RESOLVE(fail, gexec_emu_fail)
  EMU_RESOLVE(reset, gexec_emu_reset)
  EMU_RESOLVE(get_stats, gexec_emu_get_stats)
  EMU_RESOLVE(trace_enable, gexec_emu_trace_enable)
  EMU_RESOLVE(trace, gexec_emu_trace)
  EMU_RESOLVE(trace_clear, gexec_emu_trace_clear)
#undef EMU_RESOLVE
  // The versioned names libcuda exports are there too, and are the same functions.
  CHECK(dlsym(library, "cuMemAlloc_v2") == reinterpret_cast<void*>(d.cuMemAlloc));
  CHECK(dlsym(library, "cuGraphInstantiateWithFlags") == reinterpret_cast<void*>(d.cuGraphInstantiateWithFlags));
  CHECK(dlsym(library, "cuStreamBeginCapture_v2") == reinterpret_cast<void*>(d.cuStreamBeginCapture));
  return ok;
}

gexec_emu_stats stats(int device = 0) {
  gexec_emu_stats s;
  d.get_stats(device, &s);
  return s;
}

std::string trace() {
  std::string text(d.trace(nullptr, 0), '\0');
  d.trace(text.data(), text.size() + 1);
  return text;
}

template <class T>
T param(void* const* params, int i) {
  T value;
  std::memcpy(&value, params[i], sizeof value);
  return value;
}

// --- Host kernels --------------------------------------------------------------------

// vadd(a, b, c, n): c[i] = a[i] + b[i] for float arrays.
int vadd(void* const* params, const gexec_emu_launch*) {
  const int n = param<int>(params, 3);
  const std::size_t bytes = sizeof(float) * static_cast<std::size_t>(n);
  const auto* a = static_cast<const float*>(d.host_pointer(param<CUdeviceptr>(params, 0), bytes));
  const auto* b = static_cast<const float*>(d.host_pointer(param<CUdeviceptr>(params, 1), bytes));
  auto* c = static_cast<float*>(d.host_pointer(param<CUdeviceptr>(params, 2), bytes));
  if (!a || !b || !c) return 0;  // the fault is recorded: the launch fails with 700
  for (int i = 0; i < n; ++i) c[i] = a[i] + b[i];
  return 0;
}
const unsigned vadd_params[] = {8, 8, 8, 4};

// store(p, v): *p = v (an int).
int store(void* const* params, const gexec_emu_launch*) {
  int* p = static_cast<int*>(d.host_pointer(param<CUdeviceptr>(params, 0), sizeof(int)));
  if (p) *p = param<int>(params, 1);
  return 0;
}
const unsigned store_params[] = {8, 4};

// increment(p): ++*p.
int increment(void* const* params, const gexec_emu_launch*) {
  int* p = static_cast<int*>(d.host_pointer(param<CUdeviceptr>(params, 0), sizeof(int)));
  if (p) ++*p;
  return 0;
}
const unsigned increment_params[] = {8};

// shared_probe(p): p[0] = shared bytes, p[1] = 1 if all of the shared memory is 0xCD.
int shared_probe(void* const* params, const gexec_emu_launch* launch) {
  int* p = static_cast<int*>(d.host_pointer(param<CUdeviceptr>(params, 0), 2 * sizeof(int)));
  if (!p) return 0;
  p[0] = static_cast<int>(launch->shared_bytes);
  const auto* shared = static_cast<const unsigned char*>(launch->shared);
  p[1] = 1;
  for (unsigned i = 0; i < launch->shared_bytes; ++i) p[1] &= shared[i] == 0xCD;
  return 0;
}

// fail_with(code): the launch fails asynchronously with `code`.
int fail_with(void* const* params, const gexec_emu_launch*) { return param<int>(params, 0); }
const unsigned fail_params[] = {4};

const char ptx[] =
    ".version 8.0\n"
    ".target sm_75\n"
    ".address_size 64\n"
    ".visible .entry vadd(\n .param .u64 a, .param .u64 b, .param .u64 c, .param .u32 n\n)\n{ ret; }\n"
    ".visible .entry store(.param .u64 p, .param .u32 v) { ret; }\n"
    ".visible .entry increment(.param .u64 p) { ret; }\n"
    ".visible .entry shared_probe(.param .u64 p) { ret; }\n"
    ".visible .entry fail_with(.param .u32 code) { ret; }\n"
    ".visible .entry unregistered(.param .u64 p) { ret; }\n";

// --- Shared fixtures -------------------------------------------------------------------

CUcontext ctx0 = nullptr, ctx1 = nullptr;
CUmodule module0 = nullptr;
CUfunction f_vadd = nullptr, f_store = nullptr, f_increment = nullptr, f_probe = nullptr, f_fail = nullptr;

int read_int(CUdeviceptr p, CUstream s = nullptr) {
  int value = -1;
  CHECK_EQ(d.cuMemcpyDtoHAsync(&value, p, sizeof value, s), 0);
  CHECK_EQ(d.cuStreamSynchronize(s), 0);
  return value;
}

CUresult launch1(CUfunction f, CUstream s, void** params, unsigned shared = 0) {
  return d.cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, shared, s, params, nullptr);
}

// --- Tests -----------------------------------------------------------------------------

void test_init_and_errors() {
  int n = -1;
  CHECK_EQ(d.cuDeviceGetCount(&n), api::CUDA_ERROR_NOT_INITIALIZED);
  CUdeviceptr p = 0;
  CHECK_EQ(d.cuMemAlloc(&p, 16), api::CUDA_ERROR_NOT_INITIALIZED);
  int version = 0;
  CHECK_EQ(d.cuDriverGetVersion(&version), 0);
  CHECK_EQ(version, 13000);
  const char* text = nullptr;
  CHECK_EQ(d.cuGetErrorName(api::CUDA_ERROR_ILLEGAL_ADDRESS, &text), 0);
  CHECK(text && std::string(text) == "CUDA_ERROR_ILLEGAL_ADDRESS");
  CHECK_EQ(d.cuGetErrorString(api::CUDA_ERROR_ILLEGAL_ADDRESS, &text), 0);
  CHECK(text && std::string(text) == "an illegal memory access was encountered");
  CHECK_EQ(d.cuGetErrorString(api::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, &text), 0);
  CHECK(text && std::string(text) == "operation not permitted when stream is capturing");
  for (CUresult code : {0, 1, 2, 3, 4, 100, 101, 200, 201, 214, 218, 222, 400, 500, 600, 700, 701, 702, 710, 714, 715,
                        716, 717, 718, 719, 900, 901, 910, 999}) {
    text = nullptr;
    CHECK_EQ(d.cuGetErrorName(code, &text), 0);
    CHECK(text && std::strncmp(text, "CUDA_", 5) == 0);
    text = nullptr;
    CHECK_EQ(d.cuGetErrorString(code, &text), 0);
    CHECK(text && *text);
  }
  text = "x";
  CHECK_EQ(d.cuGetErrorName(12345, &text), api::CUDA_ERROR_INVALID_VALUE);
  CHECK(text == nullptr);
  void* fn = &n;
  int status = -1;
  CHECK_EQ(d.cuGetProcAddress_v2("cuNoSuchFunction", &fn, 12000, 0, &status), api::CUDA_ERROR_NOT_FOUND);
  CHECK(fn == nullptr);
  CHECK_EQ(status, 1);

  CHECK_EQ(d.cuInit(0), 0);
  CHECK_EQ(d.cuDeviceGetCount(&n), 0);
  CHECK_EQ(n, 2);
  int device = -1;
  CHECK_EQ(d.cuDeviceGet(&device, 1), 0);
  CHECK_EQ(device, 1);
  CHECK_EQ(d.cuDeviceGet(&device, 2), api::CUDA_ERROR_INVALID_DEVICE);
  char name[64] = {};
  CHECK_EQ(d.cuDeviceGetName(name, sizeof name, 0), 0);
  CHECK(std::string(name) == "gexec emulated CUDA device");
  int value = -1;
  CHECK_EQ(d.cuDeviceGetAttribute(&value, api::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0), 0);
  CHECK_EQ(value, 9);
  CHECK_EQ(d.cuDeviceGetAttribute(&value, api::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 1), 0);
  CHECK_EQ(value, 0);
}

void test_contexts() {
  CUdeviceptr p = 0;
  CHECK_EQ(d.cuMemAlloc(&p, 16), api::CUDA_ERROR_INVALID_CONTEXT);  // none current
  CHECK_EQ(d.cuDevicePrimaryCtxRetain(&ctx0, 0), 0);
  CHECK_EQ(d.cuDevicePrimaryCtxRetain(&ctx1, 1), 0);
  CUcontext again = nullptr;
  CHECK_EQ(d.cuDevicePrimaryCtxRetain(&again, 0), 0);
  CHECK(again == ctx0);
  CHECK(ctx0 && ctx1 && ctx0 != ctx1);
  CHECK_EQ(d.cuDevicePrimaryCtxRelease(0), 0);  // still retained once
  CHECK_EQ(d.cuCtxSetCurrent(ctx0), 0);
  CUcontext current = nullptr;
  CHECK_EQ(d.cuCtxGetCurrent(&current), 0);
  CHECK(current == ctx0);
  std::thread([&] {  // current contexts are per thread
    CUcontext other = ctx0;
    CHECK_EQ(d.cuCtxGetCurrent(&other), 0);
    CHECK(other == nullptr);
  }).join();
}

void test_memory() {
  const gexec_emu_stats before = stats();
  CUdeviceptr p = 0, q = 0;
  CHECK_EQ(d.cuMemAlloc(&p, 0), api::CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(d.cuMemAlloc(&p, 1000), 0);
  CHECK_EQ(d.cuMemAlloc(&q, 24), 0);
  CHECK((p >> 62) == 1);  // not a host address: never dereference it
  CHECK_EQ(p % 256, 0);
  CHECK_EQ(stats().allocations, before.allocations + 2);
  CHECK_EQ(stats().bytes, before.bytes + 1024);
  // Fresh memory is garbage.
  unsigned char bytes[24] = {};
  CHECK_EQ(d.cuMemcpyDtoHAsync(bytes, q, sizeof bytes, nullptr), 0);
  CHECK_EQ(d.cuStreamSynchronize(nullptr), 0);
  CHECK(bytes[0] == 0xCD && bytes[23] == 0xCD);
  // Ranges are checked at enqueue.
  CHECK_EQ(d.cuMemcpyDtoHAsync(bytes, q, 25, nullptr), api::CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(d.cuMemcpyDtoHAsync(bytes, q + 1, 24, nullptr), api::CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(d.cuMemsetD8Async(p + 999, 0, 2, nullptr), api::CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(d.cuMemFree(p + 8), api::CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(d.cuMemFree(p), 0);
  CHECK_EQ(d.cuMemFree(p), api::CUDA_ERROR_INVALID_VALUE);  // twice
  CHECK_EQ(d.cuMemFree(12345), api::CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(d.cuMemFree(q), 0);
  CHECK_EQ(stats().allocations, before.allocations);
}

void test_deferred_copies() {
  CUstream s = nullptr;
  CHECK_EQ(d.cuStreamCreate(&s, api::CU_STREAM_NON_BLOCKING), 0);
  CUdeviceptr p = 0;
  CHECK_EQ(d.cuMemAlloc(&p, 64), 0);
  int source[16], result[16];
  for (int i = 0; i < 16; ++i) source[i] = i, result[i] = -1;
  const gexec_emu_stats before = stats();
  CHECK_EQ(d.cuMemcpyHtoDAsync(p, source, sizeof source, s), 0);
  source[0] = 1000;  // the source was staged at enqueue
  CHECK_EQ(d.cuMemcpyDtoHAsync(result, p, sizeof result, s), 0);
  CHECK_EQ(result[0], -1);  // not synchronised: untouched
  CHECK_EQ(stats().h2d, before.h2d);
  CHECK_EQ(d.cuStreamSynchronize(s), 0);
  CHECK_EQ(result[0], 0);
  CHECK_EQ(result[15], 15);
  CHECK_EQ(stats().h2d, before.h2d + 1);
  CHECK_EQ(stats().d2h, before.d2h + 1);
  CHECK_EQ(stats().synchronizations, before.synchronizations + 1);
  // Device to device and memset.
  CUdeviceptr q = 0;
  CHECK_EQ(d.cuMemAlloc(&q, 64), 0);
  CHECK_EQ(d.cuMemcpyDtoDAsync(q, p, 64, s), 0);
  CHECK_EQ(d.cuMemsetD8Async(q, 0, 4, s), 0);
  CHECK_EQ(d.cuMemcpyDtoHAsync(result, q, sizeof result, s), 0);
  CHECK_EQ(d.cuStreamSynchronize(s), 0);
  CHECK_EQ(result[0], 0);
  CHECK_EQ(result[5], 5);
  // cuMemFree completes pending work first.
  result[7] = -1;
  CHECK_EQ(d.cuMemcpyDtoHAsync(result, p, sizeof result, s), 0);
  CHECK_EQ(d.cuMemFree(q), 0);
  CHECK_EQ(result[7], 7);
  CHECK_EQ(d.cuMemFree(p), 0);
  CHECK_EQ(d.cuStreamDestroy(s), 0);
  CHECK_EQ(d.cuStreamDestroy(s), api::CUDA_ERROR_INVALID_HANDLE);
  CHECK_EQ(d.cuStreamSynchronize(s), api::CUDA_ERROR_INVALID_HANDLE);
}

void test_events() {
  CUstream a = nullptr, b = nullptr;
  CHECK_EQ(d.cuStreamCreate(&a, 0), 0);
  CHECK_EQ(d.cuStreamCreate(&b, 0), 0);
  CUevent e = nullptr;
  CHECK_EQ(d.cuEventCreate(&e, api::CU_EVENT_DISABLE_TIMING), 0);
  CUdeviceptr p = 0;
  CHECK_EQ(d.cuMemAlloc(&p, sizeof(int)), 0);
  const int value = 42;
  int seen = -1;
  // Without a dependency, b does not see a's work: b's copy reads the garbage.
  CHECK_EQ(d.cuMemcpyHtoDAsync(p, &value, sizeof value, a), 0);
  CHECK_EQ(d.cuMemcpyDtoHAsync(&seen, p, sizeof seen, b), 0);
  CHECK_EQ(d.cuStreamSynchronize(b), 0);
  CHECK_EQ(seen, static_cast<int>(0xCDCDCDCD));
  CHECK_EQ(d.cuStreamSynchronize(a), 0);
  // With record + wait, b runs a up to the record first.
  const int value2 = 43;
  CHECK_EQ(d.cuStreamWaitEvent(b, e, 0), 0);  // never recorded: no-op
  CHECK_EQ(d.cuMemcpyHtoDAsync(p, &value2, sizeof value2, a), 0);
  CHECK_EQ(d.cuEventRecord(e, a), 0);
  CHECK_EQ(d.cuStreamWaitEvent(b, e, 0), 0);
  CHECK_EQ(d.cuMemcpyDtoHAsync(&seen, p, sizeof seen, b), 0);
  CHECK_EQ(d.cuStreamSynchronize(b), 0);
  CHECK_EQ(seen, 43);
  // cuEventSynchronize runs the recording stream up to the record only.
  const int value3 = 44;
  seen = -1;
  CHECK_EQ(d.cuMemcpyDtoHAsync(&seen, p, sizeof seen, a), 0);
  CHECK_EQ(d.cuEventRecord(e, a), 0);
  CHECK_EQ(d.cuMemcpyHtoDAsync(p, &value3, sizeof value3, a), 0);
  CHECK_EQ(d.cuEventSynchronize(e), 0);
  CHECK_EQ(seen, 43);
  CHECK_EQ(read_int(p, a), 44);
  CHECK_EQ(d.cuEventDestroy(e), 0);
  CHECK_EQ(d.cuEventDestroy(e), api::CUDA_ERROR_INVALID_HANDLE);
  CHECK_EQ(d.cuEventRecord(nullptr, a), api::CUDA_ERROR_INVALID_HANDLE);
  CHECK_EQ(d.cuStreamDestroy(nullptr), api::CUDA_ERROR_INVALID_HANDLE);
  CHECK_EQ(d.cuMemFree(p), 0);
  CHECK_EQ(d.cuStreamDestroy(a), 0);
  CHECK_EQ(d.cuStreamDestroy(b), 0);
}

void test_modules() {
  CHECK_EQ(d.register_kernel("vadd", 4, vadd_params, vadd), 0);
  CHECK_EQ(d.register_kernel("store", 2, store_params, store), 0);
  CHECK_EQ(d.register_kernel("increment", 1, increment_params, increment), 0);
  CHECK_EQ(d.register_kernel("shared_probe", 1, increment_params, shared_probe), 0);
  CHECK_EQ(d.register_kernel("fail_with", 1, fail_params, fail_with), 0);
  CHECK_EQ(d.register_kernel("not_in_ptx", 1, increment_params, increment), 0);

  CUmodule m = nullptr;
  CHECK_EQ(d.cuModuleLoadData(&m, "hello, world"), api::CUDA_ERROR_INVALID_IMAGE);
  CHECK_EQ(d.cuModuleLoadData(&m, ""), api::CUDA_ERROR_INVALID_IMAGE);
  const unsigned char elf[] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0};
  CHECK_EQ(d.cuModuleLoadData(&m, elf), 0);
  CUfunction f = nullptr;
  CHECK_EQ(d.cuModuleGetFunction(&f, m, "not_in_ptx"), 0);  // a cubin: any registered kernel
  CHECK_EQ(d.cuModuleGetFunction(&f, m, "never_registered"), api::CUDA_ERROR_NOT_FOUND);
  CHECK_EQ(d.cuModuleUnload(m), 0);
  CHECK_EQ(d.cuModuleUnload(m), api::CUDA_ERROR_INVALID_HANDLE);
  CHECK_EQ(d.cuFuncSetAttribute(f, api::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 0), api::CUDA_ERROR_INVALID_HANDLE);
  const unsigned char fatbin[] = {0x50, 0xED, 0x55, 0xBA, 1, 0, 0, 0};
  CHECK_EQ(d.cuModuleLoadData(&m, fatbin), 0);
  CHECK_EQ(d.cuModuleUnload(m), 0);

  CHECK_EQ(d.cuModuleLoadData(&module0, ptx), 0);
  CHECK_EQ(d.cuModuleGetFunction(&f_vadd, module0, "vadd"), 0);
  CUfunction again = nullptr;
  CHECK_EQ(d.cuModuleGetFunction(&again, module0, "vadd"), 0);
  CHECK(again == f_vadd);
  CHECK_EQ(d.cuModuleGetFunction(&f_store, module0, "store"), 0);
  CHECK_EQ(d.cuModuleGetFunction(&f_increment, module0, "increment"), 0);
  CHECK_EQ(d.cuModuleGetFunction(&f_probe, module0, "shared_probe"), 0);
  CHECK_EQ(d.cuModuleGetFunction(&f_fail, module0, "fail_with"), 0);
  CHECK_EQ(d.cuModuleGetFunction(&f, module0, "not_in_ptx"), api::CUDA_ERROR_NOT_FOUND);    // registered, not in the PTX
  CHECK_EQ(d.cuModuleGetFunction(&f, module0, "unregistered"), api::CUDA_ERROR_NOT_FOUND);  // in the PTX, not registered
  CHECK_EQ(d.cuModuleGetFunction(&f, module0, "vad"), api::CUDA_ERROR_NOT_FOUND);
}

void test_launches() {
  CUstream s = nullptr;
  CHECK_EQ(d.cuStreamCreate(&s, 0), 0);
  constexpr int n = 100;
  CUdeviceptr a = 0, b = 0, c = 0;
  CHECK_EQ(d.cuMemAlloc(&a, n * sizeof(float)), 0);
  CHECK_EQ(d.cuMemAlloc(&b, n * sizeof(float)), 0);
  CHECK_EQ(d.cuMemAlloc(&c, n * sizeof(float)), 0);
  std::vector<float> x(n), y(n), z(n, -1.0f);
  for (int i = 0; i < n; ++i) x[i] = static_cast<float>(i), y[i] = 2.0f * static_cast<float>(i);
  CHECK_EQ(d.cuMemcpyHtoDAsync(a, x.data(), n * sizeof(float), s), 0);
  CHECK_EQ(d.cuMemcpyHtoDAsync(b, y.data(), n * sizeof(float), s), 0);
  int count = n;
  void* args[] = {&a, &b, &c, &count};
  const gexec_emu_stats before = stats();
  CHECK_EQ(d.cuLaunchKernel(f_vadd, 1, 1, 1, 128, 1, 1, 0, s, args, nullptr), 0);
  CHECK_EQ(stats().launches, before.launches);  // deferred
  CHECK_EQ(d.cuMemcpyDtoHAsync(z.data(), c, n * sizeof(float), s), 0);
  CHECK_EQ(d.cuStreamSynchronize(s), 0);
  CHECK(z[0] == 0.0f && z[99] == 297.0f);
  CHECK_EQ(stats().launches, before.launches + 1);

  // Validation is synchronous; nothing is enqueued.
  const auto launch = [&](unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shared) {
    return d.cuLaunchKernel(f_vadd, gx, gy, gz, bx, by, bz, shared, s, args, nullptr);
  };
  CHECK_EQ(launch(1, 1, 1, 2048, 1, 1, 0), api::CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(launch(1, 1, 1, 32, 32, 2, 0), api::CUDA_ERROR_INVALID_VALUE);  // 2048 threads
  CHECK_EQ(launch(1, 1, 1, 1, 1, 65, 0), api::CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(launch(0, 1, 1, 1, 1, 1, 0), api::CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(launch(1, 65536, 1, 1, 1, 1, 0), api::CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(launch(2147483648u, 1, 1, 1, 1, 1, 0), api::CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(launch(2147483647u, 65535, 65535, 32, 32, 1, 0), 0);  // valid; never executed (see below)
  CHECK_EQ(d.cuLaunchKernel(f_vadd, 1, 1, 1, 1, 1, 1, 0, s, nullptr, nullptr), api::CUDA_ERROR_INVALID_VALUE);
  void* extra[] = {nullptr};
  CHECK_EQ(d.cuLaunchKernel(f_vadd, 1, 1, 1, 1, 1, 1, 0, s, args, extra), api::CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(d.cuLaunchKernel(nullptr, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr), api::CUDA_ERROR_INVALID_HANDLE);

  // The valid huge launch above is still queued: the vadd host kernel ignores the grid,
  // so running it is cheap. Drain it.
  CHECK_EQ(d.cuStreamSynchronize(s), 0);

  // Dynamic shared memory: 48 KiB by default, more after cuFuncSetAttribute.
  CUdeviceptr probe = 0;
  CHECK_EQ(d.cuMemAlloc(&probe, 2 * sizeof(int)), 0);
  void* probe_args[] = {&probe};
  CHECK_EQ(launch1(f_probe, s, probe_args, 65536), api::CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(d.cuFuncSetAttribute(f_probe, api::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 232449), api::CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(d.cuFuncSetAttribute(f_probe, 0, 1), api::CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(d.cuFuncSetAttribute(f_probe, api::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 65536), 0);
  CHECK_EQ(launch1(f_probe, s, probe_args, 65536), 0);
  int probed[2] = {};
  CHECK_EQ(d.cuMemcpyDtoHAsync(probed, probe, sizeof probed, s), 0);
  CHECK_EQ(d.cuStreamSynchronize(s), 0);
  CHECK_EQ(probed[0], 65536);
  CHECK_EQ(probed[1], 1);
  CHECK_EQ(stats().max_shared_bytes, 65536);

  // Parameters are copied at enqueue: the caller may reuse its storage at once.
  int value = 7;
  void* store_args[] = {&probe, &value};
  CHECK_EQ(launch1(f_store, s, store_args), 0);
  value = 99;
  CHECK_EQ(read_int(probe, s), 7);

  // A function of ctx0 cannot run while ctx1 is current, nor on ctx1's stream.
  CHECK_EQ(d.cuCtxSetCurrent(ctx1), 0);
  CUstream s1 = nullptr;
  CHECK_EQ(d.cuStreamCreate(&s1, 0), 0);
  CHECK_EQ(launch1(f_store, nullptr, store_args), api::CUDA_ERROR_INVALID_CONTEXT);
  CHECK_EQ(launch1(f_store, s1, store_args), api::CUDA_ERROR_INVALID_CONTEXT);
  CHECK_EQ(launch1(f_store, s, store_args), api::CUDA_ERROR_INVALID_CONTEXT);
  CHECK_EQ(d.cuStreamDestroy(s1), 0);
  CHECK_EQ(d.cuCtxSetCurrent(ctx0), 0);

  for (CUdeviceptr p : {a, b, c, probe}) CHECK_EQ(d.cuMemFree(p), 0);
  CHECK_EQ(d.cuStreamDestroy(s), 0);
}

void test_async_errors() {
  CUstream s = nullptr;
  CHECK_EQ(d.cuStreamCreate(&s, 0), 0);
  CUdeviceptr p = 0;
  CHECK_EQ(d.cuMemAlloc(&p, sizeof(int)), 0);
  // A non-sticky failure is reported once, by the next call that waits.
  int code = api::CUDA_ERROR_NOT_READY;
  void* fail_args[] = {&code};
  CHECK_EQ(launch1(f_fail, s, fail_args), 0);
  CHECK_EQ(d.cuStreamSynchronize(s), api::CUDA_ERROR_NOT_READY);
  CHECK_EQ(d.cuStreamSynchronize(s), 0);
  // A fault (out-of-bounds access through gexec_emu_host_pointer) is sticky.
  CUdeviceptr past_end = p + 4096;
  void* store_args[] = {&past_end, &code};
  CHECK_EQ(launch1(f_store, s, store_args), 0);  // accepted: the fault is asynchronous
  int value = 5;
  void* good_args[] = {&p, &value};
  CHECK_EQ(launch1(f_store, s, good_args), 0);
  CHECK_EQ(d.cuCtxSynchronize(), api::CUDA_ERROR_ILLEGAL_ADDRESS);
  CUdeviceptr q = 0;
  CHECK_EQ(d.cuMemAlloc(&q, 16), api::CUDA_ERROR_ILLEGAL_ADDRESS);
  CUstream s2 = nullptr;
  CHECK_EQ(d.cuStreamCreate(&s2, 0), api::CUDA_ERROR_ILLEGAL_ADDRESS);
  CHECK_EQ(launch1(f_store, s, good_args), api::CUDA_ERROR_ILLEGAL_ADDRESS);
  CHECK_EQ(d.cuStreamSynchronize(s), api::CUDA_ERROR_ILLEGAL_ADDRESS);
  // The other device's context is unaffected.
  CHECK_EQ(d.cuCtxSetCurrent(ctx1), 0);
  CHECK_EQ(d.cuMemAlloc(&q, 16), 0);
  CHECK_EQ(d.cuMemFree(q), 0);
  CHECK_EQ(d.cuCtxSetCurrent(ctx0), 0);
  d.reset();
  CHECK_EQ(read_int(p, s), static_cast<int>(0xCDCDCDCD));  // the launch after the fault was dropped
  CHECK_EQ(d.cuMemAlloc(&q, 16), 0);
  CHECK_EQ(d.cuMemFree(q), 0);

  // A sticky code returned by a kernel: 719 surfaces at cuEventSynchronize.
  code = api::CUDA_ERROR_LAUNCH_FAILED;
  CUevent e = nullptr;
  CHECK_EQ(d.cuEventCreate(&e, 0), 0);
  CHECK_EQ(launch1(f_fail, s, fail_args), 0);
  CHECK_EQ(d.cuEventRecord(e, s), 0);
  CHECK_EQ(d.cuEventSynchronize(e), api::CUDA_ERROR_LAUNCH_FAILED);
  // Destroying calls still release their object in a broken context.
  const long allocations = stats().allocations;
  CHECK_EQ(d.cuMemFree(p), api::CUDA_ERROR_LAUNCH_FAILED);
  CHECK_EQ(stats().allocations, allocations - 1);
  CHECK_EQ(d.cuEventDestroy(e), api::CUDA_ERROR_LAUNCH_FAILED);
  CHECK_EQ(d.cuStreamDestroy(s), api::CUDA_ERROR_LAUNCH_FAILED);
  d.reset();

  // Injected failures: the (skip+1)-th next call.
  d.fail("cuMemAlloc", api::CUDA_ERROR_OUT_OF_MEMORY, 1);
  CHECK_EQ(d.cuMemAlloc(&p, 16), 0);
  CHECK_EQ(d.cuMemAlloc(&q, 16), api::CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_EQ(d.cuMemFree(p), 0);
  d.fail("cuStreamSynchronize", api::CUDA_ERROR_ILLEGAL_ADDRESS, 0);
  CHECK_EQ(d.cuStreamSynchronize(nullptr), api::CUDA_ERROR_ILLEGAL_ADDRESS);
  CHECK_EQ(d.cuMemAlloc(&p, 16), api::CUDA_ERROR_ILLEGAL_ADDRESS);  // broke the current context
  d.reset();
  CHECK_EQ(d.cuStreamSynchronize(nullptr), 0);
}

// Captures `count` increments of *counter on stream s into a new graph.
CUgraph capture_increments(CUstream s, CUdeviceptr* counter, int count) {
  void* args[] = {counter};
  CHECK_EQ(d.cuStreamBeginCapture(s, api::CU_STREAM_CAPTURE_MODE_GLOBAL), 0);
  for (int i = 0; i < count; ++i) CHECK_EQ(launch1(f_increment, s, args), 0);
  CUgraph g = nullptr;
  CHECK_EQ(d.cuStreamEndCapture(s, &g), 0);
  CHECK(g != nullptr);
  return g;
}

void test_capture_and_replay() {
  CUstream s = nullptr;
  CHECK_EQ(d.cuStreamCreate(&s, api::CU_STREAM_NON_BLOCKING), 0);
  CUdeviceptr counter = 0;
  CHECK_EQ(d.cuMemAlloc(&counter, sizeof(int)), 0);
  CHECK_EQ(d.cuMemsetD8Async(counter, 0, sizeof(int), s), 0);
  CHECK_EQ(d.cuStreamSynchronize(s), 0);
  const gexec_emu_stats before = stats();

  // Captured work is recorded, not run.
  CUgraph g = capture_increments(s, &counter, 1);
  CHECK_EQ(read_int(counter, s), 0);
  CHECK_EQ(stats().captures, before.captures + 1);
  CUgraphExec exec = nullptr;
  CHECK_EQ(d.cuGraphInstantiateWithFlags(&exec, g, 0), 0);
  CHECK_EQ(d.cuGraphLaunch(exec, s), 0);
  CHECK_EQ(d.cuGraphLaunch(exec, s), 0);
  CHECK_EQ(stats().graph_launches, before.graph_launches);  // deferred
  CHECK_EQ(read_int(counter, s), 2);
  CHECK_EQ(stats().graph_launches, before.graph_launches + 2);
  CHECK_EQ(stats().graphs, before.graphs + 1);
  CHECK_EQ(stats().graph_execs, before.graph_execs + 1);

  // A captured copy reads its host source each time the graph runs.
  int host = 10, seen = -1;
  CHECK_EQ(d.cuStreamBeginCapture(s, api::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), 0);
  CHECK_EQ(d.cuMemcpyHtoDAsync(counter, &host, sizeof host, s), 0);
  CHECK_EQ(d.cuMemcpyDtoHAsync(&seen, counter, sizeof seen, s), 0);
  CUgraph copies = nullptr;
  CHECK_EQ(d.cuStreamEndCapture(s, &copies), 0);
  CUgraphExec copies_exec = nullptr;
  CHECK_EQ(d.cuGraphInstantiateWithFlags(&copies_exec, copies, 0), 0);
  host = 11;
  CHECK_EQ(d.cuGraphLaunch(copies_exec, s), 0);
  CHECK_EQ(d.cuStreamSynchronize(s), 0);
  CHECK_EQ(seen, 11);

  // cuGraphExecUpdate: same topology takes the new parameters...
  int value = 5;
  void* store_args[] = {&counter, &value};
  CHECK_EQ(d.cuStreamBeginCapture(s, api::CU_STREAM_CAPTURE_MODE_GLOBAL), 0);
  CHECK_EQ(launch1(f_store, s, store_args), 0);
  CUgraph g5 = nullptr;
  CHECK_EQ(d.cuStreamEndCapture(s, &g5), 0);
  value = 9;
  CHECK_EQ(d.cuStreamBeginCapture(s, api::CU_STREAM_CAPTURE_MODE_GLOBAL), 0);
  CHECK_EQ(launch1(f_store, s, store_args), 0);
  CUgraph g9 = nullptr;
  CHECK_EQ(d.cuStreamEndCapture(s, &g9), 0);
  CUgraphExec store_exec = nullptr;
  CHECK_EQ(d.cuGraphInstantiateWithFlags(&store_exec, g5, 0), 0);
  api::CUgraphExecUpdateResultInfo info{-1, nullptr, nullptr};
  CHECK_EQ(d.cuGraphExecUpdate(store_exec, g9, &info), 0);
  CHECK_EQ(info.result, 0);
  CHECK_EQ(d.cuGraphLaunch(store_exec, s), 0);
  CHECK_EQ(read_int(counter, s), 9);
  // ...a different one is refused and leaves the executable graph as it was.
  CHECK_EQ(d.cuGraphExecUpdate(store_exec, g, &info), api::CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
  CHECK(info.result != 0);
  CHECK_EQ(d.cuStreamBeginCapture(s, api::CU_STREAM_CAPTURE_MODE_GLOBAL), 0);
  CHECK_EQ(d.cuLaunchKernel(f_store, 2, 1, 1, 1, 1, 1, 0, s, store_args, nullptr), 0);
  CUgraph g_grid = nullptr;
  CHECK_EQ(d.cuStreamEndCapture(s, &g_grid), 0);
  CHECK_EQ(d.cuGraphExecUpdate(store_exec, g_grid, &info), api::CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
  CHECK(info.result != 0);
  CHECK_EQ(d.cuMemsetD8Async(counter, 0, sizeof(int), s), 0);
  CHECK_EQ(d.cuGraphLaunch(store_exec, s), 0);
  CHECK_EQ(read_int(counter, s), 9);
  CHECK_EQ(stats().graph_updates, before.graph_updates + 1);

  // Synchronising during a capture invalidates it.
  CHECK_EQ(d.cuStreamBeginCapture(s, api::CU_STREAM_CAPTURE_MODE_GLOBAL), 0);
  CHECK_EQ(d.cuStreamBeginCapture(s, api::CU_STREAM_CAPTURE_MODE_GLOBAL), api::CUDA_ERROR_INVALID_VALUE);
  CHECK_EQ(d.cuStreamSynchronize(s), api::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  void* args[] = {&counter};
  CHECK_EQ(launch1(f_increment, s, args), api::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  CUgraph bad = reinterpret_cast<CUgraph>(&value);
  CHECK_EQ(d.cuStreamEndCapture(s, &bad), api::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  CHECK(bad == nullptr);
  CHECK_EQ(d.cuStreamEndCapture(s, &bad), 401);  // CUDA_ERROR_ILLEGAL_STATE: not capturing
  CHECK_EQ(d.cuStreamBeginCapture(s, api::CU_STREAM_CAPTURE_MODE_GLOBAL), 0);
  CHECK_EQ(d.cuCtxSynchronize(), api::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  CHECK_EQ(d.cuStreamEndCapture(s, &bad), api::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  CHECK_EQ(d.cuStreamBeginCapture(nullptr, api::CU_STREAM_CAPTURE_MODE_GLOBAL), api::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);

  // cuMemAlloc is refused under THREAD_LOCAL (and GLOBAL) capture, allowed under RELAXED.
  CUdeviceptr extra = 0;
  CHECK_EQ(d.cuStreamBeginCapture(s, api::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), 0);
  std::thread([&] {  // another thread is not affected by a THREAD_LOCAL capture
    CHECK_EQ(d.cuCtxSetCurrent(ctx0), 0);
    CUdeviceptr other = 0;
    CHECK_EQ(d.cuMemAlloc(&other, 16), 0);
    CHECK_EQ(d.cuMemFree(other), 0);
    CUgraph g_other = nullptr;
    CHECK_EQ(d.cuStreamEndCapture(s, &g_other), 908);  // CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD
  }).join();
  CHECK_EQ(d.cuMemAlloc(&extra, 16), api::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  CHECK_EQ(d.cuStreamEndCapture(s, &bad), api::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  CHECK_EQ(d.cuStreamBeginCapture(s, api::CU_STREAM_CAPTURE_MODE_GLOBAL), 0);
  std::thread([&] {  // nor is any thread by a GLOBAL one
    CHECK_EQ(d.cuCtxSetCurrent(ctx0), 0);
    CUdeviceptr other = 0;
    CHECK_EQ(d.cuMemAlloc(&other, 16), api::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  }).join();
  CHECK_EQ(d.cuStreamEndCapture(s, &bad), api::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  CHECK_EQ(d.cuStreamBeginCapture(s, api::CU_STREAM_CAPTURE_MODE_RELAXED), 0);
  CHECK_EQ(d.cuMemAlloc(&extra, 16), 0);
  CHECK_EQ(launch1(f_increment, s, args), 0);
  CUgraph relaxed = nullptr;
  CHECK_EQ(d.cuStreamEndCapture(s, &relaxed), 0);
  CHECK_EQ(d.cuMemFree(extra), 0);

  // Fork and join: a stream waiting on an event recorded in the capture joins it; the
  // capture only ends well when it is joined back.
  CUstream side = nullptr;
  CHECK_EQ(d.cuStreamCreate(&side, api::CU_STREAM_NON_BLOCKING), 0);
  CUevent fork = nullptr, join = nullptr;
  CHECK_EQ(d.cuEventCreate(&fork, api::CU_EVENT_DISABLE_TIMING), 0);
  CHECK_EQ(d.cuEventCreate(&join, api::CU_EVENT_DISABLE_TIMING), 0);
  CHECK_EQ(d.cuMemsetD8Async(counter, 0, sizeof(int), s), 0);
  CHECK_EQ(d.cuStreamSynchronize(s), 0);
  CHECK_EQ(d.cuStreamBeginCapture(s, api::CU_STREAM_CAPTURE_MODE_GLOBAL), 0);
  CHECK_EQ(launch1(f_increment, s, args), 0);
  CHECK_EQ(d.cuEventRecord(fork, s), 0);
  CHECK_EQ(d.cuStreamWaitEvent(side, fork, 0), 0);
  CHECK_EQ(launch1(f_increment, side, args), 0);
  CHECK_EQ(d.cuEventRecord(join, side), 0);
  CHECK_EQ(d.cuStreamWaitEvent(s, join, 0), 0);
  CUgraph forked = nullptr;
  CHECK_EQ(d.cuStreamEndCapture(s, &forked), 0);
  CUgraphExec forked_exec = nullptr;
  CHECK_EQ(d.cuGraphInstantiateWithFlags(&forked_exec, forked, 0), 0);
  CHECK_EQ(d.cuGraphLaunch(forked_exec, s), 0);
  CHECK_EQ(read_int(counter, s), 2);
  // Unjoined: the side stream's work is not joined back.
  CHECK_EQ(d.cuStreamBeginCapture(s, api::CU_STREAM_CAPTURE_MODE_GLOBAL), 0);
  CHECK_EQ(d.cuEventRecord(fork, s), 0);
  CHECK_EQ(d.cuStreamWaitEvent(side, fork, 0), 0);
  CHECK_EQ(launch1(f_increment, side, args), 0);
  CHECK_EQ(d.cuStreamEndCapture(s, &bad), 904);  // CUDA_ERROR_STREAM_CAPTURE_UNJOINED
  CHECK_EQ(launch1(f_increment, side, args), 0);  // the side stream left the capture
  CHECK_EQ(d.cuStreamSynchronize(side), 0);
  CHECK_EQ(read_int(counter, s), 3);

  // Handles die with their destruction.
  for (CUgraphExec e : {exec, copies_exec, store_exec, forked_exec}) CHECK_EQ(d.cuGraphExecDestroy(e), 0);
  for (CUgraph graph : {g, copies, g5, g9, g_grid, relaxed, forked}) CHECK_EQ(d.cuGraphDestroy(graph), 0);
  CHECK_EQ(d.cuGraphDestroy(g), api::CUDA_ERROR_INVALID_HANDLE);
  CHECK_EQ(d.cuGraphLaunch(exec, s), api::CUDA_ERROR_INVALID_HANDLE);
  CHECK_EQ(stats().graphs, before.graphs);
  CHECK_EQ(stats().graph_execs, before.graph_execs);
  CHECK_EQ(d.cuEventDestroy(fork), 0);
  CHECK_EQ(d.cuEventDestroy(join), 0);
  CHECK_EQ(d.cuStreamDestroy(side), 0);
  CHECK_EQ(d.cuMemFree(counter), 0);
  CHECK_EQ(d.cuStreamDestroy(s), 0);
}

void test_peer_and_trace() {
  CUdeviceptr on0 = 0, on1 = 0;
  CHECK_EQ(d.cuMemAlloc(&on0, 16), 0);
  CHECK_EQ(d.cuCtxSetCurrent(ctx1), 0);
  CHECK_EQ(d.cuMemAlloc(&on1, 16), 0);
  CHECK_EQ(d.cuCtxSetCurrent(ctx0), 0);
  d.trace_enable(1);
  d.trace_clear();
  const int values[4] = {1, 2, 3, 4};
  CHECK_EQ(d.cuMemcpyHtoDAsync(on0, values, sizeof values, nullptr), 0);
  CHECK_EQ(d.cuMemcpyPeerAsync(on1, ctx1, on0, ctx0, sizeof values, nullptr), 0);
  CHECK_EQ(d.cuMemcpyPeerAsync(on1, ctx0, on0, ctx0, sizeof values, nullptr), api::CUDA_ERROR_INVALID_VALUE);  // on1 is not device 0's
  CUdeviceptr probe = on0;
  void* args[] = {&probe};
  CHECK_EQ(d.cuLaunchKernel(f_increment, 2, 3, 4, 32, 2, 1, 128, nullptr, args, nullptr), 0);
  CHECK_EQ(d.cuMemsetD8Async(on0, 0, 8, nullptr), 0);
  CHECK_EQ(d.cuMemcpyDtoDAsync(on0, on0 + 8, 8, nullptr), 0);
  CHECK(trace().empty());  // nothing executed yet
  CHECK_EQ(d.cuCtxSynchronize(), 0);
  CHECK_EQ(d.cuCtxSetCurrent(ctx1), 0);
  int seen[4] = {};
  CHECK_EQ(d.cuMemcpyDtoHAsync(seen, on1, sizeof seen, nullptr), 0);
  CHECK_EQ(d.cuStreamSynchronize(nullptr), 0);
  CHECK(seen[0] == 1 && seen[3] == 4);
  const std::string expected =
      "h2d 16 dev=0\n"
      "peer 16 dev=0->1\n"
      "launch increment grid=2,3,4 block=32,2,1 shared=128 dev=0\n"
      "memset 8 dev=0\n"
      "d2d 8 dev=0\n"
      "d2h 16 dev=1\n";
  CHECK(trace() == expected);
  if (trace() != expected) std::fprintf(stderr, "trace:\n%s", trace().c_str());
  char small[8];
  CHECK_EQ(d.trace(small, sizeof small), expected.size());
  CHECK(std::string(small) == "h2d 16 ");
  CHECK_EQ(stats(1).d2h, 1);
  CHECK_EQ(stats(0).peer, 1);
  d.trace_enable(0);
  d.trace_clear();
  CHECK_EQ(d.cuMemFree(on1), 0);
  CHECK_EQ(d.cuCtxSetCurrent(ctx0), 0);
  CHECK_EQ(d.cuMemFree(on0), 0);
}

// Two threads, each with its own context current and its own stream, run concurrently.
void test_threads() {
  const auto work = [](CUcontext context, int seed) {
    CHECK_EQ(d.cuCtxSetCurrent(context), 0);
    CUstream s = nullptr;
    CHECK_EQ(d.cuStreamCreate(&s, api::CU_STREAM_NON_BLOCKING), 0);
    CUdeviceptr a = 0, b = 0, c = 0;
    constexpr int n = 64;
    CHECK_EQ(d.cuMemAlloc(&a, n * sizeof(float)), 0);
    CHECK_EQ(d.cuMemAlloc(&b, n * sizeof(float)), 0);
    CHECK_EQ(d.cuMemAlloc(&c, n * sizeof(float)), 0);
    // Functions belong to a context: the other thread loads its own module.
    CUmodule m = nullptr;
    CUfunction f = nullptr;
    CHECK_EQ(d.cuModuleLoadData(&m, ptx), 0);
    CHECK_EQ(d.cuModuleGetFunction(&f, m, "vadd"), 0);
    std::vector<float> x(n), z(n);
    for (int iteration = 0; iteration < 200; ++iteration) {
      for (int i = 0; i < n; ++i) x[i] = static_cast<float>(seed + iteration + i);
      int count = n;
      void* args[] = {&a, &b, &c, &count};
      CHECK_EQ(d.cuMemcpyHtoDAsync(a, x.data(), n * sizeof(float), s), 0);
      CHECK_EQ(d.cuMemcpyHtoDAsync(b, x.data(), n * sizeof(float), s), 0);
      CHECK_EQ(d.cuLaunchKernel(f, 2, 1, 1, 32, 1, 1, 0, s, args, nullptr), 0);
      CHECK_EQ(d.cuMemcpyDtoHAsync(z.data(), c, n * sizeof(float), s), 0);
      CHECK_EQ(d.cuStreamSynchronize(s), 0);
      CHECK(z[n - 1] == 2.0f * x[n - 1]);
    }
    for (CUdeviceptr p : {a, b, c}) CHECK_EQ(d.cuMemFree(p), 0);
    CHECK_EQ(d.cuModuleUnload(m), 0);
    CHECK_EQ(d.cuStreamDestroy(s), 0);
  };
  std::thread t0(work, ctx0, 0), t1(work, ctx1, 1000), t2(work, ctx0, 2000);
  t0.join();
  t1.join();
  t2.join();
}

void test_context_release() {
  CHECK_EQ(d.cuCtxSetCurrent(ctx1), 0);
  CUdeviceptr p = 0;
  CUstream s = nullptr;
  CHECK_EQ(d.cuMemAlloc(&p, 16), 0);
  CHECK_EQ(d.cuStreamCreate(&s, 0), 0);
  CHECK_EQ(stats(1).allocations, 1);
  CHECK_EQ(d.cuDevicePrimaryCtxRelease(1), 0);  // the last reference: everything in it goes
  CHECK_EQ(stats(1).allocations, 0);
  CHECK_EQ(stats(1).streams, 0);
  CHECK_EQ(d.cuStreamSynchronize(s), api::CUDA_ERROR_INVALID_HANDLE);
  CHECK_EQ(d.cuMemAlloc(&p, 16), api::CUDA_ERROR_INVALID_CONTEXT);
  CHECK_EQ(d.cuDevicePrimaryCtxRelease(1), api::CUDA_ERROR_INVALID_CONTEXT);
  CHECK_EQ(d.cuCtxSetCurrent(ctx1), api::CUDA_ERROR_INVALID_CONTEXT);

  CHECK_EQ(d.cuCtxSetCurrent(ctx0), 0);
  CHECK_EQ(d.cuModuleUnload(module0), 0);
  const gexec_emu_stats s0 = stats(0);
  CHECK_EQ(s0.allocations, 0);
  CHECK_EQ(s0.bytes, 0);
  CHECK_EQ(s0.streams, 0);
  CHECK_EQ(s0.events, 0);
  CHECK_EQ(s0.modules, 0);
  CHECK_EQ(s0.graphs, 0);
  CHECK_EQ(s0.graph_execs, 0);
  CHECK_EQ(d.cuDevicePrimaryCtxRelease(0), 0);
}

}  // namespace

int main(int argc, char** argv) {
  const char* path = argc > 1 ? argv[1] : "/tmp/emu/libgexec_cuda_emulated.so";
  if (!load(path)) {
    std::fprintf(stderr, "FAILED: cannot use %s\n", path);
    return 1;
  }
  test_init_and_errors();
  test_contexts();
  test_memory();
  test_deferred_copies();
  test_events();
  test_modules();
  test_launches();
  test_async_errors();
  test_capture_and_replay();
  test_peer_and_trace();
  test_threads();
  test_context_release();
  if (failures) {
    std::fprintf(stderr, "FAILED: %d checks\n", failures);
    return 1;
  }
  std::printf("emulated driver self-test: all checks passed\n");
  return 0;
}
