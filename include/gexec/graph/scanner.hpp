#pragma once
// Reads TVM graph JSON in one pass over the text straight into a compact_graph and
// checks it by the rules check_graph() keeps (graph/checks.hpp), with nothing allocated
// per node for graphs in the form TVM writes (beyond node attributes other than the four
// gexec reads).
//
// This scanner only accepts: it returns true only for text that the document reader
// (graph/json.hpp) reads and validate() accepts, with the compact graph that validate()
// would make, field for field. On anything else it returns false at once and
// parse_graph() reads the text again with the document reader, which names the error.
// Strings are decoded as Boost.JSON decodes them (escapes, surrogate pairs, UTF-8
// checked); "metadata" is read by the function parse_graph() passes, as the document
// reader reads it. The scanner gives up on more than the document reader refuses:
// escapes in keys the scanner knows and in the type tags of graph attributes, numbers
// that are not plain integers, keys after "metadata", graph attributes other than
// shape, dltype, storage_id, device_index and storage_scope, node attributes whose
// value is not a string, and "attrs" together with "attr" in one node.

#include "../config.hpp"

#include <dlpack/dlpack.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../detail/shape.hpp"
#include "../dtype.hpp"
#include "../ndarray.hpp"
#include "checks.hpp"
#include "compact.hpp"
#include "../detail/json_cursor.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

/// Reads the JSON value at the start of `text` (whitespace around it allowed) as the
/// document reader reads "metadata": false if the document reader would refuse it;
/// otherwise its serialized form in `out` and the bytes read in `used`.
using metadata_reader = bool (*)(std::string_view text, std::string& out, std::size_t& used);

class graph_scanner : json_cursor {
 public:
  graph_scanner(std::string_view text, compact_graph& g, metadata_reader read_metadata) noexcept
      : json_cursor(text), g_(g), read_metadata_(read_metadata) {}

  bool run() {
    if (static_cast<std::size_t>(end_ - begin_) >= std::numeric_limits<std::uint32_t>::max()) return false;
    // The text must end in '}' and whitespace. That last '}' bounds every read below that
    // is not checked against the end: whitespace and digits stop at it, quotes and the
    // other expected characters are not it, and only the graph object may close there.
    const char* t = end_;
    while (t != begin_ && is_ws(t[-1])) --t;
    if (t == begin_ || t[-1] != '}') return false;
    last_ = t - 1;
    estimate();
    if (!graph_object()) return false;
    while (p_ != end_ && is_ws(*p_)) ++p_;
    return p_ == end_ && finish();
  }
  /// Where the scan stopped: the text's size after a graph, the byte it gave up at
  /// (or just past what it gave up on) otherwise.
  [[nodiscard]] std::size_t offset() const noexcept { return static_cast<std::size_t>(std::min(p_, end_) - begin_); }

 private:
  /// [node, index] or [node, index, version]
  bool entry(node_entry& e) noexcept {
    if (!eat('[') || !u32(e.node_id) || !eat_sep(',') || !u32(e.index)) return false;
    skip_ws();
    if (*p_ == ']') {
      ++p_;
      e.version = 0;
      return true;
    }
    return eat_sep(',') && u32(e.version) && eat(']');
  }

  // ---- sizes -----------------------------------------------------------------------

  /// Guesses the node and entry counts from "node_row_ptr" (last in TVM's files), so
  /// that the per-node and per-entry arrays are allocated once. A wrong guess costs
  /// memory or time only.
  void estimate() noexcept {
    static constexpr char key[] = "\"node_row_ptr\"";
    constexpr std::size_t klen = sizeof key - 1;
    const char* found = nullptr;
    const char* q = end_;
    for (int tries = 0; tries < 8 && q != begin_; ++tries) {  // from the end: TVM writes it last
      const void* r = memrchr(begin_, '"', static_cast<std::size_t>(q - begin_));
      if (!r) break;
      q = static_cast<const char*>(r);
      if (static_cast<std::size_t>(q - begin_) + 1 >= klen && std::memcmp(q + 1 - klen, key, klen) == 0) {
        found = q + 1;
        break;
      }
    }
    if (!found) {
      const void* r = memmem(begin_, static_cast<std::size_t>(end_ - begin_), key, klen);
      if (!r) return;
      found = static_cast<const char*>(r) + klen;
    }
    const char* s = found;
    while (s != end_ && *s != '[') {
      if (*s != ':' && !is_ws(*s)) return;
      ++s;
    }
    if (s == end_) return;
    const void* close = std::memchr(s, ']', static_cast<std::size_t>(end_ - s));
    if (!close) return;
    const char* c = static_cast<const char*>(close);
    const auto len = static_cast<std::size_t>(c - s);
    std::size_t commas = 0;
    for (std::size_t k = 0; k < len; k += 4096) {  // in blocks that a 32-bit count holds, so that it vectorizes
      std::uint32_t block = 0;
      const std::size_t stop = std::min(len, k + 4096);
      for (std::size_t j = k; j < stop; ++j) block += s[j] == ',' ? 1u : 0u;
      commas += block;
    }
    const char* t = c;
    while (t != s && is_ws(t[-1])) --t;
    std::uint64_t last = 0, scale = 1;
    int digits = 0;
    while (t != s && static_cast<unsigned char>(t[-1] - '0') < 10 && digits < 10) {
      last += scale * static_cast<unsigned>(t[-1] - '0');
      scale *= 10;
      ++digits;
      --t;
    }
    if (digits == 0 || last > (std::uint64_t{1} << 28) || commas > (std::size_t{1} << 28)) return;
    est_nodes_ = commas;  // n + 1 elements, n commas
    est_entries_ = static_cast<std::size_t>(last);
  }

  /// Makes room for `more` elements past size(), growing toward `total` (the guess for
  /// the whole array, extrapolated from what is filled so far) rather than doubling.
  template <class V>
  static void room(V& v, std::size_t more, std::size_t done, std::size_t total) {
    const std::size_t need = v.size() + more;
    if (need <= v.capacity()) return;
    std::size_t want = v.capacity() + v.capacity() / 4;
    if (done != 0 && total > done) want = std::max(want, v.size() / done * total + v.size() / done * total / 16);
    v.reserve(std::max({need, want, std::size_t{16}}));
  }
  template <class V>
  static void fit(V& v) {
    if (v.capacity() > v.size() + v.size() / 4 + 16) v.shrink_to_fit();
  }

  // ---- the graph object ----------------------------------------------------------

  bool graph_object() {
    if (!eat('{')) return false;
    unsigned seen = 0;
    bool bad = false;
    do {
      if (!eat('"')) return false;
      unsigned bit = 0;
      switch (*p_) {
        case 'n': bit = word("nodes") ? 1u : word("node_row_ptr") ? 4u : 0u; break;
        case 'a': bit = word("arg_nodes") ? 2u : word("attrs") ? 16u : 0u; break;
        case 'h': bit = word("heads") ? 8u : 0u; break;
        case 'm': return word("metadata") && eat_sep(':') && metadata() && seen == 31;
        default: break;
      }
      if (bit == 0 || (seen & bit) || !eat_sep(':')) return false;  // an unknown key or a repeated one
      seen |= bit;
      bool ok = false;
      switch (bit) {
        case 1: ok = nodes(); break;
        case 2: ok = u32_list(g_.arg_nodes); break;
        case 4: ok = row_ptr(); break;
        case 8: ok = heads(); break;
        default: ok = graph_attrs(); break;
      }
      if (!ok) return false;
    } while (next_or_close('}', bad, true));
    return !bad && seen == 31;
  }

  /// "metadata" and its value, which ends the graph (the document reader, as TVM, reads
  /// no further keys; the scanner leaves any to it), through read_metadata_.
  bool metadata() {
    std::size_t used = 0;
    if (!read_metadata_ || !read_metadata_(std::string_view(p_, static_cast<std::size_t>(last_ - p_)), g_.metadata, used)) return false;
    p_ += used;
    skip_ws();
    if (p_ != last_) return false;
    ++p_;
    return true;
  }

  bool u32_list(std::vector<std::uint32_t>& out) { return eat('[') && u32_list_tail(out); }

  bool heads() {
    if (!eat('[')) return false;
    if (peek(']')) return ++p_, true;
    bool bad = false;
    do {
      node_entry e;
      if (!entry(e)) return false;
      g_.heads.push_back(e);
    } while (next_or_close(']', bad));
    return !bad;
  }

  /// node_row_ptr: compared with the rows the nodes made if they came first, kept to
  /// check the nodes against otherwise.
  // Everything it calls inlined: the per-node and per-entry loops run here.
  GEXEC_DETAIL_FLATTEN bool row_ptr() {
    auto& rows = g_.node_row_ptr;
    if (!eat('[')) return false;
    if (!nodes_read_) {
      if (!u32_list_tail(rows)) return false;
      rows_given_ = true;
      return !rows.empty() && graph_rules::first_row(rows[0]);
    }
    std::size_t k = 0;
    if (eat(']')) return false;  // the nodes made at least [0]
    bool bad = false;
    do {
      std::uint32_t x = 0;
      if (!u32(x) || k >= rows.size() || rows[k] != x) return false;
      ++k;
    } while (next_or_close(']', bad));
    return !bad && k == rows.size();
  }
  bool u32_list_tail(std::vector<std::uint32_t>& out) {
    if (peek(']')) return ++p_, true;
    bool bad = false;
    do {
      std::uint32_t x = 0;
      if (!u32(x)) return false;
      out.push_back(x);
    } while (next_or_close(']', bad));
    return !bad;
  }

  // ---- nodes ---------------------------------------------------------------------

  // Everything it calls inlined: the per-node and per-entry loops run here.
  GEXEC_DETAIL_FLATTEN bool nodes() {
    if (!eat('[')) return false;
    std::size_t n = est_nodes_;
    if (rows_given_) n = g_.node_row_ptr.size() - 1;
    n = std::min(n, static_cast<std::size_t>(end_ - begin_) / 32);  // a node takes more than 32 bytes of text
    if (n != 0) {
      g_.name_ptr.reserve(n + 1);
      g_.func.reserve(n);
      g_.flags.reserve(n);
      g_.input_ptr.reserve(n + 1);
      g_.inputs.reserve(n);
      g_.names.reserve(n * 8);
      if (!rows_given_) g_.node_row_ptr.reserve(n + 1);
    }
    est_nodes_ = n;
    g_.name_ptr.push_back(0);
    g_.input_ptr.push_back(0);
    if (!rows_given_) g_.node_row_ptr.push_back(0);
    nodes_read_ = true;
    if (eat(']')) return !rows_given_ || g_.node_row_ptr.size() == 1;
    bool bad = false;
    std::uint32_t i = 0;
    do {
      if (!node(i)) return false;
      ++i;
    } while (next_or_close(']', bad));
    if (bad) return false;
    return !rows_given_ || g_.node_row_ptr.size() == std::size_t{i} + 1;
  }

  enum : unsigned { k_op = 1, k_name = 2, k_inputs = 4, k_attrs = 8, k_deps = 16 };
  enum : std::uint8_t { op_unknown, op_null, op_tvm };

  struct node_state {
    std::uint8_t op = op_unknown;
    std::string_view func_name;
    std::uint32_t num_inputs = 0, num_outputs = 1, flatten = 0;
    std::uint32_t n_inputs = 0;
    std::uint32_t fid = compact_graph::no_func;  // known when the name is the last one interned
    bool func_raw = true;                        // func_name is a view into the text
  };

  bool node(std::uint32_t i) {
    if (!eat('{')) return false;
    node_state st;
    unsigned seen = 0;
    extra_.clear();  // deps_ and node_kept_ are cleared when a node that had them is done
    // A key not seen before in this object, then ':'. "attrs" and "attr" both in one
    // node: the document reader merges them; left to it.
    auto key = [&](unsigned bit) {
      if (seen & bit) return false;
      seen |= bit;
      return eat_sep(':');
    };
    auto member = [&] {
      if (!eat('"')) return false;
      switch (*p_) {
        case 'o':
          if (!word("op") || !key(k_op) || !eat('"')) return false;
          if (word("tvm_op")) {
            st.op = op_tvm;
          } else if (word("null")) {
            st.op = op_null;
          } else {
            return false;
          }
          return true;
        case 'n':
          return word("name") && key(k_name) && eat('"') && name_body(i);
        case 'i':
          return word("inputs") && key(k_inputs) && inputs(i, st);
        case 'a':
          return (word("attrs") || word("attr")) && key(k_attrs) && node_attrs(st);
        case 'c':
          return word("control_deps") && key(k_deps) && control_deps(i);
        default:
          return false;
      }
    };
    // TVM writes "op", "name", "attrs", "inputs" in this order and spacing: read as
    // literals as far as they match, then member by member.
    bool read = false;
    if (lit(R"("op": "tvm_op", "name": ")")) {
      st.op = op_tvm;
      read = true;
    } else if (lit(R"("op": "null", "name": ")")) {
      st.op = op_null;
      read = true;
    }
    if (read) {
      seen = k_op | k_name;
      if (!name_body(i)) return false;
      if (lit(R"(, "attrs": )")) {
        seen |= k_attrs;
        if (!node_attrs(st)) return false;
      }
      if (lit(R"(, "inputs": )")) {
        seen |= k_inputs;
        if (!inputs(i, st)) return false;
      }
    } else if (!member()) {
      return false;
    }
    bool bad = false;
    while (next_or_close('}', bad))
      if (!member()) return false;
    if (bad || (seen & 7) != 7) return false;
    return node_done(i, st, (seen & k_attrs) != 0);
  }

  /// A node's name, its opening quote consumed.
  bool name_body(std::uint32_t i) {
    std::string_view name;
    if (!string_body(name, keep::now, true)) return false;
    room(g_.names, name.size(), i, est_nodes_);
    g_.names.append(name);
    return true;
  }

  bool inputs(std::uint32_t i, node_state& st) {
    if (!eat('[')) return false;
    if (eat(']')) return true;
    const auto& rows = g_.node_row_ptr;
    bool bad = false;
    do {
      node_entry e;
      if (!entry(e) || !graph_rules::before(e.node_id, i) ||
          !graph_rules::output_of(e.index, rows[e.node_id + 1] - rows[e.node_id]))
        return false;
      room(g_.inputs, 1, i, est_nodes_);
      g_.inputs.push_back(e);
      ++st.n_inputs;
    } while (next_or_close(']', bad));
    return !bad;
  }

  /// Node i's control dependencies, kept until node_done().
  bool control_deps(std::uint32_t i) {
    if (!eat('[')) return false;
    if (peek(']')) return ++p_, true;
    bool bad = false;
    do {
      std::uint32_t d = 0;
      if (!u32(d) || !graph_rules::before(d, i)) return false;
      deps_.push_back(d);
    } while (next_or_close(']', bad));
    return !bad;
  }

  bool node_attrs(node_state& st) {
    if (!eat('{')) return false;
    unsigned seen = 0;
    auto key = [&](unsigned bit) {
      if (seen & bit) return false;
      seen |= bit;
      return eat_sep(':');
    };
    auto func_body = [&] {
      if (last_func_raw_ && same_string(last_func_)) {  // the kernel of the node before, as in chains
        st.func_name = last_func_;
        st.fid = last_fid_;
        return true;
      }
      if (!string_body(st.func_name, keep::graph, true)) return false;
      st.func_raw = raw(st.func_name);
      return true;
    };
    auto member = [&] {
      if (!eat('"')) return false;
      if (*p_ == 'f' && word("func_name")) return key(1) && eat('"') && func_body();
      if (*p_ == 'n' && word("num_inputs")) return key(2) && eat('"') && u32_body(st.num_inputs);
      if (*p_ == 'n' && word("num_outputs")) return key(4) && eat('"') && u32_body(st.num_outputs);
      if (*p_ == 'f' && word("flatten_data")) return key(8) && eat('"') && u32_body(st.flatten);
      std::string_view name, value;
      if (!string_body(name, keep::node)) return false;
      // An escaped spelling of a key read above: left to the document reader.
      if (!raw(name) && (name == "func_name" || name == "num_inputs" || name == "num_outputs" || name == "flatten_data")) return false;
      if (!eat_sep(':') || !string_value(value, keep::node) || extra_.size() >= max_extra) return false;
      for (const auto& kv : extra_)
        if (kv.first == name) return false;  // a repeated key
      extra_.emplace_back(name, value);
      return true;
    };
    // TVM's order and spacing first, as literals, as far as they match.
    if (lit(R"("num_outputs": ")")) {
      seen = 4;
      if (!u32_body(st.num_outputs)) return false;
      if (lit(R"(, "num_inputs": ")")) {
        seen |= 2;
        if (!u32_body(st.num_inputs)) return false;
        if (lit(R"(, "flatten_data": ")")) {
          seen |= 8;
          if (!u32_body(st.flatten)) return false;
          if (lit(R"(, "func_name": ")")) {
            seen |= 1;
            if (!func_body()) return false;
          }
        }
      }
    } else if (!member()) {
      return false;
    }
    bool bad = false;
    while (next_or_close('}', bad))
      if (!member()) return false;
    return !bad && seen == 15;
  }

  bool node_done(std::uint32_t i, const node_state& st, bool has_attrs) {
    auto& rows = g_.node_row_ptr;
    std::uint32_t outputs = 1;
    std::uint32_t fid = compact_graph::no_func;
    if (st.op == op_tvm) {
      if (!has_attrs || !graph_rules::kernel_named(st.func_name) || !graph_rules::inputs_counted(st.num_inputs, st.n_inputs) ||
          !graph_rules::has_output(st.num_outputs) || !graph_rules::copy_one_to_one(st.func_name, st.n_inputs, st.num_outputs))
        return false;
      outputs = st.num_outputs;
      fid = st.fid != compact_graph::no_func ? st.fid : intern(st.func_name, st.func_raw);
      if (fid == compact_graph::no_func) return false;
    } else if (!graph_rules::null_outputs(st.num_outputs) || !graph_rules::null_inputs(st.n_inputs)) {  // a "null" node
      return false;
    }
    if (rows_given_) {
      if (rows.size() < std::size_t{i} + 2 || !graph_rules::rows_span(rows[i], rows[i + 1], outputs)) return false;
    } else {
      const std::uint64_t next = std::uint64_t{rows.back()} + outputs;
      if (next > std::numeric_limits<std::uint32_t>::max()) return false;
      rows.push_back(static_cast<std::uint32_t>(next));
    }
    g_.name_ptr.push_back(static_cast<std::uint32_t>(g_.names.size()));
    g_.input_ptr.push_back(static_cast<std::uint32_t>(g_.inputs.size()));
    g_.func.push_back(fid);
    g_.flags.push_back(static_cast<std::uint8_t>((st.flatten != 0 ? compact_graph::flag_flatten_data : 0) |
                                                 (has_attrs ? compact_graph::flag_has_attrs : 0)));
    const bool odd_null = st.op == op_null && (st.num_inputs != 0 || !st.func_name.empty());
    if (odd_null || !extra_.empty() || !deps_.empty()) {
      compact_graph::node_extra& x = g_.extras.emplace_back();
      x.node = i;
      x.num_inputs = st.num_inputs;
      if (st.op == op_null) x.func_name = st.func_name;
      x.attrs.reserve(extra_.size());
      for (const auto& [k, v] : extra_) x.attrs.emplace_back(k, v);
      x.control_deps = deps_;
      deps_.clear();
      node_kept_.clear();
    }
    return true;
  }

  /// The index of kernel `name` in funcs (the names are views into the text until
  /// finish()), or no_func when its probe runs long: the hash reads only the ends of a
  /// name, so text made to collide goes to the other readers instead of costing time
  /// quadratic in the number of names.
  /// `raw`: the name is a view into the text (not decoded), which func_body() may
  /// compare with the text that follows.
  std::uint32_t intern(std::string_view name, bool raw) {
    if (name == last_func_) return last_fid_;
    last_func_raw_ = raw;
    if (func_views_.size() * 2 >= slots_.size()) rehash(slots_.empty() ? 64 : slots_.size() * 2);
    const std::size_t mask = slots_.size() - 1;
    constexpr int max_probe = 64;
    int probe = 0;
    for (std::size_t h = hash(name) & mask;; h = (h + 1) & mask) {
      if (++probe > max_probe) return compact_graph::no_func;
      const std::uint32_t s = slots_[h];
      if (s == 0) {
        func_views_.push_back(name);
        slots_[h] = static_cast<std::uint32_t>(func_views_.size());
        break;
      }
      if (func_views_[s - 1] == name) {
        last_func_ = name;
        return last_fid_ = s - 1;
      }
    }
    last_func_ = name;
    return last_fid_ = static_cast<std::uint32_t>(func_views_.size() - 1);
  }
  static std::size_t hash(std::string_view s) noexcept {
    std::uint64_t h = s.size() * 0x9e3779b97f4a7c15ull;
    if (s.size() >= 8) {
      h ^= load8(s.data());
      h *= 0xff51afd7ed558ccdull;
      h ^= load8(s.data() + s.size() / 2 - 4);  // kernel names often differ only inside
      h *= 0xff51afd7ed558ccdull;
      h ^= load8(s.data() + s.size() - 8);
    } else {
      for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
    }
    h *= 0xc4ceb9fe1a85ec53ull;
    return static_cast<std::size_t>(h ^ (h >> 29));
  }
  void rehash(std::size_t size) {
    slots_.assign(size, 0);
    for (std::size_t k = 0; k < func_views_.size(); ++k) {
      std::size_t h = hash(func_views_[k]) & (size - 1);
      while (slots_[h] != 0) h = (h + 1) & (size - 1);
      slots_[h] = static_cast<std::uint32_t>(k + 1);
    }
  }

  // ---- graph attributes ----------------------------------------------------------

  // Everything it calls inlined: the per-node and per-entry loops run here.
  GEXEC_DETAIL_FLATTEN bool graph_attrs() {
    if (!eat('{')) return false;
    unsigned seen = 0;
    bool bad = false;
    do {
      if (!eat('"')) return false;
      unsigned bit = 0;
      switch (*p_) {
        case 's': bit = word("shape") ? 1u : word("storage_id") ? 4u : word("storage_scope") ? 16u : 0u; break;
        case 'd': bit = word("dltype") ? 2u : word("device_index") ? 8u : 0u; break;
        default: break;
      }
      // Other attributes are left to the document reader.
      if (bit == 0 || (seen & bit) || !eat_sep(':') || !eat('[')) return false;
      seen |= bit;
      bool ok = false;
      switch (bit) {
        case 1: ok = quoted("list_shape") && eat_sep(',') && shapes(); break;
        case 2: ok = quoted("list_str") && eat_sep(',') && dtypes(); break;
        case 4: ok = quoted("list_int") && eat_sep(',') && i32_list(g_.storage_id); break;
        case 8: ok = quoted("list_int") && eat_sep(',') && i32_list(g_.device_index); break;
        default: ok = quoted("list_str") && eat_sep(',') && scopes(); break;
      }
      if (!ok || !eat(']')) return false;
    } while (next_or_close('}', bad));
    return !bad && (seen & 7) == 7;
  }

  /// The entry count if known, else the guess; never more than the text could hold.
  std::size_t entries_guess() const noexcept {
    const std::size_t m = nodes_read_ || rows_given_ ? g_.node_row_ptr.back() : est_entries_;
    return std::min(m, static_cast<std::size_t>(end_ - begin_) / 8);
  }

  bool dtypes() {
    if (!eat('[')) return false;
    g_.dltype.reserve(entries_guess());
    if (eat(']')) return true;
    std::string_view last;
    DLDataType last_t{};
    bool bad = false;
    do {
      if (!eat('"')) return false;
      if (!same_string(last)) {
        std::string_view name;
        if (!string_body(name)) return false;
        const auto t = try_parse_dtype(name);
        if (!t || !graph_rules::dtype_ok(*t)) return false;
        last = raw(name) ? name : std::string_view();  // same_string() compares with the text
        last_t = *t;
      }
      g_.dltype.push_back(last_t);
    } while (next_or_close(']', bad));
    return !bad;
  }

  [[gnu::noinline]] bool scopes() {  // rare: kept out of graph_attrs()' loops
    if (!eat('[')) return false;
    if (eat(']')) return true;
    bool bad = false;
    do {
      std::string_view scope;
      if (!string_value(scope)) return false;
      g_.storage_scope.emplace_back(scope);
    } while (next_or_close(']', bad));
    return !bad;
  }

  bool i32_list(std::vector<std::int32_t>& out) {
    if (!eat('[')) return false;
    out.reserve(entries_guess());
    if (peek(']')) return ++p_, true;
    bool bad = false;
    do {
      std::int64_t x = 0;
      if (!integer(x, std::numeric_limits<std::int32_t>::min(), std::numeric_limits<std::int32_t>::max())) return false;
      out.push_back(static_cast<std::int32_t>(x));
    } while (next_or_close(']', bad));
    return !bad;
  }

  bool shapes() {
    if (!eat('[')) return false;
    const std::size_t m = entries_guess();
    g_.shape_ptr.reserve(m + 1);
    g_.dims.reserve(m);
    g_.shape_ptr.push_back(0);
    if (peek(']')) return ++p_, true;
    bool bad = false;
    std::size_t e = 0;
    do {
      if (!eat('[')) return false;
      if (peek(']')) {
        ++p_;
      } else {
        std::size_t ndim = 0;
        bool bad_dim = false;
        do {
          std::int64_t d = 0;
          if (!integer(d, std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max()) ||
              !graph_rules::dim_ok(d) || !graph_rules::ndim_ok(++ndim))
            return false;
          room(g_.dims, 1, e, m);
          g_.dims.push_back(d);
        } while (next_or_close(']', bad_dim));
        if (bad_dim) return false;
      }
      g_.shape_ptr.push_back(static_cast<std::uint32_t>(g_.dims.size()));
      ++e;
    } while (next_or_close(']', bad));
    return !bad;
  }

  // ---- the rules across sections -----------------------------------------------

  bool finish() {
    using rules = graph_rules;
    const auto& rows = g_.node_row_ptr;
    const std::size_t n = g_.func.size();
    if (!rules::row_count(rows.size(), n)) return false;
    const std::uint32_t m = rows[n];
    if (!rules::one_per_entry(g_.shape_ptr.size() - 1, m, false) || !rules::one_per_entry(g_.dltype.size(), m, false) ||
        !rules::one_per_entry(g_.storage_id.size(), m, false) || !rules::one_per_entry(g_.device_index.size(), m, true) ||
        !rules::one_per_entry(g_.storage_scope.size(), m, true))
      return false;

    // Each entry's rank, dimensions and dtype were checked as they were read.
    for (std::uint32_t e = 0; e < m; ++e)
      if (!rules::size_ok(g_.shape(e), g_.dltype[e]) || !rules::storage_id_ok(g_.storage_id[e])) return false;
    if (!g_.device_index.empty()) {
      storage_first_entry first_on_storage(m);
      for (std::uint32_t e = 0; e < m; ++e) {
        const std::int32_t dev = g_.device_index[e];
        if (!rules::device_ok(dev) || g_.device_index[first_on_storage.first(g_.storage_id[e], e)] != dev) return false;
      }
    }

    for (const node_entry& h : g_.heads)
      if (!rules::in_range(h.node_id, n) || !rules::output_of(h.index, rows[h.node_id + 1] - rows[h.node_id])) return false;

    first_by_name arg_names(g_.arg_nodes.size());
    for (std::size_t k = 0; k < g_.arg_nodes.size(); ++k) {
      const std::uint32_t nid = g_.arg_nodes[k];
      if (!rules::in_range(nid, n) || g_.func[nid] != compact_graph::no_func || arg_names.first(g_.name(nid), k) != k) return false;
    }

    g_.funcs.reserve(func_views_.size());
    for (std::string_view f : func_views_) g_.funcs.emplace_back(f);
    fit(g_.names);
    fit(g_.inputs);
    fit(g_.dims);
    fit(g_.extras);
    return true;
  }

  static constexpr std::size_t max_extra = 16;  // more other attributes in one node: left to the other readers

  compact_graph& g_;
  metadata_reader read_metadata_;
  std::size_t est_nodes_ = 0, est_entries_ = 0;
  bool nodes_read_ = false, rows_given_ = false;
  std::vector<std::pair<std::string_view, std::string_view>> extra_;
  std::vector<std::uint32_t> deps_;  // the node's control_deps
  std::vector<std::string_view> func_views_;
  std::vector<std::uint32_t> slots_;
  std::string_view last_func_;
  std::uint32_t last_fid_ = 0;
  bool last_func_raw_ = true;  // last_func_ is a view into the text
};

/// Reads `text` into `out` and checks it; true only if the document reader and
/// validate() would accept the text and make the same compact graph. On false, `out`
/// holds whatever was read before the scanner gave up. Without `read_metadata`, the
/// scanner gives up on "metadata". `stopped`, if given, is set to where the scanner
/// stopped (graph_scanner::offset).
inline bool scan_graph(std::string_view text, compact_graph& out, metadata_reader read_metadata = nullptr,
                       std::size_t* stopped = nullptr) {
  out = compact_graph();
  graph_scanner scanner(text, out, read_metadata);
  const bool ok = scanner.run();
  if (stopped) *stopped = scanner.offset();
  return ok;
}

}  // namespace detail
GEXEC_NAMESPACE_END
