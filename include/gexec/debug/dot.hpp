#pragma once
// A graph as Graphviz's dot language: `dot -Tsvg graph.dot -o graph.svg`.
//
//   std::ofstream("graph.dot") << gexec::to_dot(ex.get_graph());

#include "../config.hpp"

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "../detail/shape.hpp"
#include "../dtype.hpp"
#include "../graph.hpp"

GEXEC_NAMESPACE_BEGIN

namespace detail {
/// A dot string literal's contents: quotes and backslashes escaped, control characters dropped.
inline std::string dot_escape(std::string_view s) {
  std::string out;
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out;
}
}  // namespace detail

/// Inputs as ellipses, the named `params` grey, kernel calls as boxes with their function,
/// the graph's outputs drawn double; each edge labelled with the entry's dtype and shape.
inline std::string to_dot(const graph& g, std::span<const std::string> params = {}) {
  auto entry_label = [&g](std::uint32_t eid) {
    std::string s = eid < g.attrs.dltype.size() ? to_string(g.attrs.dltype[eid]) : "";
    if (eid < g.attrs.shape.size()) s += detail::shape_to_string(g.attrs.shape[eid]);
    return s;
  };
  std::string out = "digraph gexec {\n  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n  edge [fontname=\"Helvetica\", fontsize=9];\n";
  for (std::uint32_t nid = 0; nid < g.nodes.size(); ++nid) {
    const node& n = g.nodes[nid];
    const bool head = std::any_of(g.heads.begin(), g.heads.end(), [nid](const node_entry& e) { return e.node_id == nid; });
    std::string attrs;
    if (!n.is_op()) {
      const bool param = std::find(params.begin(), params.end(), n.name) != params.end();
      attrs = "shape=ellipse, label=\"" + detail::dot_escape(n.name) + "\\n" + detail::dot_escape(entry_label(g.entry_id(nid, 0))) + "\"" +
              (param ? ", style=filled, fillcolor=\"#dddddd\"" : "");
    } else {
      attrs = "shape=box, label=\"" + detail::dot_escape(n.name) + "\\n" + detail::dot_escape(n.func_name) + "\"";
    }
    if (head) attrs += ", peripheries=2";
    out += "  n" + std::to_string(nid) + " [" + attrs + "];\n";
  }
  for (std::uint32_t nid = 0; nid < g.nodes.size(); ++nid)
    for (const node_entry& in : g.nodes[nid].inputs)
      out += "  n" + std::to_string(in.node_id) + " -> n" + std::to_string(nid) + " [label=\"" +
             detail::dot_escape(entry_label(g.entry_id(in))) + "\"];\n";
  for (std::size_t k = 0; k < g.heads.size(); ++k)
    out += "  out" + std::to_string(k) + " [shape=plaintext, label=\"output " + std::to_string(k) + "\"];\n  n" +
           std::to_string(g.heads[k].node_id) + " -> out" + std::to_string(k) + " [label=\"" +
           detail::dot_escape(entry_label(g.entry_id(g.heads[k]))) + "\"];\n";
  out += "}\n";
  return out;
}

GEXEC_NAMESPACE_END
