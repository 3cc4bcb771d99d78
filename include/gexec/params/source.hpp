#pragma once
// The seam every weight format plugs into: a param_source lists its tensors (name, dtype,
// shape, bytes), reads one into a destination the caller owns, and hands a view in place
// where the bytes already sit on the host, aligned for the tensor's elements. Readers
// (load_param_dict, load_param_dict_file, graph_executor::load_params_file, model::load,
// the programs) open a source through the one sniff table in params/formats.hpp and know
// no format. To add a format, copy params/null_source.hpp.
//
//   param_input          the bytes a source reads: memory (with an owner, so views may
//                        outlive it), a file read with pread, or a private file mapping
//   param_source         the concept
//   read_param_dict(s)   a source's tensors as a param_dict: views where the source has
//                        them in place, copies read into fresh aligned storage elsewhere

#include "../config.hpp"

#include <dlpack/dlpack.h>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../detail/aligned_memory.hpp"
#include "../detail/byte_io.hpp"
#include "../error.hpp"
#include "../file_path.hpp"
#include "../load_progress.hpp"
#include "../ndarray.hpp"
#include "dict.hpp"

GEXEC_NAMESPACE_BEGIN

/// One tensor of a weight source, as its index describes it (its data not read yet).
struct param_entry {
  std::string name;
  DLDataType dtype{};
  std::vector<std::int64_t> shape;
  std::uint64_t bytes = 0;   ///< of its data: what read() writes
  std::uint64_t offset = 0;  ///< where its data starts in the input (for progress and messages)
};

namespace detail {
/// What std::filesystem::path(path).extension() gives for a POSIX path, as a view into it.
inline std::string_view path_extension(std::string_view path) noexcept {
  std::string_view name = path.substr(path.rfind('/') + 1);  // the file name (npos + 1 == 0)
  if (name == "." || name == "..") return {};
  const std::size_t dot = name.rfind('.');
  return dot == std::string_view::npos || dot == 0 ? std::string_view() : name.substr(dot);
}
}  // namespace detail

/// The bytes a weight source reads: memory, a file (read with pread, locked shared while
/// this lives), or a file's private mapping (both: views from the mapping, copies from
/// the file, which neither faults the mapping's pages in nor keeps them).
class param_input {
 public:
  /// Bytes in memory; with `owner` (which keeps them alive) sources may hand out views.
  static param_input memory(std::span<const std::byte> bytes, std::shared_ptr<const void> owner = nullptr) {
    param_input in;
    in.bytes_ = bytes;
    in.owner_ = std::move(owner);
    return in;
  }
  /// A regular file, opened and locked shared (flock LOCK_SH) until the last copy of this
  /// input goes; errc::io for anything else (a FIFO, a directory, a device).
  static param_input file(const file_path& path) {
    auto f = std::make_shared<detail::regular_file>(path, "parameter file");
    detail::lock_file(f->fd(), LOCK_SH, f->name(), "is being written (another process holds an exclusive flock on it)");
    param_input in;
    in.path_ = path.native();
    in.file_ = f.get();
    in.owner_ = std::move(f);
    return in;
  }
  /// A regular file mapped privately (load_mode::mmap); the mapping lives as long as a view
  /// of it. With `view_alignment`, only tensors whose data sits at a multiple of it are
  /// views; the others are read from the file (never touching the mapping's pages).
  static param_input mapped(const file_path& path, std::size_t view_alignment = 1) {
    auto m = std::make_shared<const detail::mapped_file>(path);
    param_input in;
    in.view_alignment_ = view_alignment == 0 ? 1 : view_alignment;
    in.path_ = path.native();
    in.bytes_ = m->bytes();
    in.file_ = &m->file();
    in.owner_ = std::move(m);
    return in;
  }
  /// Opens `path` as `mode` says.
  static param_input open(const file_path& path, load_mode mode) { return mode == load_mode::mmap ? mapped(path) : file(path); }

  /// The bytes in memory: all of them, or none when the input is a file read with pread.
  [[nodiscard]] std::span<const std::byte> bytes() const noexcept { return bytes_; }
  /// What keeps bytes() alive, or null (then sources copy, never view).
  [[nodiscard]] const std::shared_ptr<const void>& owner() const noexcept { return owner_; }
  /// Views are made only of data at a multiple of this (besides their elements' alignment).
  [[nodiscard]] std::size_t view_alignment() const noexcept { return view_alignment_; }
  /// Whether a view of bytes() may outlive this input.
  [[nodiscard]] bool can_view() const noexcept { return owner_ != nullptr && !bytes_.empty(); }
  /// The file read from, or null for bytes in memory.
  [[nodiscard]] const detail::regular_file* file() const noexcept { return file_; }
  /// The path, empty for bytes in memory: sources name it in messages.
  [[nodiscard]] file_path path() const { return file_path(path_); }
  /// The path's extension, as std::filesystem::path::extension() gives it (".params";
  /// empty for "dir/.params", "..", no dot, and bytes in memory), without making a path.
  [[nodiscard]] std::string_view extension() const noexcept { return detail::path_extension(path_); }
  [[nodiscard]] std::uint64_t size() const noexcept { return file_ ? file_->size() : bytes_.size(); }

  /// How a source names this input in messages: "<format>" or "<format> <path>".
  [[nodiscard]] std::string name(std::string_view format) const {
    return path_.empty() ? std::string(format) : std::string(format) + " " + path_;
  }

  /// Copies `n` bytes at `offset` (checked by the source's index to lie inside) into `dst`:
  /// from the file when there is one, else from memory.
  void read(std::uint64_t offset, void* dst, std::uint64_t n, detail::progress_sink* progress = nullptr) const {
    if (n == 0) return;
    if (file_) return file_->read_exact(dst, n, offset, progress);
    std::memcpy(dst, bytes_.data() + offset, static_cast<std::size_t>(n));
  }
  /// The first `n` bytes (fewer if the input is shorter), for sniffing.
  [[nodiscard]] std::vector<std::byte> head(std::size_t n) const {
    std::vector<std::byte> out(static_cast<std::size_t>(std::min<std::uint64_t>(n, size())));
    if (!bytes_.empty()) std::memcpy(out.data(), bytes_.data(), out.size());
    else if (file_ && !out.empty()) file_->read_exact(out.data(), out.size(), 0);
    return out;
  }

 private:
  std::span<const std::byte> bytes_;
  std::shared_ptr<const void> owner_;
  const detail::regular_file* file_ = nullptr;
  // The path as text, not a std::filesystem::path: a program that loads parameters from
  // memory (a static one) then links none of libstdc++'s path, locale and stream code.
  std::string path_;
  std::size_t view_alignment_ = 1;
};

/// A weight source: its tensors indexed (and checked) when it is made, so that a malformed
/// input is refused before any tensor data is read.
///  - entries(): the tensors, in the source's order, each name once;
///  - read(i, dst, progress): writes entry i's bytes (entries()[i].bytes of them) to
///    `dst`, host memory the caller owns; errc::io where the input cannot be read;
///  - view(i): entry i in place (a host ndarray keeping the input alive), or an undefined
///    ndarray where its bytes are not in memory or not aligned for its elements;
///  - name(): what messages call the input ("params <path>", "safetensors", ...);
///  - input_bytes(): the input's size, the total progress reports count towards;
///  - finish() (optional): refuses what the index leaves for last (TVM's blob: bytes after
///    its last tensor); readers call it after reading the data, or before, where a
///    malformed input must change nothing. detail::finish_source calls it where it exists.
/// Errors while indexing are gexec::error naming name(), the tensor and the byte.
template <class S>
concept param_source = requires(const S& s, std::size_t i, void* dst, detail::progress_sink* progress) {
  { s.entries() } -> std::convertible_to<std::span<const param_entry>>;
  s.read(i, dst, progress);
  { s.view(i) } -> std::same_as<ndarray>;
  { s.name() } -> std::convertible_to<std::string>;
  { s.input_bytes() } -> std::convertible_to<std::uint64_t>;
};

namespace detail {

/// A view of `bytes` at `at` as entry `e` where the input may be viewed there and the
/// elements are naturally aligned; an undefined ndarray otherwise.
inline ndarray view_in_place(const param_input& in, std::uint64_t at, const param_entry& e) {
  if (!in.can_view()) return ndarray();
  const std::byte* p = in.bytes().data() + at;
  if (!can_view(p, e.dtype) || reinterpret_cast<std::uintptr_t>(p) % in.view_alignment() != 0) return ndarray();
  DLTensor t{const_cast<std::byte*>(p), cpu(), static_cast<std::int32_t>(e.shape.size()), e.dtype, const_cast<std::int64_t*>(e.shape.data()),
             nullptr, 0};
  return ndarray::view(t, in.owner());
}

/// Calls `source.finish()` where the source has one.
template <class S>
void finish_source(const S& source) {
  if constexpr (requires { source.finish(); }) source.finish();
}

/// Fresh host storage for entry `i` of a source, not zeroed (about to be overwritten);
/// errc::out_of_memory naming the source and the tensor if it cannot be had.
inline ndarray storage_for(const std::string& source, std::size_t i, const param_entry& e) {
  void* p = nullptr;
  try {
    p = allocate_aligned(e.bytes);
  } catch (const error&) {
    throw error(errc::out_of_memory, source + ": tensor " + std::to_string(i) + " (\"" + e.name + "\"): cannot allocate " +
                                         std::to_string(e.bytes) + " bytes for the tensor data");
  }
  std::shared_ptr<void> storage(p, &free_aligned);
  const auto padded = align_up(e.bytes == 0 ? 1 : e.bytes, host_alignment);
  std::memset(static_cast<std::byte*>(p) + e.bytes, 0, static_cast<std::size_t>(padded - e.bytes));
  DLTensor t{p, cpu(), static_cast<std::int32_t>(e.shape.size()), e.dtype, const_cast<std::int64_t*>(e.shape.data()), nullptr, 0};
  return ndarray::view(t, std::move(storage));
}

/// The sniff table's home (params/formats.hpp): declared here so that the executor can
/// read parameters through it without including any format. A program that loads
/// parameters from bytes or a file and fails to compile with "incomplete type
/// param_formats" pointing here needs #include <gexec/params.hpp>.
template <class Tag>
struct param_formats;

}  // namespace detail

/// Every tensor of `source` as a param_dict, in its order: views where the source has
/// them in place (view(i)), copies in fresh 64-byte aligned storage elsewhere. `progress`
/// hears of the input's bytes read (or viewed), the last time with its size.
template <param_source S>
param_dict read_param_dict(const S& source, detail::progress_sink* progress = nullptr) {
  param_dict dict;
  const std::span<const param_entry> entries = source.entries();
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const param_entry& e = entries[i];
    ndarray a = source.view(i);
    if (!a.defined()) {
      a = detail::storage_for(source.name(), i, e);
      source.read(i, a.data(), progress);
    }
    dict.set(e.name, std::move(a));
    if (progress) progress->report(e.offset + e.bytes);
  }
  detail::finish_source(source);
  if (progress) progress->report(source.input_bytes());
  return dict;
}

GEXEC_NAMESPACE_END
