// Device kernels of gexec's CUDA tests, written as TVM v0.19's CUDA codegen writes them:
// extern "C" __global__ functions named <op>_kernel<k>, whose trailing launch arguments
// (grid and block extents, dynamic shared memory) the host code passes in the order of
// each kernel's launch-parameter tags (see make_cuda_blob.cpp for the table).
//
// tests/cuda/emulated_kernels.cpp implements every kernel again for the host-emulated
// driver with the same arithmetic, so both give bit-identical results: where a kernel
// multiplies and adds it says so with an explicit fused multiply-add rather than leaving
// the contraction to the compiler.

// Every element of one flat index space, one thread per element:
// i = blockIdx.x * blockDim.x + threadIdx.x, guarded by i < n.

// C = A + B. Tags: blockIdx.x, threadIdx.x.
extern "C" __global__ void vadd_kernel0(float* __restrict__ C, const float* __restrict__ A,
                                        const float* __restrict__ B, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) C[i] = A[i] + B[i];
}

// out = in * alpha + (float)beta, one rounding (fma). The scalars have four different
// parameter types so that the host's 64-bit packed values must be narrowed correctly:
// a float32 alpha, a float64 beta, an int64 n and a uint32 stride that must be 1 (any
// other value writes NaN). Tags: blockIdx.x, threadIdx.x.
extern "C" __global__ void scale_shift_kernel0(float* __restrict__ out, const float* __restrict__ in,
                                               float alpha, double beta, long long n,
                                               unsigned stride) {
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) {
    out[i] = stride == 1u ? __fmaf_rn(in[i], alpha, static_cast<float>(beta))
                          : __int_as_float(0x7fffffff);
  }
}

// out[cols, rows] = in[rows, cols]^T over 2-D blocks: y covers rows, x covers columns.
// Tags, deliberately not in x-first order: blockIdx.y, blockIdx.x, threadIdx.y, threadIdx.x.
extern "C" __global__ void transpose_kernel0(float* __restrict__ out, const float* __restrict__ in,
                                             int rows, int cols) {
  const int r = static_cast<int>(blockIdx.y * blockDim.y + threadIdx.y);
  const int c = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (r < rows && c < cols) out[c * rows + r] = in[r * cols + c];
}

// out[row] = sum of in[row, :], one block per row. Thread t first adds up the columns
// t, t + blockDim.x, ... in order, then the block halves its partial sums in dynamic
// shared memory (blockDim.x floats; blockDim.x a power of two) until buf[0] holds the
// row's sum. Tags: blockIdx.x, threadIdx.x, tir.use_dyn_shared_memory.
extern "C" __global__ void row_sum_kernel0(float* __restrict__ out, const float* __restrict__ in,
                                           int cols) {
  extern __shared__ float buf[];
  const int row = static_cast<int>(blockIdx.x);
  float acc = 0.0f;
  for (int c = static_cast<int>(threadIdx.x); c < cols; c += static_cast<int>(blockDim.x)) {
    acc += in[row * cols + c];
  }
  buf[threadIdx.x] = acc;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[row] = buf[0];
}

// Number of floats big_shared_kernel0 stages: 64 KiB of dynamic shared memory, more
// than the 48 KiB a launch gets unless the function's limit is raised first.
#define BIG_SHARED_FLOATS 16384

// out[i] = in[n - 1 - i] for n <= 16384, through shared memory: one block whose threads
// stride over all 16384 staging slots (those past n are zeroed, so the whole 64 KiB is
// used whatever n is), then over the n outputs. Tags: blockIdx.x, threadIdx.x,
// tir.use_dyn_shared_memory.
extern "C" __global__ void big_shared_kernel0(float* __restrict__ out, const float* __restrict__ in,
                                              int n) {
  extern __shared__ float buf[];
  for (int i = static_cast<int>(threadIdx.x); i < BIG_SHARED_FLOATS; i += static_cast<int>(blockDim.x)) {
    buf[i] = i < n ? in[i] : 0.0f;
  }
  __syncthreads();
  for (int i = static_cast<int>(threadIdx.x); i < n; i += static_cast<int>(blockDim.x)) {
    out[i] = buf[n - 1 - i];
  }
}

// ws = 2 * in: the first of two kernels that pass data through a workspace buffer.
// Tags: blockIdx.x, threadIdx.x.
extern "C" __global__ void double_kernel0(float* __restrict__ ws, const float* __restrict__ in,
                                          int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) ws[i] = 2.0f * in[i];
}

// out = ws + in: the second one (out = 3 * in together). Tags: blockIdx.x, threadIdx.x.
extern "C" __global__ void add_ws_kernel0(float* __restrict__ out, const float* __restrict__ ws,
                                          const float* __restrict__ in, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = ws[i] + in[i];
}

// out = max(in, 0); NaN and -0 give +0. Tags: blockIdx.x, threadIdx.x.
extern "C" __global__ void relu_kernel0(float* __restrict__ out, const float* __restrict__ in,
                                        int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = in[i] > 0.0f ? in[i] : 0.0f;
}

// *p = 1: given an address no allocation holds, every thread faults (illegal address).
// Tags: blockIdx.x, threadIdx.x.
extern "C" __global__ void fault_kernel0(float* p) { *p = 1.0f; }
