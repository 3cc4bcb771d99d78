#pragma once
// The static plan: storage per storage id, a DLTensor per entry viewing it, and the
// steps of a run as flat arrays of small typed structs (a packed call holds its
// function pointer and pointers into the flat argument arrays). Built once at
// creation; run() walks it without allocating, hashing or comparing strings.

#include "config.hpp"

#include <dlpack/dlpack.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "allocators/pool_allocator.hpp"
#include "backends/backend.hpp"
#include "binding/binding.hpp"
#include "graph.hpp"
#include "tvm_abi.hpp"

GEXEC_NAMESPACE_BEGIN

namespace detail {

enum class step_kind : std::uint8_t { call, copy };

struct call_step {
  packed_c_func fn;
  void* resource_handle;
  TVMValue* values;
  int* codes;
  int num_args;
  std::uint32_t node_id;
};

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

struct storage_buffer {
  DLDevice device{};
  std::uint64_t bytes = 0;
  std::shared_ptr<void> buffer;  ///< gexec's own memory for this storage id (null if unused)
};

struct plan {
  std::vector<storage_buffer> storage;                 ///< per storage id
  std::vector<DLTensor> entries;                       ///< per entry, viewing its storage
  std::vector<std::shared_ptr<const void>> entry_owner; ///< keeps entries[e].data alive
  std::vector<std::uint32_t> alias_root;               ///< per entry: the entry a __nop chain aliases
  std::vector<DLTensor> args;                          ///< kernel arguments, flat over all calls
  std::vector<std::uint32_t> arg_entry;                ///< entry behind each argument
  std::vector<std::int64_t> flat_shapes;               ///< 1-d shapes of flatten_data arguments
  std::vector<TVMValue> values;
  std::vector<int> codes;
  std::vector<detail::call_step> calls;
  std::vector<detail::copy_step> copies;
  std::vector<detail::step_run> order;
  /// Per alias group (keyed by its root entry), every DLTensor that is that data: the
  /// entries of the group and the arguments made from them (CSR), for rebinding in O(uses).
  std::vector<std::uint32_t> users_begin;
  std::vector<DLTensor*> users;

  /// Points entry `eid`, its __nop aliases and every argument made from them at `data`.
  /// Other entries on the same storage id (the planner reuses storage once a tensor is
  /// dead) keep their memory: they are other tensors.
  void bind_alias_group(std::uint32_t eid, void* data, const std::shared_ptr<const void>& owner) {
    const std::uint32_t root = alias_root[eid];
    for (std::uint32_t i = users_begin[root]; i < users_begin[root + 1]; ++i) {
      DLTensor* t = users[i];
      t->data = data;
      if (t >= entries.data() && t < entries.data() + entries.size()) entry_owner[static_cast<std::size_t>(t - entries.data())] = owner;
    }
  }
  /// Returns entry `eid`'s alias group to its storage id's own buffer.
  void unbind_alias_group(std::uint32_t eid, std::size_t sid) { bind_alias_group(eid, storage[sid].buffer.get(), storage[sid].buffer); }
  /// Bytes of the largest entry in `eid`'s alias group.
  [[nodiscard]] std::uint64_t alias_group_bytes(std::uint32_t eid) const {
    std::uint64_t bytes = 0;
    const std::uint32_t root = alias_root[eid];
    for (std::uint32_t i = users_begin[root]; i < users_begin[root + 1]; ++i) {
      const DLTensor& t = *users[i];
      bytes = std::max(bytes, detail::checked_byte_size({t.shape, static_cast<std::size_t>(t.ndim)}, t.dtype).value_or(0));
    }
    return bytes;
  }
};

/// Builds the plan for `g`: places entries on `devices`, allocates storage through
/// `alloc` and the backends, resolves every kernel through `binding`. Every error a
/// run could meet for structural reasons is raised here.
template <class Backends, class Allocator, op_binding Binding>
plan make_plan(const graph& g, const Binding& binding, const std::vector<DLDevice>& devices,
               const std::shared_ptr<Backends>& backends, Allocator& alloc) {
  using detail::plan_fail;
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

  // Storage: one buffer per storage id, as large as its largest entry.
  p.storage.resize(n_entries);
  std::vector<bool> used(n_entries, false);
  for (std::size_t e = 0; e < n_entries; ++e) {
    auto sid = static_cast<std::size_t>(attrs.storage_id[e]);
    auto& s = p.storage[sid];
    s.device = device_of(e);
    s.bytes = std::max(s.bytes, *detail::checked_byte_size(attrs.shape[e], attrs.dltype[e]));
    used[sid] = true;
  }
  for (const DLDevice& d : devices) {
    std::vector<std::size_t> sids;
    std::vector<std::uint64_t> sizes;
    for (std::size_t sid = 0; sid < n_entries; ++sid)
      if (used[sid] && same_device(p.storage[sid].device, d)) {
        sids.push_back(sid);
        sizes.push_back(p.storage[sid].bytes);
      }
    if (sids.empty()) continue;
    bool served = backends->visit(d.device_type, [&](auto& b) {
      using B = std::decay_t<decltype(b)>;
      auto buffers = alloc.allocate(std::shared_ptr<B>(backends, &b), d, sizes);
      for (std::size_t i = 0; i < sids.size(); ++i) p.storage[sids[i]].buffer = std::move(buffers[i]);
    });
    if (!served) throw error(errc::device_mismatch, "no backend serves " + to_string(d));
  }

  p.entries.resize(n_entries);
  p.entry_owner.resize(n_entries);
  p.alias_root.resize(n_entries);
  for (std::size_t e = 0; e < n_entries; ++e) {
    const auto& s = p.storage[static_cast<std::size_t>(attrs.storage_id[e])];
    p.entries[e] = DLTensor{s.buffer.get(), s.device, static_cast<int>(attrs.shape[e].size()), attrs.dltype[e],
                            const_cast<std::int64_t*>(attrs.shape[e].data()), nullptr, 0};
    p.entry_owner[e] = s.buffer;
    p.alias_root[e] = static_cast<std::uint32_t>(e);
  }

  // Steps. Argument arrays are sized first so that the pointers into them stay put.
  std::size_t n_args = 0;
  for (const node& n : g.nodes)
    if (n.is_op() && n.func_name != "__nop" && n.func_name != "__copy") n_args += n.inputs.size() + n.num_outputs;
  p.args.reserve(n_args);
  p.arg_entry.reserve(n_args);
  p.flat_shapes.reserve(n_args);
  p.values.reserve(n_args);
  p.codes.reserve(n_args);

  auto append_step = [&](detail::step_kind kind, std::size_t index) {
    auto i = static_cast<std::uint32_t>(index);
    if (!p.order.empty() && p.order.back().kind == kind && p.order.back().end == i) ++p.order.back().end;
    else p.order.push_back({kind, i, i + 1});
  };
  auto add_copy = [&](std::uint32_t nid, std::uint32_t from, std::uint32_t to) {
    const DLTensor& src = p.entries[from];
    DLTensor& dst = p.entries[to];
    if (detail::checked_byte_size(attrs.shape[from], attrs.dltype[from]) != detail::checked_byte_size(attrs.shape[to], attrs.dltype[to]))
      plan_fail(errc::shape_mismatch, g, nid, "copies " + to_string(attrs.dltype[from]) + detail::shape_to_string(attrs.shape[from]) +
                                                  " into " + to_string(attrs.dltype[to]) + detail::shape_to_string(attrs.shape[to]) +
                                                  ", which differs in size");
    // A copy that touches a device is that device's backend's job.
    int type = dst.device.device_type != kDLCPU ? dst.device.device_type : src.device.device_type;
    if (src.device.device_type != kDLCPU && dst.device.device_type != kDLCPU && src.device.device_type != dst.device.device_type)
      plan_fail(errc::unsupported, g, nid, "copies between " + to_string(src.device) + " and " + to_string(dst.device));
    detail::copy_step step{&src, &dst, nullptr, nullptr, nid};
    backends->visit(type, [&](auto& b) {
      step.fn = &detail::backend_copy<std::decay_t<decltype(b)>>;
      step.backend = &b;
    });
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
      TVMValue v;
      v.v_handle = &p.args.back();
      p.values.push_back(v);
      p.codes.push_back(tc_dltensor);
    };
    for (const node_entry& in : n.inputs) add_arg(g.entry_id(in));
    for (std::uint32_t k = 0; k < n.num_outputs; ++k) add_arg(g.entry_id(nid, k));
    p.calls.push_back({f.fn, f.resource_handle, p.values.data() + first, p.codes.data() + first,
                       static_cast<int>(p.args.size() - first), nid});
    append_step(detail::step_kind::call, p.calls.size() - 1);
  }

  // Users of each alias group: its entries and the arguments made from them.
  std::vector<std::uint32_t> count(n_entries + 1, 0);
  for (std::size_t e = 0; e < n_entries; ++e) ++count[p.alias_root[e] + 1];
  for (std::uint32_t eid : p.arg_entry) ++count[p.alias_root[eid] + 1];
  for (std::size_t i = 1; i <= n_entries; ++i) count[i] += count[i - 1];
  p.users_begin = count;
  p.users.resize(count.back());
  for (std::size_t e = 0; e < n_entries; ++e) p.users[count[p.alias_root[e]]++] = &p.entries[e];
  for (std::size_t i = 0; i < p.args.size(); ++i) p.users[count[p.alias_root[p.arg_entry[i]]]++] = &p.args[i];
  return p;
}

GEXEC_NAMESPACE_END
