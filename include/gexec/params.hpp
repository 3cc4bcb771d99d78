#pragma once
// Parameter blobs: TVM's NDArray-list format (tvm.runtime.save_param_dict), read and
// written bit for bit. Reading copies the tensors or, from a file, maps it and hands
// out views that keep the mapping alive.

#include "config.hpp"

#include <dlpack/dlpack.h>

#include <boost/interprocess/file_mapping.hpp>
#include <boost/interprocess/mapped_region.hpp>

#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "detail/byte_io.hpp"
#include "detail/shape.hpp"
#include "ndarray.hpp"

GEXEC_NAMESPACE_BEGIN

inline constexpr std::uint64_t param_list_magic = 0xF7E58D4F05049CB7ULL;
inline constexpr std::uint64_t tensor_magic = 0xDD5E40F096B4A13FULL;

/// Name -> tensor, in insertion order (so a blob read and written back is identical).
class param_dict {
 public:
  using value_type = std::pair<std::string, ndarray>;

  /// Inserts or replaces; a replaced entry keeps its position.
  void set(std::string name, ndarray value) {
    if (auto it = index_.find(name); it != index_.end()) {
      items_[it->second].second = std::move(value);
      return;
    }
    index_.emplace(name, items_.size());
    items_.emplace_back(std::move(name), std::move(value));
  }
  [[nodiscard]] const ndarray* find(std::string_view name) const {
    auto it = index_.find(std::string(name));
    return it == index_.end() ? nullptr : &items_[it->second].second;
  }
  [[nodiscard]] const ndarray& at(std::string_view name) const {
    if (const ndarray* a = find(name)) return *a;
    throw error(errc::not_found, "no parameter named \"" + std::string(name) + "\"");
  }
  [[nodiscard]] bool contains(std::string_view name) const { return find(name) != nullptr; }
  [[nodiscard]] std::size_t size() const noexcept { return items_.size(); }
  [[nodiscard]] bool empty() const noexcept { return items_.empty(); }
  [[nodiscard]] auto begin() const noexcept { return items_.begin(); }
  [[nodiscard]] auto end() const noexcept { return items_.end(); }

 private:
  std::vector<value_type> items_;
  std::unordered_map<std::string, std::size_t> index_;
};

enum class load_mode {
  copy,  ///< tensors own 64-byte aligned copies of their bytes
  mmap,  ///< tensors view a private mapping of the file where their elements are naturally
         ///< aligned there (not necessarily to 64 bytes), and are copies otherwise
};

namespace detail {

/// Reads one tensor record. With `keepalive` set, the tensor views the reader's bytes
/// (which `keepalive` owns); otherwise it owns a copy.
inline ndarray read_tensor_record(byte_reader& in, const std::shared_ptr<const void>& keepalive) {
  auto magic = in.read<std::uint64_t>("tensor magic");
  if (magic != tensor_magic) {
    char hex[19];
    std::snprintf(hex, sizeof hex, "0x%016llx", static_cast<unsigned long long>(magic));
    in.fail(std::string("bad tensor magic ") + hex);
  }
  (void)in.read<std::uint64_t>("tensor reserved field");
  auto device_type = in.read<std::int32_t>("device type");
  (void)in.read<std::int32_t>("device id");
  if (device_type != kDLCPU) in.fail("device type " + std::to_string(device_type) + " (saved tensors are always on the CPU)");
  auto ndim = in.read<std::int32_t>("ndim");
  DLDataType dtype;
  dtype.code = in.read<std::uint8_t>("dtype code");
  dtype.bits = in.read<std::uint8_t>("dtype bits");
  dtype.lanes = in.read<std::uint16_t>("dtype lanes");
  if (ndim < 0) in.fail("negative ndim " + std::to_string(ndim));
  if (static_cast<std::uint64_t>(ndim) > in.remaining() / sizeof(std::int64_t))
    in.fail("truncated: ndim " + std::to_string(ndim) + " needs more shape bytes than the " +
            std::to_string(in.remaining()) + " left");
  if (dtype.lanes != 1) in.fail("dtype " + to_string(dtype) + " has " + std::to_string(dtype.lanes) + " lanes; saved tensors have 1");
  if (!is_supported(dtype))
    in.fail("unsupported dtype (code " + std::to_string(dtype.code) + ", bits " + std::to_string(dtype.bits) + ")");
  std::vector<std::int64_t> shape(static_cast<std::size_t>(ndim));
  for (auto& d : shape) d = in.read<std::int64_t>("shape");
  auto bytes = checked_byte_size(shape, dtype);
  if (!bytes) in.fail("shape " + shape_to_string(shape) + " is negative or overflows");
  auto byte_size = in.read<std::int64_t>("byte size");
  if (byte_size < 0 || static_cast<std::uint64_t>(byte_size) != *bytes)
    in.fail("byte size " + std::to_string(byte_size) + " disagrees with shape " + shape_to_string(shape) + " of " +
            to_string(dtype) + " (" + std::to_string(*bytes) + " bytes)");
  auto data = in.bytes(*bytes, "tensor data");
  // A view needs its elements naturally aligned; where the file's layout puts them
  // elsewhere (names of odd lengths shift everything after them), copy instead.
  const auto natural = std::min<std::uint64_t>(element_bytes(dtype), 8);
  if (keepalive && reinterpret_cast<std::uintptr_t>(data.data()) % natural == 0) {
    DLTensor t{const_cast<std::byte*>(data.data()), cpu(), ndim, dtype, shape.data(), nullptr, 0};
    return ndarray::view(t, keepalive);
  }
  ndarray a = ndarray::empty(std::move(shape), dtype);
  if (!data.empty()) std::memcpy(a.data(), data.data(), data.size());
  return a;
}

/// Reads `names` then the tensors, the order of a parameter blob.
inline param_dict read_param_list(byte_reader& in, const std::shared_ptr<const void>& keepalive) {
  in.set_context("header");
  if (auto magic = in.read<std::uint64_t>("magic"); magic != param_list_magic)
    in.fail("not a parameter blob (bad magic)");
  (void)in.read<std::uint64_t>("reserved field");
  auto n_names = in.read_count("names", sizeof(std::uint64_t));
  std::vector<std::string> names;
  names.reserve(static_cast<std::size_t>(n_names));
  for (std::uint64_t i = 0; i < n_names; ++i) names.push_back(in.read_string("name"));
  auto n_tensors = in.read<std::uint64_t>("tensor count");
  if (n_tensors != n_names)
    in.fail("tensor count " + std::to_string(n_tensors) + " differs from the name count " + std::to_string(n_names));
  param_dict dict;
  for (std::size_t i = 0; i < names.size(); ++i) {
    in.set_context("tensor " + std::to_string(i) + " (\"" + names[i] + "\")");
    if (dict.contains(names[i])) in.fail("duplicate parameter name");
    dict.set(names[i], read_tensor_record(in, keepalive));
  }
  in.set_context({});
  return dict;
}

/// The names of a parameter blob, without reading its tensors.
inline std::vector<std::string> read_param_names(std::span<const std::byte> blob) {
  byte_reader in(blob, "params");
  if (in.read<std::uint64_t>("magic") != param_list_magic) in.fail("not a parameter blob (bad magic)");
  (void)in.read<std::uint64_t>("reserved field");
  auto n = in.read_count("names", sizeof(std::uint64_t));
  std::vector<std::string> names;
  names.reserve(static_cast<std::size_t>(n));
  for (std::uint64_t i = 0; i < n; ++i) names.push_back(in.read_string("name"));
  return names;
}

inline void write_tensor_record(byte_writer& out, std::string_view name, const ndarray& a) {
  auto fail = [&](const std::string& why) {
    throw error(errc::invalid_argument, "save_param_dict: \"" + std::string(name) + "\": " + why);
  };
  if (!a.defined()) fail("undefined tensor");
  if (a.device().device_type != kDLCPU) fail("tensor is on " + to_string(a.device()) + "; copy it to the host first");
  if (!a.is_contiguous()) fail("tensor is strided");
  if (a.dtype().lanes != 1) fail("dtype " + to_string(a.dtype()) + " has lanes; TVM's format stores one lane");
  out.write(tensor_magic);
  out.write(std::uint64_t{0});
  out.write(std::int32_t{kDLCPU});
  out.write(std::int32_t{0});
  out.write(std::int32_t{a.ndim()});
  out.write(a.dtype());
  for (std::int64_t d : a.shape()) out.write(d);
  out.write(static_cast<std::int64_t>(a.byte_size()));
  out.append(a.data(), static_cast<std::size_t>(a.byte_size()));
}

inline std::string read_file_bytes(const std::filesystem::path& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw error(errc::io, "cannot open " + std::string(what) + " " + path.string());
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw error(errc::io, "cannot read " + std::string(what) + " " + path.string());
  return bytes;
}

inline std::span<const std::byte> as_bytes(std::string_view s) noexcept {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

}  // namespace detail

/// Reads a parameter blob (tvm.runtime.save_param_dict's bytes); the tensors are copies.
inline param_dict load_param_dict(std::span<const std::byte> blob) {
  detail::byte_reader in(blob, "params");
  param_dict dict = detail::read_param_list(in, nullptr);
  if (in.remaining() != 0) in.fail(std::to_string(in.remaining()) + " unexpected bytes after the last tensor");
  return dict;
}
inline param_dict load_param_dict(std::string_view blob) { return load_param_dict(detail::as_bytes(blob)); }

/// Reads a parameter file, copying it or mapping it (load_mode::mmap: tensors are views
/// into a private mapping that lives as long as any of them).
inline param_dict load_param_dict_file(const std::filesystem::path& path, load_mode mode = load_mode::copy) {
  if (mode == load_mode::copy) {
    std::string bytes = detail::read_file_bytes(path, "parameter file");
    detail::byte_reader in(detail::as_bytes(bytes), "params " + path.string());
    param_dict dict = detail::read_param_list(in, nullptr);
    if (in.remaining() != 0) in.fail(std::to_string(in.remaining()) + " unexpected bytes after the last tensor");
    return dict;
  }
  namespace bip = boost::interprocess;
  std::error_code ec;
  auto size = std::filesystem::file_size(path, ec);
  if (ec) throw error(errc::io, "cannot open parameter file " + path.string() + ": " + ec.message());
  std::shared_ptr<bip::mapped_region> region;
  if (size != 0) {
    try {
      bip::file_mapping file(path.c_str(), bip::read_only);
      region = std::make_shared<bip::mapped_region>(file, bip::copy_on_write);
    } catch (const bip::interprocess_exception& e) {
      throw error(errc::io, "cannot map parameter file " + path.string() + ": " + e.what());
    }
  }
  std::span<const std::byte> bytes;
  if (region) bytes = {static_cast<const std::byte*>(region->get_address()), region->get_size()};
  detail::byte_reader in(bytes, "params " + path.string());
  param_dict dict = detail::read_param_list(in, region);
  if (in.remaining() != 0) in.fail(std::to_string(in.remaining()) + " unexpected bytes after the last tensor");
  return dict;
}

/// Writes a parameter blob that tvm.runtime.load_param_dict reads.
inline std::vector<std::byte> save_param_dict(const param_dict& dict) {
  detail::byte_writer out;
  std::size_t total = 32;
  for (const auto& [name, a] : dict) total += 8 + name.size() + 64 + 8 * static_cast<std::size_t>(a.ndim()) + a.byte_size();
  out.reserve(total);
  out.write(param_list_magic);
  out.write(std::uint64_t{0});
  out.write(static_cast<std::uint64_t>(dict.size()));
  for (const auto& [name, a] : dict) out.write_string(name);
  out.write(static_cast<std::uint64_t>(dict.size()));
  for (const auto& [name, a] : dict) detail::write_tensor_record(out, name, a);
  return std::move(out).take();
}

inline void save_param_dict_file(const param_dict& dict, const std::filesystem::path& path) {
  auto bytes = save_param_dict(dict);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw error(errc::io, "cannot create parameter file " + path.string());
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw error(errc::io, "cannot write parameter file " + path.string());
}

GEXEC_NAMESPACE_END
