// Host implementations of the kernels of tests/cuda/kernels.cu for the host-emulated
// CUDA driver. Each one simulates the launch it is given, block by block and thread by
// thread, with the device code's arithmetic, so that results are bit-identical to a GPU's
// and a wrong launch (grid, block, shared memory, parameter) gives the same wrong result
// a GPU would. Two simplifications, neither visible in results:
//  - the kernels index with the x dimensions (transpose also with y) only; threads that
//    differ only in the other dimensions compute and write the same values, so each
//    distinct thread runs once;
//  - flat indices are computed in 64 bits, where the device code's int indices would
//    wrap: the same while a launch has fewer than 2^31 threads in x.
// Device pointers are translated once per parameter with gexec_emu_host_pointer, for
// exactly the range the launch touches; a range outside live allocations faults the
// launch (700, CUDA_ERROR_ILLEGAL_ADDRESS), as does a dynamic shared memory size smaller
// than what the kernel indexes.

#include "emulated_kernels.hpp"

#include "emulated_driver.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

constexpr int illegal_address = 700;  // CUDA_ERROR_ILLEGAL_ADDRESS

// Parameter `index` of the launch, read as the kernel's parameter type T.
template <class T>
T param(void* const* params, int index) {
  T value;
  std::memcpy(&value, params[index], sizeof(T));
  return value;
}

// The host address of `count` floats at the device pointer in parameter `index`
// (count > 0); NULL if that range is not inside a live allocation.
float* device_floats(void* const* params, int index, long long count) {
  const auto ptr = param<unsigned long long>(params, index);
  return static_cast<float*>(gexec_emu_host_pointer(ptr, static_cast<unsigned long long>(count) * sizeof(float)));
}

// Threads of the launch in x: gridDim.x * blockDim.x.
long long threads_x(const gexec_emu_launch* launch) {
  return static_cast<long long>(launch->grid[0]) * launch->block[0];
}

// Calls f(i) with i = blockIdx.x * blockDim.x + threadIdx.x for every thread in x.
template <class F>
void for_each_thread_x(const gexec_emu_launch* launch, F f) {
  for (unsigned b = 0; b < launch->grid[0]; ++b) {
    for (unsigned t = 0; t < launch->block[0]; ++t) f(static_cast<long long>(b) * launch->block[0] + t);
  }
}

// How many elements of an n-element one-thread-per-element kernel the launch touches.
long long touched_1d(long long n, const gexec_emu_launch* launch) {
  return std::clamp(n, 0LL, threads_x(launch));
}

// vadd_kernel0(C, A, B, int n): C[i] = A[i] + B[i].
int vadd_kernel0(void* const* params, const gexec_emu_launch* launch) {
  const int n = param<int>(params, 3);
  const long long count = touched_1d(n, launch);
  if (count == 0) return 0;
  float* c = device_floats(params, 0, count);
  const float* a = device_floats(params, 1, count);
  const float* b = device_floats(params, 2, count);
  if (c == nullptr || a == nullptr || b == nullptr) return illegal_address;
  for_each_thread_x(launch, [&](long long i) {
    if (i < n) c[i] = a[i] + b[i];
  });
  return 0;
}

// scale_shift_kernel0(out, in, float alpha, double beta, long long n, unsigned stride):
// out[i] = fma(in[i], alpha, (float)beta), or NaN (bits 0x7fffffff) when stride != 1.
int scale_shift_kernel0(void* const* params, const gexec_emu_launch* launch) {
  const auto alpha = param<float>(params, 2);
  const auto beta = param<double>(params, 3);
  const auto n = param<long long>(params, 4);
  const auto stride = param<unsigned>(params, 5);
  const long long count = touched_1d(n, launch);
  if (count == 0) return 0;
  float* out = device_floats(params, 0, count);
  const float* in = device_floats(params, 1, count);
  if (out == nullptr || in == nullptr) return illegal_address;
  const std::uint32_t nan_bits = 0x7fffffff;
  float nan;
  std::memcpy(&nan, &nan_bits, sizeof(nan));
  for_each_thread_x(launch, [&](long long i) {
    if (i < n) out[i] = stride == 1u ? std::fma(in[i], alpha, static_cast<float>(beta)) : nan;
  });
  return 0;
}

// transpose_kernel0(out, in, int rows, int cols): out[c * rows + r] = in[r * cols + c],
// r = blockIdx.y * blockDim.y + threadIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x.
int transpose_kernel0(void* const* params, const gexec_emu_launch* launch) {
  const int rows = param<int>(params, 2);
  const int cols = param<int>(params, 3);
  // The rows and columns the launch reaches.
  const long long reached_rows = std::clamp(static_cast<long long>(rows), 0LL,
                                            static_cast<long long>(launch->grid[1]) * launch->block[1]);
  const long long reached_cols = std::clamp(static_cast<long long>(cols), 0LL, threads_x(launch));
  if (reached_rows == 0 || reached_cols == 0) return 0;
  float* out = device_floats(params, 0, (reached_cols - 1) * rows + reached_rows);
  const float* in = device_floats(params, 1, (reached_rows - 1) * cols + reached_cols);
  if (out == nullptr || in == nullptr) return illegal_address;
  for (unsigned by = 0; by < launch->grid[1]; ++by) {
    for (unsigned ty = 0; ty < launch->block[1]; ++ty) {
      const long long r = static_cast<long long>(by) * launch->block[1] + ty;
      for_each_thread_x(launch, [&](long long c) {
        if (r < rows && c < cols) out[c * rows + r] = in[r * cols + c];
      });
    }
  }
  return 0;
}

// row_sum_kernel0(out, in, int cols): block b sums row b. Thread t adds columns t,
// t + blockDim.x, ... into buf[t] (dynamic shared memory), then the block halves buf
// (buf[t] += buf[t + s] for t < s, s = blockDim.x / 2, ..., 1) and out[b] = buf[0].
// Within one halving step no thread reads what another writes, so running the threads
// one after another gives the device's sums exactly.
int row_sum_kernel0(void* const* params, const gexec_emu_launch* launch) {
  const int cols = param<int>(params, 2);
  const unsigned rows = launch->grid[0];
  const unsigned threads = launch->block[0];
  if (launch->shared_bytes / sizeof(float) < threads) return illegal_address;
  float* out = device_floats(params, 0, rows);
  const float* in = cols > 0 ? device_floats(params, 1, static_cast<long long>(rows) * cols) : nullptr;
  if (out == nullptr || (cols > 0 && in == nullptr)) return illegal_address;
  auto* buf = static_cast<float*>(launch->shared);
  for (unsigned row = 0; row < rows; ++row) {
    for (unsigned t = 0; t < threads; ++t) {
      float acc = 0.0f;
      for (long long c = t; c < cols; c += threads) acc += in[static_cast<long long>(row) * cols + c];
      buf[t] = acc;
    }
    for (unsigned s = threads / 2; s > 0; s >>= 1) {
      for (unsigned t = 0; t < s; ++t) buf[t] += buf[t + s];
    }
    out[row] = buf[0];
  }
  return 0;
}

// big_shared_kernel0(out, in, int n): every block stages in[0, n) and zeros up to 16384
// floats of dynamic shared memory (64 KiB), then writes out[i] = buf[n - 1 - i].
int big_shared_kernel0(void* const* params, const gexec_emu_launch* launch) {
  constexpr int staged = 16384;
  const int n = param<int>(params, 2);
  if (launch->shared_bytes / sizeof(float) < static_cast<unsigned>(std::max(staged, n))) return illegal_address;
  if (n <= 0) return 0;
  float* out = device_floats(params, 0, n);
  const float* in = device_floats(params, 1, std::min(n, staged));
  if (out == nullptr || in == nullptr) return illegal_address;
  auto* buf = static_cast<float*>(launch->shared);
  const unsigned threads = launch->block[0];
  for (unsigned b = 0; b < launch->grid[0]; ++b) {
    for (unsigned t = 0; t < threads; ++t) {
      for (long long i = t; i < staged; i += threads) buf[i] = i < n ? in[i] : 0.0f;
    }
    for (unsigned t = 0; t < threads; ++t) {
      for (long long i = t; i < n; i += threads) out[i] = buf[n - 1 - i];
    }
  }
  return 0;
}

// double_kernel0(ws, in, int n): ws[i] = 2 * in[i].
int double_kernel0(void* const* params, const gexec_emu_launch* launch) {
  const int n = param<int>(params, 2);
  const long long count = touched_1d(n, launch);
  if (count == 0) return 0;
  float* ws = device_floats(params, 0, count);
  const float* in = device_floats(params, 1, count);
  if (ws == nullptr || in == nullptr) return illegal_address;
  for_each_thread_x(launch, [&](long long i) {
    if (i < n) ws[i] = 2.0f * in[i];
  });
  return 0;
}

// add_ws_kernel0(out, ws, in, int n): out[i] = ws[i] + in[i].
int add_ws_kernel0(void* const* params, const gexec_emu_launch* launch) {
  const int n = param<int>(params, 3);
  const long long count = touched_1d(n, launch);
  if (count == 0) return 0;
  float* out = device_floats(params, 0, count);
  const float* ws = device_floats(params, 1, count);
  const float* in = device_floats(params, 2, count);
  if (out == nullptr || ws == nullptr || in == nullptr) return illegal_address;
  for_each_thread_x(launch, [&](long long i) {
    if (i < n) out[i] = ws[i] + in[i];
  });
  return 0;
}

// relu_kernel0(out, in, int n): out[i] = in[i] > 0 ? in[i] : 0.
int relu_kernel0(void* const* params, const gexec_emu_launch* launch) {
  const int n = param<int>(params, 2);
  const long long count = touched_1d(n, launch);
  if (count == 0) return 0;
  float* out = device_floats(params, 0, count);
  const float* in = device_floats(params, 1, count);
  if (out == nullptr || in == nullptr) return illegal_address;
  for_each_thread_x(launch, [&](long long i) {
    if (i < n) out[i] = in[i] > 0.0f ? in[i] : 0.0f;
  });
  return 0;
}

// fault_kernel0(p): *p = 1 (every thread writes the same float).
int fault_kernel0(void* const* params, const gexec_emu_launch*) {
  float* p = device_floats(params, 0, 1);
  if (p == nullptr) return illegal_address;
  *p = 1.0f;
  return 0;
}

// Parameter sizes in bytes: pointers 8, int/unsigned/float 4, double/long long 8.
constexpr unsigned ptr = 8;
constexpr unsigned i32 = 4;
constexpr unsigned u32 = 4;
constexpr unsigned f32 = 4;
constexpr unsigned f64 = 8;
constexpr unsigned i64 = 8;

template <std::size_t N>
void register_kernel(const char* name, const unsigned (&sizes)[N], gexec_emu_kernel_fn fn) {
  if (gexec_emu_register_kernel(name, static_cast<int>(N), sizes, fn) != 0) {
    std::fprintf(stderr, "gexec_test_register_emulated_kernels: the emulated driver refused %s\n", name);
    std::abort();
  }
}

}  // namespace

extern "C" void gexec_test_register_emulated_kernels(void) {
  register_kernel("vadd_kernel0", {ptr, ptr, ptr, i32}, vadd_kernel0);
  register_kernel("scale_shift_kernel0", {ptr, ptr, f32, f64, i64, u32}, scale_shift_kernel0);
  register_kernel("transpose_kernel0", {ptr, ptr, i32, i32}, transpose_kernel0);
  register_kernel("row_sum_kernel0", {ptr, ptr, i32}, row_sum_kernel0);
  register_kernel("big_shared_kernel0", {ptr, ptr, i32}, big_shared_kernel0);
  register_kernel("double_kernel0", {ptr, ptr, i32}, double_kernel0);
  register_kernel("add_ws_kernel0", {ptr, ptr, ptr, i32}, add_ws_kernel0);
  register_kernel("relu_kernel0", {ptr, ptr, i32}, relu_kernel0);
  register_kernel("fault_kernel0", {ptr}, fault_kernel0);
}
