#pragma once
// Builds graphs in C++ for tests and for other compilers' harnesses: the same data
// parse_graph() produces, with storage ids and row pointers filled in.
//
//   gexec::graph_builder b;
//   auto x = b.input("x", {2, 3});
//   auto y = b.op("add_one", "my_add_one", {x}, {{{2, 3}}});
//   b.output(y);
//   gexec::graph g = b.build();

#include "../config.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "data.hpp"
#include "validated.hpp"

GEXEC_NAMESPACE_BEGIN

/// Shape, dtype and placement of one node output.
struct tensor_type {
  std::vector<std::int64_t> shape;
  DLDataType dtype = dtypes::float32;
  int device_type = 0;          ///< DLDeviceType; 0 means the executor's first device
  std::int32_t storage_id = -1; ///< -1: a storage of its own; otherwise share that storage id
};

struct op_options {
  bool flatten_data = false;
  std::vector<std::pair<std::string, std::string>> attrs = {};  ///< extra node attributes
};

/// The outputs of one node; converts to its first output.
struct node_outputs {
  std::uint32_t node_id;
  std::uint32_t num_outputs;
  node_entry operator[](std::uint32_t index) const { return {node_id, index, 0}; }
  operator node_entry() const { return {node_id, 0, 0}; }  // NOLINT: one-output nodes read naturally
};

class graph_builder {
 public:
  /// A graph input or parameter ("null" node, listed in arg_nodes). Parameters are the
  /// inputs whose values come from a parameter blob.
  node_outputs input(std::string name, std::vector<std::int64_t> shape, DLDataType dtype = dtypes::float32,
                     int device_type = 0) {
    node n;
    n.op = "null";
    n.name = std::move(name);
    g_.arg_nodes.push_back(static_cast<std::uint32_t>(g_.nodes.size()));
    return add(std::move(n), {{std::move(shape), dtype, device_type, -1}});
  }

  /// A kernel call: `func_name` with `inputs`, producing `outputs`.
  node_outputs op(std::string name, std::string func_name, std::vector<node_entry> inputs,
                  std::vector<tensor_type> outputs, op_options options = {}) {
    node n;
    n.op = "tvm_op";
    n.name = std::move(name);
    n.has_attrs = true;
    n.func_name = std::move(func_name);
    n.num_inputs = static_cast<std::uint32_t>(inputs.size());
    n.num_outputs = static_cast<std::uint32_t>(outputs.size());
    n.flatten_data = options.flatten_data;
    n.extra_attrs = std::move(options.attrs);
    n.inputs = std::move(inputs);
    return add(std::move(n), std::move(outputs));
  }

  /// A reshape TVM compiles to "__nop": the output aliases the input's storage.
  node_outputs nop(std::string name, node_entry input, std::vector<std::int64_t> shape) {
    std::uint32_t eid = entry_of(input);
    tensor_type t{std::move(shape), g_.attrs.dltype.at(eid), device_of(eid), g_.attrs.storage_id.at(eid)};
    return op(std::move(name), "__nop", {input}, {std::move(t)});
  }

  /// A cross-device copy ("__copy") of `input` onto `device_type`.
  node_outputs copy(std::string name, node_entry input, int device_type) {
    std::uint32_t eid = entry_of(input);
    tensor_type t{g_.attrs.shape.at(eid), g_.attrs.dltype.at(eid), device_type, -1};
    return op(std::move(name), "__copy", {input}, {std::move(t)});
  }

  /// Appends a graph output.
  void output(node_entry e) { g_.heads.push_back(e); }

  /// The finished graph, validated like a parsed one.
  [[nodiscard]] validated_graph build() const {
    graph g = g_;
    bool any_device = false;
    for (int d : devices_) any_device = any_device || d != 0;
    if (any_device) {
      g.attrs.device_index.clear();
      for (int d : devices_) g.attrs.device_index.push_back(d == 0 ? kDLCPU : d);
    }
    return validate(std::move(g));
  }

 private:
  node_outputs add(node n, std::vector<tensor_type> outputs) {
    auto nid = static_cast<std::uint32_t>(g_.nodes.size());
    for (auto& t : outputs) {
      auto eid = static_cast<std::int32_t>(g_.attrs.shape.size());
      g_.attrs.storage_id.push_back(t.storage_id >= 0 ? t.storage_id : eid);
      g_.attrs.shape.push_back(std::move(t.shape));
      g_.attrs.dltype.push_back(t.dtype);
      devices_.push_back(t.device_type);
    }
    g_.node_row_ptr.push_back(g_.node_row_ptr.back() + static_cast<std::uint32_t>(outputs.size()));
    g_.nodes.push_back(std::move(n));
    return {nid, static_cast<std::uint32_t>(outputs.size())};
  }
  std::uint32_t entry_of(node_entry e) const {
    if (e.node_id >= g_.nodes.size() || e.index >= g_.nodes[e.node_id].num_outputs)
      throw error(errc::invalid_argument, "graph_builder: no output " + std::to_string(e.index) + " of node " +
                                              std::to_string(e.node_id));
    return g_.entry_id(e);
  }
  int device_of(std::uint32_t eid) const { return devices_.at(eid); }

  graph g_ = [] {
    graph g;
    g.node_row_ptr.push_back(0);
    return g;
  }();
  std::vector<int> devices_;  // per entry; 0 = default
};

GEXEC_NAMESPACE_END
