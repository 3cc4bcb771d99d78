#pragma once
// The graph as plain C++ data, and its validation (check_graph): every index in range,
// inputs only from earlier nodes, one attribute per entry, supported dtypes, sizes that
// do not overflow. Only a validated_graph (graph/validated.hpp) reaches planning. This
// header holds no JSON: plans, models and executors need the graph, not its text, so a
// program that builds its graphs in C++ (graph/builder.hpp) does not compile a JSON
// reader. TVM's graph JSON (parse_graph, load_graph_file, to_json) is in graph/json.hpp;
// <gexec/graph.hpp> has all of them.

#include "../config.hpp"

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../detail/json_path.hpp"
#include "../detail/shape.hpp"
#include "../device.hpp"
#include "../dtype.hpp"
#include "../error.hpp"
#include "../ndarray.hpp"
#include "checks.hpp"

GEXEC_NAMESPACE_BEGIN

/// One output of one node: [node_id, index, version] in the JSON.
struct node_entry {
  std::uint32_t node_id = 0;
  std::uint32_t index = 0;
  std::uint32_t version = 0;
  friend bool operator==(const node_entry&, const node_entry&) = default;
};

struct node {
  std::string op;  ///< "null" (graph input or parameter) or "tvm_op" (a kernel call)
  std::string name;
  std::vector<node_entry> inputs;
  bool has_attrs = false;  ///< whether the JSON had "attrs"/"attr" (tvm_op nodes always do)
  std::string func_name;   ///< kernel symbol; "__nop" aliases, "__copy" copies across devices
  std::uint32_t num_inputs = 0;
  std::uint32_t num_outputs = 1;
  bool flatten_data = false;
  std::vector<std::pair<std::string, std::string>> extra_attrs;  ///< other attrs, in file order
  std::vector<std::uint32_t> control_deps;

  [[nodiscard]] bool is_op() const noexcept { return op == "tvm_op"; }
};

/// Per-entry attributes; entry e belongs to node n when node_row_ptr[n] <= e < node_row_ptr[n+1].
struct graph_attrs {
  std::vector<std::vector<std::int64_t>> shape;
  std::vector<DLDataType> dltype;
  std::vector<std::int32_t> storage_id;
  std::vector<std::int32_t> device_index;   ///< DLDeviceType per entry; empty: all on the first device
  std::vector<std::string> storage_scope;   ///< empty when absent
};

struct graph {
  std::vector<node> nodes;
  std::vector<std::uint32_t> arg_nodes;
  std::vector<node_entry> heads;
  std::vector<std::uint32_t> node_row_ptr;
  graph_attrs attrs;
  std::string metadata;  ///< the raw JSON of "metadata", empty when absent

  [[nodiscard]] std::size_t num_entries() const noexcept { return node_row_ptr.empty() ? 0 : node_row_ptr.back(); }
  [[nodiscard]] std::uint32_t entry_id(std::uint32_t node_id, std::uint32_t index) const {
    return node_row_ptr[node_id] + index;
  }
  [[nodiscard]] std::uint32_t entry_id(const node_entry& e) const { return entry_id(e.node_id, e.index); }
};

/// Throws gexec::error(errc::invalid_graph) naming the first inconsistency: every index
/// in range, inputs only from earlier nodes, row pointers matching num_outputs, one
/// attribute per entry, supported dtypes, shapes non-negative with sizes that do not
/// overflow. The rules themselves are detail::graph_rules (graph/checks.hpp), which the
/// one-pass scanner keeps too.
inline void check_graph(const graph& g) {
  using detail::json_fail;
  using rules = detail::graph_rules;
  const detail::json_path root;
  const auto nodes_at = root / "nodes";
  const auto n_nodes = g.nodes.size();

  const auto row_at = root / "node_row_ptr";
  if (!rules::row_count(g.node_row_ptr.size(), n_nodes))
    json_fail(row_at, "has " + std::to_string(g.node_row_ptr.size()) + " elements, expected " +
                          std::to_string(n_nodes + 1) + " (one more than the node count)");
  if (!rules::first_row(g.node_row_ptr[0])) json_fail(row_at[0], "is " + std::to_string(g.node_row_ptr[0]) + ", expected 0");
  for (std::size_t i = 0; i < n_nodes; ++i) {
    const node& n = g.nodes[i];
    const auto at = nodes_at[i];
    if (!rules::printable_name(n.name))
      json_fail(at / "name", "node name \"" + detail::printable(n.name) + "\" contains a control character");
    if (!rules::printable_name(n.func_name))
      json_fail(at / "attrs" / "func_name", "\"" + detail::printable(n.func_name) + "\" contains a control character");
    if (!rules::rows_span(g.node_row_ptr[i], g.node_row_ptr[i + 1], n.num_outputs))
      json_fail(row_at[i + 1], "is " + std::to_string(g.node_row_ptr[i + 1]) + ", expected " +
                                   std::to_string(std::uint64_t{g.node_row_ptr[i]} + n.num_outputs) + " (node " +
                                   std::to_string(i) + " has " + std::to_string(n.num_outputs) + " outputs)");
    if (n.op == "null") {
      if (!rules::null_inputs(n.inputs.size())) json_fail(at / "inputs", "a \"null\" node takes no inputs");
      if (!rules::null_outputs(n.num_outputs)) json_fail(at / "attrs" / "num_outputs", "a \"null\" node has exactly 1 output");
    } else if (n.op == "tvm_op") {
      if (!n.has_attrs) json_fail(at, "tvm_op node \"" + n.name + "\" has no attrs");
      if (!rules::kernel_named(n.func_name)) json_fail(at / "attrs" / "func_name", "is empty");
      if (!rules::inputs_counted(n.num_inputs, n.inputs.size()))
        json_fail(at / "attrs" / "num_inputs", "is " + std::to_string(n.num_inputs) + " but the node has " +
                                                   std::to_string(n.inputs.size()) + " inputs");
      if (!rules::has_output(n.num_outputs)) json_fail(at / "attrs" / "num_outputs", "is 0; a kernel has at least one output");
      if (!rules::copy_one_to_one(n.func_name, n.inputs.size(), n.num_outputs))
        json_fail(at, "__copy node \"" + n.name + "\" must have 1 input and 1 output");
    } else {
      json_fail(at / "op", "unknown op \"" + detail::printable(n.op) + "\" (expected \"null\" or \"tvm_op\")");
    }
    for (std::size_t j = 0; j < n.inputs.size(); ++j) {
      const node_entry& e = n.inputs[j];
      if (!rules::before(e.node_id, i))
        json_fail((at / "inputs")[j], "refers to node " + std::to_string(e.node_id) + ", which does not come before node " +
                                       std::to_string(i));
      if (!rules::output_of(e.index, g.nodes[e.node_id].num_outputs))
        json_fail((at / "inputs")[j], "output " + std::to_string(e.index) + " of node " + std::to_string(e.node_id) +
                                       ", which has " + std::to_string(g.nodes[e.node_id].num_outputs) + " outputs");
    }
    for (std::size_t j = 0; j < n.control_deps.size(); ++j)
      if (!rules::before(n.control_deps[j], i))
        json_fail((at / "control_deps")[j], "node " + std::to_string(n.control_deps[j]) +
                                                (!rules::in_range(n.control_deps[j], n_nodes)
                                                     ? " out of range (" + std::to_string(n_nodes) + " nodes)"
                                                     : ", which does not come before node " + std::to_string(i)));
  }

  detail::first_by_name arg_names(g.arg_nodes.size());
  const auto args_at = root / "arg_nodes";
  const auto heads_at = root / "heads";
  for (std::size_t k = 0; k < g.arg_nodes.size(); ++k) {
    std::uint32_t nid = g.arg_nodes[k];
    const auto at = args_at[k];
    if (!rules::in_range(nid, n_nodes)) json_fail(at, "node " + std::to_string(nid) + " out of range (" + std::to_string(n_nodes) + " nodes)");
    if (g.nodes[nid].op != "null") json_fail(at, "node " + std::to_string(nid) + " (\"" + g.nodes[nid].name + "\") is not a \"null\" node");
    const std::size_t first = arg_names.first(g.nodes[nid].name, k);
    if (first != k) json_fail(at, "name \"" + g.nodes[nid].name + "\" is already used by arg_nodes[" + std::to_string(first) + "]");
  }
  for (std::size_t k = 0; k < g.heads.size(); ++k) {
    const node_entry& e = g.heads[k];
    const auto at = heads_at[k];
    if (!rules::in_range(e.node_id, n_nodes)) json_fail(at, "node " + std::to_string(e.node_id) + " out of range (" + std::to_string(n_nodes) + " nodes)");
    if (!rules::output_of(e.index, g.nodes[e.node_id].num_outputs))
      json_fail(at, "output " + std::to_string(e.index) + " of node " + std::to_string(e.node_id) + ", which has " +
                        std::to_string(g.nodes[e.node_id].num_outputs) + " outputs");
  }

  const std::size_t n_entries = g.num_entries();
  const auto attrs_at = root / "attrs";
  // Graph attributes are ["type", [values...]]; paths point into the values.
  // Paths are linked frames: every parent must be a named local that outlives its children.
  const auto shape_key = attrs_at / "shape", dltype_key = attrs_at / "dltype";
  const auto storage_key = attrs_at / "storage_id", device_key = attrs_at / "device_index";
  const auto shape_at = shape_key[1], dltype_at = dltype_key[1];
  const auto storage_at = storage_key[1], device_at = device_key[1];
  auto check_length = [&](std::size_t size, std::string_view key, bool optional) {
    const auto key_at = attrs_at / key;
    if (!rules::one_per_entry(size, n_entries, optional))
      json_fail(key_at[1], "has " + std::to_string(size) + " elements, expected one per entry (" + std::to_string(n_entries) + ")");
  };
  check_length(g.attrs.shape.size(), "shape", false);
  check_length(g.attrs.dltype.size(), "dltype", false);
  check_length(g.attrs.storage_id.size(), "storage_id", false);
  check_length(g.attrs.device_index.size(), "device_index", true);
  check_length(g.attrs.storage_scope.size(), "storage_scope", true);

  // First entry seen per storage id, to check that a storage is not split across devices.
  detail::storage_first_entry first_on_storage(g.attrs.device_index.empty() ? 0 : n_entries);
  for (std::size_t e = 0; e < n_entries; ++e) {
    const auto& shape = g.attrs.shape[e];
    if (!rules::ndim_ok(shape.size()))
      json_fail(shape_at[e], "has " + std::to_string(shape.size()) + " dimensions, more than gexec's limit of " +
                                 std::to_string(max_ndim));
    for (std::size_t d = 0; d < shape.size(); ++d)
      if (!rules::dim_ok(shape[d])) json_fail(shape_at[e][d], "dimension " + std::to_string(shape[d]) + " is negative");
    if (!rules::dtype_ok(g.attrs.dltype[e]))
      json_fail(dltype_at[e], "unsupported dtype " + to_string(g.attrs.dltype[e]));
    if (!rules::size_ok(shape, g.attrs.dltype[e]))
      json_fail(shape_at[e], "shape " + detail::shape_to_string(shape) + " of " + to_string(g.attrs.dltype[e]) +
                                             " overflows the addressable size");
    std::int32_t sid = g.attrs.storage_id[e];
    if (!rules::storage_id_ok(sid)) json_fail(storage_at[e], "storage id " + std::to_string(sid) + " is negative");
    if (!g.attrs.device_index.empty()) {
      std::int32_t dev = g.attrs.device_index[e];
      if (!rules::device_ok(dev)) json_fail(device_at[e], "device type " + std::to_string(dev) + " is not a DLDeviceType");
      const std::uint32_t first = first_on_storage.first(sid, static_cast<std::uint32_t>(e));
      if (g.attrs.device_index[first] != dev) {
        json_fail(device_at[e], "entry " + std::to_string(e) + " is on " + device_type_name(dev) +
                                                      " but shares storage " + std::to_string(sid) + " with entry " +
                                                      std::to_string(first) + " on " +
                                                      device_type_name(g.attrs.device_index[first]));
      }
    }
  }
}

GEXEC_NAMESPACE_END
