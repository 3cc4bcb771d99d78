#pragma once
// Checked access to a Boost.JSON DOM that reports the JSON path of whatever is wrong
// ("nodes[12].inputs[1]").

#include "../config.hpp"

// The parts of Boost.JSON the readers use (parse() into its DOM, the serializer), not
// <boost/json.hpp>: its parser is called in Boost.JSON's library, never instantiated
// here, and the conversions and stream parsers are left out of what a header-only
// program preprocesses.
#include <boost/json/monotonic_resource.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "../dtype.hpp"
#include "../error.hpp"
#include "json_path.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

/// Short JSON rendering of a value for error messages.
inline std::string json_excerpt(const boost::json::value& v) {
  std::string s = boost::json::serialize(v);
  if (s.size() > 60) {  // cut in place: GCC 12 at -O2 misreads substr(...) + "..." (-Warray-bounds)
    s.resize(57);
    s += "...";
  }
  return s;
}

/// Boost.JSON's text (an object's key, or a string, which converts to it) as a
/// std::string_view. Its string_view is boost::string_view before Boost 1.81, which does
/// not convert to std::string_view, and its string converts to std::string_view only
/// from 1.78 on; data() and size() are common to every version.
inline std::string_view json_view(boost::json::string_view s) noexcept { return {s.data(), s.size()}; }

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
  return json_view(v.get_string());
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
  unsigned x = 0;
  if (s.empty() || read_decimal(s.data(), s.data() + s.size(), std::numeric_limits<std::uint32_t>::max(), x) != s.data() + s.size())
    json_fail(at, "expected an unsigned integer in a string, got " + json_excerpt(v));
  return x;
}

}  // namespace detail
GEXEC_NAMESPACE_END
