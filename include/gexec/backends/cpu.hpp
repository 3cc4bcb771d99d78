#pragma once
// The host backend: 64-byte aligned memory and memcpy.

#include "../config.hpp"

#include <cstring>
#include "../detail/aligned_memory.hpp"

#include "../detail/shape.hpp"
#include "../device.hpp"
#include "../error.hpp"
#include "../ndarray.hpp"
#include "backend.hpp"

GEXEC_NAMESPACE_BEGIN

struct cpu_backend {
  static constexpr int device_type = kDLCPU;

  void* allocate(DLDevice, std::uint64_t bytes) { return detail::allocate_aligned(bytes); }
  void free(DLDevice, void* p) { detail::free_aligned(p); }
  void copy(const DLTensor& src, DLTensor& dst) {
    if (src.device.device_type != kDLCPU || dst.device.device_type != kDLCPU)
      throw error(errc::device_mismatch, "cpu backend cannot copy from " + to_string(src.device) + " to " + to_string(dst.device));
    std::uint64_t bytes = detail::checked_byte_size({src.shape, static_cast<std::size_t>(src.ndim)}, src.dtype).value_or(0);
    if (bytes) std::memmove(static_cast<char*>(dst.data) + dst.byte_offset, static_cast<const char*>(src.data) + src.byte_offset, bytes);
  }
  void synchronize(DLDevice) {}
};
static_assert(device_backend<cpu_backend>);

GEXEC_NAMESPACE_END
