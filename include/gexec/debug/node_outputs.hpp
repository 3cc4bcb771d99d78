#pragma once
// Every node's outputs from one run, as each node left them: what TVM's debug executor
// dumped per node, for comparing a model layer by layer with another runtime.
//
//   for (const auto& o : gexec::debug_get_outputs(ex))
//     gexec::save_npy_file(dir / (std::to_string(o.node_id) + ".npy"), o.value);

#include "../config.hpp"

#include <cstdint>
#include <cstring>
#include <vector>

#include <dlpack/dlpack.h>

#include "../graph.hpp"
#include "../ndarray.hpp"
#include "../observers/observer.hpp"

GEXEC_NAMESPACE_BEGIN

struct node_output {
  std::uint32_t node_id;
  std::uint32_t index;  ///< which output of the node
  std::uint32_t entry;  ///< the graph entry
  ndarray value;        ///< a host copy
};

namespace detail {

/// Copies each node's host outputs right after its steps, before later steps reuse them.
template <class Executor>
class output_copier {
 public:
  explicit output_copier(const Executor& ex) : ex_(ex), copies_(ex.get_graph().num_entries()) {}
  void before(const step_event&) noexcept {}
  void after(const step_event& e) {
    const graph& g = ex_.get_graph();
    for (std::uint32_t k = 0; k < g.nodes[e.node_id].num_outputs; ++k) take(g.entry_id(e.node_id, k));
  }
  void take(std::uint32_t eid) {
    const DLTensor& t = ex_.get_instance_plan().entries[eid];
    if (t.device.device_type != kDLCPU) return;  // read after the run, through the executor
    ndarray a = ndarray::empty(std::vector<std::int64_t>(t.shape, t.shape + t.ndim), t.dtype);
    if (a.byte_size()) std::memcpy(a.data(), static_cast<const char*>(t.data) + t.byte_offset, a.byte_size());
    copies_[eid] = std::move(a);
  }
  std::vector<ndarray>& copies() noexcept { return copies_; }

 private:
  const Executor& ex_;
  std::vector<ndarray> copies_;
};

}  // namespace detail

/// Runs the graph once, in order, and returns a host copy of every node's every output
/// (inputs and parameters included), in node order. `__nop` aliases get the bytes of
/// the entry they alias as it was when they were made, in their own shape.
template <class Executor>
std::vector<node_output> debug_get_outputs(Executor& ex) {
  const graph& g = ex.get_graph();
  detail::output_copier<Executor> copier(ex);
  ex.run(copier);
  std::vector<ndarray>& copies = copier.copies();
  std::vector<node_output> out;
  for (std::uint32_t nid = 0; nid < g.nodes.size(); ++nid) {
    const node& n = g.nodes[nid];
    for (std::uint32_t k = 0; k < n.num_outputs; ++k) {
      const std::uint32_t eid = g.entry_id(nid, k);
      if (!copies[eid].defined()) {
        if (!n.is_op()) {
          copier.take(eid);  // inputs and parameters are not written by the run
        } else if (n.func_name == "__nop" && !n.inputs.empty()) {
          const ndarray& source = copies[g.entry_id(n.inputs[k < n.inputs.size() ? k : 0])];
          const DLTensor& t = ex.get_instance_plan().entries[eid];
          ndarray a = ndarray::empty(std::vector<std::int64_t>(t.shape, t.shape + t.ndim), t.dtype);
          if (source.defined() && source.byte_size() == a.byte_size()) {
            if (a.byte_size()) std::memcpy(a.data(), source.data(), a.byte_size());
            copies[eid] = std::move(a);
          }
        }
        if (!copies[eid].defined()) copies[eid] = ex.debug_get_output(eid);  // device entries, unusual aliases
      }
      out.push_back({nid, k, eid, copies[eid]});
    }
  }
  return out;
}

GEXEC_NAMESPACE_END
