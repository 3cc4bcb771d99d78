#pragma once
// Checked access to a Boost.JSON DOM that reports the JSON path of whatever is wrong
// ("nodes[12].inputs[1]"). Paths are linked stack frames, so the happy path builds no string.

#include "../config.hpp"

#include <boost/json.hpp>

#include <charconv>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "../error.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

class json_path {
 public:
  json_path() = default;
  json_path operator/(std::string_view key) const { return json_path(this, key, 0, false); }
  json_path operator[](std::size_t index) const { return json_path(this, {}, index, true); }

  [[nodiscard]] std::string str() const {
    std::string s = parent_ ? parent_->str() : std::string();
    if (is_index_) return s + "[" + std::to_string(index_) + "]";
    if (key_.empty()) return s;
    return s.empty() ? std::string(key_) : s + "." + std::string(key_);
  }

 private:
  json_path(const json_path* parent, std::string_view key, std::size_t index, bool is_index)
      : parent_(parent), key_(key), index_(index), is_index_(is_index) {}
  const json_path* parent_ = nullptr;
  std::string_view key_;
  std::size_t index_ = 0;
  bool is_index_ = false;
};

/// Short JSON rendering of a value for error messages.
inline std::string json_excerpt(const boost::json::value& v) {
  std::string s = boost::json::serialize(v);
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

[[noreturn]] inline void json_fail(const json_path& at, const std::string& message) {
  std::string where = at.str();
  throw error(errc::invalid_graph, "graph: " + (where.empty() ? std::string("(root)") : where) + ": " + message);
}

inline const boost::json::object& json_object(const boost::json::value& v, const json_path& at) {
  if (!v.is_object()) json_fail(at, "expected an object, got " + json_excerpt(v));
  return v.get_object();
}

inline const boost::json::array& json_array(const boost::json::value& v, const json_path& at) {
  if (!v.is_array()) json_fail(at, "expected an array, got " + json_excerpt(v));
  return v.get_array();
}

inline std::string_view json_string(const boost::json::value& v, const json_path& at) {
  if (!v.is_string()) json_fail(at, "expected a string, got " + json_excerpt(v));
  return v.get_string();
}

/// An integer in [lo, hi]; doubles and booleans are rejected.
inline std::int64_t json_int(const boost::json::value& v, const json_path& at, std::int64_t lo, std::int64_t hi) {
  std::int64_t x = 0;
  if (v.is_int64()) {
    x = v.get_int64();
  } else if (v.is_uint64()) {
    if (v.get_uint64() > static_cast<std::uint64_t>(hi)) json_fail(at, "value " + json_excerpt(v) + " is too large");
    x = static_cast<std::int64_t>(v.get_uint64());
  } else {
    json_fail(at, "expected an integer, got " + json_excerpt(v));
  }
  if (x < lo || x > hi)
    json_fail(at, "value " + std::to_string(x) + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}

inline std::uint32_t json_u32(const boost::json::value& v, const json_path& at) {
  return static_cast<std::uint32_t>(json_int(v, at, 0, std::numeric_limits<std::uint32_t>::max()));
}

/// TVM writes numeric node attributes as strings ("num_outputs": "2").
inline std::uint32_t json_u32_string(const boost::json::value& v, const json_path& at) {
  std::string_view s = json_string(v, at);
  std::uint32_t x = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
  if (s.empty() || ec != std::errc{} || end != s.data() + s.size())
    json_fail(at, "expected an unsigned integer in a string, got " + json_excerpt(v));
  return x;
}

}  // namespace detail
GEXEC_NAMESPACE_END
