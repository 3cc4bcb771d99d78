/*
 * A host-emulated CUDA driver for gexec's tests.
 * ==============================================
 *
 * libgexec_cuda_emulated.so stands in for libcuda.so.1 so that gexec's whole CUDA path
 * (memory, copies and their order, module loading, argument packing, launch dimensions,
 * dynamic shared memory, capture and replay, error paths) runs on a machine without a
 * GPU. gexec dlopens it by path and fetches every driver function through
 * cuGetProcAddress_v2 (or cuGetProcAddress) by base name, with CUDA 12.0 semantics,
 * exactly as it does with NVIDIA's driver. The driver functions are also exported
 * under their base and versioned names (cuMemAlloc, cuMemAlloc_v2, ...). Kernels are
 * host functions the test registers under the kernel's name (gexec_emu_register_kernel).
 *
 * What is emulated, and how faithfully
 * ------------------------------------
 * - cuInit(0) first: every other driver call except cuGetProcAddress, cuGetErrorName,
 *   cuGetErrorString and cuDriverGetVersion (13000) returns CUDA_ERROR_NOT_INITIALIZED
 *   before it. cuInit reads GEXEC_EMU_DEVICES (the device count, default 2) the first
 *   time, unless gexec_emu_set_device_count was called; no device: CUDA_ERROR_NO_DEVICE.
 *   The first cuInit also loads the library GEXEC_EMU_KERNELS names, if set, and calls its
 *   gexec_test_register_emulated_kernels: so a process that loads gexec without knowing
 *   of the emulator (a Triton server) gets the host kernels.
 * - Devices are "gexec emulated CUDA device", compute capability 9.0, 16 GiB each.
 * - One primary context per device (Retain/Release are reference counted; the last
 *   Release destroys the context with everything created in it, pending work dropped).
 *   The current context is per thread. Calls that need a context use the calling
 *   thread's current one (none: CUDA_ERROR_INVALID_CONTEXT); streams, events, modules,
 *   functions and allocations belong to the context they were created in, and a stream
 *   or function of another context is refused with CUDA_ERROR_INVALID_CONTEXT (stricter
 *   than the driver for copies, which would use the stream's context).
 * - Device pointers are host addresses XOR (1 << 62): a host that dereferences one
 *   crashes. Allocations are 256-byte aligned and filled with 0xCD bytes (garbage).
 * - Streams are in-order queues whose work is DEFERRED: it runs only when something
 *   waits for it (cuStreamSynchronize, cuEventSynchronize up to the record,
 *   cuCtxSynchronize, cuMemFree, cuStreamDestroy, cuModuleUnload; a cuStreamWaitEvent
 *   makes the waiting stream run the recording stream up to the record first). So a
 *   program that reads results without synchronising sees stale data. The NULL stream is
 *   the current context's own queue, with NO implicit synchronisation with other
 *   streams (stricter than the legacy default stream). Work runs on the thread that
 *   waits, under one global mutex; host kernels must call nothing but
 *   gexec_emu_host_pointer, and only from the thread that runs them.
 * - cuMemcpyHtoDAsync snapshots the host bytes at enqueue (as for pageable memory);
 *   cuMemcpyDtoHAsync writes the host buffer only when it executes. Every device range
 *   is checked at enqueue ([ptr, ptr + bytes) inside one live allocation, else
 *   CUDA_ERROR_INVALID_VALUE) and again at execution (else the context faults with
 *   CUDA_ERROR_ILLEGAL_ADDRESS: use after free). Zero-byte copies are no-ops.
 * - Modules: PTX text (with ".version" and ".target"), an ELF cubin or a fatbin (magic
 *   0xBA55ED50); anything else is CUDA_ERROR_INVALID_IMAGE. cuModuleGetFunction finds a
 *   kernel registered with gexec_emu_register_kernel (the registration is bound then)
 *   and, for PTX, declared by ".entry <name>"; else CUDA_ERROR_NOT_FOUND.
 * - cuLaunchKernel validates dimensions (block <= 1024 x 1024 x 64 and 1024 threads,
 *   grid <= 2^31-1 x 65535 x 65535), dynamic shared memory (49152 bytes unless
 *   cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES) raised it, up to 232448),
 *   params (non-null when the kernel has parameters) and extra (must be NULL), and
 *   copies the parameter bytes at enqueue. The host kernel gets its own copy of the
 *   parameters and a 0xCD-filled dynamic shared buffer at execution.
 * - Asynchronous failures: a host kernel returning a CUresult (or touching memory
 *   outside live allocations through gexec_emu_host_pointer: 700) fails the launch; the
 *   code is returned by the next call that waits on that context's work. A sticky code
 *   (700, 719, ... as cuda_api::is_sticky) breaks the context: its queued work is
 *   dropped and every later call using it returns that code, until gexec_emu_reset().
 *   Destroying calls (cuMemFree, cuStreamDestroy, cuEventDestroy, cuModuleUnload) on a
 *   broken context still release the object, and return the code.
 * - Stream capture (modes GLOBAL, THREAD_LOCAL, RELAXED): work enqueued on a capturing
 *   stream is recorded into a graph. A stream waiting on an event recorded in the
 *   capture joins it; at cuStreamEndCapture every joined stream must have been joined
 *   back into the origin stream by an event (else CUDA_ERROR_STREAM_CAPTURE_UNJOINED,
 *   904). A capturing stream waiting on an event recorded outside the capture gets
 *   CUDA_ERROR_STREAM_CAPTURE_ISOLATION (905). Synchronising a capturing stream, an
 *   event recorded in a capture or a context with a capture, and (GLOBAL from any
 *   thread, THREAD_LOCAL from the capturing thread) cuMemAlloc/cuMemFree, return
 *   CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidate the capture: later work on it
 *   and cuStreamEndCapture return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, and the
 *   capture ends without a graph. Destroying a capturing stream is refused likewise
 *   (the stream stays). Beginning a capture on a capturing stream:
 *   CUDA_ERROR_INVALID_VALUE; ending one not begun on that stream:
 *   CUDA_ERROR_ILLEGAL_STATE (401); from another thread in a non-RELAXED mode:
 *   CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD (908). The NULL stream cannot be captured
 *   (900).
 * - Graphs are the captured operation list, replayed in capture order. A captured
 *   host-to-device copy reads its host source, and a device-to-host copy writes its
 *   host destination, each time the graph runs (not at capture). cuGraphExecUpdate
 *   accepts a graph with the same operations (kind, kernel, launch dimensions, shared
 *   bytes, copy direction and size) and takes its pointers and parameters; otherwise
 *   CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE with info.result 2 (count), 3 (kind), 4
 *   (kernel) or 5 (dimensions, sizes). A launch copies the executable's operations, so
 *   later updates or its destruction do not change work already launched.
 * - Invalid, NULL or destroyed handles: CUDA_ERROR_INVALID_HANDLE (handles are never
 *   reused).
 *
 * The test-facing API below is exported from the same library (link it, or dlsym it).
 */
#ifndef GEXEC_TESTS_CUDA_EMULATED_DRIVER_H
#define GEXEC_TESTS_CUDA_EMULATED_DRIVER_H

#if defined(__GNUC__)
#define GEXEC_EMU_EXPORT __attribute__((visibility("default")))
#else
#define GEXEC_EMU_EXPORT
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* What a host kernel learns about its launch. */
typedef struct gexec_emu_launch {
  unsigned grid[3];
  unsigned block[3];
  unsigned shared_bytes;
  void* shared; /* shared_bytes of dynamic shared memory for the whole launch (NULL if 0) */
} gexec_emu_launch;

/* params[i] points at parameter i's bytes (the emulator's copy). Return 0, or a CUresult
   to fail the launch asynchronously. */
typedef int (*gexec_emu_kernel_fn)(void* const* params, const gexec_emu_launch* launch);

/* Registers (or replaces) the host implementation of kernel `name` with its parameter
   sizes in bytes. 0 on success, 1 (CUDA_ERROR_INVALID_VALUE) on bad arguments. Functions
   already looked up keep the registration they were found with. */
GEXEC_EMU_EXPORT int gexec_emu_register_kernel(const char* name, int num_params, const unsigned* param_sizes,
                                               gexec_emu_kernel_fn fn);

/* The host address of device range [ptr, ptr + bytes): NULL, and the running launch
   faults with 700, if it is not inside one live allocation. For host kernels. */
GEXEC_EMU_EXPORT void* gexec_emu_host_pointer(unsigned long long device_ptr, unsigned long long bytes);

/* The number of devices cuDeviceGetCount reports from now on (0 to 64). */
GEXEC_EMU_EXPORT void gexec_emu_set_device_count(int n);

/* The (skip+1)-th next call of driver function `function` (base name, e.g. "cuMemAlloc")
   returns `result` without doing anything (a sticky code also breaks the calling
   thread's current context). */
GEXEC_EMU_EXPORT void gexec_emu_fail(const char* function, int result, int skip);

/* Clears injected failures, sticky errors and broken contexts, pending asynchronous
   errors, capture state (captures end without a graph), and the trace; keeps
   allocations, registrations and counters. */
GEXEC_EMU_EXPORT void gexec_emu_reset(void);

typedef struct gexec_emu_stats {
  long allocations, bytes;                            /* live */
  long streams, events, modules, graphs, graph_execs; /* live (streams: not counting NULL streams) */
  long launches, h2d, d2h, d2d, peer, memsets;        /* executed (not merely enqueued) */
  long synchronizations; /* cuStreamSynchronize + cuEventSynchronize + cuCtxSynchronize calls */
  long captures;         /* captures begun */
  long graph_launches;   /* graph launches executed */
  long graph_updates;    /* successful cuGraphExecUpdate calls */
  long max_shared_bytes; /* largest dynamic shared memory of an executed launch */
} gexec_emu_stats;

/* Per device ordinal (zeroes for an unknown ordinal). Peer copies count on the device of
   the stream that ran them. */
GEXEC_EMU_EXPORT void gexec_emu_get_stats(int device, gexec_emu_stats* out);

/* When enabled, every executed stream operation appends one line, ended by '\n':
   "launch <kernel> grid=<x>,<y>,<z> block=<x>,<y>,<z> shared=<n> dev=<d>"
   "h2d <bytes> dev=<d>", "d2h <bytes> dev=<d>", "d2d <bytes> dev=<d>",
   "peer <bytes> dev=<src>-><dst>", "memset <bytes> dev=<d>".
   gexec_emu_trace copies the trace so far into buf (NUL-terminated, truncated to size;
   buf may be NULL when size is 0) and returns its full length. */
GEXEC_EMU_EXPORT void gexec_emu_trace_enable(int on);
GEXEC_EMU_EXPORT unsigned long gexec_emu_trace(char* buf, unsigned long size);
GEXEC_EMU_EXPORT void gexec_emu_trace_clear(void);

#ifdef __cplusplus
}
#endif

#endif /* GEXEC_TESTS_CUDA_EMULATED_DRIVER_H */
