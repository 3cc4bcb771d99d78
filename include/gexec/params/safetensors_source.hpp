#pragma once
// The .safetensors format (safetensors.hpp) as a weight source: the JSON header read and
// checked when the source is made (coverage, offsets, dtypes), tensors read where they
// lie. Sniffed by byte 8, where its JSON header opens with '{' (TVM's blob has a
// reserved zero there).

#include "../config.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../safetensors.hpp"
#include "source.hpp"

GEXEC_NAMESPACE_BEGIN

class safetensors_source {
 public:
  static constexpr std::string_view format = "safetensors";
  /// The file extension that names the format where no magic bytes do.
  static constexpr std::string_view extension = ".safetensors";
  static bool sniff(std::span<const std::byte> head) noexcept { return detail::looks_like_safetensors(head); }

  explicit safetensors_source(param_input in) : in_(std::move(in)), name_(in_.name(format)) {
    std::vector<detail::safetensors_entry> index;
    if (in_.file() && in_.bytes().empty()) {
      index = detail::read_safetensors_index(*in_.file());
    } else {
      const std::span<const std::byte> blob = in_.bytes();
      const std::uint64_t n = detail::safetensors_header_length(blob.first(std::min<std::size_t>(blob.size(), 8)), blob.size(), name_);
      index = detail::parse_safetensors_header(std::string_view(reinterpret_cast<const char*>(blob.data()) + 8, static_cast<std::size_t>(n)),
                                               blob.size(), name_);
    }
    entries_.reserve(index.size());
    for (detail::safetensors_entry& e : index) entries_.push_back({std::move(e.name), e.dtype, std::move(e.shape), e.bytes, e.offset});
  }

  [[nodiscard]] std::span<const param_entry> entries() const noexcept { return entries_; }
  void read(std::size_t i, void* dst, detail::progress_sink* progress = nullptr) const {
    in_.read(entries_[i].offset, dst, entries_[i].bytes, progress);
  }
  [[nodiscard]] ndarray view(std::size_t i) const { return detail::view_in_place(in_, entries_[i].offset, entries_[i]); }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] std::uint64_t input_bytes() const noexcept { return in_.size(); }

 private:
  param_input in_;
  std::string name_;
  std::vector<param_entry> entries_;
};
static_assert(param_source<safetensors_source>);

GEXEC_NAMESPACE_END
