#pragma once
// The static plan, in two layers.
//
// `plan` belongs to a model and never changes once built: the size, device and kind
// of every storage id, a DLTensor template per entry, the kernel arguments, and the
// steps as flat arrays of small structs holding indices. It is made once per model.
//
// `detail::instance_plan` belongs to one executor: the same arrays made concrete
// (DLTensors pointing at that executor's memory, packed values pointing at its
// DLTensors, steps pointing at its values), so that run() walks flat arrays of typed
// closures without allocating, hashing or comparing strings. Making one is a few
// array copies.

#include "config.hpp"

#include <dlpack/dlpack.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "binding/binding.hpp"
#include "detail/shape.hpp"
#include "error.hpp"
#include "graph.hpp"
#include "tvm_abi.hpp"

GEXEC_NAMESPACE_BEGIN

namespace detail {

enum class step_kind : std::uint8_t { call, copy };

/// A kernel call as run() makes it: everything it needs behind one pointer.
struct call_step {
  packed_c_func fn;
  void* resource_handle;
  TVMValue* values;
  int* codes;
  int num_args;
  std::uint32_t node_id;
};

/// A copy between two entries, through the backend of the device it touches.
struct copy_step {
  const DLTensor* from;
  DLTensor* to;
  void (*fn)(void* backend, const DLTensor& from, DLTensor& to);
  void* backend;
  std::uint32_t node_id;
};

/// Consecutive steps of one kind: calls[begin, end) or copies[begin, end).
struct step_run {
  step_kind kind;
  std::uint32_t begin;
  std::uint32_t end;
};

template <class B>
void backend_copy(void* backend, const DLTensor& from, DLTensor& to) {
  static_cast<B*>(backend)->copy(from, to);
}

[[noreturn]] inline void plan_fail(errc code, const graph& g, std::uint32_t nid, const std::string& message) {
  throw error(code, "node \"" + g.nodes[nid].name + "\" (nodes[" + std::to_string(nid) + "]): " + message);
}

}  // namespace detail

/// How an executor gets the memory of a storage id.
enum class storage_kind : std::uint8_t {
  unused,      ///< no entry lives there
  activation,  ///< in the executor's arena, allocated when the executor is made
  input,       ///< holds only graph inputs (parameters included): allocated on first
               ///< use, so inputs bound zero-copy or to shared parameters take nothing
};

struct storage_slot {
  DLDevice device{kDLCPU, 0};
  std::uint64_t bytes = 0;
  storage_kind kind = storage_kind::unused;
};

/// A kernel call by index: arguments args[first_arg, first_arg + num_args).
struct call_template {
  packed_c_func fn;
  void* resource_handle;
  std::uint32_t first_arg;
  std::uint32_t num_args;
  std::uint32_t node_id;
};

/// A copy from entry `from` to entry `to`.
struct copy_template {
  std::uint32_t from;
  std::uint32_t to;
  void (*fn)(void* backend, const DLTensor& from, DLTensor& to);
  void* backend;
  std::uint32_t node_id;
};

/// The model's plan: immutable, shared by every executor of the model. Move-only,
/// because executors point into it (shapes) and must not see a copy go away.
struct plan {
  plan() = default;
  plan(plan&&) noexcept = default;
  plan& operator=(plan&&) noexcept = default;
  plan(const plan&) = delete;
  plan& operator=(const plan&) = delete;

  std::vector<storage_slot> storage;        ///< per storage id
  std::vector<DLTensor> entries;            ///< per entry; data is null here
  std::vector<std::uint32_t> alias_root;    ///< per entry: the entry a __nop chain aliases
  std::vector<DLTensor> args;               ///< kernel arguments, flat over all calls; data null
  std::vector<std::uint32_t> arg_entry;     ///< entry behind each argument
  std::vector<std::int64_t> flat_shapes;    ///< 1-d shapes of flatten_data arguments
  std::vector<int> codes;                   ///< type code of each argument
  std::vector<call_template> calls;
  std::vector<copy_template> copies;
  std::vector<detail::step_run> order;
  /// Per alias group (keyed by its root entry), everything that is that data, as a CSR
  /// list: i < entries.size() is entry i, else argument i - entries.size().
  std::vector<std::uint32_t> users_begin;
  std::vector<std::uint32_t> users;

  /// Bytes of the largest entry in `eid`'s alias group.
  [[nodiscard]] std::uint64_t alias_group_bytes(std::uint32_t eid) const {
    std::uint64_t bytes = 0;
    const std::uint32_t root = alias_root[eid];
    for (std::uint32_t i = users_begin[root]; i < users_begin[root + 1]; ++i) {
      const DLTensor& t = users[i] < entries.size() ? entries[users[i]] : args[users[i] - entries.size()];
      bytes = std::max(bytes, detail::checked_byte_size({t.shape, static_cast<std::size_t>(t.ndim)}, t.dtype).value_or(0));
    }
    return bytes;
  }
};

namespace detail {

/// One executor's concrete copy of the plan: what run() walks.
struct instance_plan {
  instance_plan() = default;
  instance_plan(instance_plan&&) = delete;  // the steps point into the arrays below
  instance_plan(const instance_plan&) = delete;

  std::vector<DLTensor> entries;
  std::vector<std::shared_ptr<const void>> entry_owner;  ///< keeps entries[e].data alive
  std::vector<DLTensor> args;
  std::vector<TVMValue> values;
  std::vector<int> codes;
  std::vector<call_step> calls;
  std::vector<copy_step> copies;

  /// Copies `p`'s arrays and points every step at this object's arrays; no data yet.
  explicit instance_plan(const plan& p)
      : entries(p.entries), entry_owner(p.entries.size()), args(p.args), values(p.args.size()), codes(p.codes) {
    for (std::size_t i = 0; i < args.size(); ++i) values[i].v_handle = &args[i];
    calls.reserve(p.calls.size());
    for (const call_template& c : p.calls)
      calls.push_back({c.fn, c.resource_handle, values.data() + c.first_arg, codes.data() + c.first_arg,
                       static_cast<int>(c.num_args), c.node_id});
    copies.reserve(p.copies.size());
    for (const copy_template& c : p.copies) copies.push_back({&entries[c.from], &entries[c.to], c.fn, c.backend, c.node_id});
  }

  /// Points entry `eid`, its __nop aliases and every argument made from them at `data`.
  /// Other entries on the same storage id (the planner reuses storage once a tensor is
  /// dead) keep their memory: they are other tensors.
  void bind_alias_group(const plan& p, std::uint32_t eid, void* data, const std::shared_ptr<const void>& owner) {
    const std::uint32_t root = p.alias_root[eid];
    const std::size_t n = entries.size();
    for (std::uint32_t i = p.users_begin[root]; i < p.users_begin[root + 1]; ++i) {
      const std::uint32_t u = p.users[i];
      if (u < n) {
        entries[u].data = data;
        entry_owner[u] = owner;
      } else {
        args[u - n].data = data;
      }
    }
  }
};

}  // namespace detail

/// Builds the plan for `g`: places entries on `devices`, sizes and classifies storage,
/// resolves every kernel through `binding`. Every error a run could meet for
/// structural reasons is raised here. `backends` must outlive the plan (copy steps
/// point at the backend that performs them).
template <class Backends, op_binding Binding>
plan make_plan(const validated_graph& vg, const Binding& binding, const std::vector<DLDevice>& devices, Backends& backends) {
  using detail::plan_fail;
  const graph& g = vg.get();
  plan p;
  const std::size_t n_entries = g.num_entries();
  const auto& attrs = g.attrs;

  // Devices: device_index holds a DLDeviceType per entry; absent, everything is on devices[0].
  std::vector<std::uint32_t> node_of_entry(n_entries);
  for (std::uint32_t nid = 0; nid < g.nodes.size(); ++nid)
    for (std::uint32_t e = g.node_row_ptr[nid]; e < g.node_row_ptr[nid + 1]; ++e) node_of_entry[e] = nid;
  auto device_of = [&](std::size_t e) {
    int type = attrs.device_index.empty() ? devices[0].device_type : attrs.device_index[e];
    for (const DLDevice& d : devices)
      if (d.device_type == type) return d;
    plan_fail(errc::device_mismatch, g, node_of_entry[e],
              "output is placed on " + device_type_name(type) + ", but no " + device_type_name(type) + " device was given");
  };

  // Storage: one slot per storage id, as large as its largest entry.
  p.storage.resize(n_entries);
  p.entries.resize(n_entries);
  p.alias_root.resize(n_entries);
  for (std::size_t e = 0; e < n_entries; ++e) {
    auto& s = p.storage[static_cast<std::size_t>(attrs.storage_id[e])];
    s.device = device_of(e);
    s.bytes = std::max(s.bytes, *detail::checked_byte_size(attrs.shape[e], attrs.dltype[e]));
    s.kind = storage_kind::activation;
    p.entries[e] = DLTensor{nullptr, s.device, static_cast<int>(attrs.shape[e].size()), attrs.dltype[e],
                            const_cast<std::int64_t*>(attrs.shape[e].data()), nullptr, 0};
    p.alias_root[e] = static_cast<std::uint32_t>(e);
  }

  // Steps. Argument arrays are sized first so that the pointers into them stay put.
  std::size_t n_args = 0;
  for (const node& n : g.nodes)
    if (n.is_op() && n.func_name != "__nop" && n.func_name != "__copy") n_args += n.inputs.size() + n.num_outputs;
  p.args.reserve(n_args);
  p.arg_entry.reserve(n_args);
  p.flat_shapes.reserve(n_args);
  p.codes.reserve(n_args);

  auto append_step = [&](detail::step_kind kind, std::size_t index) {
    auto i = static_cast<std::uint32_t>(index);
    if (!p.order.empty() && p.order.back().kind == kind && p.order.back().end == i) ++p.order.back().end;
    else p.order.push_back({kind, i, i + 1});
  };
  auto add_copy = [&](std::uint32_t nid, std::uint32_t from, std::uint32_t to) {
    const DLTensor& src = p.entries[from];
    const DLTensor& dst = p.entries[to];
    if (detail::checked_byte_size(attrs.shape[from], attrs.dltype[from]) != detail::checked_byte_size(attrs.shape[to], attrs.dltype[to]))
      plan_fail(errc::shape_mismatch, g, nid, "copies " + to_string(attrs.dltype[from]) + detail::shape_to_string(attrs.shape[from]) +
                                                  " into " + to_string(attrs.dltype[to]) + detail::shape_to_string(attrs.shape[to]) +
                                                  ", which differs in size");
    // A copy that touches a device is that device's backend's job.
    int type = dst.device.device_type != kDLCPU ? dst.device.device_type : src.device.device_type;
    if (src.device.device_type != kDLCPU && dst.device.device_type != kDLCPU && src.device.device_type != dst.device.device_type)
      plan_fail(errc::unsupported, g, nid, "copies between " + to_string(src.device) + " and " + to_string(dst.device));
    copy_template step{from, to, nullptr, nullptr, nid};
    backends.visit(type, [&](auto& b) {
      step.fn = &detail::backend_copy<std::decay_t<decltype(b)>>;
      step.backend = &b;
    });
    if (!step.fn) plan_fail(errc::device_mismatch, g, nid, "no backend copies to " + to_string(dst.device));
    p.copies.push_back(step);
    append_step(detail::step_kind::copy, p.copies.size() - 1);
  };

  for (std::uint32_t nid = 0; nid < g.nodes.size(); ++nid) {
    const node& n = g.nodes[nid];
    if (!n.is_op()) continue;
    if (n.func_name == "__nop") {
      // A reshape: output k aliases input k. TVM plans both onto one storage id, and then
      // the step vanishes; a graph that does not gets a copy instead.
      if (n.num_outputs > n.inputs.size()) plan_fail(errc::invalid_graph, g, nid, "__nop has more outputs than inputs");
      for (std::uint32_t k = 0; k < n.num_outputs; ++k) {
        std::uint32_t in = g.entry_id(n.inputs[k]), out = g.entry_id(nid, k);
        if (attrs.storage_id[in] == attrs.storage_id[out]) {
          if (detail::checked_byte_size(attrs.shape[out], attrs.dltype[out]) > detail::checked_byte_size(attrs.shape[in], attrs.dltype[in]))
            plan_fail(errc::shape_mismatch, g, nid, "__nop output is larger than the input it aliases");
          p.alias_root[out] = p.alias_root[in];
        } else {
          add_copy(nid, in, out);
        }
      }
      continue;
    }
    if (n.func_name == "__copy") {
      add_copy(nid, g.entry_id(n.inputs[0]), g.entry_id(nid, 0));
      continue;
    }
    packed_function f = binding.resolve(n.func_name);
    if (!f) plan_fail(errc::symbol_not_found, g, nid, "calls \"" + n.func_name + "\", which " + binding.describe() + " does not provide");
    const std::size_t first = p.args.size();
    auto add_arg = [&](std::uint32_t eid) {
      DLTensor t = p.entries[eid];
      if (n.flatten_data) {
        p.flat_shapes.push_back(static_cast<std::int64_t>(*detail::checked_numel(attrs.shape[eid])));
        t.ndim = 1;
        t.shape = &p.flat_shapes.back();
      }
      p.args.push_back(t);
      p.arg_entry.push_back(eid);
      p.codes.push_back(tc_dltensor);
    };
    for (const node_entry& in : n.inputs) add_arg(g.entry_id(in));
    for (std::uint32_t k = 0; k < n.num_outputs; ++k) add_arg(g.entry_id(nid, k));
    p.calls.push_back({f.fn, f.resource_handle, static_cast<std::uint32_t>(first), static_cast<std::uint32_t>(p.args.size() - first), nid});
    append_step(detail::step_kind::call, p.calls.size() - 1);
  }

  // Users of each alias group: its entries and the arguments made from them.
  std::vector<std::uint32_t> count(n_entries + 1, 0);
  for (std::size_t e = 0; e < n_entries; ++e) ++count[p.alias_root[e] + 1];
  for (std::uint32_t eid : p.arg_entry) ++count[p.alias_root[eid] + 1];
  for (std::size_t i = 1; i <= n_entries; ++i) count[i] += count[i - 1];
  p.users_begin = count;
  p.users.resize(count.back());
  for (std::size_t e = 0; e < n_entries; ++e) p.users[count[p.alias_root[e]]++] = static_cast<std::uint32_t>(e);
  for (std::size_t i = 0; i < p.args.size(); ++i)
    p.users[count[p.alias_root[p.arg_entry[i]]]++] = static_cast<std::uint32_t>(n_entries + i);

  // A storage id that holds nothing but graph inputs (and their __nop aliases) is input
  // storage: executors allocate it only when something is copied into it.
  std::vector<bool> input_group(n_entries, false);
  for (std::uint32_t nid : g.arg_nodes) input_group[p.alias_root[g.entry_id(nid, 0)]] = true;
  std::vector<bool> only_inputs(n_entries, true);
  for (std::size_t e = 0; e < n_entries; ++e)
    if (!input_group[p.alias_root[e]]) only_inputs[static_cast<std::size_t>(attrs.storage_id[e])] = false;
  for (std::size_t sid = 0; sid < n_entries; ++sid)
    if (p.storage[sid].kind == storage_kind::activation && only_inputs[sid]) p.storage[sid].kind = storage_kind::input;
  return p;
}

GEXEC_NAMESPACE_END
