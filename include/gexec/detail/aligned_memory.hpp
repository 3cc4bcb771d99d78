#pragma once
// 64-byte aligned host memory, with failures (an impossible size, an exhausted heap)
// reported as gexec::error instead of std::bad_alloc: from the heap (allocate_aligned),
// or, for buffers that live as long as a model or an executor, from a page mapping of
// their own where they are large (allocate_long_lived).

#include "../config.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <span>
#include <string>

#include <sys/mman.h>
#include <unistd.h>

#include "../error.hpp"
#include "shape.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

inline constexpr std::size_t host_alignment = 64;

/// At least one alignment unit, so that the pointer is never null.
inline void* allocate_aligned(std::uint64_t bytes) {
  const std::uint64_t n = align_up(bytes == 0 ? 1 : bytes, host_alignment);
  void* p = n >= bytes && n <= static_cast<std::uint64_t>(PTRDIFF_MAX)
                ? ::operator new(static_cast<std::size_t>(n), std::align_val_t{host_alignment}, std::nothrow)
                : nullptr;
  if (!p) throw error(errc::out_of_memory, "cannot allocate " + std::to_string(bytes) + " bytes of host memory");
  return p;
}

inline void free_aligned(void* p) noexcept { ::operator delete(p, std::align_val_t{host_alignment}); }

/// From this size on, allocate_long_lived maps pages of its own: glibc's initial
/// threshold for doing the same (M_MMAP_THRESHOLD), held fixed. Under AddressSanitizer
/// never: the heap's bounds are checked, a mapping's are not.
#if defined(__SANITIZE_ADDRESS__)
#define GEXEC_DETAIL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GEXEC_DETAIL_ASAN 1
#endif
#endif
#if defined(GEXEC_DETAIL_ASAN)
inline constexpr std::uint64_t long_lived_mapped_bytes = UINT64_MAX;
#undef GEXEC_DETAIL_ASAN
#else
inline constexpr std::uint64_t long_lived_mapped_bytes = std::uint64_t{128} << 10;
#endif

/// 64-byte aligned host memory for a buffer that lives as long as a model or an executor
/// (weights, activations), reading as zeros: from long_lived_mapped_bytes on, a private
/// anonymous mapping of its own (zero pages the system fills on first touch, never
/// written here), which free_long_lived gives back to the system whole; smaller ones
/// from the heap, zeroed unless `zeroed` is false (a kernel's workspace, written before it
/// is read: its pages are touched only where a kernel uses them). Free with
/// free_long_lived only.
///
/// Why not the heap for all: glibc maps a large block only while its threshold is low,
/// and raises the threshold to the size of each mapped block freed (up to 32 MiB). After
/// the first model is unloaded, the next one's weights and activations come from the
/// arena of the thread that loads it, and what is freed at the top of a thread's arena
/// stays resident: malloc_trim returns only free blocks below the top there. A Triton
/// server, whose load/unload requests run on several threads, grew by about a megabyte
/// per loading thread over 20 load/unload cycles of one model.
inline void* allocate_long_lived(std::uint64_t bytes, bool zeroed = true) {
  // A header of one alignment unit before the buffer says how it was had: the length of
  // its mapping, or 0 for the heap.
  const std::uint64_t n = align_up(bytes == 0 ? 1 : bytes, host_alignment);
  const long page_size = ::sysconf(_SC_PAGESIZE);
  const std::uint64_t page = page_size > 0 ? static_cast<std::uint64_t>(page_size) : 4096;
  void* base = nullptr;
  std::uint64_t mapped = 0;
  if (n >= bytes && n <= static_cast<std::uint64_t>(PTRDIFF_MAX) - host_alignment - page) {
    if (n >= long_lived_mapped_bytes) {
      mapped = align_up(n + host_alignment, page);
      base = ::mmap(nullptr, static_cast<std::size_t>(mapped), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (base == MAP_FAILED) base = nullptr;
    } else {
      base = ::operator new(static_cast<std::size_t>(n + host_alignment), std::align_val_t{host_alignment}, std::nothrow);
      if (base && zeroed) std::memset(base, 0, static_cast<std::size_t>(n + host_alignment));
    }
  }
  if (!base) throw error(errc::out_of_memory, "cannot allocate " + std::to_string(bytes) + " bytes of host memory");
  std::memcpy(base, &mapped, sizeof mapped);
  return static_cast<std::byte*>(base) + host_alignment;
}

inline void free_long_lived(void* p) noexcept {
  if (!p) return;
  std::byte* base = static_cast<std::byte*>(p) - host_alignment;
  std::uint64_t mapped = 0;
  std::memcpy(&mapped, base, sizeof mapped);
  if (mapped) ::munmap(base, static_cast<std::size_t>(mapped));
  else ::operator delete(base, std::align_val_t{host_alignment});
}

/// Gives back the whole pages inside `bytes` (madvise MADV_DONTNEED): for file-backed
/// memory nothing writes (a loaded library's data, a private mapping of a parameter file
/// never written), whose bytes were copied out and are not read again. They read back
/// from the file if touched; anonymous memory would read back as zeros.
inline void release_pages(std::span<const std::byte> bytes) noexcept {
  const long page = sysconf(_SC_PAGESIZE);
  if (page <= 0 || bytes.empty()) return;
  const auto p = static_cast<std::uintptr_t>(page);
  const std::uintptr_t begin = (reinterpret_cast<std::uintptr_t>(bytes.data()) + p - 1) / p * p;
  const std::uintptr_t end = (reinterpret_cast<std::uintptr_t>(bytes.data()) + bytes.size()) / p * p;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

}  // namespace detail
GEXEC_NAMESPACE_END
