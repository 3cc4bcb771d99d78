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
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/backend.hpp"
#include "binding/binding.hpp"
#include "detail/shape.hpp"
#include "error.hpp"
#include "graph/validated.hpp"
#include "planners/as_compiled.hpp"
#include "planners/planner.hpp"
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
using copy_fn = void (*)(void* backend, const DLTensor& from, DLTensor& to, void* stream, bool to_host);
struct copy_step {
  const DLTensor* from;
  DLTensor* to;
  copy_fn fn;
  void* backend;  ///< run on the stream of the backend's device current in the run
  bool to_host;   ///< the host reads the result next: wait for the stream
  std::uint32_t node_id;
};

/// Consecutive steps of one kind on one device: calls[begin, end) or copies[begin, end),
/// which are steps [step, step + end - begin) of the run order.
struct step_run {
  step_kind kind;
  std::uint16_t device;  ///< index into the model's devices
  std::uint32_t begin;
  std::uint32_t end;
  std::uint32_t step;
};

/// A copy enqueued on the stream of the device it touches; the host waits for it only
/// where the host reads next.
template <class B>
void backend_copy(void* backend, const DLTensor& from, DLTensor& to, void* stream, bool to_host) {
  auto& s = *static_cast<typename B::stream_type*>(stream);
  static_cast<B*>(backend)->copy_async(from, to, s);
  if (to_host) static_cast<B*>(backend)->synchronize(s);
}

[[noreturn]] inline void plan_fail(errc code, const graph& g, std::uint32_t nid, const std::string& message) {
  throw error(code, "node \"" + g.nodes[nid].name + "\" (nodes[" + std::to_string(nid) + "]): " + message);
}

}  // namespace detail

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
  detail::copy_fn fn;
  void* backend;
  std::uint16_t device;  ///< index into the model's devices: whose stream carries it
  bool to_host;
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

  std::vector<storage_slot> storage;        ///< per slot, as the planner chose
  std::vector<DLTensor> entries;            ///< per entry; data is null here
  std::vector<std::uint32_t> alias_root;    ///< per entry: the entry a __nop chain aliases
  std::vector<std::uint32_t> entry_slot;    ///< per entry: its storage slot
  std::vector<std::uint64_t> entry_offset;  ///< per entry: bytes into its slot
  storage_problem values;                   ///< the alias groups as the planner saw them
  std::vector<std::uint32_t> value_of;      ///< per entry: its alias group in `values`
  storage_figures figures;                  ///< as compiled, planned, lower bound
  std::vector<DLTensor> args;               ///< kernel arguments, flat over all calls; data null
  std::vector<std::uint32_t> arg_entry;     ///< entry behind each argument
  std::vector<std::int64_t> flat_shapes;    ///< 1-d shapes of flatten_data arguments
  std::vector<int> codes;                   ///< type code of each argument
  std::vector<call_template> calls;
  std::vector<copy_template> copies;
  std::vector<detail::step_run> order;
  std::vector<std::uint32_t> step_node;     ///< per step of the run order: its node
  std::vector<std::uint32_t> step_run_of;   ///< per step: the run in `order` holding it
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
  /// Changes whenever a pointer handed to kernels changes (bind_alias_group),
  /// so that what captured those pointers (a CUDA Graph) knows to capture again.
  std::uint64_t version = 0;

  /// Copies `p`'s arrays and points every step at this object's arrays; no data yet.
  explicit instance_plan(const plan& p)
      : entries(p.entries), entry_owner(p.entries.size()), args(p.args), values(p.args.size()), codes(p.codes) {
    for (std::size_t i = 0; i < args.size(); ++i) values[i].v_handle = &args[i];
    calls.reserve(p.calls.size());
    for (const call_template& c : p.calls)
      calls.push_back({c.fn, c.resource_handle, values.data() + c.first_arg, codes.data() + c.first_arg,
                       static_cast<int>(c.num_args), c.node_id});
    copies.reserve(p.copies.size());
    for (const copy_template& c : p.copies)
      copies.push_back({&entries[c.from], &entries[c.to], c.fn, c.backend, c.to_host, c.node_id});
  }

  /// Points entry `eid`, its __nop aliases and every argument made from them at `data`.
  /// Other entries on the same storage id (the planner reuses storage once a tensor is
  /// dead) keep their memory: they are other tensors.
  void bind_alias_group(const plan& p, std::uint32_t eid, void* data, const std::shared_ptr<const void>& owner) {
    const std::uint32_t root = p.alias_root[eid];
    const std::size_t n = entries.size();
    if (entries[root].data != data) ++version;
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

/// Builds the plan for `g`: places entries on `devices`, lays storage out with
/// `planner` (and checks its answer), resolves every kernel through `binding`. Every
/// error a run could meet for structural reasons is raised here. `backends` must
/// outlive the plan (copy steps point at the backend that performs them).
template <class Backends, op_binding Binding, storage_planner Planner = as_compiled>
plan make_plan(const validated_graph& vg, const Binding& binding, const std::vector<DLDevice>& devices, Backends& backends,
               const Planner& planner = {}) {
  using detail::plan_fail;
  const graph& g = vg.get();
  plan p;
  const std::size_t n_entries = g.num_entries();
  const auto& attrs = g.attrs;

  // Devices: device_index holds a DLDeviceType per entry; absent, everything is on devices[0].
  std::vector<std::uint32_t> node_of_entry(n_entries);
  for (std::uint32_t nid = 0; nid < g.nodes.size(); ++nid)
    for (std::uint32_t e = g.node_row_ptr[nid]; e < g.node_row_ptr[nid + 1]; ++e) node_of_entry[e] = nid;
  auto device_at = [&](std::size_t e) -> std::uint16_t {
    int type = attrs.device_index.empty() ? devices[0].device_type : attrs.device_index[e];
    for (std::size_t i = 0; i < devices.size(); ++i)
      if (devices[i].device_type == type) return static_cast<std::uint16_t>(i);
    plan_fail(errc::device_mismatch, g, node_of_entry[e],
              "output is placed on " + device_type_name(type) + ", but no " + device_type_name(type) + " device was given");
  };
  std::vector<std::uint16_t> entry_device(n_entries);
  p.entries.resize(n_entries);
  p.alias_root.resize(n_entries);
  for (std::size_t e = 0; e < n_entries; ++e) {
    entry_device[e] = device_at(e);
    p.entries[e] = DLTensor{nullptr, devices[entry_device[e]], static_cast<int>(attrs.shape[e].size()), attrs.dltype[e],
                            const_cast<std::int64_t*>(attrs.shape[e].data()), nullptr, 0};
    p.alias_root[e] = static_cast<std::uint32_t>(e);
  }

  // Steps. Argument arrays are sized first so that the pointers into them stay put.
  std::size_t n_args = 0, n_flat = 0, n_steps = 0, n_calls = 0;
  for (const node& n : g.nodes)
    if (n.is_op()) {
      n_steps += n.func_name == "__nop" ? n.num_outputs : 1;
      if (n.func_name == "__nop" || n.func_name == "__copy") continue;
      ++n_calls;
      n_args += n.inputs.size() + n.num_outputs;
      if (n.flatten_data) n_flat += n.inputs.size() + n.num_outputs;
    }
  p.args.reserve(n_args);
  p.arg_entry.reserve(n_args);
  p.flat_shapes.reserve(n_flat);
  p.codes.reserve(n_args);
  p.calls.reserve(n_calls);
  p.step_node.reserve(n_steps);
  p.step_run_of.reserve(n_steps);

  auto append_step = [&](detail::step_kind kind, std::size_t index, std::uint16_t device, std::uint32_t nid) {
    auto i = static_cast<std::uint32_t>(index);
    const auto step = static_cast<std::uint32_t>(p.step_node.size());
    p.step_node.push_back(nid);
    if (!p.order.empty() && p.order.back().kind == kind && p.order.back().device == device && p.order.back().end == i) ++p.order.back().end;
    else p.order.push_back({kind, device, i, i + 1, step});
    p.step_run_of.push_back(static_cast<std::uint32_t>(p.order.size() - 1));
  };
  auto add_copy = [&](std::uint32_t nid, std::uint32_t from, std::uint32_t to) {
    const DLTensor& src = p.entries[from];
    const DLTensor& dst = p.entries[to];
    if (detail::checked_byte_size(attrs.shape[from], attrs.dltype[from]) != detail::checked_byte_size(attrs.shape[to], attrs.dltype[to]))
      plan_fail(errc::shape_mismatch, g, nid, "copies " + to_string(attrs.dltype[from]) + detail::shape_to_string(attrs.shape[from]) +
                                                  " into " + to_string(attrs.dltype[to]) + detail::shape_to_string(attrs.shape[to]) +
                                                  ", which differs in size");
    // A copy that touches a device is that device's backend's job, on its stream.
    const bool dst_device = dst.device.device_type != kDLCPU;
    const std::uint16_t device = dst_device ? entry_device[to] : entry_device[from];
    if (src.device.device_type != kDLCPU && dst_device && src.device.device_type != dst.device.device_type)
      plan_fail(errc::unsupported, g, nid, "copies between " + to_string(src.device) + " and " + to_string(dst.device));
    copy_template step{from, to, nullptr, nullptr, device, !dst_device && src.device.device_type != kDLCPU, nid};
    backends.visit(devices[device].device_type, [&](auto& b) {
      step.fn = &detail::backend_copy<std::decay_t<decltype(b)>>;
      step.backend = &b;
    });
    if (!step.fn) plan_fail(errc::device_mismatch, g, nid, "no backend copies to " + to_string(dst.device));
    p.copies.push_back(step);
    append_step(detail::step_kind::copy, p.copies.size() - 1, device, nid);
  };

  std::vector<bool> listed_input(g.nodes.size(), false);
  for (std::uint32_t nid : g.arg_nodes) listed_input[nid] = true;
  const std::string* last_func = nullptr;
  packed_function last_resolved;
  for (std::uint32_t nid = 0; nid < g.nodes.size(); ++nid) {
    const node& n = g.nodes[nid];
    if (!n.is_op()) {
      if (!listed_input[nid])
        plan_fail(errc::invalid_graph, g, nid, "is an input (op \"null\") missing from arg_nodes: nothing could ever give it a value");
      continue;
    }
    if (n.func_name == "__nop") {
      // A reshape: output k aliases input k. TVM plans both onto one storage id, and then
      // the step vanishes; a graph that does not gets a copy instead.
      if (n.num_outputs > n.inputs.size()) plan_fail(errc::invalid_graph, g, nid, "__nop has more outputs than inputs");
      for (std::uint32_t k = 0; k < n.num_outputs; ++k) {
        std::uint32_t in = g.entry_id(n.inputs[k]), out = g.entry_id(nid, k);
        if (attrs.storage_id[in] == attrs.storage_id[out]) {
          if (detail::checked_byte_size(attrs.shape[out], attrs.dltype[out]) > detail::checked_byte_size(attrs.shape[in], attrs.dltype[in]))
            plan_fail(errc::shape_mismatch, g, nid, "__nop output is larger than the input it aliases");
          if (entry_device[in] != entry_device[out]) plan_fail(errc::device_mismatch, g, nid, "__nop output is on another device than its input");
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
    // One look-up per run of nodes calling the same function (the binding caches by name).
    if (!last_func || *last_func != n.func_name) {
      try {
        last_resolved = binding.resolve(n.func_name);
      } catch (const error& e) {  // a symbol the binding refuses: say which node asked for it
        plan_fail(e.code(), g, nid, std::string(e.message()));
      }
      last_func = &n.func_name;
    }
    const packed_function f = last_resolved;
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
    append_step(detail::step_kind::call, p.calls.size() - 1, n.num_outputs ? entry_device[g.entry_id(nid, 0)] : std::uint16_t{0}, nid);
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

  // Storage: the alias groups with their lifetimes over the node order, laid out by the planner.
  storage_problem& problem = p.values;
  problem.num_nodes = static_cast<std::uint32_t>(g.nodes.size());
  problem.num_storage_ids = 0;
  p.value_of.assign(n_entries, 0);
  for (std::uint32_t e = 0; e < n_entries; ++e) {
    problem.num_storage_ids = std::max(problem.num_storage_ids, static_cast<std::size_t>(attrs.storage_id[e]) + 1);
    if (p.alias_root[e] != e) continue;
    p.value_of[e] = static_cast<std::uint32_t>(problem.values.size());
    storage_value v;
    v.root = e;
    v.device = devices[entry_device[e]];
    v.bytes = p.alias_group_bytes(e);
    v.storage_id = attrs.storage_id[e];
    v.first = v.last = node_of_entry[e];
    problem.values.push_back(v);
  }
  for (std::uint32_t e = 0; e < n_entries; ++e) p.value_of[e] = p.value_of[p.alias_root[e]];
  for (std::uint32_t nid = 0; nid < g.nodes.size(); ++nid)
    for (const node_entry& in : g.nodes[nid].inputs) {
      storage_value& v = problem.values[p.value_of[g.entry_id(in)]];
      v.last = std::max(v.last, nid);
    }
  for (std::uint32_t nid : g.arg_nodes) {
    storage_value& v = problem.values[p.value_of[g.entry_id(nid, 0)]];
    v.is_input = true;
    v.first = 0;
    v.last = pinned_to_end;
  }
  for (const node_entry& h : g.heads) {
    storage_value& v = problem.values[p.value_of[g.entry_id(h)]];
    v.is_output = true;
    v.last = pinned_to_end;
  }
  storage_assignment placed = planner.plan(problem);
  detail::check_assignment(problem, placed, std::is_same_v<Planner, as_compiled> ? "the graph's storage_id" : "the planner");
  p.entry_slot.resize(n_entries);
  p.entry_offset.resize(n_entries);
  for (std::uint32_t e = 0; e < n_entries; ++e) {
    p.entry_slot[e] = placed.slot[p.value_of[e]];
    p.entry_offset[e] = placed.offset[p.value_of[e]];
  }
  p.figures.as_compiled = activation_bytes(as_compiled{}.plan(problem));
  p.figures.planned = activation_bytes(placed);
  p.figures.lower_bound = liveness_lower_bound(problem);
  p.storage = std::move(placed.slots);
  return p;
}

GEXEC_NAMESPACE_END
