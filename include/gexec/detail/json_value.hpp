#pragma once
// Any JSON value, read without Boost: the scanner's "metadata" (graph/json_scanned.hpp,
// and graph/json_impl.hpp where it writes the value alike), the check of graph JSON
// before Boost.JSON builds its document (graph/json_impl.hpp: it names where a text
// stops being JSON, and a repeated key by its JSON path, which Boost.JSON's DOM would
// collapse into the last one), and the safetensors header (safetensors_impl.hpp). It
// accepts what Boost.JSON's strict parser accepts and writes a value back as
// boost::json::serialize does, or refuses what it does not write alike: numbers with a
// fraction or an exponent, and integers outside int64 and uint64 (Boost.JSON keeps them
// as doubles, whose shortest form this reader does not write).

#include "../config.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "json_cursor.hpp"
#include "name_index.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

/// How deep arrays and objects nest in graph JSON and safetensors headers at most:
/// Boost.JSON's default parse_options::max_depth, which the document reader keeps.
inline constexpr unsigned json_max_depth = 32;

/// A JSON value as a tree, for readers that look values up (the safetensors header):
/// nodes in document order, each followed by its elements or members' values.
struct json_tree {
  enum class kind : std::uint8_t { null, boolean, integer, number, string, array, object };
  struct node {
    kind type = kind::null;
    bool truth = false;          ///< a boolean's value
    bool negative = false;       ///< an integer's sign ("-0" is 0)
    std::uint64_t magnitude = 0; ///< an integer's magnitude: it fits int64 or uint64
    std::size_t offset = 0;      ///< where the value starts in the text
    std::size_t end = 0;         ///< the index of the node after this value and what it holds
    std::size_t size = 0;        ///< elements or members
    std::string key;             ///< the member's key, for a value in an object
    std::string text;            ///< a string's value; a number's text
  };
  std::vector<node> nodes;

  /// The index of the first element or member value of `i`, and of the one after `c`.
  [[nodiscard]] static std::size_t first(std::size_t i) noexcept { return i + 1; }
  [[nodiscard]] std::size_t next(std::size_t c) const noexcept { return nodes[c].end; }
  /// The member value of object `i` named `k`, or 0 (the root is never a member).
  [[nodiscard]] std::size_t member(std::size_t i, std::string_view k) const noexcept {
    for (std::size_t c = first(i); c != nodes[i].end; c = next(c))
      if (nodes[c].key == k) return c;
    return 0;
  }
  /// A non-negative integer's value.
  [[nodiscard]] bool size_value(std::size_t i, std::uint64_t& out) const noexcept {
    const node& n = nodes[i];
    if (n.type != kind::integer || (n.negative && n.magnitude != 0)) return false;
    out = n.magnitude;
    return true;
  }
  /// Node `i` as compact JSON: as boost::json::serialize writes it, but numbers that are
  /// not integers as the text gives them.
  [[nodiscard]] std::string serialize(std::size_t i) const {
    std::string out;
    write(i, out);
    return out;
  }

 private:
  void write(std::size_t i, std::string& out) const;
};

/// `s` as boost::json::serialize writes a string: quotes, backslashes and control
/// characters escaped (\b \f \n \r \t by name, the rest as \u00xx), everything else
/// as it is.
inline void append_json_string(std::string& o, std::string_view s) {
  o += '"';
  constexpr char hex[] = "0123456789abcdef";
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\b': o += "\\b"; break;
      case '\f': o += "\\f"; break;
      case '\n': o += "\\n"; break;
      case '\r': o += "\\r"; break;
      case '\t': o += "\\t"; break;
      default:
        if (u < 0x20) {
          o += "\\u00";
          o += hex[u >> 4];
          o += hex[u & 15];
        } else {
          o += c;
        }
    }
  }
  o += '"';
}

inline void json_tree::write(std::size_t i, std::string& out) const {
  const node& n = nodes[i];
  switch (n.type) {
    case kind::null: out += "null"; return;
    case kind::boolean: out += n.truth ? "true" : "false"; return;
    case kind::integer:
      if (n.negative && n.magnitude != 0) out += '-';
      out += std::to_string(n.magnitude);
      return;
    case kind::number: out += n.text; return;
    case kind::string: append_json_string(out, n.text); return;
    case kind::array:
    case kind::object: {
      const bool object = n.type == kind::object;
      out += object ? '{' : '[';
      for (std::size_t c = first(i); c != n.end; c = next(c)) {
        if (c != first(i)) out += ',';
        if (object) {
          append_json_string(out, nodes[c].key);
          out += ':';
        }
        write(c, out);
      }
      out += object ? '}' : ']';
      return;
    }
  }
}

/// Reads one JSON value, whitespace around it, checking it as the document reader's
/// parser does (containers nested at most `max_depth` deep, as Boost.JSON's max_depth,
/// and keys once per object) and, given `out`, serializing it as boost::json::serialize
/// does, or given `tree`, keeping it as a json_tree. Every read is bounded by the
/// text's end.
class json_value_reader : json_cursor {
 public:
  /// Why document() returned false.
  enum class fault : std::uint8_t { none, syntax, bad_string, too_deep, duplicate_key, number, incomplete };

  json_value_reader(std::string_view text, std::string* out, unsigned max_depth, json_tree* tree = nullptr) noexcept
      : json_cursor(text), out_(out), tree_(tree), max_depth_(max_depth) {}

  /// Whitespace, one value, whitespace; false on the first fault (what(), offset()).
  /// What follows is left to the caller (offset() says where it starts).
  bool document() {
    ws();
    if (!value(0)) return false;
    ws();
    return true;
  }
  /// Where reading stopped: past the document, or at the fault.
  [[nodiscard]] std::size_t offset() const noexcept { return static_cast<std::size_t>(p_ - begin_); }
  [[nodiscard]] fault what() const noexcept { return fault_; }
  /// The repeated key, decoded, for fault::duplicate_key.
  [[nodiscard]] const std::string& key() const noexcept { return key_; }
  /// Where the repeated key is, for fault::duplicate_key: the keys and indices that lead
  /// to it, then the key ("t.dtype", "a[2].b").
  [[nodiscard]] const std::string& key_path() const noexcept { return key_path_; }

  /// The fault in words, for messages.
  [[nodiscard]] std::string describe() const {
    switch (fault_) {
      case fault::none: return "no fault";
      case fault::syntax: return "syntax error";
      case fault::bad_string: return "a string with a control character, an unknown escape, a lone surrogate or malformed UTF-8";
      case fault::too_deep: return "too deep (arrays and objects nest at most " + std::to_string(max_depth_) + " deep)";
      case fault::duplicate_key: return "duplicate key \"" + printable(key_) + "\" (an object names each key once)";
      case fault::number: return "a number that is not an integer in the range of int64 or uint64";
      case fault::incomplete: return "incomplete JSON";
    }
    return "unknown fault";
  }

 private:
  bool fail(fault f) noexcept {
    fault_ = f;
    return false;
  }
  [[nodiscard]] bool at_end() const noexcept { return p_ == end_; }
  void ws() noexcept {
    while (p_ != end_ && is_ws(*p_)) ++p_;
  }
  void put(char c) {
    if (out_) *out_ += c;
  }
  void put(std::string_view s) {
    if (out_) out_->append(s);
  }

  bool value(unsigned depth, std::string_view key = {}) {
    if (at_end()) return fail(fault::incomplete);
    if (!tree_) return any(depth);
    const std::size_t i = tree_->nodes.size();
    json_tree::node& n = tree_->nodes.emplace_back();
    n.offset = offset();
    n.key.assign(key);
    if (!any(depth)) return false;
    tree_->nodes[i].end = tree_->nodes.size();
    return true;
  }
  bool any(unsigned depth) {
    switch (*p_) {
      case '{': return object(depth + 1);
      case '[': return array(depth + 1);
      case '"': return string();
      case 't': return literal("true");
      case 'f': return literal("false");
      case 'n': return literal("null");
      default: return number();
    }
  }
  /// The tree's node of the value being read (only with a tree).
  json_tree::node& current(std::size_t i) noexcept { return tree_->nodes[i]; }

  template <std::size_t N>
  bool literal(const char (&word)[N]) {
    constexpr std::size_t len = N - 1;
    const auto left = static_cast<std::size_t>(end_ - p_);
    const std::size_t k = std::min(left, len);
    if (std::string_view(p_, k) != std::string_view(word, k)) return fail(fault::syntax);
    if (k < len) {
      p_ = end_;
      return fail(fault::incomplete);
    }
    p_ += len;
    put(std::string_view(word, len));
    if (tree_) {
      json_tree::node& n = tree_->nodes.back();
      n.type = word[0] == 'n' ? json_tree::kind::null : json_tree::kind::boolean;
      n.truth = word[0] == 't';
    }
    return true;
  }

  bool array(unsigned depth) {
    if (depth > max_depth_) return fail(fault::too_deep);
    const std::size_t self = tree_ ? tree_->nodes.size() - 1 : 0;
    if (tree_) current(self).type = json_tree::kind::array;
    ++p_;
    put('[');
    ws();
    if (at_end()) return fail(fault::incomplete);
    if (*p_ == ']') {
      ++p_;
      put(']');
      return true;
    }
    path_.push_back({{}, 0, false});
    for (;; ++path_.back().index) {
      if (!value(depth)) return false;
      if (tree_) ++current(self).size;
      if (const after next = after_item(']'); next != after::more) return next == after::done;
    }
  }

  bool object(unsigned depth) {
    if (depth > max_depth_) return fail(fault::too_deep);
    const std::size_t self = tree_ ? tree_->nodes.size() - 1 : 0;
    if (tree_) current(self).type = json_tree::kind::object;
    ++p_;
    put('{');
    ws();
    if (at_end()) return fail(fault::incomplete);
    if (*p_ == '}') {
      ++p_;
      put('}');
      return true;
    }
    name_index keys;  // this object's keys, decoded -> member index
    path_.push_back({{}, 0, true});
    for (;;) {
      if (at_end()) return fail(fault::incomplete);
      if (*p_ != '"') return fail(fault::syntax);
      const char* key_at = p_;
      std::string_view key;
      ++p_;
      if (!string_body(key)) return string_fault(key_at);
      // Boost.JSON's strict reader refuses a repeated key as soon as it is read.
      const auto [it, fresh] = keys.emplace(key, keys.size());
      path_.back().key = it->first;
      if (!fresh) {
        key_.assign(key);
        for (const step& part : path_) {
          if (!part.object) {
            key_path_ += "[" + std::to_string(part.index) + "]";
          } else {
            if (!key_path_.empty()) key_path_ += '.';
            key_path_ += printable(part.key);
          }
        }
        p_ = key_at;
        return fail(fault::duplicate_key);
      }
      const std::string_view member = it->first;
      put_string(key);
      ws();
      if (at_end()) return fail(fault::incomplete);
      if (*p_ != ':') return fail(fault::syntax);
      ++p_;
      put(':');
      ws();
      if (!value(depth, member)) return false;
      if (tree_) ++current(self).size;
      if (const after next = after_item('}'); next != after::more) return next == after::done;
    }
  }

  /// After an element or a member: `close` ends the container, ',' goes on to the next;
  /// anything else is a fault (recorded by fail()).
  enum class after { done, more, failed };
  after after_item(char close) {
    ws();
    if (at_end()) {
      (void)fail(fault::incomplete);
      return after::failed;
    }
    if (*p_ == close) {
      ++p_;
      put(close);
      path_.pop_back();
      return after::done;
    }
    if (*p_ != ',') {
      (void)fail(fault::syntax);
      return after::failed;
    }
    ++p_;
    put(',');
    ws();
    return after::more;
  }

  bool string() {
    const char* at = p_;
    std::string_view s;
    ++p_;
    if (!string_body(s)) return string_fault(at);
    put_string(s);
    if (tree_) {
      json_tree::node& n = tree_->nodes.back();
      n.type = json_tree::kind::string;
      n.text.assign(s);
    }
    return true;
  }
  /// A string that string_body() refused starts at `at`: cut short, or not well formed.
  bool string_fault(const char* at) noexcept {
    // Unterminated if no quote follows that an odd run of backslashes does not escape.
    bool closed = false;
    for (const char* q = at + 1; q != end_; ++q) {
      if (*q == '\\') {
        if (++q == end_) break;
      } else if (*q == '"') {
        closed = true;
        break;
      }
    }
    p_ = at;
    return fail(closed ? fault::bad_string : fault::incomplete);
  }

  void put_string(std::string_view s) {
    if (out_) append_json_string(*out_, s);
  }

  /// A JSON number. Integers in the range of int64 or uint64 are written as Boost.JSON
  /// writes them ("-0" as "0"); any other number is a fault when serializing (Boost.JSON
  /// would keep a double) and only checked when not.
  bool number() {
    const char* s = p_;
    const bool neg = *p_ == '-';
    p_ += neg;
    if (at_end()) return fail(fault::incomplete);
    if (digit(*p_) >= 10) return fail(fault::syntax);
    std::uint64_t v = 0;
    bool overflow = false;
    if (*p_ == '0') {
      ++p_;
    } else {
      for (; p_ != end_ && digit(*p_) < 10; ++p_) {
        const unsigned d = digit(*p_);
        if (v > (UINT64_MAX - d) / 10) overflow = true;
        v = v * 10 + d;
      }
    }
    bool integral = true;
    if (p_ != end_ && *p_ == '.') {
      integral = false;
      ++p_;
      if (at_end()) return fail(fault::incomplete);
      if (digit(*p_) >= 10) return fail(fault::syntax);
      while (p_ != end_ && digit(*p_) < 10) ++p_;
    }
    if (p_ != end_ && (*p_ == 'e' || *p_ == 'E')) {
      integral = false;
      ++p_;
      if (p_ != end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (at_end()) return fail(fault::incomplete);
      if (digit(*p_) >= 10) return fail(fault::syntax);
      while (p_ != end_ && digit(*p_) < 10) ++p_;
    }
    const bool fits = integral && !overflow && !(neg && v > std::uint64_t{1} << 63);
    if (tree_) {
      json_tree::node& n = tree_->nodes.back();
      n.type = fits ? json_tree::kind::integer : json_tree::kind::number;
      n.negative = neg;
      n.magnitude = v;
      n.text.assign(s, p_);
    }
    if (!out_) return true;
    if (!fits) {
      p_ = s;
      return fail(fault::number);
    }
    if (neg && v == 0) {
      put('0');
    } else {
      put(std::string_view(s, static_cast<std::size_t>(p_ - s)));  // no leading zeros: already canonical
    }
    return true;
  }

  std::string* out_;
  json_tree* tree_;
  unsigned max_depth_;
  fault fault_ = fault::none;
  std::string key_, key_path_;
  struct step {
    std::string_view key;  // in an object: the key being read (in that object's set of keys)
    std::size_t index;     // in an array: the element being read
    bool object;
  };
  std::vector<step> path_;  // the objects and arrays that hold the value being read
};

/// "byte N (line L)" for `offset` in `text`.
inline std::string json_position(std::string_view text, std::size_t offset) {
  offset = std::min(offset, text.size());
  const auto line = 1 + static_cast<std::size_t>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(offset), '\n'));
  return "byte " + std::to_string(offset) + " (line " + std::to_string(line) + ")";
}

/// Up to 24 bytes of `text` from `offset`, printable, for messages.
inline std::string json_near(std::string_view text, std::size_t offset) {
  if (offset >= text.size()) return "the end of the text";
  const std::string_view s = text.substr(offset, 24);
  return "\"" + printable(s) + (offset + s.size() < text.size() ? "...\"" : "\"");
}

/// The scanner's metadata_reader without Boost: the value at the start of `text` as
/// read_metadata_value() (graph/json_impl.hpp) serializes it, one level of nesting
/// taken by the graph object; false where that reader refuses the text and where this
/// one does not write the value alike (see json_value_reader).
inline bool read_metadata_plain(std::string_view text, std::string& out, std::size_t& used) {
  out.clear();
  json_value_reader r(text, &out, json_max_depth - 1);
  const bool ok = r.document();
  used = r.offset();
  if (!ok) out.clear();
  return ok;
}

}  // namespace detail
GEXEC_NAMESPACE_END
