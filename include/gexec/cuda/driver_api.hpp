#pragma once
// The part of the CUDA driver API gexec uses, declared here so that nothing of gexec
// needs a CUDA toolkit to compile: opaque handle types, the result codes gexec names,
// and the function types as the driver returns them from cuGetProcAddress for CUDA
// 12.0 semantics (cuMemAlloc is cuMemAlloc_v2, cuStreamBeginCapture takes a mode, ...); where
// a name means an older signature at that version (cuGraphInstantiate), the newer name is used.
// The layouts and values are the driver's ABI (cuda.h); gexec never links libcuda.

#include "../config.hpp"

#include <cstddef>
#include <cstdint>

extern "C" {
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;
struct CUevent_st;
struct CUgraph_st;
struct CUgraphExec_st;
struct CUgraphNode_st;
}

GEXEC_NAMESPACE_BEGIN
namespace cuda_api {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = CUctx_st*;
using CUmodule = CUmod_st*;
using CUfunction = CUfunc_st*;
using CUstream = CUstream_st*;
using CUevent = CUevent_st*;
using CUgraph = CUgraph_st*;
using CUgraphExec = CUgraphExec_st*;
using CUgraphNode = CUgraphNode_st*;

/// The result codes gexec treats specially (values of cuda.h's CUresult).
enum : CUresult {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_DEINITIALIZED = 4,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_IMAGE = 200,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_ECC_UNCORRECTABLE = 214,
  CUDA_ERROR_INVALID_PTX = 218,
  CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_NOT_READY = 600,
  CUDA_ERROR_ILLEGAL_ADDRESS = 700,
  CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
  CUDA_ERROR_LAUNCH_TIMEOUT = 702,
  CUDA_ERROR_HARDWARE_STACK_ERROR = 714,
  CUDA_ERROR_ILLEGAL_INSTRUCTION = 715,
  CUDA_ERROR_MISALIGNED_ADDRESS = 716,
  CUDA_ERROR_INVALID_ADDRESS_SPACE = 717,
  CUDA_ERROR_INVALID_PC = 718,
  CUDA_ERROR_LAUNCH_FAILED = 719,
  CUDA_ERROR_ASSERT = 710,
  CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900,
  CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901,
  CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE = 910,
  CUDA_ERROR_UNKNOWN = 999,
};

/// Errors after which the context cannot be used again (cuda.h: "the process must be
/// terminated and relaunched").
constexpr bool is_sticky(CUresult r) noexcept {
  switch (r) {
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_ASSERT: return true;
    default: return false;
  }
}

inline constexpr unsigned CU_STREAM_NON_BLOCKING = 0x1;
inline constexpr unsigned CU_EVENT_DISABLE_TIMING = 0x2;
inline constexpr int CU_STREAM_CAPTURE_MODE_GLOBAL = 0;
inline constexpr int CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1;
inline constexpr int CU_STREAM_CAPTURE_MODE_RELAXED = 2;
inline constexpr int CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;
inline constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
inline constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
inline constexpr unsigned long long CU_GET_PROC_ADDRESS_DEFAULT = 0;

/// cuGraphExecUpdate's report (CUgraphExecUpdateResultInfo).
struct CUgraphExecUpdateResultInfo {
  int result;
  CUgraphNode errorNode;
  CUgraphNode errorFromNode;
};

/// The driver functions, by the name cuGetProcAddress knows them under, with their
/// types for CUDA 12.0 semantics. X(name, return, parameters...).
#define GEXEC_CUDA_DRIVER_FUNCTIONS(X)                                                                                       \
  X(cuInit, unsigned flags)                                                                                                  \
  X(cuDriverGetVersion, int* version)                                                                                        \
  X(cuGetErrorName, CUresult error, const char** name)                                                                       \
  X(cuGetErrorString, CUresult error, const char** text)                                                                     \
  X(cuDeviceGetCount, int* count)                                                                                            \
  X(cuDeviceGet, CUdevice* device, int ordinal)                                                                              \
  X(cuDeviceGetName, char* name, int length, CUdevice device)                                                                \
  X(cuDeviceGetAttribute, int* value, int attribute, CUdevice device)                                                       \
  X(cuDevicePrimaryCtxRetain, CUcontext* context, CUdevice device)                                                          \
  X(cuDevicePrimaryCtxRelease, CUdevice device)                                                                              \
  X(cuCtxSetCurrent, CUcontext context)                                                                                      \
  X(cuCtxGetCurrent, CUcontext* context)                                                                                     \
  X(cuCtxSynchronize)                                                                                                        \
  X(cuMemAlloc, CUdeviceptr* ptr, std::size_t bytes)                                                                         \
  X(cuMemFree, CUdeviceptr ptr)                                                                                              \
  X(cuMemcpyHtoDAsync, CUdeviceptr dst, const void* src, std::size_t bytes, CUstream stream)                                 \
  X(cuMemcpyDtoHAsync, void* dst, CUdeviceptr src, std::size_t bytes, CUstream stream)                                       \
  X(cuMemcpyDtoDAsync, CUdeviceptr dst, CUdeviceptr src, std::size_t bytes, CUstream stream)                                 \
  X(cuMemcpyPeerAsync, CUdeviceptr dst, CUcontext dst_context, CUdeviceptr src, CUcontext src_context, std::size_t bytes,    \
    CUstream stream)                                                                                                         \
  X(cuMemsetD8Async, CUdeviceptr dst, unsigned char value, std::size_t count, CUstream stream)                               \
  X(cuStreamCreate, CUstream* stream, unsigned flags)                                                                        \
  X(cuStreamDestroy, CUstream stream)                                                                                        \
  X(cuStreamSynchronize, CUstream stream)                                                                                    \
  X(cuStreamWaitEvent, CUstream stream, CUevent event, unsigned flags)                                                       \
  X(cuEventCreate, CUevent* event, unsigned flags)                                                                           \
  X(cuEventDestroy, CUevent event)                                                                                           \
  X(cuEventRecord, CUevent event, CUstream stream)                                                                           \
  X(cuEventSynchronize, CUevent event)                                                                                       \
  X(cuModuleLoadData, CUmodule* module, const void* image)                                                                   \
  X(cuModuleUnload, CUmodule module)                                                                                         \
  X(cuModuleGetFunction, CUfunction* function, CUmodule module, const char* name)                                            \
  X(cuFuncSetAttribute, CUfunction function, int attribute, int value)                                                       \
  X(cuLaunchKernel, CUfunction function, unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block_x,                \
    unsigned block_y, unsigned block_z, unsigned shared_bytes, CUstream stream, void** params, void** extra)                 \
  X(cuStreamBeginCapture, CUstream stream, int mode)                                                                         \
  X(cuStreamEndCapture, CUstream stream, CUgraph* graph)                                                                     \
  X(cuGraphInstantiateWithFlags, CUgraphExec* exec, CUgraph graph, unsigned long long flags)                                          \
  X(cuGraphExecUpdate, CUgraphExec exec, CUgraph graph, CUgraphExecUpdateResultInfo* info)                                   \
  X(cuGraphLaunch, CUgraphExec exec, CUstream stream)                                                                        \
  X(cuGraphExecDestroy, CUgraphExec exec)                                                                                    \
  X(cuGraphDestroy, CUgraph graph)

#define GEXEC_CUDA_DECLARE_TYPE(name, ...) using name##_fn = CUresult (*)(__VA_ARGS__);
GEXEC_CUDA_DRIVER_FUNCTIONS(GEXEC_CUDA_DECLARE_TYPE)
#undef GEXEC_CUDA_DECLARE_TYPE

/// cuGetProcAddress as libcuda exports it (cuGetProcAddress_v2, CUDA >= 12.0), and the
/// CUDA 11.3 form without the status argument.
using cuGetProcAddress_v2_fn = CUresult (*)(const char* symbol, void** fn, int cuda_version, unsigned long long flags, int* status);
using cuGetProcAddress_fn = CUresult (*)(const char* symbol, void** fn, int cuda_version, unsigned long long flags);

/// The CUDA version whose function semantics gexec asks cuGetProcAddress for.
inline constexpr int requested_cuda_version = 12000;

}  // namespace cuda_api
GEXEC_NAMESPACE_END
