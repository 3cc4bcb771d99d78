#pragma once
// One executor's concrete copy of the model's plan: DLTensors pointing at that
// executor's memory, packed values pointing at its DLTensors, steps pointing at its
// values. run() walks these arrays. Making one is a few array copies.

#include "../config.hpp"

#include <dlpack/dlpack.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "../graph/compact.hpp"
#include "../plan.hpp"
#include "../tvm_abi.hpp"
#include "../tvm_ffi/call.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {
/// A TVM-FFI kernel call as run() makes it: 16 bytes beside its arguments' 16 each
/// (instance_plan::ffi_values), so that a long chain of calls streams no more memory a
/// node than a packed C one (a call_step, 32 bytes, and TVMValues of 8).
struct ffi_step {
  tvm_ffi_safe_call kernel;
  std::uint32_t first_arg;  ///< its arguments: ffi_values[first_arg, first_arg + num_args)
  std::int32_t num_args;
};
}  // namespace detail

/// One executor's concrete copy of the plan: what run() walks.
struct instance_plan {
  instance_plan() = default;
  instance_plan(instance_plan&&) = delete;  // the steps point into the arrays below
  instance_plan(const instance_plan&) = delete;

  std::vector<DLTensor> entries;
  std::vector<DLTensor> flat_args;  ///< per plan::flat_args: the argument's 1-d view of its entry
  std::vector<TVMValue> values;     ///< per argument: the entry (or its flat view) it passes
  /// The same arguments as TVM-FFI kernels take them (a type index and the DLTensor
  /// pointer), made once so that calling one costs what calling a packed C kernel does;
  /// empty when no kernel of the plan is a TVM-FFI one.
  std::vector<TVMFFIAny> ffi_values;
  std::vector<detail::call_step> calls;
  /// Per call, indexed like `calls`: what run() reads for a TVM-FFI kernel's call (its
  /// call_step only for an observer's event or a failure); empty when `ffi_values` is.
  std::vector<detail::ffi_step> ffi_calls;
  std::vector<detail::copy_step> copies;
  /// Changes whenever a pointer handed to kernels changes (bind_alias_group),
  /// so that what captured those pointers (a CUDA Graph) knows to capture again.
  std::uint64_t version = 0;

  /// Makes the tensors of `p` over graph `g` and points every step at them; no data yet.
  instance_plan(const plan& p, const compact_graph& g) : values(p.arg_entry.size()) {
    const auto n = static_cast<std::uint32_t>(p.num_entries());
    entries.reserve(n);
    for (std::uint32_t e = 0; e < n; ++e) entries.push_back(p.entry_tensor(g, e));
    for (std::size_t i = 0; i < values.size(); ++i) values[i].v_handle = &entries[p.arg_entry[i]];
    flat_args.reserve(p.flat_args.size());
    for (std::size_t k = 0; k < p.flat_args.size(); ++k) {
      DLTensor t = entries[p.arg_entry[p.flat_args[k]]];
      t.ndim = 1;
      t.shape = const_cast<std::int64_t*>(&p.flat_shapes[k]);
      flat_args.push_back(t);
      values[p.flat_args[k]].v_handle = &flat_args.back();
    }
    const auto is_ffi = [](const packed_function& k) { return k.fn == &detail::call_tvm_ffi; };
    if (std::any_of(p.kernels.begin(), p.kernels.end(), is_ffi)) {
      ffi_values.resize(values.size());
      for (std::size_t i = 0; i < values.size(); ++i) {
        ffi_values[i].type_index = ffi_dltensor_ptr;
        ffi_values[i].zero_padding = 0;
        ffi_values[i].v_ptr = values[i].v_handle;
      }
    }
    calls.reserve(p.calls.size());
    if (!ffi_values.empty()) ffi_calls.resize(p.calls.size(), detail::ffi_step{nullptr, 0, 0});
    for (const call_template& c : p.calls) {
      const packed_function& k = p.kernels[c.kernel];
      if (is_ffi(k)) {
        ffi_calls[calls.size()] = {reinterpret_cast<tvm_ffi_safe_call>(k.resource_handle), c.first_arg, static_cast<std::int32_t>(c.num_args)};
        calls.push_back({&detail::call_tvm_ffi_prebuilt, k.resource_handle, reinterpret_cast<TVMValue*>(ffi_values.data() + c.first_arg),
                         static_cast<int>(c.num_args), c.node_id});
      } else {
        calls.push_back({k.fn, k.resource_handle, values.data() + c.first_arg, static_cast<int>(c.num_args), c.node_id});
      }
    }
    copies.reserve(p.copies.size());
    for (const copy_template& c : p.copies)
      copies.push_back({&entries[c.from], &entries[c.to], c.fn, c.backend, c.to_host, c.node_id});
  }

  /// Points entry `eid`, its __nop aliases and every flattened argument made from them
  /// at `data`. Other entries on the same storage id (the planner reuses storage once a
  /// tensor is dead) keep their memory: they are other tensors.
  void bind_alias_group(const plan& p, std::uint32_t eid, void* data) {
    const std::uint32_t root = p.alias_root[eid];
    if (entries[root].data != data) ++version;
    for (std::uint32_t e = root; e != plan::no_entry; e = p.next_alias(e)) entries[e].data = data;
    if (p.flat_users.empty()) return;
    auto it = std::lower_bound(p.flat_users.begin(), p.flat_users.end(), std::pair<std::uint32_t, std::uint32_t>(root, 0));
    for (; it != p.flat_users.end() && it->first == root; ++it) flat_args[it->second].data = data;
  }
};

GEXEC_NAMESPACE_END
