#pragma once
// The host backend: 64-byte aligned memory (large buffers in mappings of their own,
// given back to the system when freed: allocate_long_lived), memcpy, and everything
// else trivially.
// The host has no queue, so a copy is complete when copy_async returns, events are
// empty and synchronising waits for nothing. Kernel workspace comes from a per-thread
// stack of reusable blocks, so that the steady state allocates nothing.

#include "../config.hpp"

#include <cstring>

#include "../detail/aligned_memory.hpp"
#include "../detail/shape.hpp"
#include "../detail/workspace.hpp"
#include "../device.hpp"
#include "../error.hpp"
#include "backend.hpp"

GEXEC_NAMESPACE_BEGIN

struct cpu_backend {
  static constexpr int device_type = kDLCPU;
  struct stream_type {};
  struct event_type {};

  // An executor's storage and the copies of a model's weights: as long-lived as they.
  void* allocate(DLDevice, std::uint64_t bytes) { return detail::allocate_long_lived(bytes); }
  /// What allocate() returns reads as zeros (a fresh mapping's pages, or zeroed heap):
  /// an executor need not write zeros over it, nor touch pages no kernel writes.
  static constexpr bool allocates_zeroed = true;
  void free(DLDevice, void* p) noexcept { detail::free_long_lived(p); }

  stream_type create_stream(DLDevice) noexcept { return {}; }
  void destroy_stream(DLDevice, stream_type&) noexcept {}
  void copy_async(const DLTensor& from, DLTensor& to, stream_type&) { copy(from, to); }
  void synchronize(stream_type&) noexcept {}

  event_type create_event(DLDevice) noexcept { return {}; }
  void destroy_event(DLDevice, event_type&) noexcept {}
  void record(event_type&, stream_type&) noexcept {}
  void wait(stream_type&, event_type&) noexcept {}

  void* alloc_workspace(DLDevice, std::uint64_t bytes, stream_type*) { return detail::workspace_arena::this_thread().allocate(bytes); }
  int free_workspace(DLDevice, void* p, stream_type*) noexcept { return detail::workspace_arena::this_thread().free(p); }
  void set_device(DLDevice) noexcept {}

  /// A synchronous copy between host tensors of equal size.
  static void copy(const DLTensor& from, DLTensor& to) {
    if (from.device.device_type != kDLCPU || to.device.device_type != kDLCPU)
      throw error(errc::device_mismatch, "cpu backend cannot copy from " + to_string(from.device) + " to " + to_string(to.device));
    std::uint64_t bytes = detail::checked_byte_size({from.shape, static_cast<std::size_t>(from.ndim)}, from.dtype).value_or(0);
    if (bytes) std::memmove(static_cast<char*>(to.data) + to.byte_offset, static_cast<const char*>(from.data) + from.byte_offset, bytes);
  }
};
static_assert(device_backend<cpu_backend>);

GEXEC_NAMESPACE_END
