#pragma once
// Reads TVM graph JSON straight into gexec::graph as Boost.JSON's streaming parser
// walks the text: no document, nothing per node but the graph's own data.
//
// This reader only accepts. Whatever the document reader (graph/json.hpp) would refuse
// or treat specially, it gives up on at once: a value of the wrong type, an unknown or
// repeated key, a number out of range, a missing key, text that is not JSON, a
// "metadata" key, an object where nothing is read. parse_graph() then reads the text
// again with the document reader, which names the error exactly as it always has. So
// the graph this reader returns is, field for field, the one the document reader makes
// of the same text, and error messages come from one place.

#include "../config.hpp"

#include <boost/json.hpp>
#include <boost/json/basic_parser_impl.hpp>

#include <charconv>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "../dtype.hpp"
#include "../graph/data.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

class graph_stream_handler {
 public:
  // The document reader's limits, so that both accept the same sizes.
  static constexpr std::size_t max_object_size = boost::json::object::max_size();
  static constexpr std::size_t max_array_size = boost::json::array::max_size();
  static constexpr std::size_t max_key_size = boost::json::string::max_size();
  static constexpr std::size_t max_string_size = boost::json::string::max_size();

  /// `text_bytes`: the size of the text, which bounds what may be reserved ahead.
  graph_stream_handler(graph& g, std::size_t text_bytes) : g_(g), text_bytes_(text_bytes) {
    stack_.reserve(16);
  }

  /// Whether every key the document reader requires was there (checked at each object's end).
  [[nodiscard]] bool complete() const noexcept { return done_; }

  using error_code = boost::json::error_code;
  using string_view = boost::json::string_view;

  bool on_document_begin(error_code&) { return true; }
  bool on_document_end(error_code&) { return true; }

  bool on_object_begin(error_code& ec) {
    if (stack_.empty()) return push(ctx::top, ec);
    frame& f = stack_.back();
    ++f.count;
    switch (f.kind) {
      case ctx::nodes:
        g_.nodes.emplace_back();
        return push(ctx::node, ec);
      case ctx::node:
        if (f.next != key_id::node_attrs) return give_up(ec);
        if (g_.nodes.back().has_attrs) return give_up(ec);  // "attrs" and "attr" both: the document reader merges them
        g_.nodes.back().has_attrs = true;
        return push(ctx::node_attrs, ec);
      case ctx::top:
        if (f.next != key_id::top_attrs) return give_up(ec);
        return push(ctx::graph_attrs, ec);
      default:
        return give_up(ec);  // objects inside skipped values would need their keys checked
    }
  }

  bool on_object_end(std::size_t, error_code& ec) {
    const frame f = stack_.back();
    stack_.pop_back();
    switch (f.kind) {
      case ctx::top:
        if (f.seen != 0x1f) return give_up(ec);
        done_ = true;
        return true;
      case ctx::node: {
        if ((f.seen & 7) != 7) return give_up(ec);  // op, name and inputs
        node& n = g_.nodes.back();
        if (!n.is_op() && !n.has_attrs) n.num_outputs = 1;
        return true;
      }
      case ctx::node_attrs:
        return f.seen == 0xf || give_up(ec);
      case ctx::graph_attrs:
        return (f.seen & 7) == 7 || give_up(ec);  // shape, dltype and storage_id
      default:
        return give_up(ec);
    }
  }

  bool on_array_begin(error_code& ec) {
    if (stack_.empty()) return give_up(ec);
    frame& f = stack_.back();
    ++f.count;
    switch (f.kind) {
      case ctx::top:
        switch (f.next) {
          case key_id::nodes: return push(ctx::nodes, ec);
          case key_id::arg_nodes: return push(ctx::u32_list, ec, &g_.arg_nodes);
          case key_id::node_row_ptr:
            g_.node_row_ptr.reserve(std::min(g_.nodes.size() + 1, text_bytes_ / 2));
            return push(ctx::u32_list, ec, &g_.node_row_ptr);
          case key_id::heads: return push(ctx::heads, ec);
          default: return give_up(ec);
        }
      case ctx::node:
        if (f.next == key_id::inputs) return push(ctx::inputs, ec);
        if (f.next == key_id::control_deps) return push(ctx::u32_list, ec, &g_.nodes.back().control_deps);
        return give_up(ec);
      case ctx::inputs:
        g_.nodes.back().inputs.emplace_back();
        return push(ctx::entry, ec, &g_.nodes.back().inputs.back());
      case ctx::heads:
        g_.heads.emplace_back();
        return push(ctx::entry, ec, &g_.heads.back());
      case ctx::graph_attrs:
        return push(ctx::typed, ec, nullptr, f.next);
      case ctx::typed:
        if (f.count != 2) return give_up(ec);
        switch (f.attr) {
          case key_id::shape: reserve_entries(g_.attrs.shape); return push(ctx::shapes, ec);
          case key_id::dltype: reserve_entries(g_.attrs.dltype); return push(ctx::dtypes, ec);
          case key_id::storage_id: reserve_entries(g_.attrs.storage_id); return push(ctx::i32_list, ec, &g_.attrs.storage_id);
          case key_id::device_index: reserve_entries(g_.attrs.device_index); return push(ctx::i32_list, ec, &g_.attrs.device_index);
          case key_id::storage_scope: return push(ctx::scopes, ec);
          default: return push(ctx::skip, ec);
        }
      case ctx::shapes:
        g_.attrs.shape.emplace_back();
        return push(ctx::shape, ec);
      case ctx::skip:
        return push(ctx::skip, ec);
      default:
        return give_up(ec);
    }
  }

  bool on_array_end(std::size_t, error_code& ec) {
    const frame f = stack_.back();
    stack_.pop_back();
    if (f.kind == ctx::entry) return f.count == 2 || f.count == 3 || give_up(ec);
    if (f.kind == ctx::typed) return f.count == 2 || give_up(ec);
    return true;
  }

  bool on_key_part(string_view s, std::size_t, error_code&) {
    part_.append(s.data(), s.size());
    return true;
  }
  bool on_key(string_view s, std::size_t, error_code& ec) {
    std::string_view k(s.data(), s.size());
    if (!part_.empty()) k = part_.append(s.data(), s.size());
    const bool ok = set_key(k);
    part_.clear();
    return ok || give_up(ec);
  }

  bool on_string_part(string_view s, std::size_t, error_code&) {
    part_.append(s.data(), s.size());
    return true;
  }
  bool on_string(string_view s, std::size_t, error_code& ec) {
    std::string_view v(s.data(), s.size());
    if (!part_.empty()) v = part_.append(s.data(), s.size());
    const bool ok = string_value(v);
    part_.clear();
    return ok || give_up(ec);
  }

  bool on_number_part(string_view, error_code&) { return true; }
  bool on_int64(std::int64_t i, string_view, error_code& ec) {
    return integer_value(i, i < 0 ? 0 : static_cast<std::uint64_t>(i), i < 0) || give_up(ec);
  }
  bool on_uint64(std::uint64_t u, string_view, error_code& ec) {
    // Above INT64_MAX: nothing the graph reads takes it.
    return integer_value(0, u, false, true) || give_up(ec);
  }
  bool on_double(double, string_view, error_code& ec) { return scalar_value() || give_up(ec); }
  bool on_bool(bool, error_code& ec) { return scalar_value() || give_up(ec); }
  bool on_null(error_code& ec) { return scalar_value() || give_up(ec); }
  bool on_comment_part(string_view, error_code&) { return true; }
  bool on_comment(string_view, error_code&) { return true; }

 private:
  enum class ctx : std::uint8_t {
    top, nodes, node, inputs, entry, node_attrs, u32_list, heads, graph_attrs, typed, shapes, shape, dtypes, i32_list, scopes, skip
  };
  enum class key_id : std::uint8_t {
    none,
    // top level
    nodes, arg_nodes, node_row_ptr, heads, top_attrs,
    // node
    op, name, inputs, node_attrs, control_deps,
    // node attrs
    func_name, num_inputs, num_outputs, flatten_data, extra,
    // graph attrs
    shape, dltype, storage_id, device_index, storage_scope, other,
  };
  struct frame {
    ctx kind;
    key_id next = key_id::none;// objects: the key whose value comes next
    key_id attr = key_id::none;  // typed: which graph attribute
    unsigned seen = 0;     // objects: bits of the keys seen
    std::size_t count = 0; // arrays: elements begun so far
    void* target = nullptr;
  };

  bool push(ctx kind, error_code&, void* target = nullptr, key_id attr = key_id::none) {
    frame f{kind};
    f.target = target;
    f.attr = attr;
    stack_.push_back(f);
    return true;
  }
  bool give_up(error_code& ec) {
    ec = boost::json::error::syntax;  // any error stops the parser
    return false;
  }

  /// Room for one element per entry, as num_outputs count them; never more than the
  /// text could list (each element takes at least two bytes), whatever they claim.
  template <class V>
  void reserve_entries(V& v) {
    std::size_t n = 0;
    for (const node& nd : g_.nodes) n += nd.num_outputs;
    v.reserve(std::min(n, text_bytes_ / 2));
  }

  // Records key `k` of the innermost object; false if unknown where only known keys go,
  // or repeated.
  bool set_key(std::string_view k) {
    frame& f = stack_.back();
    auto mark = [&](key_id id, unsigned bit) {
      if (f.seen & (1u << bit)) return false;
      f.seen |= 1u << bit;
      f.next = id;
      return true;
    };
    switch (f.kind) {
      case ctx::top:
        if (k == "nodes") return mark(key_id::nodes, 0);
        if (k == "arg_nodes") return mark(key_id::arg_nodes, 1);
        if (k == "node_row_ptr") return mark(key_id::node_row_ptr, 2);
        if (k == "heads") return mark(key_id::heads, 3);
        if (k == "attrs") return mark(key_id::top_attrs, 4);
        return false;  // "metadata" or an unknown key
      case ctx::node:
        if (k == "op") return mark(key_id::op, 0);
        if (k == "name") return mark(key_id::name, 1);
        if (k == "inputs") return mark(key_id::inputs, 2);
        if (k == "attrs") return mark(key_id::node_attrs, 3);
        if (k == "attr") return mark(key_id::node_attrs, 4);
        if (k == "control_deps") return mark(key_id::control_deps, 5);
        return false;
      case ctx::node_attrs: {
        if (k == "func_name") return mark(key_id::func_name, 0);
        if (k == "num_inputs") return mark(key_id::num_inputs, 1);
        if (k == "num_outputs") return mark(key_id::num_outputs, 2);
        if (k == "flatten_data") return mark(key_id::flatten_data, 3);
        auto& extra = g_.nodes.back().extra_attrs;
        if (extra.size() >= max_other_keys) return false;
        for (const auto& kv : extra)
          if (kv.first == k) return false;
        extra.emplace_back(std::string(k), std::string());
        f.next = key_id::extra;
        return true;
      }
      case ctx::graph_attrs: {
        if (k == "shape") return mark(key_id::shape, 0);
        if (k == "dltype") return mark(key_id::dltype, 1);
        if (k == "storage_id") return mark(key_id::storage_id, 2);
        if (k == "device_index") return mark(key_id::device_index, 3);
        if (k == "storage_scope") return mark(key_id::storage_scope, 4);
        if (other_keys_.size() >= max_other_keys) return false;
        for (const std::string& o : other_keys_)
          if (o == k) return false;
        other_keys_.emplace_back(k);
        f.next = key_id::other;
        return true;
      }
      default:
        return false;
    }
  }

  static bool u32_of(std::string_view s, std::uint32_t& out) {
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return !s.empty() && ec == std::errc{} && end == s.data() + s.size();
  }

  bool string_value(std::string_view v) {
    if (stack_.empty()) return false;
    frame& f = stack_.back();
    ++f.count;
    switch (f.kind) {
      case ctx::node: {
        node& n = g_.nodes.back();
        if (f.next == key_id::op) return n.op.assign(v), true;
        if (f.next == key_id::name) return n.name.assign(v), true;
        return false;
      }
      case ctx::node_attrs: {
        node& n = g_.nodes.back();
        std::uint32_t x = 0;
        switch (f.next) {
          case key_id::func_name: n.func_name.assign(v); return true;
          case key_id::num_inputs: return u32_of(v, n.num_inputs);
          case key_id::num_outputs: return u32_of(v, n.num_outputs);
          case key_id::flatten_data:
            if (!u32_of(v, x)) return false;
            n.flatten_data = x != 0;
            return true;
          case key_id::extra: n.extra_attrs.back().second.assign(v); return true;
          default: return false;
        }
      }
      case ctx::typed:
        if (f.count == 2) return f.attr == key_id::other;  // a skipped attribute's value
        if (f.count != 1) return false;
        switch (f.attr) {  // the type tag
          case key_id::shape: return v == "list_shape";
          case key_id::dltype:
          case key_id::storage_scope: return v == "list_str";
          case key_id::storage_id:
          case key_id::device_index: return v == "list_int";
          default: return v == "list_int" || v == "size_t";
        }
        return false;
      case ctx::dtypes:
        if (v != last_dtype_name_) {
          auto t = try_parse_dtype(v);
          if (!t) return false;
          last_dtype_name_.assign(v);
          last_dtype_ = *t;
        }
        g_.attrs.dltype.push_back(last_dtype_);
        return true;
      case ctx::scopes:
        g_.attrs.storage_scope.emplace_back(v);
        return true;
      case ctx::skip:
        return true;
      default:
        return false;
    }
  }

  // `u` is the value when it is not negative; `huge`: above INT64_MAX.
  bool integer_value(std::int64_t i, std::uint64_t u, bool negative, bool huge = false) {
    if (stack_.empty()) return false;
    frame& f = stack_.back();
    ++f.count;
    constexpr std::uint64_t u32_max = std::numeric_limits<std::uint32_t>::max();
    switch (f.kind) {
      case ctx::entry: {
        if (negative || u > u32_max || f.count > 3) return false;
        auto& e = *static_cast<node_entry*>(f.target);
        (f.count == 1 ? e.node_id : f.count == 2 ? e.index : e.version) = static_cast<std::uint32_t>(u);
        return true;
      }
      case ctx::u32_list:
        if (negative || u > u32_max) return false;
        static_cast<std::vector<std::uint32_t>*>(f.target)->push_back(static_cast<std::uint32_t>(u));
        return true;
      case ctx::shape:
        if (huge) return false;
        g_.attrs.shape.back().push_back(i);
        return true;
      case ctx::i32_list:
        if (huge || i < std::numeric_limits<std::int32_t>::min() || i > std::numeric_limits<std::int32_t>::max()) return false;
        static_cast<std::vector<std::int32_t>*>(f.target)->push_back(static_cast<std::int32_t>(i));
        return true;
      case ctx::typed:
        return f.count == 2 && f.attr == key_id::other;  // a skipped attribute's value
      case ctx::skip:
        return true;
      default:
        return false;
    }
  }

  bool scalar_value() {
    if (stack_.empty()) return false;
    frame& f = stack_.back();
    ++f.count;
    return f.kind == ctx::skip || (f.kind == ctx::typed && f.count == 2 && f.attr == key_id::other);
  }

  // Objects with more keys than this are left to the document reader, which looks
  // them up in a hash set.
  static constexpr std::size_t max_other_keys = 16;

  graph& g_;
  std::vector<frame> stack_;
  std::string part_;  // a key or string the parser delivered in parts
  std::vector<std::string> other_keys_;
  std::string last_dtype_name_;
  DLDataType last_dtype_{};
  bool done_ = false;
  std::size_t text_bytes_;
};

/// Reads `text` into `g` if the document reader would accept it as it is, without a
/// document; false (with `g` in an unspecified state) otherwise.
inline bool read_graph_stream(std::string_view text, graph& g) {
  boost::json::basic_parser<graph_stream_handler> p(boost::json::parse_options{}, g, text.size());
  boost::json::error_code ec;
  const std::size_t used = p.write_some(false, text.data(), text.size(), ec);
  return !ec && used == text.size() && p.handler().complete();
}

}  // namespace detail
GEXEC_NAMESPACE_END
