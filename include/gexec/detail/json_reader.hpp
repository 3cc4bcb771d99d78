#pragma once
// Checked access to a Boost.JSON DOM that reports the JSON path of whatever is wrong
// ("nodes[12].inputs[1]"), and the streaming handler that builds the DOM.

#include "../config.hpp"

// The parts of Boost.JSON the readers use (its parser, the DOM built by value_stack, the
// serializer), not <boost/json.hpp>: the conversions and stream parsers are left out of
// what a header-only program preprocesses.
#include <boost/json/basic_parser_impl.hpp>
#include <boost/json/monotonic_resource.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <boost/json/value_stack.hpp>

#include <charconv>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

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
  std::uint32_t x = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
  if (s.empty() || ec != std::errc{} || end != s.data() + s.size())
    json_fail(at, "expected an unsigned integer in a string, got " + json_excerpt(v));
  return x;
}

/// A boost::json::basic_parser handler that builds the same DOM as boost::json::parser
/// (through a value_stack) and refuses an object with two equal keys, which the DOM
/// would otherwise collapse silently into the last one. The JSON path of the repeated
/// key is left in `duplicate_at` and the parse stops with an error.
class strict_json_handler {
 public:
  static constexpr std::size_t max_object_size = boost::json::object::max_size();
  static constexpr std::size_t max_array_size = boost::json::array::max_size();
  static constexpr std::size_t max_key_size = boost::json::string::max_size();
  static constexpr std::size_t max_string_size = boost::json::string::max_size();

  boost::json::value_stack st;
  std::string duplicate_at;   ///< set when a repeated key stopped the parse: its JSON path
  std::string duplicate_key;  ///< and the key, printable

  bool on_document_begin(boost::system::error_code&) { return true; }
  bool on_document_end(boost::system::error_code&) { return true; }
  bool on_object_begin(boost::system::error_code&) {
    value_begins();
    frames_.push_back({true, keys_.size(), 0, nullptr});
    return true;
  }
  bool on_object_end(std::size_t n, boost::system::error_code&) {
    const frame& f = frames_.back();
    if (f.first_key < keys_.size()) key_bytes_.resize(keys_[f.first_key].first);
    keys_.resize(f.first_key);
    frames_.pop_back();
    st.push_object(n);
    return true;
  }
  bool on_array_begin(boost::system::error_code&) {
    value_begins();
    frames_.push_back({false, keys_.size(), 0, nullptr});
    return true;
  }
  bool on_array_end(std::size_t n, boost::system::error_code&) {
    frames_.pop_back();
    st.push_array(n);
    return true;
  }
  bool on_key_part(boost::json::string_view s, std::size_t, boost::system::error_code&) {
    st.push_chars(s);
    key_part_.append(s.data(), s.size());
    return true;
  }
  bool on_key(boost::json::string_view s, std::size_t, boost::system::error_code& ec) {
    st.push_key(s);
    std::string_view key(s.data(), s.size());
    if (!key_part_.empty()) key = key_part_.append(s.data(), s.size());
    const bool fresh = add_key(key);
    key_part_.clear();
    if (!fresh) {
      ec = boost::json::error::syntax;  // any error stops the parser; duplicate_at says which
      return false;
    }
    return true;
  }
  bool on_string_part(boost::json::string_view s, std::size_t, boost::system::error_code&) {
    st.push_chars(s);
    return true;
  }
  bool on_string(boost::json::string_view s, std::size_t, boost::system::error_code&) {
    value_begins();
    st.push_string(s);
    return true;
  }
  bool on_number_part(boost::json::string_view, boost::system::error_code&) { return true; }
  bool on_int64(std::int64_t i, boost::json::string_view, boost::system::error_code&) {
    value_begins();
    st.push_int64(i);
    return true;
  }
  bool on_uint64(std::uint64_t u, boost::json::string_view, boost::system::error_code&) {
    value_begins();
    st.push_uint64(u);
    return true;
  }
  bool on_double(double d, boost::json::string_view, boost::system::error_code&) {
    value_begins();
    st.push_double(d);
    return true;
  }
  bool on_bool(bool b, boost::system::error_code&) {
    value_begins();
    st.push_bool(b);
    return true;
  }
  bool on_null(boost::system::error_code&) {
    value_begins();
    st.push_null();
    return true;
  }
  bool on_comment_part(boost::json::string_view, boost::system::error_code&) { return true; }
  bool on_comment(boost::json::string_view, boost::system::error_code&) { return true; }

 private:
  // Objects of more keys than this look keys up in a hash set instead of comparing
  // with each earlier key, so that no object costs quadratic time.
  static constexpr std::size_t linear_keys = 16;

  struct frame {
    bool object;
    std::size_t first_key;  // this object's keys are keys_[first_key, ...)
    std::size_t elements;   // values begun so far (arrays: the current index is elements - 1)
    std::unique_ptr<std::unordered_set<std::string>> large;  // the keys, once there are many
  };

  void value_begins() noexcept {
    if (!frames_.empty() && !frames_.back().object) ++frames_.back().elements;
  }

  // Records `key` in the innermost object; false (and duplicate_at set) if it is there already.
  bool add_key(std::string_view key) {
    frame& f = frames_.back();
    const std::size_t count = keys_.size() - f.first_key;
    bool fresh = true;
    if (f.large) {
      fresh = f.large->emplace(key).second;
    } else {
      for (std::size_t i = f.first_key; i < keys_.size() && fresh; ++i)
        fresh = key != std::string_view(key_bytes_).substr(keys_[i].first, keys_[i].second);
      if (fresh && count + 1 > linear_keys) {
        f.large = std::make_unique<std::unordered_set<std::string>>();
        for (std::size_t i = f.first_key; i < keys_.size(); ++i)
          f.large->emplace(std::string_view(key_bytes_).substr(keys_[i].first, keys_[i].second));
        f.large->emplace(key);
      }
    }
    if (!fresh) {
      duplicate_at = path_to(key);
      duplicate_key = printable(key);
      return false;
    }
    keys_.emplace_back(key_bytes_.size(), key.size());
    key_bytes_.append(key);
    return true;
  }

  // "nodes[2].attrs.func_name": the enclosing keys and indices, then `key`.
  std::string path_to(std::string_view key) const {
    std::string path;
    for (std::size_t i = 0; i < frames_.size(); ++i) {
      const frame& f = frames_[i];
      if (!f.object) {
        path += "[" + std::to_string(f.elements - 1) + "]";
        continue;
      }
      // The key this object is in the middle of: its last one, or `key` for the innermost.
      std::string_view k = key;
      if (i + 1 < frames_.size()) {
        const std::size_t end = frames_[i + 1].first_key;
        k = std::string_view(key_bytes_).substr(keys_[end - 1].first, keys_[end - 1].second);
      }
      if (!path.empty()) path += ".";
      path += printable(k);
    }
    return path;
  }

  std::vector<frame> frames_;
  std::vector<std::pair<std::size_t, std::size_t>> keys_;  // offset and size in key_bytes_
  std::string key_bytes_;
  std::string key_part_;
};

}  // namespace detail
GEXEC_NAMESPACE_END
