#pragma once
// Overflow-checked shape arithmetic shared by the graph, parameter and tensor code.

#include "../config.hpp"

#include <dlpack/dlpack.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>

#include "../dtype.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

/// Element count of a shape; nullopt if a dimension is negative or the product
/// does not fit in int64 (so it also fits in size_t and in a DLTensor's arithmetic).
inline std::optional<std::uint64_t> checked_numel(std::span<const std::int64_t> shape) noexcept {
  std::uint64_t n = 1;
  constexpr auto max = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  for (std::int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (d != 0 && n > max / static_cast<std::uint64_t>(d)) return std::nullopt;
    n *= static_cast<std::uint64_t>(d);
  }
  return n;
}

/// Bytes a compact tensor of this shape and dtype occupies; nullopt on overflow.
inline std::optional<std::uint64_t> checked_byte_size(std::span<const std::int64_t> shape,
                                                      DLDataType dtype) noexcept {
  auto n = checked_numel(shape);
  if (!n) return std::nullopt;
  std::uint64_t per = element_bytes(dtype);
  constexpr auto max = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  if (per != 0 && *n > max / per) return std::nullopt;
  return *n * per;
}

/// "[2, 3, 4]"
inline std::string shape_to_string(std::span<const std::int64_t> shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

/// Rounds n up to a multiple of `alignment` (a power of two).
constexpr std::uint64_t align_up(std::uint64_t n, std::uint64_t alignment) noexcept {
  return (n + alignment - 1) & ~(alignment - 1);
}

}  // namespace detail
GEXEC_NAMESPACE_END
