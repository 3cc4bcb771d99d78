#pragma once
// JSON paths for error messages ("nodes[12].inputs[1]"), shared by the JSON reader and
// by graph validation, which names the JSON path of whatever it refuses. Paths are
// linked stack frames, so the happy path builds no string. Also: JSON strings for the
// JSON gexec writes.

#include "../config.hpp"

#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>

#include "../error.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

/// `s` as a JSON string, quoted, with '"', '\\' and control characters escaped (for the
/// JSON gexec writes: .safetensors headers, Chrome traces).
inline std::string json_quoted(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + '"';
}

/// The length of the well-formed UTF-8 sequence (Unicode 15, table 3-7, as Boost.JSON
/// checks it) that starts at `q`, a byte >= 0x80, with `left` bytes from `q` on; 0 when
/// there is none.
inline std::ptrdiff_t utf8_sequence(const char* q, std::ptrdiff_t left) noexcept {
  const auto at = [&](std::ptrdiff_t j) { return left > j ? static_cast<unsigned char>(q[j]) : 0u; };
  const auto cont = [&](std::ptrdiff_t j, unsigned lo = 0x80, unsigned hi = 0xbf) { return at(j) >= lo && at(j) <= hi; };
  const unsigned c = at(0);
  if (c >= 0xc2 && c <= 0xdf) return cont(1) ? 2 : 0;
  if (c == 0xe0) return cont(1, 0xa0) && cont(2) ? 3 : 0;
  if (c == 0xed) return cont(1, 0x80, 0x9f) && cont(2) ? 3 : 0;
  if (c >= 0xe1 && c <= 0xef) return cont(1) && cont(2) ? 3 : 0;
  if (c == 0xf0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
  if (c == 0xf4) return cont(1, 0x80, 0x8f) && cont(2) && cont(3) ? 4 : 0;
  if (c >= 0xf1 && c <= 0xf3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}

/// Whether `s` is well-formed UTF-8 (what a JSON reader takes in a string).
inline bool is_utf8(std::string_view s) noexcept {
  for (std::size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const std::ptrdiff_t n = utf8_sequence(s.data() + i, static_cast<std::ptrdiff_t>(s.size() - i));
    if (n == 0) return false;
    i += static_cast<std::size_t>(n);
  }
  return true;
}

/// `s` for an error message: control characters (NUL first: it would end the message
/// for every C reader of what()) written as \xNN, everything else as it is.
inline std::string printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      static constexpr char hex[] = "0123456789abcdef";
      out += "\\x";
      out += hex[u >> 4];
      out += hex[u & 15];
    } else {
      out += c;
    }
  }
  return out;
}

/// Whether `s` has a control character (below 0x20, or 0x7f), NUL included.
inline bool has_control_character(std::string_view s) noexcept {
  for (char c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return true;
  return false;
}

class json_path {
 public:
  json_path() = default;
  json_path operator/(std::string_view key) const { return json_path(this, key, 0, false); }
  json_path operator[](std::size_t index) const { return json_path(this, {}, index, true); }

  [[nodiscard]] std::string str() const {
    std::string s = parent_ ? parent_->str() : std::string();
    if (is_index_) return s + "[" + std::to_string(index_) + "]";
    if (key_.empty()) return s;
    return s.empty() ? printable(key_) : s + "." + printable(key_);
  }

 private:
  json_path(const json_path* parent, std::string_view key, std::size_t index, bool is_index)
      : parent_(parent), key_(key), index_(index), is_index_(is_index) {}
  const json_path* parent_ = nullptr;
  std::string_view key_;
  std::size_t index_ = 0;
  bool is_index_ = false;
};

[[noreturn]] inline void json_fail(const json_path& at, const std::string& message) {
  std::string where = at.str();
  throw error(errc::invalid_graph, "graph: " + (where.empty() ? std::string("(root)") : where) + ": " + message);
}

}  // namespace detail
GEXEC_NAMESPACE_END
