#pragma once
// numpy's .npz archives (npz.hpp) as a weight source, so that weights saved with
// np.savez load where TVM's blob does. The archive's directory is checked and every member
// decoded (CRC-32 checked, big-endian elements swapped) when the source is made; view(i)
// hands out the decoded arrays, read(i) copies them. Sniffed by the zip signature of its
// first local header ("PK\3\4") or, for an empty archive, of its end record ("PK\5\6").
//
// Not supported: members that carry no dtype ('<V2' and other raw elements, as ml_dtypes
// writes bfloat16 and float8) are errc::unsupported here, where load_npy takes the dtype
// the caller expects; compressed members (np.savez_compressed) as npz.hpp says.

#include "../config.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../npz.hpp"
#include "source.hpp"

GEXEC_NAMESPACE_BEGIN

class npz_source {
 public:
  static constexpr std::string_view format = "npz";
  /// The file extension that names the format where no magic bytes do.
  static constexpr std::string_view extension = ".npz";
  static bool sniff(std::span<const std::byte> head) noexcept {
    if (head.size() < 4 || head[0] != std::byte{'P'} || head[1] != std::byte{'K'}) return false;
    return (head[2] == std::byte{3} && head[3] == std::byte{4}) || (head[2] == std::byte{5} && head[3] == std::byte{6});
  }

  explicit npz_source(param_input in) : name_(in.name(format)), size_(in.size()) {
    std::span<const std::byte> zip = in.bytes();
    std::string held;  // a file read with pread: its bytes, for as long as the members are decoded
    if (in.file() && zip.empty() && in.size() != 0) {
      held = in.file()->read_all();
      zip = detail::as_bytes(held);
    }
    const detail::npz_reader reader(zip, name_);
    for (detail::npz_reader::member& m : reader.members()) {
      ndarray a = reader.read(m);
      const auto offset = static_cast<std::uint64_t>(m.bytes.data() - zip.data());
      entries_.push_back({std::move(m.name), a.dtype(), std::vector<std::int64_t>(a.shape().begin(), a.shape().end()), a.byte_size(), offset});
      arrays_.push_back(std::move(a));
    }
  }

  [[nodiscard]] std::span<const param_entry> entries() const noexcept { return entries_; }
  void read(std::size_t i, void* dst, detail::progress_sink* = nullptr) const {
    if (entries_[i].bytes) std::memcpy(dst, arrays_[i].data(), static_cast<std::size_t>(entries_[i].bytes));
  }
  /// The decoded array: host memory, 64-byte aligned.
  [[nodiscard]] ndarray view(std::size_t i) const { return arrays_[i]; }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] std::uint64_t input_bytes() const noexcept { return size_; }

 private:
  std::string name_;
  std::uint64_t size_ = 0;
  std::vector<param_entry> entries_;
  std::vector<ndarray> arrays_;
};
static_assert(param_source<npz_source>);

GEXEC_NAMESPACE_END
