#pragma once
// 64-byte aligned host memory, with failures (an impossible size, an exhausted heap)
// reported as gexec::error instead of std::bad_alloc.

#include "../config.hpp"

#include <cstddef>
#include <cstdint>
#include <new>
#include <string>

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

}  // namespace detail
GEXEC_NAMESPACE_END
