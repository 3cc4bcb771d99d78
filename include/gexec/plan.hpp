#pragma once
// The static plan, in two layers.
//
// `plan` belongs to a model and never changes once built: the size, device and kind
// of every storage id, a DLTensor template per entry, the kernel arguments, and the
// steps as flat arrays of small structs holding indices. It is made once per model.
//
// `instance_plan` (executor/instance_plan.hpp) belongs to one executor: the same arrays made concrete
// (DLTensors pointing at that executor's memory, packed values pointing at its
// DLTensors, steps pointing at its values), so that run() walks flat arrays of typed
// closures without allocating, hashing or comparing strings. Making one is a few
// array copies.

#include "config.hpp"

#include <dlpack/dlpack.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "backends/backend.hpp"
#include "binding/binding.hpp"
#include "detail/shape.hpp"
#include "error.hpp"
#include "graph/validated.hpp"
#include "planners/any_planner.hpp"
#include "planners/as_compiled.hpp"
#include "planners/planner.hpp"
#include "tvm_abi.hpp"
#include "tvm_ffi/call.hpp"

GEXEC_NAMESPACE_BEGIN

namespace detail {

/// A kernel call (packed C), a call of a TVM-FFI kernel (TVM >= 0.21; its arguments
/// kept as TVMFFIAny, see instance_plan), or a copy.
enum class step_kind : std::uint8_t { call, copy, ffi_call };

/// A kernel call as run() makes it: everything it needs behind one pointer but the type
/// codes, which are the plan's (every argument is a DLTensor).
struct call_step {
  packed_c_func fn;
  void* resource_handle;
  TVMValue* values;
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

[[noreturn]] inline void plan_fail(errc code, const compact_graph& g, std::uint32_t nid, const std::string& message) {
  throw error(code, "node \"" + std::string(g.name(nid)) + "\" (nodes[" + std::to_string(nid) + "]): " + message);
}

}  // namespace detail

/// A kernel call by index: kernels[kernel] with arguments [first_arg, first_arg + num_args).
struct call_template {
  std::uint32_t kernel;
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
/// because executors point into it (shapes) and must not see a copy go away. It holds
/// indices, not tensors: an executor makes its DLTensors from the graph's shapes and
/// dtypes (entry_tensor) and its kernels' argument lists from arg_entry.
struct plan {
  plan() = default;
  plan(plan&&) noexcept = default;
  plan& operator=(plan&&) noexcept = default;
  plan(const plan&) = delete;
  plan& operator=(const plan&) = delete;

  std::vector<DLDevice> devices;            ///< the model's devices
  std::vector<storage_slot> storage;        ///< per slot, as the planner chose
  std::vector<std::uint16_t> entry_device;  ///< per entry: index into devices
  std::vector<std::uint32_t> alias_root;    ///< per entry: the entry a __nop chain aliases
  std::vector<std::uint32_t> entry_slot;    ///< per entry: its storage slot
  std::vector<std::uint64_t> entry_offset;  ///< per entry: bytes into its slot
  storage_figures figures;                  ///< as compiled, planned, lower bound
  std::vector<packed_function> kernels;     ///< per kernel name of the graph (compact_graph::funcs); unused ones null
  std::vector<std::uint32_t> arg_entry;     ///< per kernel argument, flat over all calls: the entry behind it
  std::vector<std::uint32_t> flat_args;     ///< the arguments passed flattened (flatten_data), ascending
  std::vector<std::int64_t> flat_shapes;    ///< their 1-d shapes
  std::vector<int> codes;                   ///< tc_dltensor for the longest argument list: every call's type codes
  std::vector<call_template> calls;
  std::vector<copy_template> copies;
  std::vector<detail::step_run> order;
  std::vector<std::uint32_t> step_node;     ///< per step of the run order: its node
  /// Per entry: the next entry of its alias group (groups are lists from their root, in
  /// entry order), or no_entry; empty when no entry aliases another.
  std::vector<std::uint32_t> alias_next;
  /// (alias root, index into flat_args) of every flattened argument, by root.
  std::vector<std::pair<std::uint32_t, std::uint32_t>> flat_users;
  /// The inputs (indices into the graph's arg_nodes, ascending) donated to runs
  /// (model_options::donate_inputs): planned as activations, alive from the start of a
  /// run to their last reader, so that later values may take their bytes.
  std::vector<std::uint32_t> donated;

  static constexpr std::uint32_t no_entry = UINT32_MAX;
  [[nodiscard]] std::size_t num_entries() const noexcept { return alias_root.size(); }
  /// The entry after `eid` in its alias group, or no_entry.
  [[nodiscard]] std::uint32_t next_alias(std::uint32_t eid) const noexcept { return alias_next.empty() ? no_entry : alias_next[eid]; }
  /// Entry `eid` as a kernel sees it, without data.
  [[nodiscard]] DLTensor entry_tensor(const compact_graph& g, std::uint32_t eid) const {
    const auto shape = g.shape(eid);
    return DLTensor{nullptr, devices[entry_device[eid]], static_cast<int>(shape.size()), g.dltype[eid],
                    const_cast<std::int64_t*>(shape.data()), nullptr, 0};
  }
  /// Bytes of the largest entry in `eid`'s alias group.
  [[nodiscard]] std::uint64_t alias_group_bytes(const compact_graph& g, std::uint32_t eid) const {
    std::uint64_t bytes = 0;
    for (std::uint32_t e = alias_root[eid]; e != no_entry; e = next_alias(e))
      bytes = std::max(bytes, detail::checked_byte_size(g.shape(e), g.dltype[e]).value_or(0));
    return bytes;
  }
  /// The run in `order` holding step `k`.
  [[nodiscard]] std::uint32_t run_of(std::uint32_t k) const noexcept {
    auto it = std::upper_bound(order.begin(), order.end(), k, [](std::uint32_t s, const detail::step_run& r) { return s < r.step; });
    return static_cast<std::uint32_t>(it - order.begin() - 1);
  }
};


namespace detail {

/// What the phases of make_plan share: the graph and devices planned for, the backends
/// that perform copies (they must outlive the plan), and the plan being built.
template <class Backends>
struct plan_build {
  const compact_graph& g;
  const std::vector<DLDevice>& devices;
  Backends& backends;
  plan& p;
};

inline std::optional<std::uint64_t> entry_bytes(const compact_graph& g, std::uint32_t e) {
  return checked_byte_size(g.shape(e), g.dltype[e]);
}

/// Entry `e`'s dtype and shape, as error messages show them.
inline std::string describe_entry(const compact_graph& g, std::uint32_t e) { return to_string(g.dltype[e]) + shape_to_string(g.shape(e)); }

/// The index into `devices` of the device entry `e` is placed on (device_index holds a
/// DLDeviceType per entry).
inline std::uint16_t entry_device_index(const compact_graph& g, const std::vector<DLDevice>& devices, std::uint32_t e) {
  const int type = g.device_index[e];
  for (std::size_t i = 0; i < devices.size(); ++i)
    if (devices[i].device_type == type) return static_cast<std::uint16_t>(i);
  plan_fail(errc::device_mismatch, g, g.node_of(e),
            "output is placed on " + device_type_name(type) + ", but no " + device_type_name(type) + " device was given");
}

/// Phase 1: every entry on its device (without device_index, everything is on
/// devices[0]) and, until a __nop says otherwise, its own alias root.
template <class Backends>
void place_entries(plan_build<Backends>& b) {
  const auto n_entries = static_cast<std::uint32_t>(b.g.num_entries());
  b.p.entry_device.resize(n_entries);
  b.p.alias_root.resize(n_entries);
  for (std::uint32_t e = 0; e < n_entries; ++e) {
    b.p.entry_device[e] = b.g.device_index.empty() ? 0 : entry_device_index(b.g, b.devices, e);
    b.p.alias_root[e] = e;
  }
}

/// The graph's indices of its two built-in functions (past the end when absent).
struct builtin_funcs {
  // 64 bits, not ptrdiff_t: compared with uint32_t function indices, which a 32-bit
  // ptrdiff_t (int) would compare as unsigned.
  std::int64_t nop;
  std::int64_t copy;
};

/// Sizes the step arrays from one pass over the nodes, so that make_steps never reallocates.
inline void reserve_steps(const compact_graph& g, builtin_funcs fs, plan& p) {
  const auto n_nodes = static_cast<std::uint32_t>(g.num_nodes());
  std::size_t n_args = 0, n_flat = 0, n_steps = 0, n_calls = 0, max_args = 0;
  for (std::uint32_t nid = 0; nid < n_nodes; ++nid) {
    const std::uint32_t f = g.func[nid];
    if (f == compact_graph::no_func) continue;
    n_steps += f == fs.nop ? g.num_outputs(nid) : 1;
    if (f == fs.nop || f == fs.copy) continue;
    const std::size_t args = g.node_inputs(nid).size() + g.num_outputs(nid);
    ++n_calls;
    n_args += args;
    max_args = std::max(max_args, args);
    if (g.flatten_data(nid)) n_flat += args;
  }
  p.kernels.resize(g.funcs.size());
  p.arg_entry.reserve(n_args);
  p.flat_args.reserve(n_flat);
  p.flat_shapes.reserve(n_flat);
  p.codes.assign(max_args, tc_dltensor);
  p.calls.reserve(n_calls);
  p.step_node.reserve(n_steps);
}

/// Appends step `index` of `kind` to the run order, extending the last run where it can.
inline void append_step(plan& p, step_kind kind, std::size_t index, std::uint16_t device, std::uint32_t nid) {
  const auto i = static_cast<std::uint32_t>(index);
  const auto step = static_cast<std::uint32_t>(p.step_node.size());
  p.step_node.push_back(nid);
  if (!p.order.empty() && p.order.back().kind == kind && p.order.back().device == device && p.order.back().end == i) ++p.order.back().end;
  else p.order.push_back({kind, device, i, i + 1, step});
}

/// A copy step from entry `from` to entry `to`, for node `nid`.
template <class Backends>
void add_copy(plan_build<Backends>& b, std::uint32_t nid, std::uint32_t from, std::uint32_t to) {
  const compact_graph& g = b.g;
  plan& p = b.p;
  if (entry_bytes(g, from) != entry_bytes(g, to))
    plan_fail(errc::shape_mismatch, g, nid, "copies " + describe_entry(g, from) + " into " + describe_entry(g, to) + ", which differs in size");
  // A copy that touches a device is that device's backend's job, on its stream.
  const DLDevice src = b.devices[p.entry_device[from]], dst = b.devices[p.entry_device[to]];
  const bool dst_device = dst.device_type != kDLCPU;
  const std::uint16_t device = dst_device ? p.entry_device[to] : p.entry_device[from];
  if (src.device_type != kDLCPU && dst_device && src.device_type != dst.device_type)
    plan_fail(errc::unsupported, g, nid, "copies between " + to_string(src) + " and " + to_string(dst));
  copy_template step{from, to, nullptr, nullptr, device, !dst_device && src.device_type != kDLCPU, nid};
  b.backends.visit(b.devices[device].device_type, [&](auto& backend) {
    step.fn = &backend_copy<std::decay_t<decltype(backend)>>;
    step.backend = &backend;
  });
  if (!step.fn) plan_fail(errc::device_mismatch, g, nid, "no backend copies to " + to_string(dst));
  p.copies.push_back(step);
  append_step(p, step_kind::copy, p.copies.size() - 1, device, nid);
}

/// A __nop node is a reshape: output k aliases input k. TVM plans both onto one storage
/// id, and then the step vanishes; a graph that does not gets a copy instead.
template <class Backends>
void add_nop(plan_build<Backends>& b, std::uint32_t nid) {
  const compact_graph& g = b.g;
  plan& p = b.p;
  const auto inputs = g.node_inputs(nid);
  const std::uint32_t n_out = g.num_outputs(nid);
  if (n_out > inputs.size()) plan_fail(errc::invalid_graph, g, nid, "__nop has more outputs than inputs");
  for (std::uint32_t k = 0; k < n_out; ++k) {
    std::uint32_t in = g.entry_id(inputs[k]), out = g.entry_id(nid, k);
    if (g.storage_id[in] == g.storage_id[out]) {
      if (entry_bytes(g, out) > entry_bytes(g, in)) plan_fail(errc::shape_mismatch, g, nid, "__nop output is larger than the input it aliases");
      if (p.entry_device[in] != p.entry_device[out]) plan_fail(errc::device_mismatch, g, nid, "__nop output is on another device than its input");
      p.alias_root[out] = p.alias_root[in];
    } else {
      add_copy(b, nid, in, out);
    }
  }
}

/// Kernel `f` for node `nid`, resolved through `binding` the first time a node calls it.
template <class Backends, class Binding>
void resolve_kernel(plan_build<Backends>& b, const Binding& binding, std::vector<bool>& resolved, std::uint32_t nid, std::uint32_t f) {
  if (!resolved[f]) {
    try {
      b.p.kernels[f] = binding.resolve(b.g.funcs[f]);
    } catch (const error& e) {  // a symbol the binding refuses: say which node asked for it
      plan_fail(e.code(), b.g, nid, std::string(e.message()));
    }
    resolved[f] = true;
  }
  if (!b.p.kernels[f])
    plan_fail(errc::symbol_not_found, b.g, nid, "calls \"" + b.g.funcs[f] + "\", which " + binding.describe() + " does not provide");
}

/// Argument `k` (entry `eid`) of node `nid`'s call of kernel `f` is not on the kernel's device.
template <class Backends>
[[noreturn]] void fail_arg_device(const plan_build<Backends>& b, std::uint32_t nid, std::uint32_t f, std::uint32_t k, std::uint32_t eid,
                                  std::uint16_t kernel_device) {
  const compact_graph& g = b.g;
  const std::size_t n_in = g.node_inputs(nid).size();
  const std::string which = k < n_in ? "input " + std::to_string(k) + " (entry " + std::to_string(eid) + ", output of node \"" +
                                           std::string(g.name(g.node_of(eid))) + "\")"
                                     : "output " + std::to_string(k - n_in);
  plan_fail(errc::device_mismatch, g, nid,
            "kernel \"" + g.funcs[f] + "\" runs on " + to_string(b.devices[kernel_device]) + ", but its argument " + std::to_string(k) + ", " +
                which + ", is on " + to_string(b.devices[b.p.entry_device[eid]]) + ": a __copy node must move it first");
}

/// A call step of kernel `f` for node `nid`: its inputs then its outputs as arguments.
template <class Backends>
void add_call(plan_build<Backends>& b, std::uint32_t nid, std::uint32_t f) {
  const compact_graph& g = b.g;
  plan& p = b.p;
  const auto inputs = g.node_inputs(nid);
  const auto n_in = static_cast<std::uint32_t>(inputs.size());
  const std::uint32_t n_args = n_in + g.num_outputs(nid);
  const auto first = static_cast<std::uint32_t>(p.arg_entry.size());
  const bool flat = g.flatten_data(nid);
  // A kernel runs on the device of its first output and is handed pointers there: every
  // argument must live on that device (TVM's planner inserts __copy nodes where they
  // do not; a graph from another tool may not).
  const std::uint16_t kernel_device = p.entry_device[g.entry_id(nid, 0)];
  for (std::uint32_t k = 0; k < n_args; ++k) {
    const std::uint32_t eid = k < n_in ? g.entry_id(inputs[k]) : g.entry_id(nid, k - n_in);
    if (p.entry_device[eid] != kernel_device) fail_arg_device(b, nid, f, k, eid, kernel_device);
    if (flat) {
      p.flat_args.push_back(static_cast<std::uint32_t>(p.arg_entry.size()));
      p.flat_shapes.push_back(static_cast<std::int64_t>(*checked_numel(g.shape(eid))));
    }
    p.arg_entry.push_back(eid);
  }
  p.calls.push_back({f, first, n_args, nid});
  append_step(p, p.kernels[f].fn == &call_tvm_ffi ? step_kind::ffi_call : step_kind::call, p.calls.size() - 1, kernel_device, nid);
}

/// Phase 2: the steps in node order (__nop aliases or copies, __copy copies, every other
/// function a kernel call), each kernel name resolved once, on first use.
template <class Backends, class Binding>
void make_steps(plan_build<Backends>& b, const Binding& binding) {
  const compact_graph& g = b.g;
  const auto n_nodes = static_cast<std::uint32_t>(g.num_nodes());
  const builtin_funcs fs{std::find(g.funcs.begin(), g.funcs.end(), "__nop") - g.funcs.begin(),
                         std::find(g.funcs.begin(), g.funcs.end(), "__copy") - g.funcs.begin()};
  reserve_steps(g, fs, b.p);
  std::vector<bool> listed_input(n_nodes, false);
  for (std::uint32_t nid : g.arg_nodes) listed_input[nid] = true;
  std::vector<bool> resolved(g.funcs.size(), false);
  for (std::uint32_t nid = 0; nid < n_nodes; ++nid) {
    const std::uint32_t f = g.func[nid];
    if (f == compact_graph::no_func) {
      if (!listed_input[nid])
        plan_fail(errc::invalid_graph, g, nid, "is an input (op \"null\") missing from arg_nodes: nothing could ever give it a value");
    } else if (f == fs.nop) {
      add_nop(b, nid);
    } else if (f == fs.copy) {
      add_copy(b, nid, g.entry_id(g.node_inputs(nid)[0]), g.entry_id(nid, 0));
    } else {
      resolve_kernel(b, binding, resolved, nid, f);
      add_call(b, nid, f);
    }
  }
}

/// Phase 3: each alias group as a list from its root (an alias comes after what it
/// aliases), and the flattened arguments made from each group.
template <class Backends>
void link_alias_groups(plan_build<Backends>& b) {
  plan& p = b.p;
  const auto n_entries = static_cast<std::uint32_t>(p.num_entries());
  bool aliased = false;
  for (std::uint32_t e = 0; e < n_entries && !aliased; ++e) aliased = p.alias_root[e] != e;
  if (aliased) {
    std::vector<std::uint32_t> tail(n_entries);
    p.alias_next.assign(n_entries, plan::no_entry);
    for (std::uint32_t e = 0; e < n_entries; ++e) {
      const std::uint32_t root = p.alias_root[e];
      if (root != e) p.alias_next[tail[root]] = e;
      tail[root] = e;
    }
  }
  p.flat_users.reserve(p.flat_args.size());
  for (std::size_t k = 0; k < p.flat_args.size(); ++k)
    p.flat_users.emplace_back(p.alias_root[p.arg_entry[p.flat_args[k]]], static_cast<std::uint32_t>(k));
  std::sort(p.flat_users.begin(), p.flat_users.end());
}

/// The storage problem's values: one per alias group, alive from the node that makes
/// it; value_of[e] becomes entry e's value.
template <class Backends>
storage_problem storage_values(const plan_build<Backends>& b, std::vector<std::uint32_t>& value_of) {
  const compact_graph& g = b.g;
  const plan& p = b.p;
  const auto n_nodes = static_cast<std::uint32_t>(g.num_nodes());
  storage_problem problem;
  problem.num_nodes = n_nodes;
  problem.num_storage_ids = 0;
  {
    std::size_t n_values = 0;
    for (std::uint32_t e = 0; e < p.num_entries(); ++e) n_values += p.alias_root[e] == e;
    problem.values.reserve(n_values);
  }
  for (std::uint32_t nid = 0; nid < n_nodes; ++nid)
    for (std::uint32_t e = g.node_row_ptr[nid]; e < g.node_row_ptr[nid + 1]; ++e) {
      problem.num_storage_ids = std::max(problem.num_storage_ids, static_cast<std::size_t>(g.storage_id[e]) + 1);
      if (p.alias_root[e] != e) {
        value_of[e] = value_of[p.alias_root[e]];
        continue;
      }
      value_of[e] = static_cast<std::uint32_t>(problem.values.size());
      storage_value v;
      v.root = e;
      v.device = b.devices[p.entry_device[e]];
      v.bytes = p.alias_group_bytes(g, e);
      v.storage_id = g.storage_id[e];
      v.first = v.last = nid;
      problem.values.push_back(v);
    }
  return problem;
}

/// Each value alive to its last use; the graph's inputs and outputs for the whole run.
/// A donated input (`donated`, ascending input indices) is alive from the start of the
/// run (it is set before) to its last reader, and planned as an activation.
inline void value_lifetimes(const compact_graph& g, const std::vector<std::uint32_t>& value_of, std::span<const std::uint32_t> donated,
                            storage_problem& problem) {
  for (std::uint32_t nid = 0; nid < problem.num_nodes; ++nid)
    for (const node_entry& in : g.node_inputs(nid)) {
      storage_value& v = problem.values[value_of[g.entry_id(in)]];
      v.last = std::max(v.last, nid);
    }
  for (std::size_t i = 0, d = 0; i < g.arg_nodes.size(); ++i) {
    storage_value& v = problem.values[value_of[g.entry_id(g.arg_nodes[i], 0)]];
    v.first = 0;
    if (d < donated.size() && donated[d] == i) {
      ++d;
      continue;
    }
    v.is_input = true;
    v.last = pinned_to_end;
  }
  for (const node_entry& h : g.heads) {
    storage_value& v = problem.values[value_of[g.entry_id(h)]];
    v.is_output = true;
    v.last = pinned_to_end;
  }
}

/// Phase 4: the alias groups laid out by the planner, its answer checked, each entry
/// given its slot and offset, and the figures to compare planners by.
template <class Backends, storage_planner Planner>
void plan_storage(plan_build<Backends>& b, const Planner& planner) {
  plan& p = b.p;
  const auto n_entries = p.num_entries();
  std::vector<std::uint32_t> value_of(n_entries, 0);
  storage_problem problem = storage_values(b, value_of);
  value_lifetimes(b.g, value_of, p.donated, problem);
  storage_assignment placed = planner.plan(problem);
  const bool as_ids = keeps_storage_ids(planner);
  check_assignment(problem, placed, as_ids ? "the graph's storage_id" : "the planner");
  p.entry_slot.resize(n_entries);
  p.entry_offset.resize(n_entries);
  for (std::uint32_t e = 0; e < n_entries; ++e) {
    p.entry_slot[e] = placed.slot[value_of[e]];
    p.entry_offset[e] = placed.offset[value_of[e]];
  }
  p.figures.as_compiled = as_ids ? activation_bytes(placed) : activation_bytes(as_compiled{}.plan(problem));
  p.figures.planned = activation_bytes(placed);
  p.figures.lower_bound = liveness_lower_bound(problem);
  p.storage = std::move(placed.slots);
}

}  // namespace detail

/// Builds the plan for `vg`: places entries on `devices`, lays storage out with
/// `planner` (and checks its answer), resolves every kernel name once through
/// `binding`. Every error a run could meet for structural reasons is raised here.
/// `backends` must outlive the plan (copy steps point at the backend that performs them).
/// `donated`: the inputs (ascending indices into arg_nodes, none a graph output) whose
/// bytes later values may take once they are read (plan::donated).
template <class Backends, op_binding Binding, storage_planner Planner = as_compiled>
plan make_plan(const validated_graph& vg, const Binding& binding, const std::vector<DLDevice>& devices, Backends& backends,
               const Planner& planner = {}, std::vector<std::uint32_t> donated = {}) {
  plan p;
  p.devices = devices;
  p.donated = std::move(donated);
  detail::plan_build<Backends> b{vg.compact(), devices, backends, p};
  detail::place_entries(b);
  detail::make_steps(b, binding);
  detail::link_alias_groups(b);
  detail::plan_storage(b, planner);
  return p;
}

GEXEC_NAMESPACE_END
