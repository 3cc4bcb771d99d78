#pragma once
// null_backend: the skeleton of a device backend, written to be copied when gexec gains
// a device (Vulkan, OpenCL, ...). It works: it serves a device type of its own,
// null_device_type, with host memory, doing each piece of work at once, so a graph
// placed on it runs (with kernels that read host memory: C++ kernels in a registry) and
// it passes the backend conformance suite (tests/test_backend_conformance.cpp).
//
//   using with_null = gexec::backends<gexec::cpu_backend, gexec::null_backend>;
//   gexec::basic_model<with_null, gexec::pool_allocator, gexec::registry> m(
//       graph, kernels, {}, {.devices = {gexec::cpu(), gexec::null_device()}});
//
// Adding a device by copying this file:
// 1. Give the device a folder of its own beside cuda/ (include/gexec/vulkan/backend.hpp,
//    with the code that loads its driver at first use, so that a program naming the
//    backend still builds and runs on a machine without the device), and name the folder
//    in the layering table (tests/layering/layering.cpp, the wings' layer).
// 2. Set device_type to the DLDeviceType TVM writes in the graph's device_index for it
//    (kDLVulkan, kDLOpenCL, ...): the executor sends every entry of that type here.
// 3. Replace each function's body below; the comment above it says what the executor
//    relies on. Keep noexcept where it is: those run in destructors.
// 4. Kernels: TVM stores a device's compiled kernels in the library's device module blob
//    under a type key ("vulkan", "opencl"); the wing registers a reader for that key
//    (see how <gexec/cuda.hpp> registers "cuda"), and launchers reach the device through
//    launch_services() (optional, see cuda/backend.hpp).
// 5. Register the backend: the one line is its name in the list of
//    <gexec/all_backends.hpp> (with its header included there), which gexec-run and the
//    Triton backend take their devices from:
//      using all_backends = backends<cpu_backend, cuda_backend, vulkan_backend>;
//    Then add it to the conformance suite: one subject saying how to make it, which
//    kernels run on it and which cases it does not support, and why (see
//    tests/test_backend_conformance.cpp; a wing with its own test folder registers there,
//    as tests/cuda/test_backend_conformance_cuda.cpp does).
//
// null_backend itself is not in all_backends: programs would then accept graphs placed
// on a device that is the host in disguise. A program that wants it names it in its own
// list, as above (backends<cpu_backend, null_backend>), or adds it to all_backends with
// that one line.

#include "../config.hpp"

#include <dlpack/dlpack.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../detail/aligned_memory.hpp"
#include "../detail/shape.hpp"
#include "../device.hpp"
#include "../error.hpp"
#include "backend.hpp"

GEXEC_NAMESPACE_BEGIN

/// The device type null_backend serves: 6, a value DLPack leaves unassigned (between
/// kDLOpenCL and kDLVulkan; TVM once used it for SDAccel) and that DLPack 0.6's
/// DLDeviceType, whose values must stay below 16, can hold. A copied backend uses its
/// device's DLDeviceType instead.
inline constexpr int null_device_type = 6;
constexpr DLDevice null_device(int id = 0) noexcept { return {static_cast<DLDeviceType>(null_device_type), id}; }

class null_backend {
 public:
  static constexpr int device_type = null_device_type;

  /// An in-order queue of work on one device. A device keeps its driver's queue handle
  /// here; the null device runs work as it is enqueued and only counts it.
  struct stream_type {
    int device_id = 0;
    std::uint64_t enqueued = 0;
  };
  /// A mark in a stream's work. A device keeps its driver's event or timeline value here.
  struct event_type {
    int device_id = 0;
    std::uint64_t at = 0;  ///< how much of the stream's work it marks
    bool recorded = false;
  };

  // ---- memory ---------------------------------------------------------------------

  /// Memory for `bytes` on `d`, aligned to at least 64 bytes (TVM's kAllocAlignment:
  /// compiled kernels assume it), never null, also for 0 bytes. Throws gexec::error:
  /// errc::out_of_memory when the device has no room, errc::device_mismatch for a device
  /// this backend does not serve.
  void* allocate(DLDevice d, std::uint64_t bytes) {
    check(d, "allocate");
    return detail::allocate_aligned(bytes);
  }
  /// Gives back what allocate returned; null is a no-op. Never throws, even when the
  /// device has failed (then it gives back what it still can).
  void free(DLDevice, void* p) noexcept { detail::free_aligned(p); }

  // ---- streams and copies ---------------------------------------------------------

  /// A new queue on `d`. The executor makes one per device it runs on (more under the
  /// parallel_streams policy) and destroys it when it goes.
  stream_type create_stream(DLDevice d) {
    check(d, "create_stream");
    return {d.device_id, 0};
  }
  /// Waits for the stream's work, then releases it. Never throws.
  void destroy_stream(DLDevice, stream_type& s) noexcept { s = {}; }

  /// Enqueues a copy between tensors of equal byte size: host to device, device to host,
  /// or within this device type (also between two ids of it). The source may be read and
  /// the destination written any time until synchronize(s) returns; a device that must
  /// read host memory at once (pageable memory) does so here. Throws gexec::error:
  /// errc::device_mismatch for a tensor on another device type, errc::shape_mismatch when
  /// the sizes differ. Zero bytes copy nothing (the pointers may then be null).
  void copy_async(const DLTensor& from, DLTensor& to, stream_type& s) {
    const bool src_here = from.device.device_type == device_type, dst_here = to.device.device_type == device_type;
    if ((!src_here && from.device.device_type != kDLCPU) || (!dst_here && to.device.device_type != kDLCPU) || (!src_here && !dst_here))
      throw error(errc::device_mismatch, "null backend cannot copy from " + to_string(from.device) + " to " + to_string(to.device));
    const auto bytes = detail::checked_byte_size({from.shape, static_cast<std::size_t>(from.ndim)}, from.dtype).value_or(0);
    const auto room = detail::checked_byte_size({to.shape, static_cast<std::size_t>(to.ndim)}, to.dtype).value_or(0);
    if (bytes != room)
      throw error(errc::shape_mismatch, "null backend: copy of " + std::to_string(bytes) + " bytes into " + std::to_string(room));
    if (bytes == 0) return;
    std::memmove(static_cast<char*>(to.data) + to.byte_offset, static_cast<const char*>(from.data) + from.byte_offset, bytes);
    ++s.enqueued;
  }
  /// Returns when everything enqueued on `s` has finished and its writes are visible to
  /// the host. A failure of work done asynchronously surfaces here, as gexec::error.
  void synchronize(stream_type&) {}

  // ---- events ---------------------------------------------------------------------

  event_type create_event(DLDevice d) {
    check(d, "create_event");
    return {d.device_id, 0, false};
  }
  void destroy_event(DLDevice, event_type& e) noexcept { e = {}; }
  /// Marks what `s` has enqueued so far.
  void record(event_type& e, stream_type& s) {
    e.at = s.enqueued;
    e.recorded = true;
  }
  /// Work enqueued on `s` after this runs after the work `e` marks (possibly on another
  /// stream). Here everything has already run. What waiting for an event never recorded
  /// means is the device's to say (CUDA: nothing to wait for; the emulated test device
  /// throws); the executor records every event before it waits on it.
  void wait(stream_type&, event_type&) {}

  // ---- what compiled kernels and TVM's runtime ask for ----------------------------

  /// Scratch for a kernel on `d` (TVMBackendAllocWorkspace with this device type), used
  /// by work enqueued on `*s` (null: a kernel called outside an executor's run). A device
  /// may hand a freed block out again only to later work on the same stream, which runs
  /// after the work that used it; the steady state should allocate nothing. Throws
  /// gexec::error as allocate does.
  void* alloc_workspace(DLDevice d, std::uint64_t bytes, stream_type*) {
    void* p = allocate(d, bytes);
    try {
      std::lock_guard g(state_->mu);
      state_->workspaces.push_back(p);
    } catch (...) {
      free(d, p);
      throw;
    }
    return p;
  }
  /// Takes back a block alloc_workspace gave: 0, or -1 for memory it did not give out
  /// (TVMBackendFreeWorkspace reports that to the kernel). Never throws.
  int free_workspace(DLDevice d, void* p, stream_type*) noexcept {
    {
      std::lock_guard g(state_->mu);
      auto& live = state_->workspaces;
      auto it = std::find(live.begin(), live.end(), p);
      if (p == nullptr || it == live.end()) return -1;
      *it = live.back();
      live.pop_back();
    }
    free(d, p);
    return 0;
  }
  /// Makes `d` the calling thread's current device (TVM's __tvm_set_device); kernels call
  /// it before they launch.
  void set_device(DLDevice d) { check(d, "set_device"); }

  /// Optional: zeroes fresh executor storage, done on return. Without it the executor
  /// copies zeroed host memory in.
  void fill_zero(DLDevice d, void* p, std::uint64_t bytes) {
    check(d, "fill_zero");
    if (bytes) std::memset(p, 0, static_cast<std::size_t>(bytes));
  }

  // Optional too: `void* native_handle(stream_type&) noexcept`, the driver's own queue for
  // code that launches on it (see cuda/backend.hpp), and `const void* launch_services()
  // const noexcept`, what the wing's kernel launchers need (its loaded driver).

 private:
  /// Every entry point checks its device: a tensor of another device type reaching a
  /// backend is a bug upstream, reported rather than served.
  static void check(DLDevice d, const char* what) {
    if (d.device_type != device_type || d.device_id < 0)
      throw error(errc::device_mismatch, std::string("null backend ") + what + ": " + to_string(d) + " is not its device");
  }
  /// Shared by copies of the backend (a model and its executors hold copies).
  struct state {
    std::mutex mu;
    std::vector<void*> workspaces;  ///< handed out by alloc_workspace, not yet freed
  };
  std::shared_ptr<state> state_ = std::make_shared<state>();
};
static_assert(device_backend<null_backend>);

GEXEC_NAMESPACE_END
