#pragma once
// The .safetensors format (Hugging Face's): weights kept apart from code, as many
// deployments keep them, read and written beside TVM's parameter blob (params.hpp, whose
// load_param_dict and load_param_dict_file tell the two apart by their first bytes).
//
//   [u64 little-endian N][N bytes of JSON header][data]
//   header: {"__metadata__": {str: str}?, "<name>": {"dtype": "F32", "shape": [2, 3],
//            "data_offsets": [begin, end]}, ...}   offsets relative to the data's start
//
// Reading checks what the format promises: a header length inside the file, a JSON object
// of known keys, dtypes gexec stores, offsets inside the data that agree with the shape,
// and data that the tensors cover exactly once (no overlaps, no bytes belonging to no
// tensor). Every refusal is errc::invalid_params naming the file offset at fault. The
// tensors come in the header's order. Writing puts the header's keys in the dict's order
// and the data largest elements first, after a header padded with spaces to a multiple of
// 8 bytes, so that every tensor's data is aligned for its elements in the file and a
// mapped file (load_mode::mmap) serves views without a copy. The header's JSON is read
// in safetensors_impl.hpp by gexec's own JSON reader, no Boost.JSON (compiled into
// gexec::compiled in that mode).

#include "config.hpp"

#include <dlpack/dlpack.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "detail/byte_io.hpp"
#include "detail/json_path.hpp"
#include "detail/shape.hpp"
#include "dtype.hpp"
#include "error.hpp"
#include "ndarray.hpp"

GEXEC_NAMESPACE_BEGIN

/// The longest JSON header read (the format's own limit): a longer one is refused before
/// it is read.
inline constexpr std::uint64_t safetensors_max_header = std::uint64_t{100} << 20;

namespace detail {

struct safetensors_dtype {
  std::string_view name;
  DLDataType dtype;
};
inline constexpr safetensors_dtype safetensors_dtypes[] = {
    {"F64", {kDLFloat, 64, 1}},   {"F32", {kDLFloat, 32, 1}},   {"F16", {kDLFloat, 16, 1}},   {"BF16", {kDLBfloat, 16, 1}},
    {"I64", {kDLInt, 64, 1}},     {"I32", {kDLInt, 32, 1}},     {"I16", {kDLInt, 16, 1}},     {"I8", {kDLInt, 8, 1}},
    {"U64", {kDLUInt, 64, 1}},    {"U32", {kDLUInt, 32, 1}},    {"U16", {kDLUInt, 16, 1}},    {"U8", {kDLUInt, 8, 1}},
    {"BOOL", {kDLUInt, 1, 1}},    {"F8_E4M3", {tvm_float8_e4m3_code, 8, 1}}, {"F8_E5M2", {tvm_float8_e5m2_code, 8, 1}},
};

inline std::optional<DLDataType> safetensors_dtype_of(std::string_view name) noexcept {
  for (const auto& d : safetensors_dtypes)
    if (d.name == name) return d.dtype;
  return std::nullopt;
}
inline std::optional<std::string_view> safetensors_name_of(DLDataType t) noexcept {
  for (const auto& d : safetensors_dtypes)
    if (same_dtype(d.dtype, t)) return d.name;
  return std::nullopt;
}

/// One tensor of a checked header: where its data lies in the file.
struct safetensors_entry {
  std::string name;
  DLDataType dtype{};
  std::vector<std::int64_t> shape;
  std::uint64_t offset = 0;  ///< of its data, from the file's start
  std::uint64_t bytes = 0;
};

/// Whether a blob or file starting with these bytes is a .safetensors file rather than
/// TVM's blob: its JSON header opens at byte 8, where TVM's blob has a reserved zero.
inline bool looks_like_safetensors(std::span<const std::byte> first) noexcept {
  return first.size() >= 9 && static_cast<char>(first[8]) == '{';
}

[[noreturn]] inline void safetensors_fail(const std::string& what, std::uint64_t offset, const std::string& message) {
  throw error(errc::invalid_params, what + ": at byte " + std::to_string(offset) + ": " + message);
}

/// The header length from a file's first 8 bytes, checked against its size.
inline std::uint64_t safetensors_header_length(std::span<const std::byte> first8, std::uint64_t file_size, const std::string& what) {
  if (file_size < 8 || first8.size() < 8)
    safetensors_fail(what, 0, "truncated: " + std::to_string(file_size) + " bytes, fewer than the 8 of the header length");
  std::uint64_t n = 0;
  std::memcpy(&n, first8.data(), 8);
  if (n > file_size - 8)
    safetensors_fail(what, 0, "header length " + std::to_string(n) + " runs past the end of the file (" + std::to_string(file_size) + " bytes)");
  if (n > safetensors_max_header)
    safetensors_fail(what, 0, "header length " + std::to_string(n) + " exceeds the format's limit of " + std::to_string(safetensors_max_header) + " bytes");
  if (n < 2) safetensors_fail(what, 0, "header length " + std::to_string(n) + " is too short for a JSON object");
  return n;
}

/// Every byte of the data (`data_size` bytes from `data_start`) belongs to exactly one tensor.
inline void check_safetensors_coverage(const std::vector<safetensors_entry>& tensors, std::uint64_t data_start, std::uint64_t data_size,
                                       const std::string& what) {
  std::vector<const safetensors_entry*> sorted;
  for (const auto& t : tensors) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->offset != b->offset ? a->offset < b->offset : a->bytes < b->bytes; });
  std::uint64_t covered = data_start;
  const safetensors_entry* last = nullptr;
  auto span_of = [data_start](const safetensors_entry& t) {
    return "data bytes " + std::to_string(t.offset - data_start) + " to " + std::to_string(t.offset - data_start + t.bytes);
  };
  for (const auto* t : sorted) {
    if (t->offset < covered)
      safetensors_fail(what, t->offset, "tensor \"" + t->name + "\" (" + span_of(*t) + ") overlaps tensor \"" + last->name + "\" (" + span_of(*last) + ")");
    if (t->offset > covered)
      safetensors_fail(what, covered, "data bytes " + std::to_string(covered - data_start) + " to " + std::to_string(t->offset - data_start) +
                                          " belong to no tensor");
    if (t->bytes > 0 || last == nullptr) last = t;
    covered = t->offset + t->bytes;
  }
  if (covered != data_start + data_size)
    safetensors_fail(what, covered, "data bytes " + std::to_string(covered - data_start) + " to " + std::to_string(data_size) + " belong to no tensor");
}

/// The tensors of a header (the `header.size()` bytes after the length, in a file of
/// `file_size` bytes), in its order, checked: see the top of this header. Defined in
/// safetensors_impl.hpp.
GEXEC_DECL std::vector<safetensors_entry> parse_safetensors_header(std::string_view header, std::uint64_t file_size, const std::string& what);


/// Host storage for one tensor; errc::out_of_memory naming it when there is none.
inline ndarray safetensors_storage(const safetensors_entry& e, const std::string& what) {
  try {
    return ndarray::empty(e.shape, e.dtype);
  } catch (const std::bad_alloc&) {
    throw error(errc::out_of_memory, what + ": cannot allocate " + std::to_string(e.bytes) + " bytes for tensor \"" + e.name + "\"");
  }
}

/// The tensors of a .safetensors file held in memory, in the header's order: copies, or
/// with `keepalive` (which owns `blob`) views where the data is aligned for its elements.
inline std::vector<std::pair<std::string, ndarray>> read_safetensors(std::span<const std::byte> blob, const std::string& what,
                                                                   const std::shared_ptr<const void>& keepalive = nullptr) {
  const std::uint64_t n = safetensors_header_length(blob.first(std::min<std::size_t>(blob.size(), 8)), blob.size(), what);
  const std::string_view header(reinterpret_cast<const char*>(blob.data()) + 8, static_cast<std::size_t>(n));
  std::vector<std::pair<std::string, ndarray>> out;
  for (safetensors_entry& e : parse_safetensors_header(header, blob.size(), what)) {
    const std::byte* at = blob.data() + e.offset;
    const std::uint64_t natural = std::min<std::uint64_t>(element_bytes(e.dtype), 8);
    if (keepalive && reinterpret_cast<std::uintptr_t>(at) % natural == 0) {
      DLTensor t{const_cast<std::byte*>(at), cpu(), static_cast<std::int32_t>(e.shape.size()), e.dtype, e.shape.data(), nullptr, 0};
      out.emplace_back(e.name, ndarray::view(t, keepalive));
      continue;
    }
    ndarray a = safetensors_storage(e, what);
    if (e.bytes) std::memcpy(a.data(), at, static_cast<std::size_t>(e.bytes));
    out.emplace_back(std::move(e.name), std::move(a));
  }
  return out;
}

/// The tensors of a .safetensors file, read header first (a malformed one is refused after
/// reading it alone), then each tensor straight into its storage.
/// The tensors of a .safetensors file, its header alone read and checked: where each lies.
inline std::vector<safetensors_entry> read_safetensors_index(const regular_file& file) {
  const std::string what = "safetensors " + file.path().string();
  std::byte first[8]{};
  if (file.size() >= 8) file.read_exact(first, 8, 0);
  const std::uint64_t n = safetensors_header_length(first, file.size(), what);
  std::string header(static_cast<std::size_t>(n), '\0');
  file.read_exact(header.data(), n, 8);
  return parse_safetensors_header(header, file.size(), what);
}

inline std::vector<std::pair<std::string, ndarray>> read_safetensors_file(const regular_file& file, progress_sink* progress = nullptr) {
  const std::string what = "safetensors " + file.path().string();
  std::vector<std::pair<std::string, ndarray>> out;
  for (safetensors_entry& e : read_safetensors_index(file)) {
    ndarray a = safetensors_storage(e, what);
    if (e.bytes) file.read_exact(a.data(), e.bytes, e.offset, progress);
    out.emplace_back(std::move(e.name), std::move(a));
  }
  return out;
}

}  // namespace detail

/// A .safetensors file of `tensors` (any range of (name, ndarray) pairs, a param_dict for
/// one): the header's keys in their order, the data largest elements first. Host tensors
/// of the dtypes the format has; errc::invalid_argument naming the tensor otherwise.
template <class Tensors>
std::vector<std::byte> save_safetensors(const Tensors& tensors) {
  struct item {
    const std::string* name;
    const ndarray* value;
    std::string_view dtype;
    std::uint64_t begin = 0;
  };
  std::vector<item> items;
  std::unordered_map<std::string_view, std::size_t> names;  // the first tensor of each name
  for (const auto& [name, a] : tensors) {
    // What the reader refuses is never written: a header is JSON (names in UTF-8, each once)
    // and "__metadata__" is the format's own key.
    if (!detail::is_utf8(name))
      throw error(errc::invalid_argument, "save_safetensors: tensor name \"" + detail::printable(name) +
                                              "\" is not UTF-8, which a .safetensors header (JSON) cannot hold");
    if (name == "__metadata__")
      throw error(errc::invalid_argument, "save_safetensors: a tensor cannot be named \"__metadata__\", the format's key for metadata");
    if (!names.emplace(std::string_view(name), items.size()).second) throw error(errc::invalid_argument, "save_safetensors: two tensors are named \"" + detail::printable(name) + "\"");
    const auto dtype = detail::safetensors_name_of(a.dtype());
    if (!dtype)
      throw error(errc::invalid_argument, "save_safetensors: tensor \"" + name + "\" is " + to_string(a.dtype()) +
                                              ", which the .safetensors format has no dtype for");
    if (a.device().device_type != kDLCPU)
      throw error(errc::invalid_argument, "save_safetensors: tensor \"" + name + "\" is not on the host; copy it there first");
    items.push_back({&name, &a, *dtype});
  }
  std::vector<std::size_t> order(items.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return element_bytes(items[a].value->dtype()) > element_bytes(items[b].value->dtype());
  });
  std::uint64_t data = 0;
  for (std::size_t i : order) {
    items[i].begin = data;
    data += items[i].value->byte_size();
  }
  std::string header = "{";
  for (const item& it : items) {
    if (header.size() > 1) header += ',';
    header += detail::json_quoted(*it.name);
    header += ":{\"dtype\":\"" + std::string(it.dtype) + "\",\"shape\":[";
    for (std::size_t d = 0; d < it.value->shape().size(); ++d) {
      if (d) header += ',';
      header += std::to_string(it.value->shape()[d]);
    }
    header += "],\"data_offsets\":[" + std::to_string(it.begin) + "," + std::to_string(it.begin + it.value->byte_size()) + "]}";
  }
  header += '}';
  header.append((8 - header.size() % 8) % 8, ' ');  // the data starts at a multiple of 8
  std::vector<std::byte> out(8 + header.size() + data);
  const std::uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, header.data(), header.size());
  for (const item& it : items)
    if (it.value->byte_size())
      std::memcpy(out.data() + 8 + header.size() + it.begin, it.value->data(), static_cast<std::size_t>(it.value->byte_size()));
  return out;
}

GEXEC_NAMESPACE_END

#if GEXEC_HEADER_ONLY()
#include "safetensors_impl.hpp"
#endif
