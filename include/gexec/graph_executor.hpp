#pragma once
// gexec::graph_executor: one instance of a model. It holds only what a run changes or
// a caller binds: its activation storage, its inputs, its zero-copy bindings and the
// step arrays run() walks. The graph, kernels, plan and parameters belong to the model
// and are shared by every instance of it.
//
//   gexec::module lib = gexec::load_module("deploy_lib.so");
//   auto ex = gexec::create(graph_json, lib, {gexec::cpu()});
//   ex.load_params(param_bytes);
//   ex.set_input("data", input);
//   ex.run();
//   gexec::ndarray out = ex.get_output(0);
//
// An executor is used by one thread at a time: a call that changes it (run, set_input,
// load_params, ...) while another thread is inside one is refused with errc::busy.
// For concurrency make one executor per thread from one model (model::instantiate).

#include "config.hpp"

#include <dlpack/dlpack.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "allocators/pool_allocator.hpp"
#include "backends/backend.hpp"
#include "backends/cpu.hpp"
#include "binding/packed_c_abi.hpp"
#include "binding/registry.hpp"
#include "detail/last_error.hpp"
#include "detail/model_state.hpp"
#include "detail/run_context.hpp"
#include "error.hpp"
#include "fwd.hpp"
#include "graph.hpp"
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
  using model_state = detail::model_state<Backends, Allocator, Binding>;

  /// An instance of `model` (see basic_model::instantiate): allocates its activations,
  /// and reads the model's parameters in place.
  explicit graph_executor(std::shared_ptr<const model_state> model) : m_(std::move(model)), s_(std::make_unique<instance>(*m_)) {}

  graph_executor(graph_executor&&) noexcept = default;
  graph_executor& operator=(graph_executor&&) noexcept = default;

  // ---- inputs ---------------------------------------------------------------------

  [[nodiscard]] int get_num_inputs() const noexcept { return m_ ? static_cast<int>(m_->graph->arg_nodes.size()) : 0; }
  /// Index of an input (arg node, parameters included, as in TVM); -1 when absent.
  [[nodiscard]] int get_input_index(std::string_view name) const {
    auto it = model().input_index.find(std::string(name));
    return it == model().input_index.end() ? -1 : it->second;
  }
  /// Inputs that are not parameters (of the model, loaded or shared), in graph order.
  [[nodiscard]] std::vector<tensor_info> get_input_info() const {
    std::vector<tensor_info> info;
    for (std::size_t i = 0; i < model().graph->arg_nodes.size(); ++i)
      if (!self().is_param[i]) info.push_back(describe(input_name(static_cast<int>(i)), model().input_entry(i)));
    return info;
  }

  /// Copies `value` into input `index`; shape and dtype must match. Undoes an earlier
  /// set_input_zero_copy of that input.
  void set_input(int index, const ndarray& value) {
    busy_guard g(self(), "set_input");
    std::uint32_t eid = input_entry(index);
    check_tensor("set_input", input_name(index), eid, value, false);
    make_own(eid);
    copy_tensor(value.dltensor(), self().plan.entries[eid]);
  }
  void set_input(std::string_view name, const ndarray& value) { set_input(require_input(name), value); }

  /// Makes input `index` read `value`'s memory directly, at every use of it: the entry,
  /// its __nop aliases and every kernel argument made from them. Shape, dtype, device
  /// and 64-byte alignment must match. May be called again, with the same or another
  /// tensor, any number of times. Entries the planner put on the same storage id once
  /// the input was dead keep the executor's memory, so they neither overrun nor
  /// overwrite the caller's tensor.
  void set_input_zero_copy(int index, const ndarray& value) {
    busy_guard g(self(), "set_input_zero_copy");
    std::uint32_t eid = input_entry(index);
    check_tensor("set_input_zero_copy", input_name(index), eid, value, true);
    if (model().plan.alias_group_bytes(eid) > value.byte_size())
      throw error(errc::shape_mismatch, "set_input_zero_copy \"" + input_name(index) + "\": a __nop alias of it is larger than the tensor");
    bind(eid, value.data(), value.storage_owner(), bound_to::input);
  }
  void set_input_zero_copy(std::string_view name, const ndarray& value) { set_input_zero_copy(require_input(name), value); }

  /// A view of input `index` in the memory it is read from.
  [[nodiscard]] ndarray get_input(int index) const { return view_of(input_entry(index)); }
  [[nodiscard]] ndarray get_input(std::string_view name) const { return get_input(require_input(name)); }

  // ---- parameters -----------------------------------------------------------------

  /// Copies the parameters whose names are graph inputs into this executor's own memory
  /// (others are ignored, as in TVM); the model and its other executors are unaffected.
  /// Everything is checked before anything is copied: on error, nothing changes.
  void load_params(const param_dict& params) {
    busy_guard g(self(), "load_params");
    std::vector<std::pair<std::uint32_t, const ndarray*>> todo;
    for (const auto& [name, value] : params) {
      int index = get_input_index(name);
      if (index < 0) continue;
      std::uint32_t eid = input_entry(index);
      check_tensor("load_params", name, eid, value, false);
      todo.emplace_back(eid, &value);
    }
    for (auto [eid, value] : todo) reserve_own(eid);  // may throw: before anything changes
    for (auto [eid, value] : todo) {
      make_own(eid);
      copy_tensor(value->dltensor(), self().plan.entries[eid]);
      self().is_param[input_of(eid)] = true;
    }
  }
  void load_params(std::span<const std::byte> blob) { load_params(load_param_dict(blob)); }
  void load_params(std::string_view blob) { load_params(load_param_dict(blob)); }
  void load_params_file(const std::filesystem::path& path) { load_params(load_param_dict_file(path, load_mode::copy)); }

  /// Makes this executor read `other`'s memory for the parameters named in `blob` (only
  /// the names are read); takes no memory of its own for them. The memory stays valid
  /// after `other` is destroyed. Instances of one model share its parameters already.
  template <class OB, class OA, class OBind>
  void share_params(const graph_executor<OB, OA, OBind>& other, std::span<const std::byte> blob) {
    busy_guard g(self(), "share_params");
    struct share {
      std::uint32_t eid;
      ndarray value;
    };
    std::vector<share> todo;
    for (const std::string& name : detail::read_param_names(blob)) {
      int index = get_input_index(name), other_index = other.get_input_index(name);
      if (index < 0) continue;
      if (other_index < 0) throw error(errc::not_found, "share_params: the other executor has no input \"" + name + "\"");
      ndarray value = other.get_input(other_index);
      std::uint32_t eid = input_entry(index);
      check_tensor("share_params", name, eid, value, true);
      todo.push_back({eid, std::move(value)});
    }
    for (share& s : todo) {
      bind(s.eid, s.value.data(), s.value.storage_owner(), bound_to::shared);
      self().is_param[input_of(s.eid)] = true;
    }
  }
  template <class OB, class OA, class OBind>
  void share_params(const graph_executor<OB, OA, OBind>& other, std::string_view blob) {
    share_params(other, detail::as_bytes(blob));
  }

  // ---- outputs --------------------------------------------------------------------

  [[nodiscard]] int get_num_outputs() const noexcept { return m_ ? static_cast<int>(m_->graph->heads.size()) : 0; }
  /// Index of an output named "node:i" as TVM names outputs, or by node name alone; -1 when absent.
  [[nodiscard]] int get_output_index(std::string_view name) const {
    if (auto it = model().output_index.find(std::string(name)); it != model().output_index.end()) return it->second;
    const graph& g = model().graph;
    for (std::size_t i = 0; i < g.heads.size(); ++i)
      if (g.nodes[g.heads[i].node_id].name == name) return static_cast<int>(i);
    return -1;
  }
  /// Every output's name ("node:i"), shape and dtype, by entry (multi-output nodes included).
  [[nodiscard]] std::vector<tensor_info> get_output_info() const {
    std::vector<tensor_info> info;
    for (int i = 0; i < get_num_outputs(); ++i) info.push_back(describe(model().output_names[static_cast<std::size_t>(i)], output_entry(i)));
    return info;
  }

  /// Makes output `index` be written into `value`'s memory: the kernel producing it (or
  /// the tensor it is a __nop alias of) writes there directly. May be called again, with
  /// the same or another tensor, any number of times. Where the output is an input's
  /// data, a parameter, another output's zero-copy tensor, or an alias of something
  /// larger, run() copies into `value` at the end instead.
  void set_output_zero_copy(int index, const ndarray& value) {
    busy_guard g(self(), "set_output_zero_copy");
    std::uint32_t eid = output_entry(index);
    check_tensor("set_output_zero_copy", model().output_names[static_cast<std::size_t>(index)], eid, value, true);
    instance& s = self();
    const std::uint32_t root = model().plan.alias_root[eid];
    std::erase_if(s.output_copies, [&](const output_copy& c) { return c.index == index; });
    if (s.binding[root] == bound_to::output && s.bound_output[root] == index) make_own(eid);  // rebinding this output
    if (s.input_group[root] || s.binding[root] != bound_to::internal || model().plan.alias_group_bytes(eid) > value.byte_size()) {
      s.output_copies.push_back({index, eid, value});
    } else {
      bind(eid, value.data(), value.storage_owner(), bound_to::output);
      s.bound_output[root] = index;
    }
  }

  /// A view of output `index` (valid until the next run changes it).
  [[nodiscard]] ndarray get_output(int index) const {
    std::uint32_t eid = output_entry(index);
    for (const output_copy& c : self().output_copies)
      if (c.index == index) return c.value;
    return view_of(eid);
  }
  /// Copies output `index` into `dst` (host or device); shape and dtype must match.
  void copy_output_to(int index, const ndarray& dst) {
    busy_guard g(self(), "copy_output_to");
    std::uint32_t eid = output_entry(index);
    check_tensor("copy_output_to", model().output_names[static_cast<std::size_t>(index)], eid, dst, false);
    copy_tensor(self().plan.entries[eid], const_cast<DLTensor&>(dst.dltensor()));
  }

  // ---- running --------------------------------------------------------------------

  /// Runs every step. Throws errc::kernel_failed, naming the node and passing on the
  /// kernel's message, if a kernel returns non-zero; errc::busy if another thread is
  /// using this executor.
  void run() { run_until(static_cast<std::uint32_t>(model().graph->nodes.size())); }

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
    const graph& g = model().graph;
    if (entry_id >= g.num_entries())
      throw error(errc::invalid_argument, "debug_get_output: entry " + std::to_string(entry_id) + " out of range (" +
                                              std::to_string(g.num_entries()) + " entries)");
    run_until(node_of(entry_id) + 1);
    const DLTensor& e = self().plan.entries[entry_id];
    ndarray out = ndarray::empty(std::vector<std::int64_t>(e.shape, e.shape + e.ndim), e.dtype);
    copy_tensor(e, const_cast<DLTensor&>(out.dltensor()));
    return out;
  }
  /// The same for output `index` of the node called `node_name`.
  [[nodiscard]] ndarray debug_get_output(std::string_view node_name, std::uint32_t index = 0) {
    const graph& g = model().graph;
    for (std::uint32_t nid = 0; nid < g.nodes.size(); ++nid)
      if (g.nodes[nid].name == node_name) {
        if (index >= g.nodes[nid].num_outputs)
          throw error(errc::invalid_argument, "debug_get_output: node \"" + std::string(node_name) + "\" has " +
                                                  std::to_string(g.nodes[nid].num_outputs) + " outputs");
        return debug_get_output(g.entry_id(nid, index));
      }
    throw error(errc::not_found, "debug_get_output: no node named \"" + std::string(node_name) + "\"");
  }

  [[nodiscard]] const gexec::graph& get_graph() const { return model().graph; }
  [[nodiscard]] const gexec::plan& get_plan() const { return model().plan; }
  /// Bytes of storage this executor allocated itself (activations, and inputs it holds).
  [[nodiscard]] std::uint64_t storage_bytes() const noexcept { return s_ ? s_->own_bytes : 0; }
  /// The DLTensors run() hands to kernels, per entry and per argument: for tests and tools.
  [[nodiscard]] const detail::instance_plan& get_instance_plan() const { return self().plan; }
  /// The model this executor is an instance of.
  [[nodiscard]] const std::shared_ptr<const model_state>& get_model_state() const noexcept { return m_; }

 private:
  enum class bound_to : std::uint8_t {
    internal,  ///< the executor's own storage (allocated on first use for input storage)
    model,     ///< the model's parameter
    shared,    ///< another executor's parameter (share_params)
    input,     ///< the caller's tensor (set_input_zero_copy)
    output,    ///< the caller's tensor (set_output_zero_copy)
  };
  struct output_copy {
    int index;
    std::uint32_t eid;
    ndarray value;
  };

  /// Everything one executor owns, behind one pointer so that the executor moves
  /// cheaply and the step arrays never move.
  struct instance {
    detail::instance_plan plan;
    Allocator allocator;
    std::vector<std::shared_ptr<void>> storage;  ///< per storage id: own memory, null until needed
    std::uint64_t own_bytes = 0;
    std::vector<bound_to> binding;    ///< per alias root
    std::vector<int> bound_output;    ///< per alias root: the output bound there zero-copy
    std::vector<bool> input_group;    ///< per alias root: holds a graph input
    std::vector<bool> is_param;       ///< per input index
    std::vector<output_copy> output_copies;
    bool inputs_ready = false;        ///< every input storage id bound or allocated
    std::atomic<bool> busy{false};
    detail::run_context context;

    explicit instance(const model_state& m)
        : plan(m.plan),
          allocator(m.allocator),
          storage(m.plan.storage.size()),
          binding(m.plan.entries.size(), bound_to::internal),
          bound_output(m.plan.entries.size(), -1),
          input_group(m.plan.entries.size(), false),
          is_param(m.graph->arg_nodes.size(), false) {
      const gexec::plan& p = m.plan;
      context = m.rt->context();
      context.executor = this;
      // Activations: one allocation per device through the allocator policy.
      for (const DLDevice& d : m.devices) {
        std::vector<std::size_t> sids;
        std::vector<std::uint64_t> sizes;
        for (std::size_t sid = 0; sid < p.storage.size(); ++sid)
          if (p.storage[sid].kind == storage_kind::activation && same_device(p.storage[sid].device, d)) {
            sids.push_back(sid);
            sizes.push_back(p.storage[sid].bytes);
          }
        if (sids.empty()) continue;
        auto buffers = allocate(m, d, sizes);
        for (std::size_t i = 0; i < sids.size(); ++i) {
          storage[sids[i]] = std::move(buffers[i]);
          own_bytes += sizes[i];
        }
      }
      for (std::size_t i = 0; i < m.graph->arg_nodes.size(); ++i) {
        const std::uint32_t root = p.alias_root[m.input_entry(i)];
        input_group[root] = true;
        if (m.params[i].defined()) {
          plan.bind_alias_group(p, root, m.params[i].data(), m.params[i].storage_owner());
          binding[root] = bound_to::model;
          is_param[i] = true;
        }
      }
      for (std::uint32_t e = 0; e < p.entries.size(); ++e)
        if (p.alias_root[e] == e && binding[e] == bound_to::internal) {
          const auto& buffer = storage[m.storage_of(e)];
          if (buffer) plan.bind_alias_group(p, e, buffer.get(), buffer);
        }
    }

    std::vector<std::shared_ptr<void>> allocate(const model_state& m, DLDevice d, std::span<const std::uint64_t> sizes) {
      std::vector<std::shared_ptr<void>> buffers;
      bool served = m.backends->visit(d.device_type, [&](auto& b) {
        using B = std::decay_t<decltype(b)>;
        buffers = allocator.allocate(std::shared_ptr<B>(m.backends, &b), d, sizes);
      });
      if (!served) throw error(errc::device_mismatch, "no backend serves " + to_string(d));
      return buffers;
    }
  };

  /// Marks the executor in use for one call; a second thread entering is refused.
  class busy_guard {
   public:
    busy_guard(instance& s, const char* what) : s_(s) {
      if (s_.busy.exchange(true, std::memory_order_acquire))
        throw error(errc::busy, std::string(what) + ": the executor is in use by another thread; an executor serves one "
                                                    "thread at a time (make one per thread with model::instantiate)");
    }
    ~busy_guard() { s_.busy.store(false, std::memory_order_release); }
    busy_guard(const busy_guard&) = delete;
    busy_guard& operator=(const busy_guard&) = delete;

   private:
    instance& s_;
  };

  [[nodiscard]] const model_state& model() const {
    if (!m_) throw error(errc::invalid_argument, "the executor was moved from");
    return *m_;
  }
  [[nodiscard]] instance& self() const {
    if (!s_) throw error(errc::invalid_argument, "the executor was moved from");
    return *s_;
  }

  void run_until(std::uint32_t node_end) {
    instance& s = self();
    busy_guard g(s, "run");
    if (!s.inputs_ready) [[unlikely]]
      allocate_unbound_inputs();
    detail::context_scope scope(&s.context);
    bool& error_set = detail::last_error_set();
    for (const detail::step_run& r : model().plan.order) {
      if (r.kind == detail::step_kind::call) {
        for (const detail::call_step *c = s.plan.calls.data() + r.begin, *end = s.plan.calls.data() + r.end; c != end; ++c) {
          if (c->node_id >= node_end) [[unlikely]] return;
          TVMValue ret;
          int ret_code = tc_null;
          error_set = false;
          if (c->fn(c->values, c->codes, c->num_args, &ret, &ret_code, c->resource_handle) != 0) [[unlikely]]
            kernel_failed(c->node_id);
        }
      } else {
        for (const detail::copy_step *c = s.plan.copies.data() + r.begin, *end = s.plan.copies.data() + r.end; c != end; ++c) {
          if (c->node_id >= node_end) [[unlikely]] return;
          c->fn(c->backend, *c->from, *c->to);
        }
      }
    }
    for (const output_copy& c : s.output_copies) copy_tensor(s.plan.entries[c.eid], const_cast<DLTensor&>(c.value.dltensor()));
  }

  [[noreturn]] void kernel_failed(std::uint32_t nid) const {
    std::string message = detail::take_last_error();
    const node& n = model().graph->nodes[nid];
    throw error(errc::kernel_failed, "node \"" + n.name + "\" (nodes[" + std::to_string(nid) + "], " + n.func_name +
                                         ") failed: " + (message.empty() ? std::string("no message") : message));
  }

  // ---- storage and bindings ----------------------------------------------------------

  /// Points `eid`'s alias group at `data` and records what it is bound to.
  void bind(std::uint32_t eid, void* data, const std::shared_ptr<const void>& owner, bound_to to) const {
    instance& s = self();
    const std::uint32_t root = model().plan.alias_root[eid];
    s.plan.bind_alias_group(model().plan, root, data, owner);
    s.binding[root] = to;
    s.bound_output[root] = -1;
  }

  /// Allocates the executor's own memory for `eid`'s storage id, if it has none yet.
  /// Input storage is made only when something needs it; it starts zeroed.
  std::shared_ptr<void>& reserve_own(std::uint32_t eid) const {
    const model_state& m = model();
    instance& s = self();
    const std::size_t sid = m.storage_of(eid);
    std::shared_ptr<void>& buffer = s.storage[sid];
    if (buffer) return buffer;
    const storage_slot& slot = m.plan.storage[sid];
    const std::uint64_t size[1] = {slot.bytes};
    buffer = std::move(s.allocate(m, slot.device, size)[0]);
    s.own_bytes += slot.bytes;
    if (slot.device.device_type == kDLCPU) std::memset(buffer.get(), 0, static_cast<std::size_t>(slot.bytes));
    // Groups on this storage id that use the executor's memory now have it.
    for (std::uint32_t i = m.input_roots_begin[sid]; i < m.input_roots_begin[sid + 1]; ++i) {
      const std::uint32_t root = m.input_roots[i];
      if (s.binding[root] == bound_to::internal) s.plan.bind_alias_group(m.plan, root, buffer.get(), buffer);
    }
    return buffer;
  }
  /// Returns `eid`'s alias group to the executor's own memory.
  void make_own(std::uint32_t eid) const {
    std::shared_ptr<void>& buffer = reserve_own(eid);
    bind(eid, buffer.get(), buffer, bound_to::internal);
  }
  /// Before the first run: input storage no one bound or set gets zeroed memory.
  void allocate_unbound_inputs() {
    const model_state& m = model();
    instance& s = self();
    for (std::size_t sid = 0; sid < m.plan.storage.size(); ++sid)
      for (std::uint32_t i = m.input_roots_begin[sid]; i < m.input_roots_begin[sid + 1]; ++i)
        if (s.binding[m.input_roots[i]] == bound_to::internal) {
          reserve_own(m.input_roots[i]);
          break;
        }
    s.inputs_ready = true;
  }

  // ---- names and checks --------------------------------------------------------------

  [[nodiscard]] std::uint32_t input_entry(int index) const {
    if (index < 0 || index >= get_num_inputs())
      throw error(errc::invalid_argument, "input index " + std::to_string(index) + " out of range (" + std::to_string(get_num_inputs()) + " inputs)");
    return model().input_entry(static_cast<std::size_t>(index));
  }
  [[nodiscard]] std::uint32_t output_entry(int index) const {
    if (index < 0 || index >= get_num_outputs())
      throw error(errc::invalid_argument, "output index " + std::to_string(index) + " out of range (" + std::to_string(get_num_outputs()) + " outputs)");
    return model().graph->entry_id(model().graph->heads[static_cast<std::size_t>(index)]);
  }
  [[nodiscard]] std::size_t input_of(std::uint32_t eid) const {
    return static_cast<std::size_t>(model().input_index.at(model().graph->nodes[node_of(eid)].name));
  }
  [[nodiscard]] const std::string& input_name(int index) const {
    return model().graph->nodes[model().graph->arg_nodes[static_cast<std::size_t>(index)]].name;
  }
  [[nodiscard]] int require_input(std::string_view name) const {
    int index = get_input_index(name);
    if (index >= 0) return index;
    std::string known;
    for (std::size_t i = 0; i < model().graph->arg_nodes.size(); ++i)
      if (!self().is_param[i]) known += (known.empty() ? "" : ", ") + input_name(static_cast<int>(i));
    throw error(errc::not_found, "no input named \"" + std::string(name) + "\" (inputs: " + known + ")");
  }
  [[nodiscard]] std::uint32_t node_of(std::uint32_t eid) const {
    const auto& rows = model().graph->node_row_ptr;
    auto it = std::upper_bound(rows.begin(), rows.end(), eid);
    return static_cast<std::uint32_t>(it - rows.begin() - 1);
  }
  [[nodiscard]] tensor_info describe(const std::string& name, std::uint32_t eid) const {
    return {name, model().graph->attrs.shape[eid], model().graph->attrs.dltype[eid]};
  }
  [[nodiscard]] ndarray view_of(std::uint32_t eid) const {
    instance& s = self();
    if (s.plan.entries[eid].data == nullptr) reserve_own(eid);
    return ndarray::view(s.plan.entries[eid], s.plan.entry_owner[eid]);
  }

  /// Checks `value` against entry `eid`: dtype, shape, and for zero-copy use the device,
  /// compactness and 64-byte alignment kernels rely on.
  void check_tensor(const char* what, std::string_view name, std::uint32_t eid, const ndarray& value, bool zero_copy) const {
    auto fail = [&](errc code, const std::string& why) {
      throw error(code, std::string(what) + " \"" + std::string(name) + "\": " + why);
    };
    if (!value.defined()) fail(errc::invalid_argument, "undefined tensor");
    const auto& shape = model().graph->attrs.shape[eid];
    DLDataType dtype = model().graph->attrs.dltype[eid];
    if (!same_dtype(value.dtype(), dtype)) fail(errc::dtype_mismatch, "dtype is " + to_string(value.dtype()) + ", expected " + to_string(dtype));
    if (!std::equal(shape.begin(), shape.end(), value.shape().begin(), value.shape().end()))
      fail(errc::shape_mismatch, "shape is " + detail::shape_to_string(value.shape()) + ", expected " + detail::shape_to_string(shape));
    if (!value.is_contiguous()) fail(errc::invalid_argument, "tensor is strided; gexec needs compact row-major tensors");
    if (!zero_copy) return;
    const DLDevice want = self().plan.entries[eid].device;
    if (!same_device(value.device(), want)) fail(errc::device_mismatch, "tensor is on " + to_string(value.device()) + ", expected " + to_string(want));
    if (!value.is_aligned()) fail(errc::misaligned, "data is not 64-byte aligned");
  }

  /// Copies between tensors of equal size; a copy that touches a device is that device's backend's job.
  void copy_tensor(const DLTensor& src, DLTensor& dst) const {
    int type = dst.device.device_type != kDLCPU ? dst.device.device_type : src.device.device_type;
    if (!model().backends->visit(type, [&](auto& b) { b.copy(src, dst); }))
      throw error(errc::device_mismatch, "no backend copies between " + to_string(src.device) + " and " + to_string(dst.device));
  }

  std::shared_ptr<const model_state> m_;
  std::unique_ptr<instance> s_;
};

GEXEC_NAMESPACE_END
