#pragma once
// Little-endian reading and writing of dmlc's serialization primitives (what TVM's
// parameter blobs and module blobs are made of), with bounds checked on every read.

#include "../config.hpp"

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "../error.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

static_assert(std::endian::native == std::endian::little, "gexec reads TVM's little-endian formats natively");

class byte_reader {
 public:
  byte_reader(std::span<const std::byte> data, std::string source, errc code = errc::invalid_params)
      : data_(data), source_(std::move(source)), code_(code) {}

  /// What is being read, for error messages ("tensor 2 (\"w\")").
  void set_context(std::string context) { context_ = std::move(context); }

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
    auto s = data_.subspan(pos_, static_cast<std::size_t>(n));
    pos_ += static_cast<std::size_t>(n);
    return s;
  }

  /// dmlc string: u64 length, then the bytes.
  std::string read_string(const char* field) {
    auto n = read<std::uint64_t>(field);
    auto s = bytes(n, field);
    return {reinterpret_cast<const char*>(s.data()), s.size()};
  }

  /// A dmlc vector count, checked against the bytes left (each element takes at least
  /// `min_element_bytes`) so that a forged count cannot make the caller reserve memory.
  std::uint64_t read_count(const char* field, std::uint64_t min_element_bytes) {
    auto n = read<std::uint64_t>(field);
    if (min_element_bytes != 0 && n > remaining() / min_element_bytes)
      fail(std::string("truncated: ") + field + " count " + std::to_string(n) + " exceeds what the remaining " +
           std::to_string(remaining()) + " bytes can hold");
    return n;
  }

  [[nodiscard]] std::size_t position() const noexcept { return pos_; }
  [[nodiscard]] std::size_t remaining() const noexcept { return data_.size() - pos_; }
  [[nodiscard]] std::span<const std::byte> data() const noexcept { return data_; }

  [[noreturn]] void fail(const std::string& message) const {
    throw error(code_, source_ + ": " + (context_.empty() ? "" : context_ + ": ") + message + " (at byte " +
                           std::to_string(pos_) + ")");
  }

 private:
  void require(std::uint64_t n, const char* field) const {
    if (n > remaining())
      fail(std::string("truncated: ") + field + " needs " + std::to_string(n) + " bytes, " + std::to_string(remaining()) +
           " left");
  }

  std::span<const std::byte> data_;
  std::size_t pos_ = 0;
  std::string source_;
  std::string context_;
  errc code_;
};

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
