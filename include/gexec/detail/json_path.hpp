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
