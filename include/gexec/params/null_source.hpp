#pragma once
// The null weight source: a skeleton to copy when adding a format (GGUF, say). Its own
// format is the smallest one that exercises every part of the seam: the 8 bytes
// "GEXECNUL" and nothing after them, holding no tensors. The conformance suite
// (tests/test_param_sources.cpp) runs it like every other source.
//
// To add a format:
//  1. Copy this file to params/<format>_source.hpp and rename the class.
//  2. `format`: the name messages give the input ("gguf <path>"), through param_input::name.
//  3. `sniff(head)`: whether an input starting with `head` (its first 16 bytes, or fewer
//     when it is shorter) is of this format. Use magic bytes; keep it cheap and noexcept.
//  4. The constructor: read and check the whole index (names, dtypes, shapes, where each
//     tensor's data lies) before any data, so that a malformed input is refused before
//     anything is allocated for it. Refuse with gexec::error (errc::invalid_params) naming
//     name(), the tensor and the byte; check every size against in.size() before trusting
//     it. Read through param_input: bytes() when the input is in memory or mapped,
//     file() (pread, as detail::file_reader does) when it is not.
//  5. read(i, dst): write entry i's bytes; in.read(offset, dst, n, progress) does it for
//     data stored as it is kept in memory (little-endian, C order). Formats that store
//     otherwise (compressed, quantized) decode here.
//  6. view(i): detail::view_in_place(in, offset, entry) where the bytes are stored as
//     kept; an undefined ndarray where they are not (view is an optimisation, read is
//     the contract).
//  7. Register it: one line in the list in params/formats.hpp, and one line in the
//     conformance suite with the cases it does not support.

#include "../config.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../error.hpp"
#include "source.hpp"

GEXEC_NAMESPACE_BEGIN

class null_source {
 public:
  static constexpr std::string_view format = "null weights";
  /// The file extension that names the format where no magic bytes do.
  static constexpr std::string_view extension = ".gexecnull";
  static constexpr char magic[8] = {'G', 'E', 'X', 'E', 'C', 'N', 'U', 'L'};
  static bool sniff(std::span<const std::byte> head) noexcept { return head.size() >= 8 && std::memcmp(head.data(), magic, 8) == 0; }

  explicit null_source(param_input in) : in_(std::move(in)), name_(in_.name(format)) {
    // The index: here only the magic. A real format reads its header and tensor table.
    const std::vector<std::byte> head = in_.head(9);
    if (!sniff(head)) throw error(errc::invalid_params, name_ + ": not a null weight file (bad magic) (at byte 0)");
    if (in_.size() != 8) throw error(errc::invalid_params, name_ + ": " + std::to_string(in_.size() - 8) + " unexpected bytes after the magic (at byte 8)");
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
  std::vector<param_entry> entries_;  // always empty here
};
static_assert(param_source<null_source>);

GEXEC_NAMESPACE_END
