#pragma once
// Allocator policies: how an executor obtains the buffers of the storage ids on one
// device. Each buffer comes back as a shared_ptr so that views (get_output,
// share_params) keep it alive after the executor is gone.

#include "../config.hpp"

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "../backends/backend.hpp"
#include "../detail/shape.hpp"
#include "../ndarray.hpp"

GEXEC_NAMESPACE_BEGIN

/// One arena per device holding every storage id's buffer at a 64-byte aligned offset:
/// one allocation per executor and device, and neighbouring buffers in one region.
struct pool_allocator {
  /// Every buffer is part of memory just taken from backend->allocate, never reused:
  /// it reads as zeros where the backend's allocate says so (allocates_zeroed).
  static constexpr bool passes_backend_memory = true;
  template <device_backend B>
  std::vector<std::shared_ptr<void>> allocate(std::shared_ptr<B> backend, DLDevice device, std::span<const std::uint64_t> sizes) {
    std::vector<std::uint64_t> offsets(sizes.size());
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      offsets[i] = total;
      // Offsets become pointers: the arena must neither wrap nor outgrow an address space.
      const std::uint64_t bytes = detail::align_up(sizes[i] == 0 ? 1 : sizes[i], kernel_alignment);
      if (bytes < sizes[i] || bytes > static_cast<std::uint64_t>(PTRDIFF_MAX) - total)
        throw error(errc::out_of_memory, "pool_allocator: the storage on " + to_string(device) + " exceeds an address space");
      total += bytes;
    }
    void* base = backend->allocate(device, total);
    std::shared_ptr<void> arena(base, [backend, device](void* p) { backend->free(device, p); });
    std::vector<std::shared_ptr<void>> buffers;
    buffers.reserve(sizes.size());
    for (std::uint64_t off : offsets) buffers.emplace_back(arena, static_cast<char*>(base) + off);
    return buffers;
  }
};

/// One allocation per storage id, as TVM's graph executor does.
struct buffer_allocator {
  /// As pool_allocator's: the backend's fresh memory, never reused.
  static constexpr bool passes_backend_memory = true;
  template <device_backend B>
  std::vector<std::shared_ptr<void>> allocate(std::shared_ptr<B> backend, DLDevice device, std::span<const std::uint64_t> sizes) {
    std::vector<std::shared_ptr<void>> buffers;
    buffers.reserve(sizes.size());
    for (std::uint64_t size : sizes)
      buffers.emplace_back(backend->allocate(device, size), [backend, device](void* p) { backend->free(device, p); });
    return buffers;
  }
};

GEXEC_NAMESPACE_END
