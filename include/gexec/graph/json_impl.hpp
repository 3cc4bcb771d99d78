#pragma once
// The definitions of graph/json.hpp: the document reader over Boost.JSON, parse_graph,
// load_graph_file and to_json. Included by json.hpp in header-only mode and by
// src/gexec.cpp in compiled mode.

#include "json.hpp"

#include <dlpack/dlpack.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <new>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "../detail/byte_io.hpp"
#include "../detail/json_path.hpp"
#include "../detail/json_reader.hpp"
#include "../detail/json_value.hpp"
#include "../dtype.hpp"
#include "../error.hpp"
#include "data.hpp"
#include "scanner.hpp"
#include "validated.hpp"

GEXEC_NAMESPACE_BEGIN

namespace detail {

inline node_entry read_node_entry(const boost::json::value& v, const json_path& at) {
  const auto& a = json_array(v, at);
  if (a.size() != 2 && a.size() != 3) json_fail(at, "expected [node, index] or [node, index, version], got " + json_excerpt(v));
  return {json_u32(a[0], at[0]), json_u32(a[1], at[1]), a.size() == 3 ? json_u32(a[2], at[2]) : 0};
}

inline void read_node_attrs(node& n, const boost::json::value& v, const json_path& at) {
  n.has_attrs = true;
  unsigned seen = 0;
  for (const auto& [key, value] : json_object(v, at)) {
    const auto kat = at / json_view(key);
    if (key == "func_name") {
      n.func_name = json_string(value, kat);
      seen |= 1;
    } else if (key == "num_inputs") {
      n.num_inputs = json_u32_string(value, kat);
      seen |= 2;
    } else if (key == "num_outputs") {
      n.num_outputs = json_u32_string(value, kat);
      seen |= 4;
    } else if (key == "flatten_data") {
      n.flatten_data = json_u32_string(value, kat) != 0;
      seen |= 8;
    } else {
      // TVM keeps other attributes as strings; keep anything else verbatim as JSON text.
      n.extra_attrs.emplace_back(key, value.is_string() ? std::string(json_view(value.get_string())) : boost::json::serialize(value));
    }
  }
  constexpr const char* required[] = {"func_name", "num_inputs", "num_outputs", "flatten_data"};
  for (unsigned bit = 0; bit < 4; ++bit)
    if (!(seen & (1u << bit))) json_fail(at, std::string("missing \"") + required[bit] + "\"");
}

inline node read_node(const boost::json::value& v, const json_path& at) {
  node n;
  unsigned seen = 0;
  for (const auto& [key, value] : json_object(v, at)) {
    const auto kat = at / json_view(key);
    if (key == "op") {
      n.op = json_string(value, kat);
      seen |= 1;
    } else if (key == "name") {
      n.name = json_string(value, kat);
      seen |= 2;
    } else if (key == "inputs") {
      const auto& a = json_array(value, kat);
      n.inputs.reserve(a.size());
      for (std::size_t j = 0; j < a.size(); ++j) n.inputs.push_back(read_node_entry(a[j], kat[j]));
      seen |= 4;
    } else if (key == "attrs" || key == "attr") {
      read_node_attrs(n, value, kat);
    } else if (key == "control_deps") {
      const auto& a = json_array(value, kat);
      for (std::size_t j = 0; j < a.size(); ++j) n.control_deps.push_back(json_u32(a[j], kat[j]));
    } else {
      json_fail(kat, "unknown node key");
    }
  }
  if (!(seen & 1)) json_fail(at, "missing \"op\"");
  if (!(seen & 2)) json_fail(at, "missing \"name\"");
  if (!(seen & 4)) json_fail(at, "missing \"inputs\"");
  if (!n.is_op() && !n.has_attrs) n.num_outputs = 1;
  return n;
}

/// A graph attribute is ["type", value]; returns value after checking the type tag.
inline const boost::json::value& typed_attr(const boost::json::value& v, const json_path& at, std::string_view type) {
  const auto& a = json_array(v, at);
  if (a.size() != 2) json_fail(at, "expected [\"" + std::string(type) + "\", value], got " + json_excerpt(v));
  std::string_view tag = json_string(a[0], at[0]);
  if (tag != type) json_fail(at[0], "expected \"" + std::string(type) + "\", got \"" + printable(tag) + "\"");
  return a[1];
}

template <class F>
void for_each_element(const boost::json::value& v, const json_path& at, F&& f) {
  const auto& a = json_array(v, at);
  for (std::size_t i = 0; i < a.size(); ++i) f(a[i], at[i]);
}

inline void read_graph_attrs(graph_attrs& attrs, const boost::json::value& v, const json_path& at) {
  unsigned seen = 0;
  for (const auto& [key, value] : json_object(v, at)) {
    const auto kat = at / json_view(key);
    const auto vat = kat[1];
    if (key == "shape") {
      for_each_element(typed_attr(value, kat, "list_shape"), vat, [&](const auto& s, const json_path& sat) {
        auto& shape = attrs.shape.emplace_back();
        for_each_element(s, sat, [&](const auto& d, const json_path& dat) {
          shape.push_back(json_int(d, dat, std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max()));
        });
      });
      seen |= 1;
    } else if (key == "dltype") {
      for_each_element(typed_attr(value, kat, "list_str"), vat, [&](const auto& s, const json_path& sat) {
        std::string_view name = json_string(s, sat);
        auto t = try_parse_dtype(name);
        if (!t) json_fail(sat, "unknown dtype \"" + printable(name) + "\"");
        attrs.dltype.push_back(*t);
      });
      seen |= 2;
    } else if (key == "storage_id") {
      for_each_element(typed_attr(value, kat, "list_int"), vat, [&](const auto& s, const json_path& sat) {
        attrs.storage_id.push_back(static_cast<std::int32_t>(json_int(s, sat, INT32_MIN, INT32_MAX)));
      });
      seen |= 4;
    } else if (key == "device_index") {
      for_each_element(typed_attr(value, kat, "list_int"), vat, [&](const auto& s, const json_path& sat) {
        attrs.device_index.push_back(static_cast<std::int32_t>(json_int(s, sat, INT32_MIN, INT32_MAX)));
      });
    } else if (key == "storage_scope") {
      for_each_element(typed_attr(value, kat, "list_str"), vat, [&](const auto& s, const json_path& sat) {
        attrs.storage_scope.emplace_back(json_string(s, sat));
      });
    } else {
      // TVM skips other list_int and size_t attributes and rejects anything else.
      const auto& a = json_array(value, kat);
      std::string_view tag = a.empty() ? std::string_view() : json_string(a[0], kat[0]);
      if (a.size() != 2 || (tag != "list_int" && tag != "size_t"))
        json_fail(kat, "unknown graph attribute; only list_int and size_t attributes can be skipped");
    }
  }
  if (!(seen & 1)) json_fail(at, "missing \"shape\"");
  if (!(seen & 2)) json_fail(at, "missing \"dltype\"");
  if (!(seen & 4)) json_fail(at, "missing \"storage_id\"");
}

/// `text` as a Boost.JSON document, checked first by gexec's own reader
/// (detail/json_value.hpp), which names a repeated key by its JSON path (the DOM would
/// keep the last one silently) and says where a text stops being JSON; Boost.JSON's
/// parse(), called in its library, then builds the DOM.
inline boost::json::value parse_json_text(std::string_view text, boost::json::storage_ptr sp) {
  json_value_reader check(text, nullptr, json_max_depth);
  if (!check.document()) {
    if (check.what() == json_value_reader::fault::duplicate_key)
      throw error(errc::invalid_graph, "graph: " + check.key_path() + ": " + check.describe());
    throw error(errc::invalid_json, "graph JSON: " + check.describe() + " at " + json_position(text, check.offset()));
  }
  if (check.offset() != text.size()) throw error(errc::invalid_json, "graph JSON: text after the value at " + json_position(text, check.offset()));
  boost::json::parse_options options;
  options.max_depth = json_max_depth;
  boost::system::error_code ec;
  boost::json::value doc = boost::json::parse(boost::json::string_view(text.data(), text.size()), ec, std::move(sp), options);
  if (ec) throw error(errc::invalid_json, "graph JSON: " + ec.message());
  return doc;
}

/// The graph as the document reader sees `json_text`: a Boost.JSON document first, then
/// read from it, naming the JSON path of the first thing wrong. parse_graph() reads
/// with detail::scan_graph and comes here only for what the scanner gives up on
/// (errors above all), so that every message comes from this one reader.
inline graph read_graph_document(std::string_view json_text) {
  boost::json::monotonic_resource arena;
  boost::json::value doc = parse_json_text(json_text, &arena);
  const json_path root;
  graph g;
  unsigned seen = 0;
  for (const auto& [key, value] : json_object(doc, root)) {
    const auto at = root / json_view(key);
    if (key == "nodes") {
      const auto& a = json_array(value, at);
      g.nodes.reserve(a.size());
      for (std::size_t i = 0; i < a.size(); ++i) g.nodes.push_back(read_node(a[i], at[i]));
      seen |= 1;
    } else if (key == "arg_nodes") {
      for_each_element(value, at, [&](const auto& v, const json_path& p) { g.arg_nodes.push_back(json_u32(v, p)); });
      seen |= 2;
    } else if (key == "node_row_ptr") {
      for_each_element(value, at, [&](const auto& v, const json_path& p) { g.node_row_ptr.push_back(json_u32(v, p)); });
      seen |= 4;
    } else if (key == "heads") {
      for_each_element(value, at, [&](const auto& v, const json_path& p) { g.heads.push_back(read_node_entry(v, p)); });
      seen |= 8;
    } else if (key == "attrs") {
      read_graph_attrs(g.attrs, value, at);
      seen |= 16;
    } else if (key == "metadata") {
      g.metadata = boost::json::serialize(value);
      break;  // as in TVM, "metadata" ends the graph
    } else {
      json_fail(at, "unknown graph key");
    }
  }
  constexpr const char* required[] = {"nodes", "arg_nodes", "node_row_ptr", "heads", "attrs"};
  for (unsigned bit = 0; bit < 5; ++bit)
    if (!(seen & (1u << bit))) json_fail(root, std::string("missing \"") + required[bit] + "\"");
  return g;
}

/// The scanner's metadata_reader: the JSON value at the start of `text` as
/// read_graph_document() keeps "metadata" (serialized), checked with the depth left to a
/// value inside the graph object; false where the document reader would refuse the text
/// (not JSON, a repeated key, too deep). gexec's reader writes it where it writes it as
/// Boost.JSON does; a number it does not write alike (a fraction, an exponent, beyond 64
/// bits) has Boost.JSON read and write the value.
inline bool read_metadata_value(std::string_view text, std::string& out, std::size_t& used) {
  if (read_metadata_plain(text, out, used)) return true;
  json_value_reader check(text, nullptr, json_max_depth - 1);
  if (!check.document()) return false;
  used = check.offset();
  boost::json::parse_options options;
  options.max_depth = json_max_depth - 1;
  boost::json::monotonic_resource arena;
  boost::system::error_code ec;
  const boost::json::value v = boost::json::parse(boost::json::string_view(text.data(), used), ec, &arena, options);
  if (ec) return false;
  out = boost::json::serialize(v);
  return true;
}

}  // namespace detail

GEXEC_DECL validated_graph parse_graph(std::string_view json_text) try {
  {
    compact_graph c;
    if (detail::scan_graph(json_text, c, &detail::read_metadata_value)) return detail::seal_checked(std::move(c));
  }
  return validate(detail::read_graph_document(json_text));
} catch (const std::bad_alloc&) {
  throw error(errc::out_of_memory, "graph: out of memory for the " + std::to_string(json_text.size()) + " bytes of JSON");
}

GEXEC_DECL validated_graph load_graph_file(const file_path& path) {
  return parse_graph(detail::regular_file(path, "graph file").read_buffer().view());
}
GEXEC_DECL validated_graph load_graph_file(const file_path& path, const load_progress& progress) {
  detail::regular_file file(path, "graph file");
  detail::progress_sink sink(&progress, file.size());
  return parse_graph(file.read_buffer(&sink).view());
}

namespace detail {
/// A JSON array of `values` (numbers, strings, or vectors of them), element by element.
template <class T>
boost::json::array json_array_of(const std::vector<T>& values) {
  boost::json::array a;
  a.reserve(values.size());
  for (const T& v : values) {
    if constexpr (requires { v.size(); v.begin(); } && !std::is_convertible_v<const T&, std::string_view>) a.emplace_back(json_array_of(v));
    else a.emplace_back(v);
  }
  return a;
}
}  // namespace detail

GEXEC_DECL std::string to_json(const graph& g) {
  namespace json = boost::json;
  using detail::json_array_of;
  auto entry = [](const node_entry& e) { return json::array{e.node_id, e.index, e.version}; };
  json::array nodes;
  nodes.reserve(g.nodes.size());
  for (const node& n : g.nodes) {
    json::object o;
    o["op"] = n.op;
    o["name"] = n.name;
    json::array inputs;
    for (const auto& e : n.inputs) inputs.push_back(entry(e));
    o["inputs"] = std::move(inputs);
    if (n.has_attrs) {
      json::object a;
      a["func_name"] = n.func_name;
      a["num_inputs"] = std::to_string(n.num_inputs);
      a["num_outputs"] = std::to_string(n.num_outputs);
      a["flatten_data"] = n.flatten_data ? "1" : "0";
      for (const auto& [k, v] : n.extra_attrs) a[k] = v;
      o["attrs"] = std::move(a);
    }
    if (!n.control_deps.empty()) o["control_deps"] = json_array_of(n.control_deps);
    nodes.push_back(std::move(o));
  }
  json::array heads;
  for (const auto& e : g.heads) heads.push_back(entry(e));
  json::array dltypes;
  for (DLDataType t : g.attrs.dltype) dltypes.push_back(json::string(to_string(t)));
  json::object attrs;
  attrs["dltype"] = json::array{"list_str", std::move(dltypes)};
  attrs["storage_id"] = json::array{"list_int", json_array_of(g.attrs.storage_id)};
  if (!g.attrs.device_index.empty()) attrs["device_index"] = json::array{"list_int", json_array_of(g.attrs.device_index)};
  if (!g.attrs.storage_scope.empty()) attrs["storage_scope"] = json::array{"list_str", json_array_of(g.attrs.storage_scope)};
  attrs["shape"] = json::array{"list_shape", json_array_of(g.attrs.shape)};
  json::object doc;
  doc["nodes"] = std::move(nodes);
  doc["arg_nodes"] = json_array_of(g.arg_nodes);
  doc["heads"] = std::move(heads);
  doc["attrs"] = std::move(attrs);
  doc["node_row_ptr"] = json_array_of(g.node_row_ptr);
  if (!g.metadata.empty()) doc["metadata"] = json::parse(g.metadata);
  return json::serialize(doc);
}

GEXEC_NAMESPACE_END
