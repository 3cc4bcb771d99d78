#pragma once
// Field-for-field comparison of two compact graphs, for the tests and the graph fuzzer:
// the name of the first field that differs, or an empty string when they are equal.

#include <gexec/graph/compact.hpp>

#include <cstddef>
#include <string>

namespace gexec_test {

inline std::string compact_difference(const gexec::compact_graph& a, const gexec::compact_graph& b) {
  auto same_dtypes = [&] {
    if (a.dltype.size() != b.dltype.size()) return false;
    for (std::size_t e = 0; e < a.dltype.size(); ++e)
      if (a.dltype[e].code != b.dltype[e].code || a.dltype[e].bits != b.dltype[e].bits || a.dltype[e].lanes != b.dltype[e].lanes)
        return false;
    return true;
  };
  auto same_extras = [&] {
    if (a.extras.size() != b.extras.size()) return false;
    for (std::size_t k = 0; k < a.extras.size(); ++k) {
      const auto &x = a.extras[k], &y = b.extras[k];
      if (x.node != y.node || x.num_inputs != y.num_inputs || x.func_name != y.func_name || x.attrs != y.attrs ||
          x.control_deps != y.control_deps)
        return false;
    }
    return true;
  };
  if (a.names != b.names) return "names";
  if (a.name_ptr != b.name_ptr) return "name_ptr";
  if (a.func != b.func) return "func";
  if (a.flags != b.flags) return "flags";
  if (a.input_ptr != b.input_ptr) return "input_ptr";
  if (a.inputs != b.inputs) return "inputs";
  if (a.node_row_ptr != b.node_row_ptr) return "node_row_ptr";
  if (a.funcs != b.funcs) return "funcs";
  if (!same_extras()) return "extras";
  if (!same_dtypes()) return "dltype";
  if (a.storage_id != b.storage_id) return "storage_id";
  if (a.device_index != b.device_index) return "device_index";
  if (a.storage_scope != b.storage_scope) return "storage_scope";
  if (a.shape_ptr != b.shape_ptr) return "shape_ptr";
  if (a.dims != b.dims) return "dims";
  if (a.arg_nodes != b.arg_nodes) return "arg_nodes";
  if (a.heads != b.heads) return "heads";
  if (a.metadata != b.metadata) return "metadata";
  return {};
}

}  // namespace gexec_test
