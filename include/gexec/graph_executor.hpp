#pragma once
// gexec::graph_executor: runs a TVM graph over a binding's kernels on a set of devices.
//
//   gexec::module lib = gexec::load_module("deploy_lib.so");
//   auto ex = gexec::create(graph_json, lib, {gexec::cpu()});
//   ex.load_params(param_bytes);
//   ex.set_input("data", input);
//   ex.run();
//   gexec::ndarray out = ex.get_output(0);

#include "config.hpp"

#include <dlpack/dlpack.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "allocators/pool_allocator.hpp"
#include "backends/backend.hpp"
#include "backends/cpu.hpp"
#include "binding/packed_c_abi.hpp"
#include "binding/registry.hpp"
#include "detail/last_error.hpp"
#include "error.hpp"
#include "fwd.hpp"
#include "graph.hpp"
#include "module.hpp"
#include "ndarray.hpp"
#include "params.hpp"
#include "plan.hpp"

GEXEC_NAMESPACE_BEGIN

/// Name, shape and dtype of a graph input or output.
struct tensor_info {
  std::string name;
  std::vector<std::int64_t> shape;
  DLDataType dtype;
};

template <class Backends, class Allocator, class Binding>
class graph_executor {
  static_assert(is_backends_v<Backends>, "Backends must be gexec::backends<...> of device backends");
  static_assert(Backends::template allocates_with<Allocator>,
                "Allocator must provide allocate(shared_ptr<Backend>, DLDevice, span<const uint64_t>) for every backend");
  static_assert(op_binding<Binding>, "Binding must provide resolve(name) -> packed_function and describe()");

 public:
  /// Validates the devices, plans storage and binds every kernel: a graph that can be
  /// created runs without structural errors.
  graph_executor(graph g, Binding binding, std::vector<DLDevice> devices, Backends backends = {}, Allocator allocator = {})
      : graph_(std::move(g)),
        binding_(std::move(binding)),
        devices_(std::move(devices)),
        backends_(std::make_shared<Backends>(std::move(backends))),
        allocator_(std::move(allocator)) {
    if (devices_.empty()) throw error(errc::invalid_argument, "create: no device given");
    for (const DLDevice& d : devices_)
      if (!Backends::serves(d.device_type)) throw error(errc::device_mismatch, "create: no backend serves " + to_string(d));
    plan_ = make_plan(graph_, binding_, devices_, backends_, allocator_);
    group_binding_.assign(plan_.entries.size(), bound_to::internal);
    for (std::size_t i = 0; i < graph_.arg_nodes.size(); ++i) input_index_.emplace(graph_.nodes[graph_.arg_nodes[i]].name, static_cast<int>(i));
    for (std::size_t i = 0; i < graph_.heads.size(); ++i) {
      output_names_.push_back(graph_.nodes[graph_.heads[i].node_id].name + ":" + std::to_string(i));
      output_index_.emplace(output_names_.back(), static_cast<int>(i));
    }
  }

  graph_executor(graph_executor&&) noexcept = default;
  graph_executor& operator=(graph_executor&&) noexcept = default;

  // ---- inputs ---------------------------------------------------------------------

  [[nodiscard]] int get_num_inputs() const noexcept { return static_cast<int>(graph_.arg_nodes.size()); }
  /// Index of an input (arg node, parameters included, as in TVM); -1 when absent.
  [[nodiscard]] int get_input_index(std::string_view name) const {
    auto it = input_index_.find(std::string(name));
    return it == input_index_.end() ? -1 : it->second;
  }
  /// Inputs that are not loaded parameters, in graph order.
  [[nodiscard]] std::vector<tensor_info> get_input_info() const {
    std::vector<tensor_info> info;
    for (std::uint32_t nid : graph_.arg_nodes)
      if (!param_names_.count(graph_.nodes[nid].name)) info.push_back(describe(graph_.nodes[nid].name, graph_.entry_id(nid, 0)));
    return info;
  }

  /// Copies `value` into input `index`; shape and dtype must match. Undoes an earlier
  /// set_input_zero_copy of that input.
  void set_input(int index, const ndarray& value) {
    std::uint32_t eid = input_entry(index);
    check_tensor("set_input", input_name(index), eid, value, false);
    unbind(eid);
    copy_tensor(value.dltensor(), plan_.entries[eid]);
  }
  void set_input(std::string_view name, const ndarray& value) { set_input(require_input(name), value); }

  /// Makes input `index` read `value`'s memory directly, at every use of it: the entry,
  /// the entries sharing its storage as __nop aliases, and every kernel argument made
  /// from them. Shape, dtype, device and 64-byte alignment must match. Entries the
  /// planner put on the same storage id once the input was dead keep gexec's memory,
  /// so they neither overrun nor overwrite the caller's tensor.
  void set_input_zero_copy(int index, const ndarray& value) {
    std::uint32_t eid = input_entry(index);
    check_tensor("set_input_zero_copy", input_name(index), eid, value, true);
    if (plan_.alias_group_bytes(eid) > value.byte_size())
      throw error(errc::shape_mismatch, "set_input_zero_copy \"" + input_name(index) + "\": a __nop alias of it is larger than the tensor");
    plan_.bind_alias_group(eid, value.data(), value.storage_owner());
    group_binding_[plan_.alias_root[eid]] = bound_to::input;
  }
  void set_input_zero_copy(std::string_view name, const ndarray& value) { set_input_zero_copy(require_input(name), value); }

  /// A view of input `index` in the executor's memory.
  [[nodiscard]] ndarray get_input(int index) const { return view_of(input_entry(index)); }
  [[nodiscard]] ndarray get_input(std::string_view name) const { return get_input(require_input(name)); }

  // ---- parameters -----------------------------------------------------------------

  /// Copies the parameters whose names are graph inputs (others are ignored, as in TVM).
  /// Everything is checked before anything is copied: on error, nothing changes.
  void load_params(const param_dict& params) {
    std::vector<std::pair<std::uint32_t, const ndarray*>> todo;
    for (const auto& [name, value] : params) {
      int index = get_input_index(name);
      if (index < 0) continue;
      std::uint32_t eid = input_entry(index);
      check_tensor("load_params", name, eid, value, false);
      todo.emplace_back(eid, &value);
    }
    for (auto [eid, value] : todo) {
      unbind(eid);
      copy_tensor(value->dltensor(), plan_.entries[eid]);
      param_names_.insert(graph_.nodes[node_of(eid)].name);
    }
  }
  void load_params(std::span<const std::byte> blob) { load_params(load_param_dict(blob)); }
  void load_params(std::string_view blob) { load_params(load_param_dict(blob)); }
  void load_params_file(const std::filesystem::path& path) { load_params(load_param_dict_file(path, load_mode::mmap)); }

  /// Makes this executor use `other`'s memory for the parameters named in `blob` (only
  /// the names are read). The memory stays valid after `other` is destroyed.
  void share_params(const graph_executor& other, std::span<const std::byte> blob) {
    std::vector<std::pair<std::uint32_t, std::uint32_t>> todo;  // (this entry, other entry)
    for (const std::string& name : detail::read_param_names(blob)) {
      int index = get_input_index(name), other_index = other.get_input_index(name);
      if (index < 0) continue;
      if (other_index < 0) throw error(errc::not_found, "share_params: the other executor has no input \"" + name + "\"");
      std::uint32_t eid = input_entry(index), other_eid = other.input_entry(other_index);
      check_tensor("share_params", name, eid, other.view_of(other_eid), true);
      todo.emplace_back(eid, other_eid);
    }
    for (auto [eid, other_eid] : todo) {
      unbind(eid);
      plan_.bind_alias_group(eid, other.plan_.entries[other_eid].data, other.plan_.entry_owner[other_eid]);
      param_names_.insert(graph_.nodes[node_of(eid)].name);
    }
  }
  void share_params(const graph_executor& other, std::string_view blob) { share_params(other, detail::as_bytes(blob)); }

  // ---- outputs --------------------------------------------------------------------

  [[nodiscard]] int get_num_outputs() const noexcept { return static_cast<int>(graph_.heads.size()); }
  /// Index of an output named "node:i" as TVM names outputs, or by node name alone; -1 when absent.
  [[nodiscard]] int get_output_index(std::string_view name) const {
    if (auto it = output_index_.find(std::string(name)); it != output_index_.end()) return it->second;
    for (std::size_t i = 0; i < graph_.heads.size(); ++i)
      if (graph_.nodes[graph_.heads[i].node_id].name == name) return static_cast<int>(i);
    return -1;
  }
  /// Every output's name ("node:i"), shape and dtype, by entry (multi-output nodes included).
  [[nodiscard]] std::vector<tensor_info> get_output_info() const {
    std::vector<tensor_info> info;
    for (std::size_t i = 0; i < graph_.heads.size(); ++i) info.push_back(describe(output_names_[i], graph_.entry_id(graph_.heads[i])));
    return info;
  }

  /// Makes output `index` be written into `value`'s memory: the kernel producing it (or
  /// the tensor it is a __nop alias of) writes there directly. Where the output is an
  /// input's data, or already another output's, or an alias of something larger, run()
  /// copies into `value` at the end instead.
  void set_output_zero_copy(int index, const ndarray& value) {
    std::uint32_t eid = output_entry(index);
    check_tensor("set_output_zero_copy", output_names_[static_cast<std::size_t>(index)], eid, value, true);
    std::erase_if(output_copies_, [&](const output_copy& c) { return c.index == index; });
    const std::uint32_t root = plan_.alias_root[eid];
    bool is_input = false;
    for (std::uint32_t nid : graph_.arg_nodes) is_input |= plan_.alias_root[graph_.entry_id(nid, 0)] == root;
    if (is_input || group_binding_[root] != bound_to::internal || plan_.alias_group_bytes(eid) > value.byte_size()) {
      output_copies_.push_back({index, eid, value});
    } else {
      plan_.bind_alias_group(eid, value.data(), value.storage_owner());
      group_binding_[root] = bound_to::output;
    }
  }

  /// A view of output `index` (valid until the next run changes it).
  [[nodiscard]] ndarray get_output(int index) const {
    std::uint32_t eid = output_entry(index);
    for (const output_copy& c : output_copies_)
      if (c.index == index) return c.value;
    return view_of(eid);
  }
  /// Copies output `index` into `dst` (host or device); shape and dtype must match.
  void copy_output_to(int index, const ndarray& dst) {
    std::uint32_t eid = output_entry(index);
    check_tensor("copy_output_to", output_names_[static_cast<std::size_t>(index)], eid, dst, false);
    copy_tensor(plan_.entries[eid], const_cast<DLTensor&>(dst.dltensor()));
  }

  // ---- running --------------------------------------------------------------------

  /// Runs every step. Throws errc::kernel_failed, naming the node and passing on the
  /// kernel's message, if a kernel returns non-zero.
  void run() { run_until(static_cast<std::uint32_t>(graph_.nodes.size())); }

  /// set_input for each (name, value), then run(); returns views of the outputs.
  std::vector<ndarray> run_from_inputs(const std::vector<std::pair<std::string, ndarray>>& inputs) {
    for (const auto& [name, value] : inputs) set_input(name, value);
    run();
    std::vector<ndarray> outs;
    for (int i = 0; i < get_num_outputs(); ++i) outs.push_back(get_output(i));
    return outs;
  }

  /// Runs the graph up to and including the node producing entry `entry_id`, and returns
  /// a host copy of that entry (indexed by entry, not node).
  [[nodiscard]] ndarray debug_get_output(std::uint32_t entry_id) {
    if (entry_id >= graph_.num_entries())
      throw error(errc::invalid_argument, "debug_get_output: entry " + std::to_string(entry_id) + " out of range (" +
                                              std::to_string(graph_.num_entries()) + " entries)");
    run_until(node_of(entry_id) + 1);
    const DLTensor& e = plan_.entries[entry_id];
    ndarray out = ndarray::empty(std::vector<std::int64_t>(e.shape, e.shape + e.ndim), e.dtype);
    copy_tensor(e, const_cast<DLTensor&>(out.dltensor()));
    return out;
  }
  /// The same for output `index` of the node called `node_name`.
  [[nodiscard]] ndarray debug_get_output(std::string_view node_name, std::uint32_t index = 0) {
    for (std::uint32_t nid = 0; nid < graph_.nodes.size(); ++nid)
      if (graph_.nodes[nid].name == node_name) {
        if (index >= graph_.nodes[nid].num_outputs)
          throw error(errc::invalid_argument, "debug_get_output: node \"" + std::string(node_name) + "\" has " +
                                                  std::to_string(graph_.nodes[nid].num_outputs) + " outputs");
        return debug_get_output(graph_.entry_id(nid, index));
      }
    throw error(errc::not_found, "debug_get_output: no node named \"" + std::string(node_name) + "\"");
  }

  [[nodiscard]] const gexec::graph& get_graph() const noexcept { return graph_; }
  [[nodiscard]] const gexec::plan& get_plan() const noexcept { return plan_; }

 private:
  enum class bound_to : std::uint8_t { internal, input, output };
  struct output_copy {
    int index;
    std::uint32_t eid;
    ndarray value;
  };

  void run_until(std::uint32_t node_end) {
    for (const detail::step_run& r : plan_.order) {
      if (r.kind == detail::step_kind::call) {
        for (const detail::call_step* s = plan_.calls.data() + r.begin, *end = plan_.calls.data() + r.end; s != end; ++s) {
          if (s->node_id >= node_end) [[unlikely]] return;
          TVMValue ret;
          int ret_code = tc_null;
          if (s->fn(s->values, s->codes, s->num_args, &ret, &ret_code, s->resource_handle) != 0) [[unlikely]]
            kernel_failed(s->node_id);
        }
      } else {
        for (const detail::copy_step* s = plan_.copies.data() + r.begin, *end = plan_.copies.data() + r.end; s != end; ++s) {
          if (s->node_id >= node_end) [[unlikely]] return;
          s->fn(s->backend, *s->from, *s->to);
        }
      }
    }
    for (const output_copy& c : output_copies_) copy_tensor(plan_.entries[c.eid], const_cast<DLTensor&>(c.value.dltensor()));
  }

  [[noreturn]] void kernel_failed(std::uint32_t nid) const {
    std::string message = detail::take_last_error();
    const node& n = graph_.nodes[nid];
    throw error(errc::kernel_failed, "node \"" + n.name + "\" (nodes[" + std::to_string(nid) + "], " + n.func_name +
                                         ") failed: " + (message.empty() ? std::string("no message") : message));
  }

  [[nodiscard]] std::uint32_t input_entry(int index) const {
    if (index < 0 || index >= get_num_inputs())
      throw error(errc::invalid_argument, "input index " + std::to_string(index) + " out of range (" + std::to_string(get_num_inputs()) + " inputs)");
    return graph_.entry_id(graph_.arg_nodes[static_cast<std::size_t>(index)], 0);
  }
  [[nodiscard]] std::uint32_t output_entry(int index) const {
    if (index < 0 || index >= get_num_outputs())
      throw error(errc::invalid_argument, "output index " + std::to_string(index) + " out of range (" + std::to_string(get_num_outputs()) + " outputs)");
    return graph_.entry_id(graph_.heads[static_cast<std::size_t>(index)]);
  }
  [[nodiscard]] const std::string& input_name(int index) const { return graph_.nodes[graph_.arg_nodes[static_cast<std::size_t>(index)]].name; }
  [[nodiscard]] int require_input(std::string_view name) const {
    int index = get_input_index(name);
    if (index >= 0) return index;
    std::string known;
    for (std::uint32_t nid : graph_.arg_nodes)
      if (!param_names_.count(graph_.nodes[nid].name)) known += (known.empty() ? "" : ", ") + graph_.nodes[nid].name;
    throw error(errc::not_found, "no input named \"" + std::string(name) + "\" (inputs: " + known + ")");
  }
  [[nodiscard]] std::size_t storage_of(std::uint32_t eid) const { return static_cast<std::size_t>(graph_.attrs.storage_id[eid]); }
  [[nodiscard]] std::uint32_t node_of(std::uint32_t eid) const {
    auto it = std::upper_bound(graph_.node_row_ptr.begin(), graph_.node_row_ptr.end(), eid);
    return static_cast<std::uint32_t>(it - graph_.node_row_ptr.begin() - 1);
  }
  [[nodiscard]] tensor_info describe(const std::string& name, std::uint32_t eid) const {
    return {name, graph_.attrs.shape[eid], graph_.attrs.dltype[eid]};
  }
  [[nodiscard]] ndarray view_of(std::uint32_t eid) const { return ndarray::view(plan_.entries[eid], plan_.entry_owner[eid]); }

  /// Returns entry `eid`'s alias group to gexec's own memory if something else was bound.
  void unbind(std::uint32_t eid) {
    auto sid = storage_of(eid);
    if (plan_.entries[eid].data == plan_.storage[sid].buffer.get()) return;
    plan_.unbind_alias_group(eid, sid);
    group_binding_[plan_.alias_root[eid]] = bound_to::internal;
  }

  /// Checks `value` against entry `eid`: dtype, shape, and for zero-copy use the device,
  /// compactness and 64-byte alignment kernels rely on.
  void check_tensor(const char* what, std::string_view name, std::uint32_t eid, const ndarray& value, bool zero_copy) const {
    auto fail = [&](errc code, const std::string& why) {
      throw error(code, std::string(what) + " \"" + std::string(name) + "\": " + why);
    };
    if (!value.defined()) fail(errc::invalid_argument, "undefined tensor");
    const auto& shape = graph_.attrs.shape[eid];
    DLDataType dtype = graph_.attrs.dltype[eid];
    if (!same_dtype(value.dtype(), dtype)) fail(errc::dtype_mismatch, "dtype is " + to_string(value.dtype()) + ", expected " + to_string(dtype));
    if (!std::equal(shape.begin(), shape.end(), value.shape().begin(), value.shape().end()))
      fail(errc::shape_mismatch, "shape is " + detail::shape_to_string(value.shape()) + ", expected " + detail::shape_to_string(shape));
    if (!value.is_contiguous()) fail(errc::invalid_argument, "tensor is strided; gexec needs compact row-major tensors");
    if (!zero_copy) return;
    const DLDevice want = plan_.entries[eid].device;
    if (!same_device(value.device(), want)) fail(errc::device_mismatch, "tensor is on " + to_string(value.device()) + ", expected " + to_string(want));
    if (!value.is_aligned()) fail(errc::misaligned, "data is not 64-byte aligned");
  }

  /// Copies between tensors of equal size; a copy that touches a device is that device's backend's job.
  void copy_tensor(const DLTensor& src, DLTensor& dst) {
    int type = dst.device.device_type != kDLCPU ? dst.device.device_type : src.device.device_type;
    if (!backends_->visit(type, [&](auto& b) { b.copy(src, dst); }))
      throw error(errc::device_mismatch, "no backend copies between " + to_string(src.device) + " and " + to_string(dst.device));
  }

  gexec::graph graph_;
  Binding binding_;
  std::vector<DLDevice> devices_;
  std::shared_ptr<Backends> backends_;
  Allocator allocator_;
  gexec::plan plan_;
  std::vector<bound_to> group_binding_;  // per alias root entry
  std::unordered_map<std::string, int> input_index_;
  std::unordered_map<std::string, int> output_index_;
  std::vector<std::string> output_names_;
  std::unordered_set<std::string> param_names_;
  std::vector<output_copy> output_copies_;
};

/// An executor over a TVM-compiled library with the default policies.
inline graph_executor<> create(std::string_view graph_json, const module& lib, std::vector<DLDevice> devices = {cpu()}) {
  return graph_executor<>(parse_graph(graph_json), packed_c_abi(lib), std::move(devices));
}
inline graph_executor<> create(graph g, const module& lib, std::vector<DLDevice> devices = {cpu()}) {
  return graph_executor<>(std::move(g), packed_c_abi(lib), std::move(devices));
}
/// An executor over another binding: a registry or static_registry of C++ kernels.
template <op_binding Binding>
graph_executor<backends<cpu_backend>, pool_allocator, Binding> create(graph g, Binding kernels, std::vector<DLDevice> devices = {cpu()}) {
  return {std::move(g), std::move(kernels), std::move(devices)};
}
template <op_binding Binding>
graph_executor<backends<cpu_backend>, pool_allocator, Binding> create(std::string_view graph_json, Binding kernels,
                                                                      std::vector<DLDevice> devices = {cpu()}) {
  return {parse_graph(graph_json), std::move(kernels), std::move(devices)};
}

GEXEC_NAMESPACE_END
