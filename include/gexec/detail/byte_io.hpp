#pragma once
// Little-endian reading and writing of dmlc's serialization primitives (what TVM's
// parameter blobs and module blobs are made of), with bounds checked on every read;
// and the reading of files: only regular files, with one sized read (or a few large
// ones), never a byte at a time.

#include "../config.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../error.hpp"
#include "../file_path.hpp"
#include "../load_progress.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

static_assert(std::endian::native == std::endian::little, "gexec reads TVM's little-endian formats natively");

/// Position, size and error reporting shared by the readers of memory and of files.
class reader_base {
 public:
  /// What is being read, for error messages ("tensor 2 (\"w\")").
  void set_context(std::string context) { context_ = std::move(context); }

  [[nodiscard]] std::size_t position() const noexcept { return static_cast<std::size_t>(pos_); }
  [[nodiscard]] std::size_t remaining() const noexcept { return static_cast<std::size_t>(size_ - pos_); }

  [[noreturn]] void fail(const std::string& message) const { fail(code_, message); }
  /// The same message with another code (errc::out_of_memory, errc::io).
  [[noreturn]] void fail(errc code, const std::string& message) const {
    throw error(code, source_ + ": " + (context_.empty() ? "" : context_ + ": ") + message + " (at byte " +
                          std::to_string(pos_) + ")");
  }

  /// Throws unless `n` more bytes are there: every size read from the input is checked
  /// with this before anything is allocated for it.
  void require(std::uint64_t n, const char* field) const {
    if (n > remaining())
      fail(std::string("truncated: ") + field + " needs " + std::to_string(n) + " bytes, " + std::to_string(remaining()) +
           " left");
  }

  /// A dmlc vector count `n`, checked against the bytes left (each element takes at
  /// least `min_element_bytes`) so that a forged count cannot make the caller reserve memory.
  std::uint64_t checked_count(std::uint64_t n, const char* field, std::uint64_t min_element_bytes) const {
    if (min_element_bytes != 0 && n > remaining() / min_element_bytes)
      fail(std::string("truncated: ") + field + " count " + std::to_string(n) + " exceeds what the remaining " +
           std::to_string(remaining()) + " bytes can hold");
    return n;
  }

 protected:
  reader_base(std::uint64_t size, std::string source, errc code) : size_(size), source_(std::move(source)), code_(code) {}

  std::uint64_t size_ = 0;
  std::uint64_t pos_ = 0;
  std::string source_;
  std::string context_;
  errc code_;
};

/// Reads from bytes in memory; bytes() hands out views of them.
class byte_reader : public reader_base {
 public:
  byte_reader(std::span<const std::byte> data, std::string source, errc code = errc::invalid_params)
      : reader_base(data.size(), std::move(source), code), data_(data) {}

  template <class T>
  T read(const char* field) {
    static_assert(std::is_trivially_copyable_v<T>);
    require(sizeof(T), field);
    T value;
    std::memcpy(&value, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }

  std::span<const std::byte> bytes(std::uint64_t n, const char* field) {
    require(n, field);
    auto s = data_.subspan(static_cast<std::size_t>(pos_), static_cast<std::size_t>(n));
    pos_ += n;
    return s;
  }

  /// Copies the next `n` bytes to `dst`.
  void read_into(void* dst, std::uint64_t n, const char* field) {
    auto s = bytes(n, field);
    if (!s.empty()) std::memcpy(dst, s.data(), s.size());
  }

  /// dmlc string: u64 length, then the bytes.
  std::string read_string(const char* field) {
    auto n = read<std::uint64_t>(field);
    auto s = bytes(n, field);
    return {reinterpret_cast<const char*>(s.data()), s.size()};
  }

  /// A dmlc vector count, checked against the bytes left.
  std::uint64_t read_count(const char* field, std::uint64_t min_element_bytes) {
    return checked_count(read<std::uint64_t>(field), field, min_element_bytes);
  }

  [[nodiscard]] std::span<const std::byte> data() const noexcept { return data_; }

 private:
  std::span<const std::byte> data_;
};

/// "a FIFO", "a directory", ...: what a path is when it is not a regular file.
/// The bytes of a string (a file read into memory, a blob held as text).
inline std::span<const std::byte> as_bytes(std::string_view s) noexcept {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

inline const char* file_kind(mode_t mode) noexcept {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

/// The size of the regular file at `path`, or nothing where there is none (missing,
/// unreadable, or something else than a regular file).
inline std::optional<std::uint64_t> regular_file_size(const file_path& path) noexcept {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  return static_cast<std::uint64_t>(st.st_size);
}

/// A file's bytes as read_buffer() returns them.
struct file_buffer {
  std::unique_ptr<char[]> bytes;
  std::size_t size = 0;
  [[nodiscard]] std::string_view view() const noexcept { return {bytes.get(), size}; }
};

/// A regular file open for reading (the descriptor closes with the object). Anything
/// else (a FIFO, a directory, a device, a socket) is refused with errc::io naming the
/// path before a byte is read, and opening never waits for a FIFO's writer.
class regular_file {
 public:
  /// `what` names the file in messages ("parameter file").
  regular_file(const file_path& path, std::string_view what) : path_(path), what_(what) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) fail_errno("cannot open", errno);
    if (!S_ISREG(st.st_mode)) fail_not_regular(st.st_mode);
    // O_NONBLOCK: should the path have become a FIFO since stat(), open() does not wait for a writer.
    do fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    while (fd_ < 0 && errno == EINTR);
    if (fd_ < 0) fail_errno("cannot open", errno);
    // The constructor's failures below skip the destructor: close here.
    if (::fstat(fd_, &st) != 0) {
      const int err = errno;
      ::close(std::exchange(fd_, -1));
      fail_errno("cannot stat", err);
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(std::exchange(fd_, -1));
      fail_not_regular(st.st_mode);
    }
    if (int flags = ::fcntl(fd_, F_GETFL); flags >= 0) (void)::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK);
    size_ = static_cast<std::uint64_t>(st.st_size);
  }
  regular_file(const regular_file&) = delete;
  regular_file& operator=(const regular_file&) = delete;
  ~regular_file() {
    if (fd_ >= 0) ::close(fd_);
  }

  [[nodiscard]] int fd() const noexcept { return fd_; }
  /// The size when opened; reads never go past it.
  [[nodiscard]] std::uint64_t size() const noexcept { return size_; }
  [[nodiscard]] const file_path& path() const noexcept { return path_; }
  /// "parameter file /path/to/params.bin"
  [[nodiscard]] std::string name() const { return what_ + " " + path_.string(); }

  /// Bytes read between two progress reports.
  static constexpr std::uint64_t progress_step = std::uint64_t{8} << 20;

  /// Reads exactly `n` bytes at `offset`, in as few calls as the kernel allows (or in
  /// steps of progress_step, each reported as the file offset reached, when `progress`
  /// is set); errc::io if the file ends first (it shrank while being read) or reading fails.
  void read_exact(void* dst, std::uint64_t n, std::uint64_t offset, progress_sink* progress = nullptr) const {
    auto* out = static_cast<char*>(dst);
    const std::uint64_t step = progress && *progress ? progress_step : std::uint64_t{1} << 30;
    while (n > 0) {
      const auto chunk = static_cast<std::size_t>(std::min<std::uint64_t>(n, step));
      ssize_t got = ::pread(fd_, out, chunk, static_cast<off_t>(offset));
      if (got < 0) {
        if (errno == EINTR) continue;
        fail_errno("cannot read", errno);
      }
      if (got == 0)
        throw error(errc::io, "cannot read " + name() + ": it ends at byte " + std::to_string(offset) + ", before its size of " +
                                  std::to_string(size_) + " bytes (was it changed while being read?)");
      out += got;
      n -= static_cast<std::uint64_t>(got);
      offset += static_cast<std::uint64_t>(got);
      if (progress) progress->report(offset);
    }
  }

  /// The whole file in one sized read (in steps, each reported, with a progress
  /// callback); errc::out_of_memory if no buffer that large can be had. The buffer is
  /// not zeroed first: the read writes every byte.
  [[nodiscard]] file_buffer read_buffer(progress_sink* progress = nullptr) const {
    file_buffer out;
    try {
      if (size_ > static_cast<std::uint64_t>(std::numeric_limits<std::ptrdiff_t>::max())) throw std::length_error("file size");
      out.bytes.reset(new char[static_cast<std::size_t>(size_)]);  // default-initialized: no pass over it
    } catch (const std::exception&) {  // std::bad_alloc, std::length_error
      throw error(errc::out_of_memory, "cannot allocate " + std::to_string(size_) + " bytes to read " + name());
    }
    out.size = static_cast<std::size_t>(size_);
    read_exact(out.bytes.get(), size_, 0, progress);
    if (progress) progress->report(size_);
    return out;
  }

  /// The same as a std::string (zeroed first, then read).
  [[nodiscard]] std::string read_all(progress_sink* progress = nullptr) const {
    std::string bytes;
    try {
      if (size_ > bytes.max_size()) throw std::length_error("file size");
      bytes.resize(static_cast<std::size_t>(size_));
    } catch (const std::exception&) {  // std::bad_alloc, std::length_error
      throw error(errc::out_of_memory, "cannot allocate " + std::to_string(size_) + " bytes to read " + name());
    }
    read_exact(bytes.data(), size_, 0, progress);
    if (progress) progress->report(size_);
    return bytes;
  }

 private:
  [[noreturn]] void fail_errno(const char* doing, int err) const {
    // EOVERFLOW: a file of 2 GiB or more, in a 32-bit process built without 64-bit
    // file offsets; no such file fits the address space anyway.
    if (err == EOVERFLOW)
      throw error(errc::out_of_memory, std::string(doing) + " " + name() + ": it is larger than this 32-bit process can address (" +
                                           std::generic_category().message(err) + ")");
    throw error(errc::io, std::string(doing) + " " + name() + ": " + std::generic_category().message(err));
  }
  [[noreturn]] void fail_not_regular(mode_t mode) const {
    throw error(errc::io, name() + " is " + file_kind(mode) + ", not a regular file");
  }

  file_path path_;
  std::string what_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

/// Reads a regular file through a buffer of large reads, with byte_reader's interface
/// (less bytes(): tensor data is read straight into its destination). Nothing is read
/// beyond what has been asked for plus one buffer, so a malformed header is reported
/// without reading the rest of a large file, and every size is checked against the
/// bytes the file has left before anything is allocated for it.
class file_reader : public reader_base {
 public:
  static constexpr std::size_t buffer_size = std::size_t{1} << 16;

  /// `progress`, when given, hears of the file offset reached after each large read.
  file_reader(const regular_file& file, std::string source, errc code = errc::invalid_params, progress_sink* progress = nullptr)
      : reader_base(file.size(), std::move(source), code), file_(file), buffer_(new std::byte[buffer_size]), progress_(progress) {}

  template <class T>
  T read(const char* field) {
    static_assert(std::is_trivially_copyable_v<T>);
    static_assert(sizeof(T) <= buffer_size);
    require(sizeof(T), field);
    if (end_ - begin_ < sizeof(T)) refill();
    T value;
    std::memcpy(&value, buffer_.get() + begin_, sizeof(T));
    begin_ += sizeof(T);
    pos_ += sizeof(T);
    return value;
  }

  /// Copies the next `n` bytes to `dst`: what is buffered, then one read for the rest.
  void read_into(void* dst, std::uint64_t n, const char* field) {
    require(n, field);
    auto* out = static_cast<std::byte*>(dst);
    const auto buffered = std::min<std::uint64_t>(n, end_ - begin_);
    if (buffered) std::memcpy(out, buffer_.get() + begin_, static_cast<std::size_t>(buffered));
    begin_ += static_cast<std::size_t>(buffered);
    pos_ += buffered;
    n -= buffered;
    if (n == 0) return;
    if (n >= buffer_size) {
      file_.read_exact(out + buffered, n, pos_, progress_);
      pos_ += n;
      return;
    }
    short_refill_ = false;  // n bytes are wanted, more than a short refill may bring
    refill();
    std::memcpy(out + buffered, buffer_.get() + begin_, static_cast<std::size_t>(n));
    begin_ += static_cast<std::size_t>(n);
    pos_ += n;
  }

  std::string read_string(const char* field) {
    auto n = read<std::uint64_t>(field);
    require(n, field);
    std::string s(static_cast<std::size_t>(n), '\0');
    read_into(s.data(), n, field);
    return s;
  }

  std::uint64_t read_count(const char* field, std::uint64_t min_element_bytes) {
    return checked_count(read<std::uint64_t>(field), field, min_element_bytes);
  }

  /// Steps over the next `n` bytes (tensor data read elsewhere, at their offset) without
  /// reading them; the next refill reads only a little, as what follows is a header.
  void skip(std::uint64_t n, const char* field) {
    require(n, field);
    const auto buffered = std::min<std::uint64_t>(n, end_ - begin_);
    begin_ += static_cast<std::size_t>(buffered);
    pos_ += n;
    if (n > buffered) begin_ = end_ = 0;
    short_refill_ = true;
  }

 private:
  // Keeps the unread buffered bytes and reads as much of the file after them as fits.
  void refill() {
    const std::size_t kept = end_ - begin_;
    if (kept && begin_) std::memmove(buffer_.get(), buffer_.get() + begin_, kept);
    begin_ = 0;
    end_ = kept;
    const std::size_t most = short_refill_ ? std::size_t{4096} : buffer_size;
    short_refill_ = false;
    const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(most - std::min(kept, most), remaining() - kept));
    file_.read_exact(buffer_.get() + kept, want, pos_ + kept);
    end_ += want;
  }

  const regular_file& file_;
  std::unique_ptr<std::byte[]> buffer_;
  std::size_t begin_ = 0, end_ = 0;  // unread bytes of the buffer; buffer_[begin_] is the file's byte pos_
  progress_sink* progress_ = nullptr;
  bool short_refill_ = true;  // the first read is a header's: a page of the buffer, not all of it
};

/// A dmlc vector of u64: its count, checked against the bytes left, then the values.
inline std::vector<std::uint64_t> read_u64_vector(byte_reader& in, const char* field) {
  auto n = in.read_count(field, sizeof(std::uint64_t));
  std::vector<std::uint64_t> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = in.read<std::uint64_t>(field);
  return v;
}

/// A dmlc vector of strings.
inline std::vector<std::string> read_string_vector(byte_reader& in, const char* field) {
  auto n = in.read_count(field, sizeof(std::uint64_t));
  std::vector<std::string> v;
  v.reserve(static_cast<std::size_t>(n));
  for (std::uint64_t i = 0; i < n; ++i) v.push_back(in.read_string(field));
  return v;
}

class byte_writer {
 public:
  template <class T>
  void write(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>);
    append(&value, sizeof(T));
  }
  void write_string(std::string_view s) {
    write(static_cast<std::uint64_t>(s.size()));
    append(s.data(), s.size());
  }
  /// A dmlc vector of u64: its count, then the values.
  void write_u64_vector(std::span<const std::uint64_t> v) {
    write(static_cast<std::uint64_t>(v.size()));
    for (std::uint64_t x : v) write(x);
  }
  void append(const void* p, std::size_t n) {
    auto* b = static_cast<const std::byte*>(p);
    out_.insert(out_.end(), b, b + n);
  }
  void reserve(std::size_t n) { out_.reserve(n); }
  [[nodiscard]] std::vector<std::byte> take() && { return std::move(out_); }

 private:
  std::vector<std::byte> out_;
};

}  // namespace detail
GEXEC_NAMESPACE_END
