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
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "allocators/pool_allocator.hpp"
#include "backends/backend.hpp"
#include "backends/cpu.hpp"
#include "binding/registry.hpp"
#include "detail/workspace.hpp"
#include "error.hpp"
#include "execution/policy.hpp"
#include "execution/sequential.hpp"
#include "execution/step_program.hpp"
#include "executor/bindings.hpp"
#include "executor/executor_view.hpp"
#include "executor/instance.hpp"
#include "executor/instance_plan.hpp"
#include "executor/messages.hpp"
#include "executor/model_state.hpp"
#include "executor/turns.hpp"
#include "file_path.hpp"
#include "fwd.hpp"
#include "graph/validated.hpp"
#include "ndarray.hpp"
#include "observers/observer.hpp"
#include "params/dict.hpp"
#include "params/source.hpp"
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
    return it == model().input_index.end() ? -1 : static_cast<int>(it->second);
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
    detail::busy_guard g(self().turns, "set_input");
    std::uint32_t eid = input_entry(index);
    check_tensor("set_input", input_name(index), eid, value, false);
    self().make_own(model(), eid);
    self().copy_tensor(model(), value.dltensor(), self().plan.entries[eid]);
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
    detail::busy_guard g(self().turns, "set_input_zero_copy");
    std::uint32_t eid = input_entry(index);
    check_tensor("set_input_zero_copy", input_name(index), eid, value, true);
    if (model().plan.alias_group_bytes(model().compact(), eid) > value.byte_size())
      throw error(errc::shape_mismatch, "set_input_zero_copy \"" + input_name(index) + "\": a __nop alias of it is larger than the tensor");
    self().bindings.refuse_overlap("set_input_zero_copy \"" + input_name(index) + "\"", value, bound_to::output);
    self().bindings.bind(eid, value.data(), value.storage_owner(), bound_to::input);
    self().mark_set(static_cast<std::size_t>(index));
  }
  void set_input_zero_copy(std::string_view name, const ndarray& value) { set_input_zero_copy(require_input(name), value); }

  /// A view of input `index` in the memory it is read from. An input donated to runs
  /// (model_options::donate_inputs) has none after a run used it up.
  [[nodiscard]] ndarray get_input(int index) const {
    const std::uint32_t eid = input_entry(index);
    if (self().used_up[static_cast<std::size_t>(index)]) [[unlikely]]
      throw error(errc::invalid_argument, "get_input \"" + input_name(index) + "\": the last run used up this input, donated to runs "
                                          "(model_options::donate_inputs); set_input gives it a value again");
    return self().view_of(model(), eid);
  }
  [[nodiscard]] ndarray get_input(std::string_view name) const { return get_input(require_input(name)); }

  // ---- parameters -----------------------------------------------------------------

  /// Copies the parameters whose names are graph inputs into this executor's own memory
  /// (others are ignored, as in TVM); the model and its other executors are unaffected.
  /// Everything is checked before anything is copied: on error, nothing changes.
  void load_params(const param_dict& params) {
    detail::busy_guard g(self().turns, "load_params");
    std::vector<std::pair<std::uint32_t, const ndarray*>> todo;
    for (const auto& [name, value] : params) {
      int index = get_input_index(name);
      if (index < 0) continue;
      std::uint32_t eid = input_entry(index);
      check_tensor("load_params", name, eid, value, false);
      todo.emplace_back(eid, &value);
    }
    for (auto [eid, value] : todo) self().reserve_own(model(), eid);  // may throw: before anything changes
    for (auto [eid, value] : todo) {
      self().make_own(model(), eid);
      self().copy_tensor(model(), value->dltensor(), self().plan.entries[eid]);
      self().mark_param(model(), eid);
    }
  }
  /// Reads a blob (TVM's, .safetensors or .npz: the sniff table of <gexec/params.hpp>
  /// decides, which a program calling this includes) and loads it as above.
  void load_params(std::span<const std::byte> blob) {
    detail::param_formats<Backends>::with(param_input::memory(blob), [&](const auto& source) { load_params(read_param_dict(source)); });
  }
  void load_params(std::string_view blob) { load_params(detail::as_bytes(blob)); }
  /// Reads each parameter of the file that names a host input straight into this
  /// executor's own memory for it (memory it already has is overwritten in place, fresh
  /// memory is not zeroed first): one pass over the data. Every record is read and
  /// checked before any data is: a malformed file changes nothing. Only a file that
  /// changes while being read (errc::io) can leave some parameters loaded and others not.
  /// Any format the sniff table reads (needs <gexec/params.hpp>).
  void load_params_file(const file_path& path, const load_progress& progress = {}) {
    detail::param_formats<Backends>::with(param_input::file(path), [&](const auto& source) {
      const bool done = [&] {
        detail::busy_guard g(self().turns, "load_params_file");
        std::vector<std::pair<std::uint32_t, std::size_t>> todo;  // (entry, the source's index)
        detail::finish_source(source);  // a malformed file changes nothing
        const std::span<const param_entry> entries = source.entries();
        for (std::size_t i = 0; i < entries.size(); ++i) {
          const param_entry& e = entries[i];
          const int index = get_input_index(e.name);
          if (index < 0) continue;
          const std::uint32_t eid = input_entry(index);
          // Checked as load_params checks a tensor: dtype and shape (the data is not read).
          alignas(64) static std::byte placeholder;
          DLTensor t{&placeholder, cpu(), static_cast<std::int32_t>(e.shape.size()), e.dtype, const_cast<std::int64_t*>(e.shape.data()), nullptr, 0};
          check_tensor("load_params", e.name, eid, ndarray::view(t, nullptr), false);
          todo.emplace_back(eid, i);
        }
        return self().read_params(model(), source, todo, progress);  // false: not all on the host
      }();
      if (!done) {
        detail::progress_sink sink(&progress, source.input_bytes());
        load_params(read_param_dict(source, &sink));
      }
    });
  }

  /// Makes this executor read `other`'s memory for the parameters named in `blob` (only
  /// the names are used); takes no memory of its own for them. The memory stays valid
  /// after `other` is destroyed. Instances of one model share its parameters already.
  void share_params(executor_view other, std::span<const std::byte> blob) {
    std::vector<std::string> names;
    detail::param_formats<Backends>::with(param_input::memory(blob), [&](const auto& source) {
      detail::finish_source(source);
      for (const param_entry& e : source.entries()) names.push_back(e.name);
    });
    detail::busy_guard g(self().turns, "share_params");
    struct share {
      std::uint32_t eid;
      ndarray value;
    };
    std::vector<share> todo;
    for (const std::string& name : names) {
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
      self().mark_param(model(), s.eid);
    }
  }
  void share_params(executor_view other, std::string_view blob) { share_params(other, detail::as_bytes(blob)); }

  // ---- outputs --------------------------------------------------------------------

  [[nodiscard]] int get_num_outputs() const noexcept { return m_ ? static_cast<int>(m_->compact().heads.size()) : 0; }
  /// Index of an output named "node:i" as TVM names outputs, or by node name alone; -1 when absent.
  [[nodiscard]] int get_output_index(std::string_view name) const {
    if (auto it = model().output_index.find(std::string(name)); it != model().output_index.end()) return static_cast<int>(it->second);
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
    detail::busy_guard g(self().turns, "set_output_zero_copy");
    std::uint32_t eid = output_entry(index);
    check_tensor("set_output_zero_copy", model().output_names[static_cast<std::size_t>(index)], eid, value, true);
    self().bindings.refuse_overlap("set_output_zero_copy \"" + model().output_names[static_cast<std::size_t>(index)] + "\"", value, bound_to::input);
    self().bindings.bind_output(index, eid, value, [this](std::uint32_t e) { return self().own_memory(model(), e); });
  }

  /// A view of output `index` (valid until the next run changes it).
  [[nodiscard]] ndarray get_output(int index) const {
    std::uint32_t eid = output_entry(index);
    if (const ndarray* copied = self().bindings.copied_output(index)) return *copied;
    self().synchronize_for(self().plan.entries[eid].device);
    return self().view_of(model(), eid);
  }
  /// Copies output `index` into `dst` (host or device); shape and dtype must match.
  void copy_output_to(int index, const ndarray& dst) {
    detail::busy_guard g(self().turns, "copy_output_to");
    std::uint32_t eid = output_entry(index);
    check_tensor("copy_output_to", model().output_names[static_cast<std::size_t>(index)], eid, dst, false);
    if (const ndarray* copied = self().bindings.copied_output(index))  // what get_output returns
      return self().copy_tensor(model(), copied->dltensor(), const_cast<DLTensor&>(dst.dltensor()));
    if (self().plan.entries[eid].data == nullptr) self().reserve_own(model(), eid);  // an input never set: its zeroed storage
    self().copy_tensor(model(), self().plan.entries[eid], const_cast<DLTensor&>(dst.dltensor()));
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
  /// Enqueues a copy between two tensors of equal byte size (host memory, or a device
  /// of the model) on this executor's stream for that device, ordered with its runs:
  /// nothing waits, and the data is in place after synchronize(). For servers that move
  /// request data into bound inputs and out of outputs with one wait per batch. A copy
  /// between host tensors is complete on return; one touching a device the model does not
  /// run on, too (the backend's own stream).
  void copy_async(const DLTensor& from, DLTensor& to) {
    detail::busy_guard g(self().turns, "copy_async");
    self().enqueue_copy(model(), from, to);
  }

  /// Waits until every device of this executor has finished what was enqueued on it
  /// (outputs bound zero-copy on a device are complete then; get_output and
  /// copy_output_to wait by themselves).
  void synchronize() { self().streams.synchronize(); }

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
    self().synchronize_for(e.device);
    ndarray out = ndarray::empty(std::vector<std::int64_t>(e.shape, e.shape + e.ndim), e.dtype);
    self().copy_tensor(model(), e, const_cast<DLTensor&>(out.dltensor()));
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
    return s_ && s_->policy_state_type == &detail::policy_state_tag<S> ? static_cast<const S*>(s_->policy_state.get()) : nullptr;
  }
  /// The model this executor is an instance of.
  [[nodiscard]] const std::shared_ptr<const model_state>& get_model_state() const noexcept { return m_; }

 private:
  using instance = detail::executor_instance<Backends>;
  template <class Observer>
  using program = step_program<Backends, Observer>;
  using bound_to = zero_copy_bindings::bound_to;
  using output_copy = zero_copy_bindings::output_copy;

  [[nodiscard]] const model_state& model() const {
    if (!m_) throw error(errc::invalid_argument, "the executor was moved from");
    return *m_;
  }
  [[nodiscard]] instance& self() const {
    if (!s_) throw error(errc::invalid_argument, "the executor was moved from");
    return *s_;
  }

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
    static_assert(lane_step_program<program<Observer>> && capture_step_program<program<Observer>>);
    instance& s = self();
    std::optional<detail::in_turn> turn;  // released after the guard below
    if constexpr (Wait) turn.emplace(s.turns);
    detail::busy_guard g = Wait ? detail::busy_guard(s.turns, detail::busy_guard::taken) : detail::busy_guard(s.turns, "run");
    if (s.unset_inputs != 0 && !m_->zero_unset_inputs) [[unlikely]]
      detail::refuse_unset_inputs(m_->compact(), s.input_set, s.used_up);
    if (!s.inputs_ready) [[unlikely]]
      s.allocate_unbound_inputs(*m_);
    struct use_up_donated {  // whatever the run did, later values may have taken donated inputs' bytes
      instance& s;
      const model_state& m;
      ~use_up_donated() {
        if (!m.plan.donated.empty()) [[unlikely]]
          s.use_up_donated(m);
      }
    } donated{s, *m_};
    detail::context_scope scope(&s.context);
    detail::workspace_scope workspace;
    detail::serial_runs::scope serial(s.serial, s.context);
    program<Observer> steps(*m_, s, observer);
    struct back_to_lane_zero {  // a lane policy leaves the executor's own streams current
      instance& s;
      ~back_to_lane_zero() { s.active_lane = 0; }
    } lane_zero{s};
    policy.execute(steps);
    if (whole_run)
      for (const output_copy& c : s.bindings.output_copies())
        s.copy_tensor(*m_, s.plan.entries[c.eid], const_cast<DLTensor&>(c.value.dltensor()));
  }

  /// Runs the steps of nodes before `node_end`, in order (debug_get_output).
  void run_until(std::uint32_t node_end) {
    const auto& nodes = model().plan.step_node;
    const auto end = static_cast<std::uint32_t>(std::lower_bound(nodes.begin(), nodes.end(), node_end) - nodes.begin());
    run_with(detail::first_steps{end}, no_observer_, end == nodes.size());
  }

  // ---- names and checks --------------------------------------------------------------

  [[nodiscard]] std::uint32_t input_entry(int index) const {
    detail::check_index("input", index, get_num_inputs());
    return model().input_entry(static_cast<std::size_t>(index));
  }
  [[nodiscard]] std::uint32_t output_entry(int index) const {
    detail::check_index("output", index, get_num_outputs());
    return model().compact().entry_id(model().compact().heads[static_cast<std::size_t>(index)]);
  }
  [[nodiscard]] std::string input_name(int index) const {
    return std::string(model().compact().name(model().compact().arg_nodes[static_cast<std::size_t>(index)]));
  }
  [[nodiscard]] int require_input(std::string_view name) const {
    const int index = get_input_index(name);
    return index >= 0 ? index : detail::no_input_named(model().compact(), name, self().is_param);
  }
  [[nodiscard]] std::uint32_t node_of(std::uint32_t eid) const { return model().compact().node_of(eid); }
  [[nodiscard]] tensor_info describe(const std::string& name, std::uint32_t eid) const {
    const auto shape = model().compact().shape(eid);
    return {name, std::vector<std::int64_t>(shape.begin(), shape.end()), model().compact().dltype[eid]};
  }
  /// Checks `value` against entry `eid` (executor/messages.hpp).
  void check_tensor(const char* what, std::string_view name, std::uint32_t eid, const ndarray& value, bool zero_copy) const {
    detail::check_tensor(model().compact(), what, name, eid, self().plan.entries[eid].device, value, zero_copy);
  }

  std::shared_ptr<const model_state> m_;
  std::unique_ptr<instance> s_;
  [[no_unique_address]] no_observer no_observer_;
};

GEXEC_NAMESPACE_END
