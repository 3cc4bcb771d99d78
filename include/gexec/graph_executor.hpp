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
#include <chrono>
#include <cstring>
#include <exception>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "allocators/pool_allocator.hpp"
#include "backends/backend.hpp"
#include "backends/cpu.hpp"
#include "binding/registry.hpp"
#include "detail/last_error.hpp"
#include "detail/workspace.hpp"
#include "error.hpp"
#include "execution/policy.hpp"
#include "execution/sequential.hpp"
#include "executor/bindings.hpp"
#include "executor/instance_plan.hpp"
#include "executor/model_state.hpp"
#include "fwd.hpp"
#include "graph/validated.hpp"
#include "ndarray.hpp"
#include "observers/observer.hpp"
#include "params.hpp"
#include "plan.hpp"
#include "runtime/run_context.hpp"

GEXEC_NAMESPACE_BEGIN

/// Name, shape and dtype of a graph input or output.
struct tensor_info {
  std::string name;
  std::vector<std::int64_t> shape;
  DLDataType dtype;
};

template <class Backends>
class graph_executor {
  static_assert(is_backends_v<Backends>, "Backends must be gexec::backends<...> of device backends");

 public:
  using model_state = gexec::model_state<Backends>;

  /// An instance of `model` (see basic_model::instantiate): allocates its activations,
  /// and reads the model's parameters in place.
  explicit graph_executor(std::shared_ptr<const model_state> model) : m_(std::move(model)), s_(std::make_unique<instance>(*m_)) {}

  graph_executor(graph_executor&&) noexcept = default;
  graph_executor& operator=(graph_executor&&) noexcept = default;

  // ---- inputs ---------------------------------------------------------------------

  [[nodiscard]] int get_num_inputs() const noexcept { return m_ ? static_cast<int>(m_->compact().arg_nodes.size()) : 0; }
  /// Index of an input (arg node, parameters included, as in TVM); -1 when absent.
  [[nodiscard]] int get_input_index(std::string_view name) const {
    auto it = model().input_index.find(std::string(name));
    return it == model().input_index.end() ? -1 : it->second;
  }
  /// Inputs that are not parameters (of the model, loaded or shared), in graph order.
  [[nodiscard]] std::vector<tensor_info> get_input_info() const {
    std::vector<tensor_info> info;
    for (std::size_t i = 0; i < model().compact().arg_nodes.size(); ++i)
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
    self().mark_set(static_cast<std::size_t>(index));
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
    if (model().plan.alias_group_bytes(model().compact(), eid) > value.byte_size())
      throw error(errc::shape_mismatch, "set_input_zero_copy \"" + input_name(index) + "\": a __nop alias of it is larger than the tensor");
    self().bindings.refuse_overlap("set_input_zero_copy \"" + input_name(index) + "\"", value, bound_to::output);
    self().bindings.bind(eid, value.data(), value.storage_owner(), bound_to::input);
    self().mark_set(static_cast<std::size_t>(index));
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
      self().mark_set(input_of(eid));
    }
  }
  void load_params(std::span<const std::byte> blob) { load_params(load_param_dict(blob)); }
  void load_params(std::string_view blob) { load_params(load_param_dict(blob)); }
  /// Reads each parameter of the file that names a host input straight into this
  /// executor's own memory for it (memory it already has is overwritten in place, fresh
  /// memory is not zeroed first): one pass over the data. Every record is read and
  /// checked before any data is: a malformed file changes nothing. Only a file that
  /// changes while being read (errc::io) can leave some parameters loaded and others not.
  void load_params_file(const std::filesystem::path& path, const load_progress& progress = {}) {
    const bool done = [&] {
      busy_guard g(self(), "load_params_file");
      const detail::param_file file(path);
      std::vector<std::pair<std::uint32_t, const detail::param_record*>> todo;
      for (const detail::param_record& r : file.records()) {
        const int index = get_input_index(r.name);
        if (index < 0) continue;
        const std::uint32_t eid = input_entry(index);
        // Checked as load_params checks a tensor: dtype and shape (the data is not read).
        alignas(64) static std::byte placeholder;
        detail::tensor_header h = r.header;
        check_tensor("load_params", r.name, eid, ndarray::view(h.over(&placeholder), nullptr), false);
        todo.emplace_back(eid, &r);
      }
      const model_state& m = model();
      for (auto [eid, r] : todo)
        if (m.plan.storage[m.storage_of(eid)].device.device_type != kDLCPU) return false;  // through host copies, below
      // Fresh storage is left unzeroed only where the tensor covers all of it.
      std::vector<std::size_t> unzeroed;
      for (auto [eid, r] : todo) {
        const std::size_t sid = m.storage_of(eid);
        const bool covers = m.plan.storage[sid].bytes == r->header.bytes && m.input_roots_begin[sid + 1] - m.input_roots_begin[sid] == 1;
        if (covers && !self().storage[sid]) unzeroed.push_back(sid);
        reserve_own(eid, !covers);  // may throw: before anything changes
      }
      detail::progress_sink sink(&progress, file.size());
      try {
        for (auto [eid, r] : todo) {
          make_own(eid);
          file.read(*r, self().plan.entries[eid].data, &sink);
          self().is_param[input_of(eid)] = true;
          self().mark_set(input_of(eid));
        }
      } catch (...) {  // nothing reads memory no one wrote
        for (std::size_t sid : unzeroed) std::memset(self().storage[sid].get(), 0, static_cast<std::size_t>(m.plan.storage[sid].bytes));
        throw;
      }
      sink.report(file.size());
      return true;
    }();
    if (!done) load_params(load_param_dict_file(path, load_mode::copy, progress));
  }

  /// Makes this executor read `other`'s memory for the parameters named in `blob` (only
  /// the names are read); takes no memory of its own for them. The memory stays valid
  /// after `other` is destroyed. Instances of one model share its parameters already.
  template <class OB>
  void share_params(const graph_executor<OB>& other, std::span<const std::byte> blob) {
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
      self().bindings.bind(s.eid, s.value.data(), s.value.storage_owner(), bound_to::shared);
      self().is_param[input_of(s.eid)] = true;
      self().mark_set(input_of(s.eid));
    }
  }
  template <class OB>
  void share_params(const graph_executor<OB>& other, std::string_view blob) {
    share_params(other, detail::as_bytes(blob));
  }

  // ---- outputs --------------------------------------------------------------------

  [[nodiscard]] int get_num_outputs() const noexcept { return m_ ? static_cast<int>(m_->compact().heads.size()) : 0; }
  /// Index of an output named "node:i" as TVM names outputs, or by node name alone; -1 when absent.
  [[nodiscard]] int get_output_index(std::string_view name) const {
    if (auto it = model().output_index.find(std::string(name)); it != model().output_index.end()) return it->second;
    const compact_graph& g = model().compact();
    for (std::size_t i = 0; i < g.heads.size(); ++i)
      if (g.name(g.heads[i].node_id) == name) return static_cast<int>(i);
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
    self().bindings.refuse_overlap("set_output_zero_copy \"" + model().output_names[static_cast<std::size_t>(index)] + "\"", value, bound_to::input);
    self().bindings.bind_output(index, eid, value, [this](std::uint32_t e) { return own_memory(e); });
  }

  /// A view of output `index` (valid until the next run changes it).
  [[nodiscard]] ndarray get_output(int index) const {
    std::uint32_t eid = output_entry(index);
    if (const ndarray* copied = self().bindings.copied_output(index)) return *copied;
    synchronize_for(self().plan.entries[eid].device);
    return view_of(eid);
  }
  /// Copies output `index` into `dst` (host or device); shape and dtype must match.
  void copy_output_to(int index, const ndarray& dst) {
    busy_guard g(self(), "copy_output_to");
    std::uint32_t eid = output_entry(index);
    check_tensor("copy_output_to", model().output_names[static_cast<std::size_t>(index)], eid, dst, false);
    if (const ndarray* copied = self().bindings.copied_output(index))  // what get_output returns
      return copy_tensor(copied->dltensor(), const_cast<DLTensor&>(dst.dltensor()));
    if (self().plan.entries[eid].data == nullptr) reserve_own(eid);  // an input never set: its zeroed storage
    copy_tensor(self().plan.entries[eid], const_cast<DLTensor&>(dst.dltensor()));
  }

  // ---- running --------------------------------------------------------------------

  /// Runs every step in order. Throws errc::kernel_failed, naming the node and passing
  /// on the kernel's message, if a kernel returns non-zero; errc::busy if another
  /// thread is using this executor.
  void run() { run_with(sequential{}, no_observer_); }
  /// run(policy): every step as an execution policy orders them (sequential,
  /// parallel_branches, ...). run(observer): every step in order, with the observer's
  /// hooks around each (node_timer, ...).
  template <class PolicyOrObserver>
  void run(PolicyOrObserver&& p) {
    run_either<false>(p);
  }
  /// Every step as `policy` orders them, with `observer`'s hooks around each.
  template <class Policy, class Observer>
  void run(const Policy& policy, Observer& observer) {
    static_assert(execution_policy<Policy>, "gexec: run(policy, observer) needs a policy modelling gexec::execution_policy (execute(steps))");
    static_assert(step_observer<Observer>, "gexec: run(policy, observer) needs an observer modelling gexec::step_observer (before/after)");
    run_with(policy, observer);
  }
  /// run(), run(policy or observer) and run(policy, observer) that, where another thread
  /// is inside this executor, wait their turn instead of failing with errc::busy. Threads
  /// waiting in run_in_turn are served in the order they came; calls that do not wait
  /// (run(), set_input, ...) are refused while any thread is inside, as ever, and a
  /// waiting thread may wait for them. For an executor that several threads take turns
  /// on; one executor per thread (model::instantiate) remains the way to run at once.
  void run_in_turn() { run_with<true>(sequential{}, no_observer_); }
  template <class PolicyOrObserver>
  void run_in_turn(PolicyOrObserver&& p) {
    run_either<true>(p);
  }
  template <class Policy, class Observer>
  void run_in_turn(const Policy& policy, Observer& observer) {
    static_assert(execution_policy<Policy>, "gexec: run_in_turn(policy, observer) needs a policy modelling gexec::execution_policy (execute(steps))");
    static_assert(step_observer<Observer>, "gexec: run_in_turn(policy, observer) needs an observer modelling gexec::step_observer (before/after)");
    run_with<true>(policy, observer);
  }
  /// Waits until every device of this executor has finished what was enqueued on it
  /// (outputs bound zero-copy on a device are complete then; get_output and
  /// copy_output_to wait by themselves).
  void synchronize() {
    for (const device_stream& d : self().streams) d.sync(model().backends.get(), d.stream);
  }

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
    const compact_graph& g = model().compact();
    if (entry_id >= g.num_entries())
      throw error(errc::invalid_argument, "debug_get_output: entry " + std::to_string(entry_id) + " out of range (" +
                                              std::to_string(g.num_entries()) + " entries)");
    run_until(node_of(entry_id) + 1);
    const DLTensor& e = self().plan.entries[entry_id];
    synchronize_for(e.device);
    ndarray out = ndarray::empty(std::vector<std::int64_t>(e.shape, e.shape + e.ndim), e.dtype);
    copy_tensor(e, const_cast<DLTensor&>(out.dltensor()));
    return out;
  }
  /// The same for output `index` of the node called `node_name`.
  [[nodiscard]] ndarray debug_get_output(std::string_view node_name, std::uint32_t index = 0) {
    const compact_graph& g = model().compact();
    for (std::uint32_t nid = 0; nid < g.num_nodes(); ++nid)
      if (g.name(nid) == node_name) {
        if (index >= g.num_outputs(nid))
          throw error(errc::invalid_argument, "debug_get_output: node \"" + std::string(node_name) + "\" has " +
                                                  std::to_string(g.num_outputs(nid)) + " outputs");
        return debug_get_output(g.entry_id(nid, index));
      }
    throw error(errc::not_found, "debug_get_output: no node named \"" + std::string(node_name) + "\"");
  }

  /// The graph as gexec::graph (made from the model's compact form on first call).
  [[nodiscard]] const gexec::graph& get_graph() const { return model().graph.get(); }
  [[nodiscard]] const gexec::plan& get_plan() const { return model().plan; }
  /// Bytes of storage this executor allocated itself (activations, and inputs it holds).
  [[nodiscard]] std::uint64_t storage_bytes() const noexcept { return s_ ? s_->own_bytes : 0; }
  /// The DLTensors run() hands to kernels, per entry and per argument: for tests and tools.
  [[nodiscard]] const instance_plan& get_instance_plan() const { return self().plan; }
  /// The state a stateful execution policy keeps in this executor, if it is of type S.
  template <class S>
  [[nodiscard]] const S* policy_state() const noexcept {
    return s_ && s_->policy_state_type == &policy_state_tag<S> ? static_cast<const S*>(s_->policy_state.get()) : nullptr;
  }
  /// The model this executor is an instance of.
  [[nodiscard]] const std::shared_ptr<const model_state>& get_model_state() const noexcept { return m_; }

 private:
  template <class S>
  static constexpr char policy_state_tag = 0;

  using bound_to = zero_copy_bindings::bound_to;
  using output_copy = zero_copy_bindings::output_copy;

  /// The executor's stream on one of the model's devices, type-erased: the backend's
  /// stream_type object, and how to wait for and release it.
  struct device_stream {
    DLDevice device{kDLCPU, 0};
    void* stream = nullptr;
    void (*sync)(Backends* backends, void* stream) = nullptr;
    void (*release)(Backends* backends, DLDevice device, void* stream) noexcept = nullptr;
  };

  /// Everything one executor owns, behind one pointer so that the executor moves
  /// cheaply and the step arrays never move.
  /// The executor's streams, released with it (or with a constructor that fails after them).
  struct stream_set {
    std::shared_ptr<Backends> backends;
    std::vector<device_stream> list;  ///< per model device
    stream_set(std::shared_ptr<Backends> b, std::vector<device_stream> l) : backends(std::move(b)), list(std::move(l)) {}
    stream_set(const stream_set&) = delete;
    stream_set& operator=(const stream_set&) = delete;
    ~stream_set() {
      for (device_stream& d : list) {
        try {
          d.sync(backends.get(), d.stream);
        } catch (...) {  // a device that cannot finish has nothing left to wait for
        }
        d.release(backends.get(), d.device, d.stream);
      }
    }
    auto begin() const { return list.begin(); }
    auto end() const { return list.end(); }
  };

  struct instance {
    stream_set streams;
    std::vector<void*> stream_objects;   ///< per model device: streams[d].stream
    instance_plan plan;
    allocate_function<Backends> allocator;  ///< the model's, copied: an allocator with state has one per executor
    std::vector<std::shared_ptr<void>> storage;  ///< per storage slot: own memory, null until needed
    std::uint64_t own_bytes = 0;
    zero_copy_bindings bindings;      ///< what each alias group is bound to; the outputs copied after a run
    std::vector<bool> is_param;       ///< per input index
    std::vector<bool> input_set;      ///< per input index: given a value (set, bound, loaded, shared)
    std::size_t unset_inputs = 0;
    bool inputs_ready = false;        ///< every input slot bound or allocated
    std::atomic<bool> busy{false};
    std::atomic<std::uint32_t> turn_next{0}, turn_now{0};  ///< run_in_turn's line: tickets given, ticket served
    detail::run_context context;
    /// Scratch of execution policies, per step; allocated on first use.
    std::unique_ptr<std::atomic<std::uint32_t>[]> counters;
    std::unique_ptr<std::uint32_t[]> slots;
    /// More streams per device for policies that spread steps over them (lanes); lane 0
    /// is `streams`. lane_objects[lane][d] is the stream object of model device d.
    std::vector<std::unique_ptr<stream_set>> extra_lanes;
    std::vector<std::vector<void*>> lane_objects;
    unsigned active_lane = 0;
    /// Per step, the event a lane policy recorded after it (null until needed).
    std::vector<std::shared_ptr<void>> step_events;
    /// What a stateful execution policy keeps per executor (a captured CUDA Graph), of
    /// the type `policy_state_type` names; destroyed before the streams it may use.
    std::shared_ptr<void> policy_state;
    const void* policy_state_type = nullptr;

    explicit instance(const model_state& m)
        : streams(m.backends, make_streams(m)),
          stream_objects(stream_pointers(streams.list)),
          plan(m.plan, m.compact()),
          allocator(m.allocate),
          storage(m.plan.storage.size()),
          bindings(m.plan, m.compact(), plan),
          is_param(m.compact().arg_nodes.size(), false),
          input_set(m.compact().arg_nodes.size(), false),
          unset_inputs(m.compact().arg_nodes.size()) {
      const gexec::plan& p = m.plan;
      lane_objects.push_back(stream_objects);
      context = m.rt->context();
      context.workspace_limit = m.max_workspace_bytes;
      context.executor = this;
      context.backends = m.backends.get();
      context.devices = m.device_table;
      context.device = m.devices[0];
      context.stream = stream_objects[0];
      context.native_stream = m.device_table->native_stream(m.backends.get(), m.devices[0], stream_objects[0]);
      context.launch_services = m.device_table->launch_services(m.backends.get(), m.devices[0]);
      // Activations: one allocation per device through the allocator policy.
      for (const DLDevice& d : m.devices) {
        std::vector<std::size_t> slots_here;
        std::vector<std::uint64_t> sizes;
        for (std::size_t i = 0; i < p.storage.size(); ++i)
          if (p.storage[i].kind == storage_kind::activation && same_device(p.storage[i].device, d)) {
            slots_here.push_back(i);
            sizes.push_back(p.storage[i].bytes);
          }
        if (slots_here.empty()) continue;
        std::uint64_t total = 0;
        for (std::uint64_t size : sizes) total += arena_bytes(size);  // fits: checked when the model was built
        check_storage_limit(m, total);
        auto buffers = allocate(m, d, sizes);
        for (std::size_t i = 0; i < slots_here.size(); ++i) {
          storage[slots_here[i]] = std::move(buffers[i]);
          own_bytes += sizes[i];
          zero(m, storage[slots_here[i]].get(), p.storage[slots_here[i]]);
        }
      }
      for (std::size_t i = 0; i < m.compact().arg_nodes.size(); ++i) {
        const std::uint32_t root = p.alias_root[m.input_entry(i)];
        bindings.mark_input(root);
        if (m.params[i].defined()) {
          bindings.bind(root, m.params[i].data(), m.params[i].storage_owner(), bound_to::model);
          is_param[i] = true;
          mark_set(i);
        }
      }
      for (std::uint32_t e = 0; e < p.num_entries(); ++e)
        if (p.alias_root[e] == e && bindings.of(e) == bound_to::internal && storage[m.storage_of(e)]) bind_own(p, e);
    }
    instance(const instance&) = delete;
    instance& operator=(const instance&) = delete;

    void mark_set(std::size_t input) noexcept {
      if (!input_set[input]) {
        input_set[input] = true;
        --unset_inputs;
      }
    }

    /// Refuses storage that would take the executor past model_options::max_storage_bytes.
    void check_storage_limit(const model_state& m, std::uint64_t more) const {
      if (more > m.max_storage_bytes || own_bytes > m.max_storage_bytes - more)
        throw error(errc::out_of_memory, "executor storage: " + std::to_string(own_bytes + more) + " bytes would exceed the limit of " +
                                             std::to_string(m.max_storage_bytes) + " bytes (model_options::max_storage_bytes)");
    }

    /// Zeroes fresh storage: directly on the host, by a copy from zeroed host memory on a
    /// device. Nothing reads memory no one wrote.
    void zero(const model_state& m, void* data, const storage_slot& slot) {
      if (slot.device.device_type == kDLCPU) {
        std::memset(data, 0, static_cast<std::size_t>(slot.bytes));
        return;
      }
      bool done = false;  // by the device itself, where its backend can (a memset)
      m.backends->visit(slot.device.device_type, [&](auto& b) {
        if constexpr (requires { b.fill_zero(slot.device, data, slot.bytes); }) {
          b.fill_zero(slot.device, data, slot.bytes);
          done = true;
        }
      });
      if (done) return;
      std::vector<std::uint8_t> zeros(static_cast<std::size_t>(slot.bytes));
      std::int64_t n = static_cast<std::int64_t>(slot.bytes);
      DLTensor from{zeros.data(), cpu(), 1, {kDLUInt, 8, 1}, &n, nullptr, 0};
      DLTensor to{data, slot.device, 1, {kDLUInt, 8, 1}, &n, nullptr, 0};
      m.backends->copy(from, to);
    }

    /// Points root entry `e`'s alias group at its place in its own storage slot.
    void bind_own(const gexec::plan& p, std::uint32_t e) {
      plan.bind_alias_group(p, e, static_cast<char*>(storage[p.entry_slot[e]].get()) + p.entry_offset[e]);
    }

    std::vector<std::shared_ptr<void>> allocate(const model_state& m, DLDevice d, std::span<const std::uint64_t> sizes) {
      return allocator(m.backends, d, sizes);
    }

    static std::vector<device_stream> make_streams(const model_state& m) {
      std::vector<device_stream> out;
      out.reserve(m.devices.size());
      struct undo {  // releases what was made if a later device fails
        std::vector<device_stream>& made;
        Backends* backends;
        bool done = false;
        ~undo() {
          if (!done)
            for (device_stream& d : made) d.release(backends, d.device, d.stream);
        }
      } guard{out, m.backends.get()};
      for (const DLDevice& d : m.devices)
        m.backends->visit(d.device_type, [&](auto& b) {
          using B = std::decay_t<decltype(b)>;
          using stream_t = typename B::stream_type;
          auto* object = new stream_t(b.create_stream(d));
          device_stream ds;
          ds.device = d;
          ds.stream = object;
          ds.sync = [](Backends* bs, void* st) { bs->template get<B>().synchronize(*static_cast<stream_t*>(st)); };
          ds.release = [](Backends* bs, DLDevice dev, void* st) noexcept {
            auto* object = static_cast<stream_t*>(st);
            bs->template get<B>().destroy_stream(dev, *object);
            delete object;
          };
          out.push_back(ds);
        });
      guard.done = true;
      return out;
    }
    static std::vector<void*> stream_pointers(const std::vector<device_stream>& streams) {
      std::vector<void*> out;
      for (const device_stream& d : streams) out.push_back(d.stream);
      return out;
    }
  };

  /// A place in the line of run_in_turn callers (a ticket lock, so that nobody starves):
  /// made, it has waited until this thread is first in line and the executor is free;
  /// gone, the next in line goes. Nothing of it is on the path of calls that do not wait.
  class in_turn {
   public:
    explicit in_turn(instance& s) : s_(s) {
      const std::uint32_t ticket = s_.turn_next.fetch_add(1, std::memory_order_relaxed);
      for (std::uint32_t now = s_.turn_now.load(std::memory_order_acquire); now != ticket; now = s_.turn_now.load(std::memory_order_acquire))
        s_.turn_now.wait(now, std::memory_order_acquire);
      // First in line, this thread takes the executor; a call that does not wait may still
      // be inside (the line is for run_in_turn callers), so wait for it too.
      for (unsigned tries = 0; s_.busy.exchange(true, std::memory_order_acquire); ++tries) {
        if (tries < 64) std::this_thread::yield();
        else std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
    ~in_turn() {
      s_.turn_now.fetch_add(1, std::memory_order_release);
      s_.turn_now.notify_all();
    }
    in_turn(const in_turn&) = delete;
    in_turn& operator=(const in_turn&) = delete;

   private:
    instance& s_;
  };

  /// Marks the executor in use for one call; a second thread entering is refused.
  class busy_guard {
   public:
    struct taken_t {};
    static constexpr taken_t taken{};
    /// For an executor this thread has taken already (in_turn).
    busy_guard(instance& s, taken_t) noexcept : s_(s) {}
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

  /// What an execution policy drives: the steps of this run, the edges between them,
  /// the runtime's pool and per-step scratch. See execution/policy.hpp.
  template <class Observer>
  class step_program {
   public:
    step_program(graph_executor& ex, Observer& observer) : ex_(ex), observer_(observer) {}

    [[nodiscard]] std::uint32_t size() const noexcept { return static_cast<std::uint32_t>(ex_.m_->plan.step_node.size()); }
    void run(std::uint32_t begin, std::uint32_t end) { ex_.run_steps(begin, std::min(end, size()), observer_); }
    void run_step(std::uint32_t step) { ex_.run_steps(step, step + 1, observer_); }
    [[nodiscard]] const step_graph& dependencies() const { return ex_.m_->dependencies(); }
    [[nodiscard]] int max_concurrency() const noexcept { return ex_.s_->context.pool->max_concurrency(); }
    template <class F>
    void parallel_for(int num_tasks, F&& f) {
      ex_.s_->context.pool->parallel_for(num_tasks, std::forward<F>(f));
    }
    [[nodiscard]] std::span<std::atomic<std::uint32_t>> counters() {
      instance& s = *ex_.s_;
      if (!s.counters) s.counters = std::make_unique<std::atomic<std::uint32_t>[]>(size());
      return {s.counters.get(), size()};
    }
    [[nodiscard]] std::span<std::uint32_t> slots() {
      instance& s = *ex_.s_;
      if (!s.slots) s.slots = std::make_unique<std::uint32_t[]>(size());
      return {s.slots.get(), size()};
    }
    /// While it lives, this thread runs steps with its own copy of the run's context.
    class context_guard {
     public:
      explicit context_guard(const detail::run_context& c) : copy_(c), scope_(&copy_) {}
      context_guard(const context_guard&) = delete;
      context_guard& operator=(const context_guard&) = delete;

     private:
      detail::run_context copy_;
      detail::context_scope scope_;
    };
    [[nodiscard]] context_guard thread_context() const { return context_guard(ex_.s_->context); }

    // For policies that hand the work to a device driver (CUDA Graph capture):
    /// Changes whenever a pointer the steps hand to kernels may have changed.
    [[nodiscard]] std::uint64_t bindings_version() const noexcept { return ex_.s_->plan.version; }
    /// The executor's object of type S for this policy, made on first use; kept with the
    /// executor (a policy of another type asking replaces it).
    template <class S>
    [[nodiscard]] S& state() {
      instance& s = *ex_.s_;
      if (s.policy_state_type != &policy_state_tag<S>) {
        s.policy_state.reset();
        s.policy_state = std::make_shared<S>();
        s.policy_state_type = &policy_state_tag<S>;
      }
      return *static_cast<S*>(s.policy_state.get());
    }
    /// The model's devices, and per device the driver's handle of the executor's stream
    /// there (a CUstream; null on the host) and what launchers need there (the CUDA driver).
    [[nodiscard]] std::span<const DLDevice> devices() const noexcept { return ex_.m_->devices; }
    [[nodiscard]] void* native_stream(std::size_t d) const noexcept {
      const model_state& m = *ex_.m_;
      return m.device_table->native_stream(m.backends.get(), m.devices[d], ex_.s_->stream_objects[d]);
    }
    [[nodiscard]] const void* launch_services(std::size_t d) const noexcept {
      const model_state& m = *ex_.m_;
      return m.device_table->launch_services(m.backends.get(), m.devices[d]);
    }

    // Lanes: several streams per device, for policies that order steps with events
    // (parallel_streams). Lane 0 is the executor's own stream; the others are made on
    // first use and kept with the executor. On the host every lane is the host itself.
    /// The model device (index into devices()) step k runs on.
    [[nodiscard]] std::uint16_t step_device(std::uint32_t k) const noexcept {
      const gexec::plan& p = ex_.m_->plan;
      return p.order[p.run_of(k)].device;
    }
    /// Makes sure there are `n` lanes.
    void use_lanes(unsigned n) {
      instance& s = *ex_.s_;
      const model_state& m = *ex_.m_;
      while (s.lane_objects.size() < n) {
        auto lane = std::make_unique<stream_set>(m.backends, instance::make_streams(m));
        s.lane_objects.push_back(instance::stream_pointers(lane->list));
        s.extra_lanes.push_back(std::move(lane));
      }
    }
    /// Runs step k on `lane`'s stream of its device.
    void run_step_on(std::uint32_t k, unsigned lane) {
      ex_.s_->active_lane = lane;
      ex_.run_steps(k, k + 1, observer_);
    }
    /// Marks, on `lane`, that step k is done (what wait_for waits for).
    void signal(std::uint32_t k, unsigned lane) {
      instance& s = *ex_.s_;
      const model_state& m = *ex_.m_;
      const std::uint16_t d = step_device(k);
      const DLDevice device = m.devices[d];
      if (device.device_type == kDLCPU) return;  // done when it returned
      if (s.step_events.size() < size()) s.step_events.resize(size());
      std::shared_ptr<void>& slot = s.step_events[k];
      m.backends->visit(device.device_type, [&](auto& b) {
        using B = std::decay_t<decltype(b)>;
        using E = typename B::event_type;
        if (!slot) {
          auto* e = new E(b.create_event(device));
          slot = std::shared_ptr<void>(e, [backends = m.backends, device](void* p) {
            auto* event = static_cast<E*>(p);
            backends->template get<B>().destroy_event(device, *event);
            delete event;
          });
        }
        b.record(*static_cast<E*>(slot.get()), *static_cast<typename B::stream_type*>(s.lane_objects[lane][d]));
      });
    }
    /// Makes `lane`'s stream on model device `d` wait until step k (signalled on
    /// `k_lane`) is done; the host waits where `d` is the host or another device type.
    void wait_for(std::uint32_t k, unsigned k_lane, std::uint16_t d, unsigned lane) {
      instance& s = *ex_.s_;
      const model_state& m = *ex_.m_;
      const std::uint16_t dk = step_device(k);
      const DLDevice from = m.devices[dk], to = m.devices[d];
      if (from.device_type == kDLCPU || (dk == d && k_lane == lane)) return;
      m.backends->visit(from.device_type, [&](auto& b) {
        using B = std::decay_t<decltype(b)>;
        using S = typename B::stream_type;
        if (to.device_type == from.device_type && s.step_events.size() > k && s.step_events[k])
          b.wait(*static_cast<S*>(s.lane_objects[lane][d]), *static_cast<typename B::event_type*>(s.step_events[k].get()));
        else
          b.synchronize(*static_cast<S*>(s.lane_objects[k_lane][dk]));
      });
    }

   private:
    graph_executor& ex_;
    Observer& observer_;
  };

  template <bool Wait, class PolicyOrObserver>
  void run_either(PolicyOrObserver& p) {
    using P = std::remove_cvref_t<PolicyOrObserver>;
    if constexpr (execution_policy<P>) {
      run_with<Wait>(p, no_observer_);
    } else {
      static_assert(step_observer<P>, "gexec: run(x) needs x to model gexec::execution_policy (execute(steps)) or "
                                      "gexec::step_observer (before(step_event), after(step_event))");
      run_with<Wait>(sequential{}, p);
    }
  }

  template <bool Wait = false, class Policy, class Observer>
  void run_with(const Policy& policy, Observer& observer, bool whole_run = true) {
    instance& s = self();
    std::optional<in_turn> turn;  // released after the guard below
    if constexpr (Wait) turn.emplace(s);
    busy_guard g = Wait ? busy_guard(s, busy_guard::taken) : busy_guard(s, "run");
    if (s.unset_inputs != 0 && !m_->zero_unset_inputs) [[unlikely]]
      refuse_unset_inputs();
    if (!s.inputs_ready) [[unlikely]]
      allocate_unbound_inputs();
    detail::context_scope scope(&s.context);
    detail::workspace_scope workspace;
    step_program<Observer> program(*this, observer);
    struct back_to_lane_zero {  // a lane policy leaves the executor's own streams current
      instance& s;
      ~back_to_lane_zero() { s.active_lane = 0; }
    } lane_zero{s};
    policy.execute(program);
    if (whole_run) finish_run();
  }

  /// The first `end` steps in order: a run up to a node.
  struct first_steps {
    std::uint32_t end;
    template <class Program>
    void execute(Program& steps) const {
      steps.run(0, end);
    }
  };

  /// Runs the steps of nodes before `node_end`, in order (debug_get_output).
  void run_until(std::uint32_t node_end) {
    const auto& nodes = model().plan.step_node;
    const auto end = static_cast<std::uint32_t>(std::lower_bound(nodes.begin(), nodes.end(), node_end) - nodes.begin());
    run_with(first_steps{end}, no_observer_, end == nodes.size());
  }

  void finish_run() {
    instance& s = self();
    for (const output_copy& c : s.bindings.output_copies()) copy_tensor(s.plan.entries[c.eid], const_cast<DLTensor&>(c.value.dltensor()));
  }

  /// Steps [begin, end) of the run order, on this thread: the flat loops over the step
  /// arrays, with the observer's hooks around each step when there is one. A function
  /// of its own, aligned to 64 bytes, so that where its loops fall against cache-line
  /// and fetch boundaries does not move with unrelated code around it (a do-nothing
  /// kernel's dispatch cost varied 1.00-1.21x the plain loop by placement alone).
  template <class Observer>
  [[gnu::noinline, gnu::aligned(64)]] void run_steps(std::uint32_t begin, std::uint32_t end, Observer& observer) {
    if (begin >= end) return;
    instance& s = *s_;
    const model_state& m = *m_;
    detail::run_context* const current = detail::current_context();
    if (!current || current->executor != &s) [[unlikely]]
      throw error(errc::invalid_argument, "steps of a run called on a thread without the run's context (an execution policy "
                                          "must hold steps.thread_context() on each thread it runs steps on)");
    detail::run_context& context = *current;
    bool& error_set = detail::last_error_set();
    constexpr bool observed = !std::is_same_v<Observer, no_observer>;
    // The step running, for a C++ exception a kernel or backend lets out of the C ABI.
    const detail::call_step* call = nullptr;
    const detail::copy_step* copy = nullptr;
    int* const codes = const_cast<int*>(m.plan.codes.data());  // packed calls take int*; kernels only read it
    try {
      for (const detail::step_run* r = m.plan.order.data() + m.plan.run_of(begin); begin < end; ++r) {
        const std::uint32_t lo = r->begin + (begin - r->step);
        const std::uint32_t hi = r->begin + std::min(end - r->step, r->end - r->begin);
        begin = r->step + (hi - r->begin);
        if (context.stream != s.lane_objects[s.active_lane][r->device]) [[unlikely]]
          switch_device(context, r->device);
        if (r->kind == detail::step_kind::call) {
          copy = nullptr;
          for (const detail::call_step *c = s.plan.calls.data() + lo, *last = s.plan.calls.data() + hi; c != last; ++c) {
            [[maybe_unused]] const step_event event{r->step + static_cast<std::uint32_t>(c - s.plan.calls.data() - r->begin), c->node_id};
            if constexpr (observed) observer.before(event);
            TVMValue ret;
            int ret_code = tc_null;
            error_set = false;
            call = c;
            if (c->fn(c->values, codes, c->num_args, &ret, &ret_code, c->resource_handle) != 0) [[unlikely]]
              kernel_failed(c->node_id);
            if constexpr (observed) observer.after(event);
          }
        } else {
          call = nullptr;
          for (const detail::copy_step *c = s.plan.copies.data() + lo, *last = s.plan.copies.data() + hi; c != last; ++c) {
            [[maybe_unused]] const step_event event{r->step + static_cast<std::uint32_t>(c - s.plan.copies.data() - r->begin), c->node_id};
            if constexpr (observed) observer.before(event);
            copy = c;
            c->fn(c->backend, *c->from, *c->to, context.stream, c->to_host);
            if constexpr (observed) observer.after(event);
          }
        }
      }
    } catch (const error&) {
      throw;
    } catch (...) {
      if (!call && !copy) throw;
      kernel_threw(call ? call->node_id : copy->node_id, std::current_exception());
    }
  }

  /// Makes model device `d` this thread's current one for the steps that follow.
  void switch_device(detail::run_context& context, std::uint16_t d) const {
    const model_state& m = *m_;
    context.device = m.devices[d];
    context.stream = s_->lane_objects[s_->active_lane][d];
    context.native_stream = m.device_table->native_stream(m.backends.get(), context.device, context.stream);
    context.launch_services = m.device_table->launch_services(m.backends.get(), context.device);
    if (context.device.device_type != kDLCPU) m.device_table->set_device(m.backends.get(), context.device);
  }

  /// Waits for the executor's stream on `device` (the host is about to read from it).
  void synchronize_for(DLDevice device) const {
    if (device.device_type == kDLCPU) return;
    for (const device_stream& d : self().streams)
      if (same_device(d.device, device)) d.sync(model().backends.get(), d.stream);
  }

  [[noreturn]] void kernel_threw(std::uint32_t nid, std::exception_ptr e) const {
    const compact_graph& g = model().compact();
    std::string what = "unknown exception";
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      what = x.what();
    } catch (...) {
    }
    throw error(errc::kernel_failed, "node \"" + std::string(g.name(nid)) + "\" (nodes[" + std::to_string(nid) + "], " +
                                         std::string(g.func_name(nid)) + ") threw: " + what);
  }

  /// run() with inputs no one gave a value: an error naming them, unless the model allows it.
  [[noreturn]] void refuse_unset_inputs() const {
    const instance& s = self();
    std::string names;
    int listed = 0;
    for (std::size_t i = 0; i < s.input_set.size(); ++i)
      if (!s.input_set[i] && listed++ < 8) names += (names.empty() ? "\"" : ", \"") + input_name(static_cast<int>(i)) + "\"";
    if (listed > 8) names += " and " + std::to_string(listed - 8) + " more";
    throw error(errc::invalid_argument, "run: input" + std::string(listed > 1 ? "s " : " ") + names + (listed > 1 ? " were" : " was") +
                                            " never given a value (set_input, set_input_zero_copy, load_params, share_params or "
                                            "the model's parameters); model_options::zero_unset_inputs runs them as zeros");
  }

  [[noreturn]] void kernel_failed(std::uint32_t nid) const {
    std::string message = detail::take_last_error();
    const compact_graph& g = model().compact();
    throw error(errc::kernel_failed, "node \"" + std::string(g.name(nid)) + "\" (nodes[" + std::to_string(nid) + "], " +
                                         std::string(g.func_name(nid)) + ") failed: " + (message.empty() ? std::string("no message") : message));
  }

  // ---- storage and bindings ----------------------------------------------------------

  /// Allocates the executor's own memory for `eid`'s storage id, if it has none yet.
  /// Input storage is made only when something needs it; it starts zeroed.
  /// `zeroed` false: the caller overwrites all of it at once (load_params_file).
  std::shared_ptr<void>& reserve_own(std::uint32_t eid, bool zeroed = true) const {
    const model_state& m = model();
    instance& s = self();
    const std::size_t sid = m.storage_of(eid);
    std::shared_ptr<void>& buffer = s.storage[sid];
    if (buffer) return buffer;
    const storage_slot& slot = m.plan.storage[sid];
    s.check_storage_limit(m, slot.bytes);
    const std::uint64_t size[1] = {slot.bytes};
    buffer = std::move(s.allocate(m, slot.device, size)[0]);
    s.own_bytes += slot.bytes;
    if (zeroed) s.zero(m, buffer.get(), slot);
    // Groups on this storage id that use the executor's memory now have it.
    for (std::uint32_t i = m.input_roots_begin[sid]; i < m.input_roots_begin[sid + 1]; ++i) {
      const std::uint32_t root = m.input_roots[i];
      if (s.bindings.of(root) == bound_to::internal) s.bind_own(m.plan, root);
    }
    return buffer;
  }
  /// The executor's own memory for `eid`'s alias group, allocated if it has none yet.
  void* own_memory(std::uint32_t eid) const {
    reserve_own(eid);
    const std::uint32_t root = model().plan.alias_root[eid];
    return static_cast<char*>(self().storage[model().plan.entry_slot[root]].get()) + model().plan.entry_offset[root];
  }
  /// Returns `eid`'s alias group to the executor's own memory.
  void make_own(std::uint32_t eid) const { self().bindings.give_back(eid, own_memory(eid)); }
  /// Before the first run: input storage no one bound or set gets zeroed memory.
  void allocate_unbound_inputs() {
    const model_state& m = model();
    instance& s = self();
    for (std::size_t sid = 0; sid < m.plan.storage.size(); ++sid)
      for (std::uint32_t i = m.input_roots_begin[sid]; i < m.input_roots_begin[sid + 1]; ++i)
        if (s.bindings.of(m.input_roots[i]) == bound_to::internal) {
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
    return model().compact().entry_id(model().compact().heads[static_cast<std::size_t>(index)]);
  }
  [[nodiscard]] std::size_t input_of(std::uint32_t eid) const {
    return static_cast<std::size_t>(model().input_index.at(std::string(model().compact().name(node_of(eid)))));
  }
  [[nodiscard]] std::string input_name(int index) const {
    return std::string(model().compact().name(model().compact().arg_nodes[static_cast<std::size_t>(index)]));
  }
  [[nodiscard]] int require_input(std::string_view name) const {
    int index = get_input_index(name);
    if (index >= 0) return index;
    std::string known;
    for (std::size_t i = 0; i < model().compact().arg_nodes.size(); ++i)
      if (!self().is_param[i]) known += (known.empty() ? "" : ", ") + input_name(static_cast<int>(i));
    throw error(errc::not_found, "no input named \"" + std::string(name) + "\" (inputs: " + known + ")");
  }
  [[nodiscard]] std::uint32_t node_of(std::uint32_t eid) const {
    return model().compact().node_of(eid);
  }
  [[nodiscard]] tensor_info describe(const std::string& name, std::uint32_t eid) const {
    const auto shape = model().compact().shape(eid);
    return {name, std::vector<std::int64_t>(shape.begin(), shape.end()), model().compact().dltype[eid]};
  }
  [[nodiscard]] ndarray view_of(std::uint32_t eid) const {
    instance& s = self();
    if (s.plan.entries[eid].data == nullptr) reserve_own(eid);
    const std::uint32_t root = model().plan.alias_root[eid];
    if (s.bindings.of(root) == bound_to::internal) return ndarray::view(s.plan.entries[eid], s.storage[model().storage_of(eid)]);
    return ndarray::view(s.plan.entries[eid], s.bindings.owner(root));
  }

  /// Checks `value` against entry `eid`: dtype, shape, and for zero-copy use the device,
  /// compactness and 64-byte alignment kernels rely on.
  void check_tensor(const char* what, std::string_view name, std::uint32_t eid, const ndarray& value, bool zero_copy) const {
    auto fail = [&](errc code, const std::string& why) {
      throw error(code, std::string(what) + " \"" + std::string(name) + "\": " + why);
    };
    if (!value.defined()) fail(errc::invalid_argument, "undefined tensor");
    const auto shape = model().compact().shape(eid);
    DLDataType dtype = model().compact().dltype[eid];
    if (!same_dtype(value.dtype(), dtype)) fail(errc::dtype_mismatch, "dtype is " + to_string(value.dtype()) + ", expected " + to_string(dtype));
    if (!std::equal(shape.begin(), shape.end(), value.shape().begin(), value.shape().end()))
      fail(errc::shape_mismatch, "shape is " + detail::shape_to_string(value.shape()) + ", expected " + detail::shape_to_string(shape));
    if (!value.is_contiguous()) fail(errc::invalid_argument, "tensor is strided; gexec needs compact row-major tensors");
    if (!zero_copy) return;
    const DLDevice want = self().plan.entries[eid].device;
    if (!same_device(value.device(), want)) fail(errc::device_mismatch, "tensor is on " + to_string(value.device()) + ", expected " + to_string(want));
    if (!value.is_aligned()) fail(errc::misaligned, "data is not 64-byte aligned");
  }

  /// Copies between tensors of equal size, complete on return; a copy that touches a
  /// device is that device's backend's job, on this executor's stream there.
  void copy_tensor(const DLTensor& src, DLTensor& dst) const {
    const DLDevice d = dst.device.device_type != kDLCPU ? dst.device : src.device;
    for (const device_stream& ds : self().streams)
      if (same_device(ds.device, d)) {
        model().backends->visit(d.device_type, [&](auto& b) {
          auto& stream = *static_cast<typename std::decay_t<decltype(b)>::stream_type*>(ds.stream);
          b.copy_async(src, dst, stream);
          b.synchronize(stream);
        });
        return;
      }
    model().backends->copy(src, dst);  // a device the model does not run on: a stream of its own
  }

  std::shared_ptr<const model_state> m_;
  std::unique_ptr<instance> s_;
  [[no_unique_address]] no_observer no_observer_;
};

GEXEC_NAMESPACE_END
