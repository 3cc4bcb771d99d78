// A host-emulated CUDA driver (libgexec_cuda_emulated.so) for gexec's tests: see
// emulated_driver.h for what it emulates and how faithfully. The driver functions have
// exactly the C signatures of gexec/cuda/driver_api.hpp (the driver's ABI for CUDA 12.0
// semantics) and are handed out by cuGetProcAddress_v2 under their base names.
//
// The layout of this file: result codes and their texts; the emulated objects (contexts,
// streams and their deferred operations, events, captures, modules, graphs, memory); how
// queued operations execute; the driver functions; the test-facing gexec_emu_* API; the
// exported names and cuGetProcAddress.
//
// Every entry point takes one global recursive mutex (recursive because a host kernel,
// run by a driver call that waits, calls gexec_emu_host_pointer). Handles are numbers
// from one counter, never reused, looked up in per-kind registries: a NULL, destroyed
// or wrong-kind handle is found in no registry and gets CUDA_ERROR_INVALID_HANDLE.

#include "emulated_driver.h"

#include <gexec/cuda/driver_api.hpp>

#include <dlfcn.h>

#include <algorithm>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace api = gexec::cuda_api;
using api::CUcontext;
using api::CUdevice;
using api::CUdeviceptr;
using api::CUevent;
using api::CUfunction;
using api::CUgraph;
using api::CUgraphExec;
using api::CUgraphExecUpdateResultInfo;
using api::CUmodule;
using api::CUresult;
using api::CUstream;

#define EMU_API extern "C" GEXEC_EMU_EXPORT

namespace {

// ---------------------------------------------------------------------------------------
// Result codes

// cuda.h codes the emulator returns that driver_api.hpp does not name.
constexpr CUresult CUDA_ERROR_ILLEGAL_STATE = 401;
constexpr CUresult CUDA_ERROR_STREAM_CAPTURE_UNJOINED = 904;
constexpr CUresult CUDA_ERROR_STREAM_CAPTURE_ISOLATION = 905;
constexpr CUresult CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD = 908;

// cuGetErrorName's and cuGetErrorString's answers, as the real driver gives them.
struct ErrorText {
  CUresult code;
  const char* name;
  const char* text;
};
constexpr ErrorText error_texts[] = {
    {api::CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {api::CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {api::CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {api::CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {api::CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {api::CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {api::CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {api::CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {api::CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {api::CUDA_ERROR_ECC_UNCORRECTABLE, "CUDA_ERROR_ECC_UNCORRECTABLE", "uncorrectable ECC error encountered"},
    {api::CUDA_ERROR_INVALID_PTX, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {api::CUDA_ERROR_UNSUPPORTED_PTX_VERSION, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
     "the provided PTX was compiled with an unsupported toolchain."},
    {api::CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state"},
    {api::CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {api::CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {api::CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {api::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch"},
    {api::CUDA_ERROR_LAUNCH_TIMEOUT, "CUDA_ERROR_LAUNCH_TIMEOUT", "the launch timed out and was terminated"},
    {api::CUDA_ERROR_ASSERT, "CUDA_ERROR_ASSERT", "device-side assert triggered"},
    {api::CUDA_ERROR_HARDWARE_STACK_ERROR, "CUDA_ERROR_HARDWARE_STACK_ERROR", "hardware stack error"},
    {api::CUDA_ERROR_ILLEGAL_INSTRUCTION, "CUDA_ERROR_ILLEGAL_INSTRUCTION", "an illegal instruction was encountered"},
    {api::CUDA_ERROR_MISALIGNED_ADDRESS, "CUDA_ERROR_MISALIGNED_ADDRESS", "misaligned address"},
    {api::CUDA_ERROR_INVALID_ADDRESS_SPACE, "CUDA_ERROR_INVALID_ADDRESS_SPACE",
     "operation not supported on global/shared address space"},
    {api::CUDA_ERROR_INVALID_PC, "CUDA_ERROR_INVALID_PC", "invalid program counter"},
    {api::CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {api::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
     "operation not permitted when stream is capturing"},
    {api::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
     "operation failed due to a previous error during capture"},
    {CUDA_ERROR_STREAM_CAPTURE_UNJOINED, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED",
     "capture sequence contains a fork that was not joined to the primary stream"},
    {CUDA_ERROR_STREAM_CAPTURE_ISOLATION, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION",
     "dependency created on uncaptured work in another stream"},
    {CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD",
     "attempt to terminate a thread-local capture sequence from another thread"},
    {api::CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE",
     "the graph update was not performed because it included changes which violated constraints specific to instantiated "
     "graph update"},
    {api::CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

const ErrorText* find_error(CUresult code) {
  for (const ErrorText& e : error_texts)
    if (e.code == code) return &e;
  return nullptr;
}

// ---------------------------------------------------------------------------------------
// Emulated hardware limits

constexpr unsigned long long device_address_bit = 1ull << 62;  // device pointer = host address ^ this
constexpr std::size_t allocation_alignment = 256;
constexpr unsigned char garbage = 0xCD;  // what uninitialised device and shared memory hold
constexpr std::size_t device_memory_bytes = 16ull << 30;
constexpr int max_devices = 64;
constexpr int default_dynamic_shared_bytes = 49152;
constexpr int max_dynamic_shared_bytes = 232448;  // sm_90's opt-in limit (no static shared memory here)
constexpr int driver_version = 13000;

// ---------------------------------------------------------------------------------------
// The emulated objects

using Handle = std::uint64_t;

template <class T>
T* to_handle(Handle h) {
  return reinterpret_cast<T*>(static_cast<std::uintptr_t>(h));
}
Handle from_handle(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

// A host implementation of a kernel, registered by a test under the kernel's name.
struct Kernel {
  std::string name;
  std::vector<unsigned> param_sizes;
  gexec_emu_kernel_fn fn;
};

// The operations a stream queues (or a capture records). Each is self-contained: it owns
// copies of everything the caller may reuse once the enqueuing call returned.
struct Op;
struct Launch {
  Handle function;
  std::shared_ptr<const Kernel> kernel;
  unsigned grid[3];
  unsigned block[3];
  unsigned shared_bytes;
  std::vector<std::vector<unsigned char>> params;  // the parameter bytes, copied at enqueue
};
enum class Direction { h2d, d2h, d2d, peer };
struct Copy {
  Direction direction;
  CUdeviceptr dst = 0;  // device destination (h2d, d2d, peer)
  CUdeviceptr src = 0;  // device source (d2h, d2d, peer)
  void* host_dst = nullptr;        // d2h: written when the copy executes
  const void* host_src = nullptr;  // h2d in a graph: read each time the graph runs
  bool snapshotted = false;        // h2d on a stream: the source was copied at enqueue...
  std::vector<unsigned char> snapshot{};  // ...into here
  std::size_t bytes = 0;
  int src_device = 0, dst_device = 0;  // peer
};
struct Memset {
  CUdeviceptr dst;
  unsigned char value;
  std::size_t bytes;
};
// cuStreamWaitEvent: before going on, run `stream` until `count` of its ops executed.
struct WaitFor {
  Handle stream;
  std::uint64_t count;
};
// cuGraphLaunch: the executable graph's ops as they were at launch.
struct RunGraph {
  std::shared_ptr<const std::vector<Op>> ops;
};
struct Op {
  std::variant<Launch, Copy, Memset, WaitFor, RunGraph> what;
};

// A stream capture in progress. Streams join it by waiting on an event recorded in it;
// `members` tracks, per stream, enough to tell at cuStreamEndCapture whether every
// forked stream was joined back into the origin stream.
struct Capture {
  struct Member {
    std::uint64_t actions = 0;  // ops, records and waits this stream added to the capture
    Handle joined_into = 0;     // the stream that last waited on this stream's latest record...
    std::uint64_t joined_at = 0;  // ...when this stream had done `joined_at` actions
  };
  Handle origin;
  Handle context;
  int mode;
  std::thread::id thread;
  bool active = true;
  bool invalidated = false;
  std::vector<Op> ops;
  std::map<Handle, Member> members;
};

struct Context {
  int device;
  int refcount = 0;
  CUresult sticky = api::CUDA_SUCCESS;   // set: the context is broken, every use returns it
  CUresult pending = api::CUDA_SUCCESS;  // a non-sticky asynchronous error not yet reported
  Handle default_stream = 0;
};

// An in-order queue of deferred operations: `executed` of the `enqueued` ops ran.
struct Stream {
  Handle id;
  Handle context;
  std::deque<Op> queue;
  std::uint64_t enqueued = 0, executed = 0;
  std::shared_ptr<Capture> capture;  // set while the stream takes part in a capture
};

struct Event {
  Handle context;
  Handle stream = 0;        // the last record outside capture: `stream` after its first
  std::uint64_t count = 0;  // `count` ops (stream 0: never recorded)
  struct {
    std::weak_ptr<Capture> capture;  // the last record inside a capture, if later than the above
    Handle stream = 0;
    std::uint64_t action = 0;  // the recording stream's member actions at the record
  } captured{};
};

struct Module {
  Handle context;
  bool is_ptx;
  std::string ptx;
  std::map<std::string, Handle, std::less<>> functions;
};

struct Function {
  Handle context;
  Handle module;
  std::shared_ptr<const Kernel> kernel;
  int max_dynamic_shared = default_dynamic_shared_bytes;
};

struct Graph {
  Handle context;
  int device;
  std::vector<Op> ops;
};

struct GraphExec {
  Handle context;
  int device;
  std::shared_ptr<const std::vector<Op>> ops;
};

struct Allocation {
  struct Free {
    void operator()(unsigned char* p) const noexcept { std::free(p); }
  };
  std::unique_ptr<unsigned char, Free> host;
  std::size_t bytes;
  int device;
  Handle context;
};

struct Device {
  Handle primary = 0;  // its primary context while retained
  gexec_emu_stats stats{};
};

struct Injection {
  std::string function;
  CUresult result;
  int skip;
};

struct State {
  std::recursive_mutex mutex;
  bool initialized = false;
  bool device_count_set = false;
  int device_count = 2;
  Device devices[max_devices];
  Handle next_handle = 0x10000;

  // Registries of live objects (unordered_map keeps references stable across inserts).
  std::unordered_map<Handle, Context> contexts;
  std::unordered_map<Handle, Stream> streams;
  std::unordered_map<Handle, Event> events;
  std::unordered_map<Handle, Module> modules;
  std::unordered_map<Handle, Function> functions;
  std::unordered_map<Handle, Graph> graphs;
  std::unordered_map<Handle, GraphExec> execs;
  std::map<CUdeviceptr, Allocation> allocations;  // by device address, for range lookups
  std::vector<std::shared_ptr<Capture>> captures;  // active ones
  std::map<std::string, std::shared_ptr<const Kernel>, std::less<>> kernels;

  std::vector<Injection> injections;
  bool in_kernel = false;  // a host kernel is running...
  bool faulted = false;    // ...and touched memory outside live allocations
  bool tracing = false;
  std::string trace;

  Handle new_handle() { return next_handle += 0x10; }
};

// Never destroyed: gexec (or a test) may call the driver from its own static destructors
// at exit, after this library's would have run.
State& st() {
  static State* const state = new State;
  return *state;
}

// cuCtxSetCurrent's, per thread. Static TLS (initial-exec), as a driver loaded once
// keeps it: no __tls_get_addr per access, and no dynamic TLS blocks, which LLVM 14's
// LeakSanitizer misreads under glibc 2.36 (a crash at exit scanning a thread's DTLS).
__attribute__((tls_model("initial-exec"))) thread_local Handle current_context = 0;

template <class Map>
auto* find(Map& map, Handle h) {
  const auto it = map.find(h);
  return it == map.end() ? nullptr : &it->second;
}

gexec_emu_stats& stats(int device) { return st().devices[device].stats; }

void trace_line(const char* format, ...) __attribute__((format(printf, 1, 2)));
void trace_line(const char* format, ...) {
  if (!st().tracing) return;
  char line[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(line, sizeof line, format, args);
  va_end(args);
  st().trace += line;
  st().trace += '\n';
}

// The allocation holding all of device range [ptr, ptr + bytes), or nullptr.
Allocation* owner(CUdeviceptr ptr, std::size_t bytes) {
  auto& allocations = st().allocations;
  auto it = allocations.upper_bound(ptr);
  if (it == allocations.begin()) return nullptr;
  --it;
  const std::size_t offset = ptr - it->first;
  if (offset >= it->second.bytes || bytes > it->second.bytes - offset) return nullptr;
  return &it->second;
}

bool valid_device(CUdevice device) { return device >= 0 && device < st().device_count; }

unsigned char* host_address(CUdeviceptr ptr) { return reinterpret_cast<unsigned char*>(ptr ^ device_address_bit); }

// ---------------------------------------------------------------------------------------
// Context state: broken contexts and asynchronous errors

// A sticky error: the context's queued work is dropped and every later use fails.
void break_context(Handle id, Context& context, CUresult code) {
  context.sticky = code;
  for (auto& [handle, stream] : st().streams)
    if (stream.context == id) {
      stream.queue.clear();
      stream.executed = stream.enqueued;
    }
}

// An operation of `context` failed while executing (asynchronously).
void fail_async(Handle id, Context& context, CUresult code) {
  if (context.sticky) return;
  if (api::is_sticky(code))
    break_context(id, context, code);
  else if (!context.pending)
    context.pending = code;
}

// What a call that waited on `context`'s work reports: its sticky error, or the pending
// asynchronous error (which is then reported).
CUresult take_status(Context& context) {
  if (context.sticky) return context.sticky;
  return std::exchange(context.pending, api::CUDA_SUCCESS);
}

// The calling thread's current context: INVALID_CONTEXT if none, its sticky error if broken.
CUresult current(Handle& id, Context*& context) {
  id = current_context;
  context = find(st().contexts, id);
  if (!context) return api::CUDA_ERROR_INVALID_CONTEXT;
  return context->sticky;
}

// A stream argument: NULL is the current context's own stream.
CUresult resolve_stream(CUstream handle, Stream*& stream) {
  if (!handle) {
    const Context* context = find(st().contexts, current_context);
    if (!context) return api::CUDA_ERROR_INVALID_CONTEXT;
    stream = find(st().streams, context->default_stream);
  } else {
    stream = find(st().streams, from_handle(handle));
  }
  return stream ? api::CUDA_SUCCESS : api::CUDA_ERROR_INVALID_HANDLE;
}

// A stream argument of a call that works in the current context (copies, launches): the
// context must be current, usable, and the stream's.
CUresult stream_in_current(CUstream handle, Stream*& stream, Context*& context) {
  Handle id;
  if (const CUresult r = current(id, context)) return r;
  if (const CUresult r = resolve_stream(handle, stream)) return r;
  return stream->context == id ? api::CUDA_SUCCESS : api::CUDA_ERROR_INVALID_CONTEXT;
}

// ---------------------------------------------------------------------------------------
// Captures

void note_action(Capture& capture, const Stream& stream) { ++capture.members[stream.id].actions; }

std::shared_ptr<Capture> active_capture(const Event& event) {
  std::shared_ptr<Capture> capture = event.captured.capture.lock();
  return capture && capture->active ? capture : nullptr;
}

// Ends a capture: its streams leave capture mode.
void end_capture(const std::shared_ptr<Capture>& capture) {
  capture->active = false;
  for (const auto& [id, member] : capture->members)
    if (Stream* stream = find(st().streams, id)) stream->capture.reset();
  std::erase(st().captures, capture);
}

// Whether `stream` of the capture reaches the origin stream by joins, with nothing added
// after each join.
bool joined(const Capture& capture, Handle stream) {
  for (std::size_t hops = 0; hops <= capture.members.size(); ++hops) {
    if (stream == capture.origin) return true;
    const Capture::Member& member = capture.members.at(stream);
    if (!member.joined_into || member.joined_at != member.actions) return false;
    stream = member.joined_into;
  }
  return false;
}

// cuMemAlloc and cuMemFree are "potentially unsafe" during a capture in GLOBAL mode (from
// any thread) or THREAD_LOCAL mode (from the capturing thread): they invalidate it.
CUresult refuse_unsafe_call_during_capture() {
  CUresult r = api::CUDA_SUCCESS;
  for (const auto& capture : st().captures)
    if (capture->mode == api::CU_STREAM_CAPTURE_MODE_GLOBAL ||
        (capture->mode == api::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL && capture->thread == std::this_thread::get_id())) {
      capture->invalidated = true;
      r = api::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
  return r;
}

// Queues `op` on `stream`, or records it into the stream's capture.
CUresult enqueue(Stream& stream, Op op) {
  if (stream.capture) {
    Capture& capture = *stream.capture;
    if (capture.invalidated) return api::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    note_action(capture, stream);
    capture.ops.push_back(std::move(op));
    return api::CUDA_SUCCESS;
  }
  stream.queue.push_back(std::move(op));
  ++stream.enqueued;
  return api::CUDA_SUCCESS;
}

// ---------------------------------------------------------------------------------------
// Execution of queued operations (on the thread that waits for them)

void run(Stream& stream, std::uint64_t count);

// Runs one op for a stream of context `context_id`.
void execute(const Op& op, Handle context_id, Context& context) {
  if (context.sticky) return;
  const int device = context.device;
  gexec_emu_stats& s = stats(device);
  if (const auto* launch = std::get_if<Launch>(&op.what)) {
    std::vector<std::vector<unsigned char>> params = launch->params;  // the kernel may write its own copy
    std::vector<void*> pointers;
    for (auto& p : params) pointers.push_back(p.data());
    std::vector<unsigned char> shared(launch->shared_bytes, garbage);
    gexec_emu_launch info{};
    std::copy_n(launch->grid, 3, info.grid);
    std::copy_n(launch->block, 3, info.block);
    info.shared_bytes = launch->shared_bytes;
    info.shared = shared.empty() ? nullptr : shared.data();
    st().in_kernel = true;
    st().faulted = false;
    CUresult r = launch->kernel->fn(pointers.data(), &info);
    st().in_kernel = false;
    if (st().faulted) r = api::CUDA_ERROR_ILLEGAL_ADDRESS;
    ++s.launches;
    s.max_shared_bytes = std::max<long>(s.max_shared_bytes, launch->shared_bytes);
    trace_line("launch %s grid=%u,%u,%u block=%u,%u,%u shared=%u dev=%d", launch->kernel->name.c_str(), launch->grid[0],
               launch->grid[1], launch->grid[2], launch->block[0], launch->block[1], launch->block[2], launch->shared_bytes,
               device);
    if (r != api::CUDA_SUCCESS) fail_async(context_id, context, r);
  } else if (const auto* copy = std::get_if<Copy>(&op.what)) {
    // Device ranges were valid at enqueue; memory freed since is an illegal address.
    const bool reads_device = copy->direction != Direction::h2d;
    const bool writes_device = copy->direction != Direction::d2h;
    if ((reads_device && !owner(copy->src, copy->bytes)) || (writes_device && !owner(copy->dst, copy->bytes))) {
      fail_async(context_id, context, api::CUDA_ERROR_ILLEGAL_ADDRESS);
      return;
    }
    const void* from = reads_device ? host_address(copy->src) : copy->snapshotted ? copy->snapshot.data() : copy->host_src;
    void* to = writes_device ? host_address(copy->dst) : copy->host_dst;
    std::memmove(to, from, copy->bytes);
    switch (copy->direction) {
      case Direction::h2d: ++s.h2d; trace_line("h2d %zu dev=%d", copy->bytes, device); break;
      case Direction::d2h: ++s.d2h; trace_line("d2h %zu dev=%d", copy->bytes, device); break;
      case Direction::d2d: ++s.d2d; trace_line("d2d %zu dev=%d", copy->bytes, device); break;
      case Direction::peer:
        ++s.peer;
        trace_line("peer %zu dev=%d->%d", copy->bytes, copy->src_device, copy->dst_device);
        break;
    }
  } else if (const auto* memset = std::get_if<Memset>(&op.what)) {
    if (!owner(memset->dst, memset->bytes)) {
      fail_async(context_id, context, api::CUDA_ERROR_ILLEGAL_ADDRESS);
      return;
    }
    std::memset(host_address(memset->dst), memset->value, memset->bytes);
    ++s.memsets;
    trace_line("memset %zu dev=%d", memset->bytes, device);
  } else if (const auto* wait = std::get_if<WaitFor>(&op.what)) {
    // A destroyed stream completed its work when it was destroyed.
    if (Stream* other = find(st().streams, wait->stream)) run(*other, wait->count);
  } else if (const auto* graph = std::get_if<RunGraph>(&op.what)) {
    ++s.graph_launches;
    for (const Op& node : *graph->ops) execute(node, context_id, context);
  }
}

// Runs `stream`'s queued ops until `count` of all it was given have executed.
void run(Stream& stream, std::uint64_t count) {
  Context& context = st().contexts.at(stream.context);
  while (stream.executed < count && !stream.queue.empty()) {
    const Op op = std::move(stream.queue.front());
    stream.queue.pop_front();
    ++stream.executed;
    execute(op, stream.context, context);
  }
}

void drain(Stream& stream) { run(stream, stream.enqueued); }

void drain_context(Handle context) {
  for (auto& [id, stream] : st().streams)
    if (stream.context == context) drain(stream);
}

// ---------------------------------------------------------------------------------------
// Object lifetimes

Handle create_stream(Handle context) {
  const Handle id = st().new_handle();
  st().streams.emplace(id, Stream{.id = id, .context = context, .queue = {}, .capture = {}});
  return id;
}

void destroy_allocation(std::map<CUdeviceptr, Allocation>::iterator it) {
  gexec_emu_stats& s = stats(it->second.device);
  --s.allocations;
  s.bytes -= static_cast<long>(it->second.bytes);
  st().allocations.erase(it);
}

void destroy_module(Handle id, const Module& module) {
  for (const auto& [name, function] : module.functions) st().functions.erase(function);
  --stats(st().contexts.at(module.context).device).modules;
  st().modules.erase(id);
}

// The last cuDevicePrimaryCtxRelease: the context and everything created in it go away,
// pending work unexecuted. Graphs are not tied to a context and stay.
void destroy_context(Handle id) {
  State& state = st();
  Context& context = state.contexts.at(id);
  gexec_emu_stats& s = stats(context.device);
  for (auto captures = state.captures; const auto& capture : captures)
    if (capture->context == id) end_capture(capture);
  std::erase_if(state.streams, [&](const auto& entry) {
    const bool mine = entry.second.context == id;
    if (mine && entry.first != context.default_stream) --s.streams;
    return mine;
  });
  std::erase_if(state.events, [&](const auto& entry) {
    const bool mine = entry.second.context == id;
    if (mine) --s.events;
    return mine;
  });
  for (auto modules = state.modules; const auto& [handle, module] : modules)
    if (module.context == id) destroy_module(handle, module);
  for (auto it = state.allocations.begin(); it != state.allocations.end();) {
    const auto next = std::next(it);
    if (it->second.context == id) destroy_allocation(it);
    it = next;
  }
  state.devices[context.device].primary = 0;
  state.contexts.erase(id);
}

// ---------------------------------------------------------------------------------------
// What every driver function does first: take the lock, answer an injected failure, and
// refuse to work before cuInit.

CUresult prologue(const char* function, bool needs_init) {
  State& state = st();
  for (auto it = state.injections.begin(); it != state.injections.end(); ++it) {
    if (it->function != function) continue;
    if (it->skip-- > 0) break;
    const CUresult result = it->result;
    state.injections.erase(it);
    if (api::is_sticky(result))
      if (Context* context = find(state.contexts, current_context)) break_context(current_context, *context, result);
    return result;
  }
  return needs_init && !state.initialized ? api::CUDA_ERROR_NOT_INITIALIZED : api::CUDA_SUCCESS;
}

class Call {
 public:
  Call(const char* function, bool needs_init) : lock_(st().mutex), result_(prologue(function, needs_init)) {}
  CUresult result() const { return result_; }

 private:
  std::lock_guard<std::recursive_mutex> lock_;
  CUresult result_;
};

// The first line of every driver function: __func__ is its base name.
#define EMU_ENTER(needs_init)              \
  const Call call(__func__, (needs_init)); \
  if (call.result() != api::CUDA_SUCCESS) return call.result()

// Whether a PTX text declares kernel `name` (".entry name(" or ".entry name ").
bool ptx_declares(std::string_view ptx, std::string_view name) {
  const auto is_identifier = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '$';
  };
  for (std::size_t at = ptx.find(".entry"); at != std::string_view::npos; at = ptx.find(".entry", at + 1)) {
    std::size_t i = at + 6;
    if (i >= ptx.size() || (ptx[i] != ' ' && ptx[i] != '\t' && ptx[i] != '\n')) continue;
    while (i < ptx.size() && (ptx[i] == ' ' || ptx[i] == '\t' || ptx[i] == '\n')) ++i;
    std::size_t end = i;
    while (end < ptx.size() && is_identifier(ptx[end])) ++end;
    if (ptx.substr(i, end - i) == name) return true;
  }
  return false;
}

// Whether the NUL-terminated-or-longer `image` starts with `magic` (never reading past a
// NUL, as no magic byte is one).
bool starts_with(const void* image, std::string_view magic) {
  const auto* bytes = static_cast<const unsigned char*>(image);
  for (std::size_t i = 0; i < magic.size(); ++i)
    if (bytes[i] != static_cast<unsigned char>(magic[i])) return false;
  return true;
}

// Why an executable graph cannot take a graph's parameters (a CUgraphExecUpdateResult),
// or 0 when it can.
int update_mismatch(const std::vector<Op>& from, const std::vector<Op>& to) {
  constexpr int topology_changed = 2, node_type_changed = 3, function_changed = 4, parameters_changed = 5;
  if (from.size() != to.size()) return topology_changed;
  for (std::size_t i = 0; i < from.size(); ++i) {
    if (from[i].what.index() != to[i].what.index()) return node_type_changed;
    if (const auto* a = std::get_if<Launch>(&from[i].what)) {
      const auto& b = std::get<Launch>(to[i].what);
      if (a->function != b.function) return function_changed;
      if (!std::equal(a->grid, a->grid + 3, b.grid) || !std::equal(a->block, a->block + 3, b.block) ||
          a->shared_bytes != b.shared_bytes)
        return parameters_changed;
    } else if (const auto* c = std::get_if<Copy>(&from[i].what)) {
      const auto& d = std::get<Copy>(to[i].what);
      if (c->direction != d.direction || c->bytes != d.bytes || c->src_device != d.src_device ||
          c->dst_device != d.dst_device)
        return parameters_changed;
    } else if (const auto* m = std::get_if<Memset>(&from[i].what)) {
      if (m->bytes != std::get<Memset>(to[i].what).bytes) return parameters_changed;
    }
  }
  return 0;
}

}  // namespace

// =======================================================================================
// The driver functions, declared from gexec's list so that a signature that drifts from
// it does not compile.

#define EMU_DECLARE(name, ...) EMU_API CUresult name(__VA_ARGS__);
GEXEC_CUDA_DRIVER_FUNCTIONS(EMU_DECLARE)
#undef EMU_DECLARE
EMU_API CUresult cuGetProcAddress_v2(const char* symbol, void** fn, int cuda_version, unsigned long long flags, int* status);
EMU_API CUresult cuGetProcAddress(const char* symbol, void** fn, int cuda_version, unsigned long long flags);

// --- Initialisation, errors, devices ---------------------------------------------------

CUresult cuInit(unsigned flags) {
  EMU_ENTER(false);
  if (flags != 0) return api::CUDA_ERROR_INVALID_VALUE;
  State& state = st();
  if (!state.device_count_set && !state.initialized)
    if (const char* env = std::getenv("GEXEC_EMU_DEVICES")) {
      char* end = nullptr;
      const long n = std::strtol(env, &end, 10);
      if (end != env && *end == '\0' && n >= 0 && n <= max_devices) state.device_count = static_cast<int>(n);
    }
  if (state.device_count == 0) return api::CUDA_ERROR_NO_DEVICE;
  if (!state.initialized)
    if (const char* kernels = std::getenv("GEXEC_EMU_KERNELS")) {  // a process that cannot register them itself (a server)
      void* lib = dlopen(kernels, RTLD_NOW | RTLD_LOCAL);
      auto register_all = lib ? reinterpret_cast<void (*)()>(dlsym(lib, "gexec_test_register_emulated_kernels")) : nullptr;
      if (!register_all) {
        std::fprintf(stderr, "emulated CUDA driver: GEXEC_EMU_KERNELS=%s: %s\n", kernels, lib ? "no gexec_test_register_emulated_kernels" : dlerror());
        return api::CUDA_ERROR_NOT_INITIALIZED;
      }
      register_all();
    }
  state.initialized = true;
  return api::CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int* version) {
  EMU_ENTER(false);
  if (!version) return api::CUDA_ERROR_INVALID_VALUE;
  *version = driver_version;
  return api::CUDA_SUCCESS;
}

CUresult cuGetErrorName(CUresult error, const char** name) {
  EMU_ENTER(false);
  if (!name) return api::CUDA_ERROR_INVALID_VALUE;
  const ErrorText* e = find_error(error);
  *name = e ? e->name : nullptr;
  return e ? api::CUDA_SUCCESS : api::CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorString(CUresult error, const char** text) {
  EMU_ENTER(false);
  if (!text) return api::CUDA_ERROR_INVALID_VALUE;
  const ErrorText* e = find_error(error);
  *text = e ? e->text : nullptr;
  return e ? api::CUDA_SUCCESS : api::CUDA_ERROR_INVALID_VALUE;
}

CUresult cuDeviceGetCount(int* count) {
  EMU_ENTER(true);
  if (!count) return api::CUDA_ERROR_INVALID_VALUE;
  *count = st().device_count;
  return api::CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  EMU_ENTER(true);
  if (!device) return api::CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(ordinal)) return api::CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return api::CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char* name, int length, CUdevice device) {
  EMU_ENTER(true);
  if (!valid_device(device)) return api::CUDA_ERROR_INVALID_DEVICE;
  if (!name || length <= 0) return api::CUDA_ERROR_INVALID_VALUE;
  std::snprintf(name, static_cast<std::size_t>(length), "%s", "gexec emulated CUDA device");
  return api::CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int* value, int attribute, CUdevice device) {
  EMU_ENTER(true);
  if (!value) return api::CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(device)) return api::CUDA_ERROR_INVALID_DEVICE;
  switch (attribute) {  // an H100-like device; attributes not listed read 0
    case 1: *value = 1024; break;                   // MAX_THREADS_PER_BLOCK
    case 2: case 3: *value = 1024; break;           // MAX_BLOCK_DIM_X, _Y
    case 4: *value = 64; break;                     // MAX_BLOCK_DIM_Z
    case 5: *value = 2147483647; break;             // MAX_GRID_DIM_X
    case 6: case 7: *value = 65535; break;          // MAX_GRID_DIM_Y, _Z
    case 8: *value = default_dynamic_shared_bytes; break;  // MAX_SHARED_MEMORY_PER_BLOCK
    case 10: *value = 32; break;                    // WARP_SIZE
    case 16: *value = 132; break;                   // MULTIPROCESSOR_COUNT
    case 41: *value = 1; break;                     // UNIFIED_ADDRESSING
    case api::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = 9; break;
    case api::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = 0; break;
    case 97: *value = max_dynamic_shared_bytes; break;  // MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
    default:
      if (attribute <= 0 || attribute > 200) return api::CUDA_ERROR_INVALID_VALUE;
      *value = 0;
  }
  return api::CUDA_SUCCESS;
}

// --- Contexts --------------------------------------------------------------------------

CUresult cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
  EMU_ENTER(true);
  if (!context) return api::CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(device)) return api::CUDA_ERROR_INVALID_DEVICE;
  State& state = st();
  Handle& primary = state.devices[device].primary;
  if (!primary) {
    primary = state.new_handle();
    state.contexts.emplace(primary, Context{.device = device});
    state.contexts.at(primary).default_stream = create_stream(primary);
  }
  ++state.contexts.at(primary).refcount;
  *context = to_handle<CUctx_st>(primary);
  return api::CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice device) {
  EMU_ENTER(true);
  if (!valid_device(device)) return api::CUDA_ERROR_INVALID_DEVICE;
  const Handle primary = st().devices[device].primary;
  if (!primary) return api::CUDA_ERROR_INVALID_CONTEXT;
  if (--st().contexts.at(primary).refcount == 0) destroy_context(primary);
  return api::CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext context) {
  EMU_ENTER(true);
  if (context && !find(st().contexts, from_handle(context))) return api::CUDA_ERROR_INVALID_CONTEXT;
  current_context = from_handle(context);
  return api::CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext* context) {
  EMU_ENTER(true);
  if (!context) return api::CUDA_ERROR_INVALID_VALUE;
  *context = to_handle<CUctx_st>(current_context);
  return api::CUDA_SUCCESS;
}

CUresult cuCtxSynchronize() {
  EMU_ENTER(true);
  Handle id;
  Context* context;
  if (const CUresult r = current(id, context)) return r;
  ++stats(context->device).synchronizations;
  CUresult r = api::CUDA_SUCCESS;
  for (const auto& capture : st().captures)
    if (capture->context == id) {
      capture->invalidated = true;
      r = api::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
  if (r) return r;
  drain_context(id);
  return take_status(*context);
}

// --- Memory ----------------------------------------------------------------------------

CUresult cuMemAlloc(CUdeviceptr* ptr, std::size_t bytes) {
  EMU_ENTER(true);
  Handle id;
  Context* context;
  if (const CUresult r = current(id, context)) return r;
  if (const CUresult r = refuse_unsafe_call_during_capture()) return r;
  if (!ptr || bytes == 0) return api::CUDA_ERROR_INVALID_VALUE;
  gexec_emu_stats& s = stats(context->device);
  if (bytes > device_memory_bytes - static_cast<std::size_t>(s.bytes)) return api::CUDA_ERROR_OUT_OF_MEMORY;
  const std::size_t rounded = (bytes + allocation_alignment - 1) / allocation_alignment * allocation_alignment;
  auto* host = static_cast<unsigned char*>(std::aligned_alloc(allocation_alignment, rounded));
  if (!host) return api::CUDA_ERROR_OUT_OF_MEMORY;
  std::memset(host, garbage, rounded);
  const CUdeviceptr device_address = reinterpret_cast<std::uintptr_t>(host) ^ device_address_bit;
  st().allocations.emplace(device_address,
                           Allocation{.host = {host, {}}, .bytes = bytes, .device = context->device, .context = id});
  ++s.allocations;
  s.bytes += static_cast<long>(bytes);
  *ptr = device_address;
  return api::CUDA_SUCCESS;
}

CUresult cuMemFree(CUdeviceptr ptr) {
  EMU_ENTER(true);
  Handle id;
  Context* context;
  if (const CUresult r = current(id, context); !context) return r;
  if (const CUresult r = refuse_unsafe_call_during_capture()) return r;
  const auto it = st().allocations.find(ptr);
  if (it == st().allocations.end()) return api::CUDA_ERROR_INVALID_VALUE;
  // Like cudaFree, wait for the work that may still use the memory (none is queued in a
  // broken context: it may still free).
  Context& owner_context = st().contexts.at(it->second.context);
  drain_context(id);
  if (it->second.context != id) drain_context(it->second.context);
  destroy_allocation(it);
  if (const CUresult r = take_status(owner_context)) return r;
  return take_status(*context);
}

CUresult cuMemcpyHtoDAsync(CUdeviceptr dst, const void* src, std::size_t bytes, CUstream handle) {
  EMU_ENTER(true);
  Stream* stream;
  Context* context;
  if (const CUresult r = stream_in_current(handle, stream, context)) return r;
  if (bytes == 0) return api::CUDA_SUCCESS;
  if (!src || !owner(dst, bytes)) return api::CUDA_ERROR_INVALID_VALUE;
  Copy copy{.direction = Direction::h2d, .dst = dst, .host_src = src, .bytes = bytes};
  if (!stream->capture) {  // pageable memory: the driver stages it before returning
    copy.snapshotted = true;
    copy.snapshot.assign(static_cast<const unsigned char*>(src), static_cast<const unsigned char*>(src) + bytes);
  }
  return enqueue(*stream, Op{std::move(copy)});
}

CUresult cuMemcpyDtoHAsync(void* dst, CUdeviceptr src, std::size_t bytes, CUstream handle) {
  EMU_ENTER(true);
  Stream* stream;
  Context* context;
  if (const CUresult r = stream_in_current(handle, stream, context)) return r;
  if (bytes == 0) return api::CUDA_SUCCESS;
  if (!dst || !owner(src, bytes)) return api::CUDA_ERROR_INVALID_VALUE;
  return enqueue(*stream, Op{Copy{.direction = Direction::d2h, .src = src, .host_dst = dst, .bytes = bytes}});
}

CUresult cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, std::size_t bytes, CUstream handle) {
  EMU_ENTER(true);
  Stream* stream;
  Context* context;
  if (const CUresult r = stream_in_current(handle, stream, context)) return r;
  if (bytes == 0) return api::CUDA_SUCCESS;
  if (!owner(dst, bytes) || !owner(src, bytes)) return api::CUDA_ERROR_INVALID_VALUE;
  return enqueue(*stream, Op{Copy{.direction = Direction::d2d, .dst = dst, .src = src, .bytes = bytes}});
}

CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dst_context, CUdeviceptr src, CUcontext src_context,
                           std::size_t bytes, CUstream handle) {
  EMU_ENTER(true);
  Stream* stream;
  Context* context;
  if (const CUresult r = stream_in_current(handle, stream, context)) return r;
  const Context* to = find(st().contexts, from_handle(dst_context));
  const Context* from = find(st().contexts, from_handle(src_context));
  if (!to || !from) return api::CUDA_ERROR_INVALID_CONTEXT;
  if (to->sticky) return to->sticky;
  if (from->sticky) return from->sticky;
  if (bytes == 0) return api::CUDA_SUCCESS;
  const Allocation* dst_allocation = owner(dst, bytes);
  const Allocation* src_allocation = owner(src, bytes);
  if (!dst_allocation || !src_allocation || dst_allocation->device != to->device || src_allocation->device != from->device)
    return api::CUDA_ERROR_INVALID_VALUE;
  return enqueue(*stream, Op{Copy{.direction = Direction::peer,
                                  .dst = dst,
                                  .src = src,
                                  .bytes = bytes,
                                  .src_device = from->device,
                                  .dst_device = to->device}});
}

CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char value, std::size_t count, CUstream handle) {
  EMU_ENTER(true);
  Stream* stream;
  Context* context;
  if (const CUresult r = stream_in_current(handle, stream, context)) return r;
  if (count == 0) return api::CUDA_SUCCESS;
  if (!owner(dst, count)) return api::CUDA_ERROR_INVALID_VALUE;
  return enqueue(*stream, Op{Memset{.dst = dst, .value = value, .bytes = count}});
}

// --- Streams ---------------------------------------------------------------------------

CUresult cuStreamCreate(CUstream* stream, unsigned flags) {
  EMU_ENTER(true);
  Handle id;
  Context* context;
  if (const CUresult r = current(id, context)) return r;
  if (!stream || (flags & ~api::CU_STREAM_NON_BLOCKING)) return api::CUDA_ERROR_INVALID_VALUE;
  *stream = to_handle<CUstream_st>(create_stream(id));
  ++stats(context->device).streams;
  return api::CUDA_SUCCESS;
}

CUresult cuStreamDestroy(CUstream handle) {
  EMU_ENTER(true);
  Stream* stream = handle ? find(st().streams, from_handle(handle)) : nullptr;
  if (!stream) return api::CUDA_ERROR_INVALID_HANDLE;
  if (stream->capture) {
    stream->capture->invalidated = true;
    return api::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  Context& context = st().contexts.at(stream->context);
  drain(*stream);  // its work completes first (nothing is queued in a broken context)
  --stats(context.device).streams;
  st().streams.erase(from_handle(handle));
  return take_status(context);
}

CUresult cuStreamSynchronize(CUstream handle) {
  EMU_ENTER(true);
  Stream* stream;
  if (const CUresult r = resolve_stream(handle, stream)) return r;
  Context& context = st().contexts.at(stream->context);
  if (context.sticky) return context.sticky;
  ++stats(context.device).synchronizations;
  if (stream->capture) {
    stream->capture->invalidated = true;
    return api::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  drain(*stream);
  return take_status(context);
}

CUresult cuStreamWaitEvent(CUstream handle, CUevent event_handle, unsigned flags) {
  EMU_ENTER(true);
  Stream* stream;
  if (const CUresult r = resolve_stream(handle, stream)) return r;
  Event* event = find(st().events, from_handle(event_handle));
  if (!event) return api::CUDA_ERROR_INVALID_HANDLE;
  if (flags != 0) return api::CUDA_ERROR_INVALID_VALUE;
  if (const CUresult r = st().contexts.at(stream->context).sticky) return r;
  if (stream->capture && stream->capture->invalidated) return api::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;

  if (const std::shared_ptr<Capture> capture = active_capture(*event)) {
    // The event was recorded in a capture: the waiting stream joins it (a fork), or, if it
    // is in it already, this may join the recording stream back (a join).
    if (stream->capture && stream->capture != capture) return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
    if (capture->invalidated) return api::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    if (!stream->capture) {
      if (stream->context != capture->context) return api::CUDA_ERROR_INVALID_CONTEXT;
      stream->capture = capture;
      capture->members[stream->id];
    }
    Capture::Member& recorder = capture->members.at(event->captured.stream);
    if (event->captured.stream != stream->id && recorder.actions == event->captured.action) {
      recorder.joined_into = stream->id;
      recorder.joined_at = recorder.actions;
    }
    note_action(*capture, *stream);
    return api::CUDA_SUCCESS;
  }
  if (stream->capture) {
    // Only in-stream order may cross a capture's boundary.
    if (!event->stream) return api::CUDA_SUCCESS;
    stream->capture->invalidated = true;
    return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
  }
  if (event->stream && event->stream != stream->id)  // never recorded: nothing to wait for
    return enqueue(*stream, Op{WaitFor{.stream = event->stream, .count = event->count}});
  return api::CUDA_SUCCESS;
}

// --- Events ----------------------------------------------------------------------------

CUresult cuEventCreate(CUevent* event, unsigned flags) {
  EMU_ENTER(true);
  Handle id;
  Context* context;
  if (const CUresult r = current(id, context)) return r;
  constexpr unsigned known_flags = 0x1 | api::CU_EVENT_DISABLE_TIMING | 0x4;  // BLOCKING_SYNC, DISABLE_TIMING, INTERPROCESS
  if (!event || (flags & ~known_flags)) return api::CUDA_ERROR_INVALID_VALUE;
  const Handle handle = st().new_handle();
  st().events.emplace(handle, Event{.context = id});
  ++stats(context->device).events;
  *event = to_handle<CUevent_st>(handle);
  return api::CUDA_SUCCESS;
}

CUresult cuEventDestroy(CUevent handle) {
  EMU_ENTER(true);
  Event* event = find(st().events, from_handle(handle));
  if (!event) return api::CUDA_ERROR_INVALID_HANDLE;
  Context& context = st().contexts.at(event->context);
  --stats(context.device).events;
  st().events.erase(from_handle(handle));
  return context.sticky;
}

CUresult cuEventRecord(CUevent event_handle, CUstream handle) {
  EMU_ENTER(true);
  Event* event = find(st().events, from_handle(event_handle));
  if (!event) return api::CUDA_ERROR_INVALID_HANDLE;
  Stream* stream;
  if (const CUresult r = resolve_stream(handle, stream)) return r;
  if (stream->context != event->context) return api::CUDA_ERROR_INVALID_CONTEXT;
  if (const CUresult r = st().contexts.at(stream->context).sticky) return r;
  if (stream->capture) {
    Capture& capture = *stream->capture;
    if (capture.invalidated) return api::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    note_action(capture, *stream);
    event->captured.capture = stream->capture;
    event->captured.stream = stream->id;
    event->captured.action = capture.members.at(stream->id).actions;
    return api::CUDA_SUCCESS;
  }
  event->stream = stream->id;
  event->count = stream->enqueued;
  event->captured.capture.reset();
  return api::CUDA_SUCCESS;
}

CUresult cuEventSynchronize(CUevent handle) {
  EMU_ENTER(true);
  Event* event = find(st().events, from_handle(handle));
  if (!event) return api::CUDA_ERROR_INVALID_HANDLE;
  Context& context = st().contexts.at(event->context);
  if (context.sticky) return context.sticky;
  ++stats(context.device).synchronizations;
  if (const std::shared_ptr<Capture> capture = active_capture(*event)) {
    capture->invalidated = true;
    return api::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  if (Stream* stream = find(st().streams, event->stream)) run(*stream, event->count);
  return take_status(context);
}

// --- Modules and functions -------------------------------------------------------------

CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  EMU_ENTER(true);
  Handle id;
  Context* context;
  if (const CUresult r = current(id, context)) return r;
  if (!module || !image) return api::CUDA_ERROR_INVALID_VALUE;
  Module loaded{.context = id, .is_ptx = false, .ptx = {}, .functions = {}};
  if (!starts_with(image, "\x7f" "ELF") && !starts_with(image, "\x50\xed\x55\xba")) {  // cubin, fatbin (0xBA55ED50)
    const std::string_view text(static_cast<const char*>(image));
    if (text.find(".version") == std::string_view::npos || text.find(".target") == std::string_view::npos)
      return api::CUDA_ERROR_INVALID_IMAGE;
    loaded.is_ptx = true;
    loaded.ptx = text;
  }
  const Handle handle = st().new_handle();
  st().modules.emplace(handle, std::move(loaded));
  ++stats(context->device).modules;
  *module = to_handle<CUmod_st>(handle);
  return api::CUDA_SUCCESS;
}

CUresult cuModuleUnload(CUmodule handle) {
  EMU_ENTER(true);
  Module* module = find(st().modules, from_handle(handle));
  if (!module) return api::CUDA_ERROR_INVALID_HANDLE;
  const Handle context_id = module->context;
  Context& context = st().contexts.at(context_id);
  drain_context(context_id);  // launches of its kernels complete first
  destroy_module(from_handle(handle), *module);
  return take_status(context);
}

CUresult cuModuleGetFunction(CUfunction* function, CUmodule handle, const char* name) {
  EMU_ENTER(true);
  if (!function || !name) return api::CUDA_ERROR_INVALID_VALUE;
  Module* module = find(st().modules, from_handle(handle));
  if (!module) return api::CUDA_ERROR_INVALID_HANDLE;
  if (const CUresult r = st().contexts.at(module->context).sticky) return r;
  if (const auto known = module->functions.find(name); known != module->functions.end()) {
    *function = to_handle<CUfunc_st>(known->second);
    return api::CUDA_SUCCESS;
  }
  const auto kernel = st().kernels.find(name);
  if (kernel == st().kernels.end() || (module->is_ptx && !ptx_declares(module->ptx, name))) return api::CUDA_ERROR_NOT_FOUND;
  const Handle id = st().new_handle();
  st().functions.emplace(id, Function{.context = module->context, .module = from_handle(handle), .kernel = kernel->second});
  module->functions.emplace(name, id);
  *function = to_handle<CUfunc_st>(id);
  return api::CUDA_SUCCESS;
}

CUresult cuFuncSetAttribute(CUfunction handle, int attribute, int value) {
  EMU_ENTER(true);
  Function* function = find(st().functions, from_handle(handle));
  if (!function) return api::CUDA_ERROR_INVALID_HANDLE;
  if (const CUresult r = st().contexts.at(function->context).sticky) return r;
  if (attribute != api::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES || value < 0 || value > max_dynamic_shared_bytes)
    return api::CUDA_ERROR_INVALID_VALUE;
  function->max_dynamic_shared = value;
  return api::CUDA_SUCCESS;
}

CUresult cuLaunchKernel(CUfunction handle, unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block_x,
                        unsigned block_y, unsigned block_z, unsigned shared_bytes, CUstream stream_handle, void** params,
                        void** extra) {
  EMU_ENTER(true);
  const Function* function = find(st().functions, from_handle(handle));
  if (!function) return api::CUDA_ERROR_INVALID_HANDLE;
  Stream* stream;
  Context* context;
  if (const CUresult r = stream_in_current(stream_handle, stream, context)) return r;
  if (function->context != stream->context) return api::CUDA_ERROR_INVALID_CONTEXT;
  const unsigned long long threads = 1ull * block_x * block_y * block_z;
  if (!grid_x || !grid_y || !grid_z || !block_x || !block_y || !block_z || block_x > 1024 || block_y > 1024 ||
      block_z > 64 || threads > 1024 || grid_x > 2147483647u || grid_y > 65535 || grid_z > 65535)
    return api::CUDA_ERROR_INVALID_VALUE;
  if (shared_bytes > static_cast<unsigned>(function->max_dynamic_shared)) return api::CUDA_ERROR_INVALID_VALUE;
  const Kernel& kernel = *function->kernel;
  if (extra || (!kernel.param_sizes.empty() && !params)) return api::CUDA_ERROR_INVALID_VALUE;
  Launch launch{.function = from_handle(handle),
                .kernel = function->kernel,
                .grid = {grid_x, grid_y, grid_z},
                .block = {block_x, block_y, block_z},
                .shared_bytes = shared_bytes,
                .params = {}};
  for (std::size_t i = 0; i < kernel.param_sizes.size(); ++i) {
    if (!params[i]) return api::CUDA_ERROR_INVALID_VALUE;
    const auto* bytes = static_cast<const unsigned char*>(params[i]);
    launch.params.emplace_back(bytes, bytes + kernel.param_sizes[i]);
  }
  return enqueue(*stream, Op{std::move(launch)});
}

// --- Stream capture and graphs ---------------------------------------------------------

CUresult cuStreamBeginCapture(CUstream handle, int mode) {
  EMU_ENTER(true);
  if (!handle) return api::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;  // the NULL stream cannot be captured
  Stream* stream = find(st().streams, from_handle(handle));
  if (!stream) return api::CUDA_ERROR_INVALID_HANDLE;
  if (const CUresult r = st().contexts.at(stream->context).sticky) return r;
  if (mode < api::CU_STREAM_CAPTURE_MODE_GLOBAL || mode > api::CU_STREAM_CAPTURE_MODE_RELAXED || stream->capture)
    return api::CUDA_ERROR_INVALID_VALUE;
  auto capture = std::make_shared<Capture>();
  capture->origin = stream->id;
  capture->context = stream->context;
  capture->mode = mode;
  capture->thread = std::this_thread::get_id();
  capture->members[stream->id];
  stream->capture = capture;
  st().captures.push_back(std::move(capture));
  ++stats(st().contexts.at(stream->context).device).captures;
  return api::CUDA_SUCCESS;
}

CUresult cuStreamEndCapture(CUstream handle, CUgraph* graph) {
  EMU_ENTER(true);
  if (!graph) return api::CUDA_ERROR_INVALID_VALUE;
  Stream* stream;
  if (const CUresult r = resolve_stream(handle, stream)) return r;
  const std::shared_ptr<Capture> capture = stream->capture;
  if (!capture || capture->origin != stream->id) return CUDA_ERROR_ILLEGAL_STATE;
  if (capture->mode != api::CU_STREAM_CAPTURE_MODE_RELAXED && capture->thread != std::this_thread::get_id())
    return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
  *graph = nullptr;
  end_capture(capture);
  const Context& context = st().contexts.at(capture->context);
  if (context.sticky) return context.sticky;
  if (capture->invalidated) return api::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  for (const auto& [id, member] : capture->members)
    if (!joined(*capture, id)) return CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
  const Handle id = st().new_handle();
  st().graphs.emplace(id, Graph{.context = capture->context, .device = context.device, .ops = std::move(capture->ops)});
  ++stats(context.device).graphs;
  *graph = to_handle<CUgraph_st>(id);
  return api::CUDA_SUCCESS;
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph handle, unsigned long long flags) {
  EMU_ENTER(true);
  if (!exec || (flags & ~0xFull)) return api::CUDA_ERROR_INVALID_VALUE;
  const Graph* graph = find(st().graphs, from_handle(handle));
  if (!graph) return api::CUDA_ERROR_INVALID_HANDLE;
  const Handle id = st().new_handle();
  st().execs.emplace(id, GraphExec{.context = graph->context,
                                   .device = graph->device,
                                   .ops = std::make_shared<const std::vector<Op>>(graph->ops)});
  ++stats(graph->device).graph_execs;
  *exec = to_handle<CUgraphExec_st>(id);
  return api::CUDA_SUCCESS;
}

CUresult cuGraphExecUpdate(CUgraphExec exec_handle, CUgraph graph_handle, CUgraphExecUpdateResultInfo* info) {
  EMU_ENTER(true);
  GraphExec* exec = find(st().execs, from_handle(exec_handle));
  const Graph* graph = find(st().graphs, from_handle(graph_handle));
  if (!exec || !graph) return api::CUDA_ERROR_INVALID_HANDLE;
  if (!info) return api::CUDA_ERROR_INVALID_VALUE;
  info->errorNode = nullptr;
  info->errorFromNode = nullptr;
  info->result = graph->context != exec->context ? 1 : update_mismatch(*exec->ops, graph->ops);
  if (info->result != 0) return api::CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
  exec->ops = std::make_shared<const std::vector<Op>>(graph->ops);
  ++stats(exec->device).graph_updates;
  return api::CUDA_SUCCESS;
}

CUresult cuGraphLaunch(CUgraphExec exec_handle, CUstream handle) {
  EMU_ENTER(true);
  const GraphExec* exec = find(st().execs, from_handle(exec_handle));
  if (!exec) return api::CUDA_ERROR_INVALID_HANDLE;
  Stream* stream;
  if (const CUresult r = resolve_stream(handle, stream)) return r;
  if (stream->context != exec->context) return api::CUDA_ERROR_INVALID_CONTEXT;
  if (const CUresult r = st().contexts.at(stream->context).sticky) return r;
  for (const Op& op : *exec->ops)  // its kernels' modules must still be loaded
    if (const auto* launch = std::get_if<Launch>(&op.what); launch && !find(st().functions, launch->function))
      return api::CUDA_ERROR_INVALID_HANDLE;
  if (stream->capture) {  // launched into a capture: its ops become part of the captured graph
    if (stream->capture->invalidated) return api::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    note_action(*stream->capture, *stream);
    stream->capture->ops.insert(stream->capture->ops.end(), exec->ops->begin(), exec->ops->end());
    return api::CUDA_SUCCESS;
  }
  return enqueue(*stream, Op{RunGraph{exec->ops}});
}

CUresult cuGraphExecDestroy(CUgraphExec handle) {
  EMU_ENTER(true);
  const GraphExec* exec = find(st().execs, from_handle(handle));
  if (!exec) return api::CUDA_ERROR_INVALID_HANDLE;
  --stats(exec->device).graph_execs;
  st().execs.erase(from_handle(handle));
  return api::CUDA_SUCCESS;
}

CUresult cuGraphDestroy(CUgraph handle) {
  EMU_ENTER(true);
  const Graph* graph = find(st().graphs, from_handle(handle));
  if (!graph) return api::CUDA_ERROR_INVALID_HANDLE;
  --stats(graph->device).graphs;
  st().graphs.erase(from_handle(handle));
  return api::CUDA_SUCCESS;
}

// =======================================================================================
// The test-facing API (emulated_driver.h)

EMU_API int gexec_emu_register_kernel(const char* name, int num_params, const unsigned* param_sizes,
                                      gexec_emu_kernel_fn fn) {
  const std::lock_guard lock(st().mutex);
  if (!name || !*name || num_params < 0 || (num_params > 0 && !param_sizes) || !fn) return api::CUDA_ERROR_INVALID_VALUE;
  std::vector<unsigned> sizes(param_sizes, param_sizes + num_params);
  if (std::find(sizes.begin(), sizes.end(), 0u) != sizes.end()) return api::CUDA_ERROR_INVALID_VALUE;
  st().kernels[name] = std::make_shared<const Kernel>(Kernel{name, std::move(sizes), fn});
  return api::CUDA_SUCCESS;
}

EMU_API void* gexec_emu_host_pointer(unsigned long long device_ptr, unsigned long long bytes) {
  const std::lock_guard lock(st().mutex);
  if (owner(device_ptr, bytes)) return host_address(device_ptr);
  if (st().in_kernel) st().faulted = true;
  return nullptr;
}

EMU_API void gexec_emu_set_device_count(int n) {
  const std::lock_guard lock(st().mutex);
  st().device_count = std::clamp(n, 0, max_devices);
  st().device_count_set = true;
}

EMU_API void gexec_emu_fail(const char* function, int result, int skip) {
  const std::lock_guard lock(st().mutex);
  if (function) st().injections.push_back({function, result, std::max(skip, 0)});
}

EMU_API void gexec_emu_reset(void) {
  const std::lock_guard lock(st().mutex);
  State& state = st();
  state.injections.clear();
  for (auto& [id, context] : state.contexts) context.sticky = context.pending = api::CUDA_SUCCESS;
  for (auto captures = state.captures; const auto& capture : captures) end_capture(capture);
  state.trace.clear();
}

EMU_API void gexec_emu_get_stats(int device, gexec_emu_stats* out) {
  const std::lock_guard lock(st().mutex);
  if (!out) return;
  *out = device >= 0 && device < max_devices ? stats(device) : gexec_emu_stats{};
}

EMU_API void gexec_emu_trace_enable(int on) {
  const std::lock_guard lock(st().mutex);
  st().tracing = on != 0;
}

EMU_API unsigned long gexec_emu_trace(char* buf, unsigned long size) {
  const std::lock_guard lock(st().mutex);
  const std::string& trace = st().trace;
  if (buf && size > 0) {
    const std::size_t n = std::min<std::size_t>(trace.size(), size - 1);
    std::memcpy(buf, trace.data(), n);
    buf[n] = '\0';
  }
  return trace.size();
}

EMU_API void gexec_emu_trace_clear(void) {
  const std::lock_guard lock(st().mutex);
  st().trace.clear();
}

// =======================================================================================
// The versioned names libcuda exports, and cuGetProcAddress

#define EMU_ALIAS(versioned, base) EMU_API decltype(base) versioned __attribute__((alias(#base)));
EMU_ALIAS(cuMemAlloc_v2, cuMemAlloc)
EMU_ALIAS(cuMemFree_v2, cuMemFree)
EMU_ALIAS(cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync)
EMU_ALIAS(cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync)
EMU_ALIAS(cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync)
EMU_ALIAS(cuStreamDestroy_v2, cuStreamDestroy)
EMU_ALIAS(cuEventDestroy_v2, cuEventDestroy)
EMU_ALIAS(cuDevicePrimaryCtxRelease_v2, cuDevicePrimaryCtxRelease)
EMU_ALIAS(cuStreamBeginCapture_v2, cuStreamBeginCapture)
EMU_ALIAS(cuGraphExecUpdate_v2, cuGraphExecUpdate)
#undef EMU_ALIAS

namespace {
struct ProcEntry {
  const char* name;
  void* fn;
};
// The static_cast checks each function against gexec's function type.
#define EMU_PROC(name, ...) {#name, reinterpret_cast<void*>(static_cast<api::name##_fn>(&name))},
const ProcEntry procs[] = {
    GEXEC_CUDA_DRIVER_FUNCTIONS(EMU_PROC)  //
    {"cuGetProcAddress", reinterpret_cast<void*>(static_cast<api::cuGetProcAddress_v2_fn>(&cuGetProcAddress_v2))},
};
#undef EMU_PROC
}  // namespace

CUresult cuGetProcAddress_v2(const char* symbol, void** fn, int /*cuda_version*/, unsigned long long /*flags*/,
                             int* status) {
  constexpr int symbol_found = 0, symbol_not_found = 1;  // CUdriverProcAddressQueryResult
  if (!symbol || !fn) return api::CUDA_ERROR_INVALID_VALUE;
  for (const ProcEntry& entry : procs)
    if (std::strcmp(entry.name, symbol) == 0) {
      *fn = entry.fn;
      if (status) *status = symbol_found;
      return api::CUDA_SUCCESS;
    }
  *fn = nullptr;
  if (status) *status = symbol_not_found;
  return api::CUDA_ERROR_NOT_FOUND;
}

CUresult cuGetProcAddress(const char* symbol, void** fn, int cuda_version, unsigned long long flags) {
  return cuGetProcAddress_v2(symbol, fn, cuda_version, flags, nullptr);
}
