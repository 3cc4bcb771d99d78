#pragma once
// The graph as models keep it: a few flat arrays instead of a struct and heap blocks
// per node. Names are one string with offsets, inputs and shapes are CSR arrays, the
// kernel names are kept once each (nodes hold an index), and what TVM's graphs rarely
// carry (attributes beyond the four gexec reads, control dependencies) sits in a sparse
// side table. Converting to and from gexec::graph loses nothing: a validated_graph
// holds this form and makes the node-per-struct graph only when someone asks for it.

#include "../config.hpp"

#include <dlpack/dlpack.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../error.hpp"
#include "data.hpp"

GEXEC_NAMESPACE_BEGIN

struct compact_graph {
  /// func[n] of an "null" node (an input or parameter).
  static constexpr std::uint32_t no_func = UINT32_MAX;
  enum node_flag : std::uint8_t { flag_flatten_data = 1, flag_has_attrs = 2 };

  /// What a node has beyond the compact fields; kept for the few nodes that have it.
  struct node_extra {
    std::uint32_t node = 0;
    std::uint32_t num_inputs = 0;  ///< the attribute as written (a "null" node's; tvm_op nodes have inputs.size())
    std::string func_name;         ///< a "null" node's func_name attribute, if it had one
    std::vector<std::pair<std::string, std::string>> attrs;
    std::vector<std::uint32_t> control_deps;
  };

  // Per node (n nodes); the *_ptr arrays have n + 1 elements, starting at 0.
  std::string names;                        ///< every node's name, back to back
  std::vector<std::uint32_t> name_ptr;      ///< node i's name is names[name_ptr[i], name_ptr[i+1])
  std::vector<std::uint32_t> func;          ///< index into funcs, or no_func for a "null" node
  std::vector<std::uint8_t> flags;          ///< node_flag bits
  std::vector<std::uint32_t> input_ptr;     ///< node i's inputs are inputs[input_ptr[i], input_ptr[i+1])
  std::vector<node_entry> inputs;
  std::vector<std::uint32_t> node_row_ptr;  ///< node i's outputs are entries [node_row_ptr[i], node_row_ptr[i+1])
  std::vector<std::string> funcs;           ///< distinct kernel names, in order of first use
  std::vector<node_extra> extras;           ///< sorted by node

  // Per entry (m entries).
  std::vector<DLDataType> dltype;
  std::vector<std::int32_t> storage_id;
  std::vector<std::int32_t> device_index;   ///< empty: all on the first device
  std::vector<std::string> storage_scope;   ///< empty when absent
  std::vector<std::uint32_t> shape_ptr;     ///< entry e's shape is dims[shape_ptr[e], shape_ptr[e+1]); m + 1 elements
  std::vector<std::int64_t> dims;

  std::vector<std::uint32_t> arg_nodes;
  std::vector<node_entry> heads;
  std::string metadata;

  [[nodiscard]] std::size_t num_nodes() const noexcept { return func.size(); }
  [[nodiscard]] std::size_t num_entries() const noexcept { return node_row_ptr.empty() ? 0 : node_row_ptr.back(); }
  [[nodiscard]] std::string_view name(std::uint32_t nid) const noexcept {
    return std::string_view(names).substr(name_ptr[nid], name_ptr[nid + 1] - name_ptr[nid]);
  }
  [[nodiscard]] bool is_op(std::uint32_t nid) const noexcept { return func[nid] != no_func; }
  /// The kernel a tvm_op node calls ("" for a "null" node).
  [[nodiscard]] std::string_view func_name(std::uint32_t nid) const noexcept {
    return func[nid] == no_func ? std::string_view() : std::string_view(funcs[func[nid]]);
  }
  [[nodiscard]] bool flatten_data(std::uint32_t nid) const noexcept { return flags[nid] & flag_flatten_data; }
  [[nodiscard]] std::span<const node_entry> node_inputs(std::uint32_t nid) const noexcept {
    return {inputs.data() + input_ptr[nid], inputs.data() + input_ptr[nid + 1]};
  }
  [[nodiscard]] std::uint32_t num_outputs(std::uint32_t nid) const noexcept { return node_row_ptr[nid + 1] - node_row_ptr[nid]; }
  [[nodiscard]] std::uint32_t entry_id(std::uint32_t nid, std::uint32_t index) const noexcept { return node_row_ptr[nid] + index; }
  [[nodiscard]] std::uint32_t entry_id(const node_entry& e) const noexcept { return entry_id(e.node_id, e.index); }
  /// The node whose output entry `eid` is.
  [[nodiscard]] std::uint32_t node_of(std::uint32_t eid) const noexcept {
    return static_cast<std::uint32_t>(std::upper_bound(node_row_ptr.begin(), node_row_ptr.end(), eid) - node_row_ptr.begin() - 1);
  }
  [[nodiscard]] std::span<const std::int64_t> shape(std::uint32_t eid) const noexcept {
    return {dims.data() + shape_ptr[eid], dims.data() + shape_ptr[eid + 1]};
  }
  /// What node `nid` has beyond the compact fields, or null.
  [[nodiscard]] const node_extra* extra(std::uint32_t nid) const noexcept {
    auto it = std::lower_bound(extras.begin(), extras.end(), nid, [](const node_extra& x, std::uint32_t n) { return x.node < n; });
    return it != extras.end() && it->node == nid ? &*it : nullptr;
  }
};

namespace detail {
/// Offsets in a compact_graph are 32-bit: refuses a graph whose arrays would not fit.
inline std::uint32_t compact_offset(std::size_t n, const char* what) {
  if (n > std::numeric_limits<std::uint32_t>::max())
    throw error(errc::out_of_memory, std::string("graph: more than 2^32 - 1 ") + what + " in one graph");
  return static_cast<std::uint32_t>(n);
}
}  // namespace detail

/// The compact form of `g`, which must be valid (check_graph).
inline compact_graph to_compact(const graph& g) {
  compact_graph c;
  const std::size_t n = g.nodes.size(), m = g.num_entries();
  std::size_t name_bytes = 0, n_inputs = 0, n_dims = 0;
  for (const node& x : g.nodes) {
    name_bytes += x.name.size();
    n_inputs += x.inputs.size();
  }
  for (const auto& s : g.attrs.shape) n_dims += s.size();
  detail::compact_offset(name_bytes, "bytes of node names");
  detail::compact_offset(n_inputs, "node inputs");
  detail::compact_offset(n_dims, "shape dimensions");
  c.names.reserve(name_bytes);
  c.name_ptr.reserve(n + 1);
  c.func.reserve(n);
  c.flags.reserve(n);
  c.input_ptr.reserve(n + 1);
  c.inputs.reserve(n_inputs);
  c.name_ptr.push_back(0);
  c.input_ptr.push_back(0);
  std::unordered_map<std::string_view, std::uint32_t> func_index;  // views into g
  for (std::uint32_t i = 0; i < n; ++i) {
    const node& x = g.nodes[i];
    c.names += x.name;
    c.name_ptr.push_back(static_cast<std::uint32_t>(c.names.size()));
    if (x.is_op()) {
      auto [it, fresh] = func_index.try_emplace(x.func_name, static_cast<std::uint32_t>(c.funcs.size()));
      if (fresh) c.funcs.push_back(x.func_name);
      c.func.push_back(it->second);
    } else {
      c.func.push_back(compact_graph::no_func);
    }
    c.flags.push_back(static_cast<std::uint8_t>((x.flatten_data ? compact_graph::flag_flatten_data : 0) |
                                                (x.has_attrs ? compact_graph::flag_has_attrs : 0)));
    c.inputs.insert(c.inputs.end(), x.inputs.begin(), x.inputs.end());
    c.input_ptr.push_back(static_cast<std::uint32_t>(c.inputs.size()));
    const bool odd_null = !x.is_op() && (x.num_inputs != 0 || !x.func_name.empty());
    if (odd_null || !x.extra_attrs.empty() || !x.control_deps.empty())
      c.extras.push_back({i, x.num_inputs, x.is_op() ? std::string() : x.func_name, x.extra_attrs, x.control_deps});
  }
  c.node_row_ptr = g.node_row_ptr;
  c.dltype = g.attrs.dltype;
  c.storage_id = g.attrs.storage_id;
  c.device_index = g.attrs.device_index;
  c.storage_scope = g.attrs.storage_scope;
  c.shape_ptr.reserve(m + 1);
  c.dims.reserve(n_dims);
  c.shape_ptr.push_back(0);
  for (const auto& s : g.attrs.shape) {
    c.dims.insert(c.dims.end(), s.begin(), s.end());
    c.shape_ptr.push_back(static_cast<std::uint32_t>(c.dims.size()));
  }
  c.arg_nodes = g.arg_nodes;
  c.heads = g.heads;
  c.metadata = g.metadata;
  return c;
}

/// The node-per-struct graph of `c`: what to_compact made it from, field for field.
inline graph to_graph(const compact_graph& c) {
  graph g;
  const auto n = static_cast<std::uint32_t>(c.num_nodes());
  g.nodes.resize(n);
  auto extra = c.extras.begin();
  for (std::uint32_t i = 0; i < n; ++i) {
    node& x = g.nodes[i];
    x.name = c.name(i);
    const auto in = c.node_inputs(i);
    x.inputs.assign(in.begin(), in.end());
    x.has_attrs = c.flags[i] & compact_graph::flag_has_attrs;
    x.flatten_data = c.flatten_data(i);
    x.num_outputs = c.num_outputs(i);
    if (c.is_op(i)) {
      x.op = "tvm_op";
      x.func_name = c.func_name(i);
      x.num_inputs = static_cast<std::uint32_t>(in.size());
    } else {
      x.op = "null";
    }
    if (extra != c.extras.end() && extra->node == i) {
      if (!c.is_op(i)) {
        x.num_inputs = extra->num_inputs;
        x.func_name = extra->func_name;
      }
      x.extra_attrs = extra->attrs;
      x.control_deps = extra->control_deps;
      ++extra;
    }
  }
  g.node_row_ptr = c.node_row_ptr;
  g.attrs.dltype = c.dltype;
  g.attrs.storage_id = c.storage_id;
  g.attrs.device_index = c.device_index;
  g.attrs.storage_scope = c.storage_scope;
  g.attrs.shape.reserve(c.num_entries());
  for (std::uint32_t e = 0; e < c.num_entries(); ++e) {
    const auto s = c.shape(e);
    g.attrs.shape.emplace_back(s.begin(), s.end());
  }
  g.arg_nodes = c.arg_nodes;
  g.heads = c.heads;
  g.metadata = c.metadata;
  return g;
}

GEXEC_NAMESPACE_END
