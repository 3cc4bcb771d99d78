#pragma once
// Everything one executor owns, behind one pointer so that the executor moves cheaply
// and the step arrays never move: its streams (and more per device for lane policies),
// its copy of the plan, its storage and zero-copy bindings, which inputs were given a
// value, the run's context, and policies' scratch and state. With it, how storage is
// made: activations at once, one allocation per device; input storage when something
// needs it, zeroed.

#include "../config.hpp"

#include <dlpack/dlpack.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../error.hpp"
#include "../load_progress.hpp"
#include "../ndarray.hpp"
#include "../params/dict.hpp"
#include "../params/source.hpp"
#include "../plan.hpp"
#include "../planners/planner.hpp"
#include "../runtime/run_context.hpp"
#include "../runtime/serial_runs.hpp"
#include "bindings.hpp"
#include "instance_plan.hpp"
#include "model_state.hpp"
#include "streams.hpp"
#include "turns.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

template <class Backends>
struct executor_instance {
  using model_state = gexec::model_state<Backends>;
  using bound_to = zero_copy_bindings::bound_to;

  stream_set<Backends> streams;  ///< lane 0: the executor's own stream per model device
  instance_plan plan;
  allocate_function<Backends> allocator;  ///< the model's, copied: an allocator with state has one per executor
  std::vector<std::shared_ptr<void>> storage;  ///< per storage slot: own memory, null until needed
  std::uint64_t own_bytes = 0;
  zero_copy_bindings bindings;      ///< what each alias group is bound to; the outputs copied after a run
  std::vector<bool> is_param;       ///< per input index
  std::vector<bool> input_set;      ///< per input index: given a value (set, bound, loaded, shared)
  std::vector<bool> used_up;        ///< per input index: a donated input the last run used up (plan::donated)
  std::size_t unset_inputs = 0;
  bool inputs_ready = false;        ///< every input slot bound or allocated
  occupancy turns;
  run_context context;
  serial_runs serial;  ///< whether the next runs use the workers at all
  /// Scratch of execution policies, per step; allocated on first use.
  std::unique_ptr<std::atomic<std::uint32_t>[]> counters;
  std::unique_ptr<std::uint32_t[]> slots;
  /// More streams per device for policies that spread steps over them (lanes); lane 0
  /// is `streams`. lane_objects[lane][d] is the stream object of model device d.
  std::vector<std::unique_ptr<stream_set<Backends>>> extra_lanes;
  std::vector<std::vector<void*>> lane_objects;
  unsigned active_lane = 0;
  /// Per step, the event a lane policy recorded after it (made on first use).
  std::unique_ptr<step_events<Backends>> events;
  /// What a stateful execution policy keeps per executor (a captured CUDA Graph), of
  /// the type `policy_state_type` names; destroyed before the streams it may use.
  std::shared_ptr<void> policy_state;
  const void* policy_state_type = nullptr;

  explicit executor_instance(const model_state& m)
      : streams(m.backends, m.devices),
        plan(m.plan, m.compact()),
        allocator(m.allocate),
        storage(m.plan.storage.size()),
        bindings(m.plan, m.compact(), plan),
        is_param(m.compact().arg_nodes.size(), false),
        input_set(m.compact().arg_nodes.size(), false),
        used_up(m.compact().arg_nodes.size(), false),
        unset_inputs(m.compact().arg_nodes.size()) {
    const gexec::plan& p = m.plan;
    lane_objects.push_back(streams.pointers());
    context = m.rt->context();
    context.workspace_limit = m.max_workspace_bytes;
    context.executor = this;
    context.backends = m.backends.get();
    context.devices = m.device_table;
    context.device = m.devices[0];
    context.stream = lane_objects[0][0];
    context.native_stream = streams.native_handle(0);
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
  executor_instance(const executor_instance&) = delete;
  executor_instance& operator=(const executor_instance&) = delete;

  void mark_set(std::size_t input) noexcept {
    if (!input_set[input]) {
      input_set[input] = true;
      used_up[input] = false;
      --unset_inputs;
    }
  }

  /// After a run, one that failed included: each donated input read from the executor's
  /// own storage may have been overwritten by later values, and has no value until it
  /// is set again. One bound zero-copy was only read.
  [[gnu::cold, gnu::noinline]] void use_up_donated(const model_state& m) noexcept {
    for (const std::uint32_t i : m.plan.donated)
      if (input_set[i] && bindings.of(m.plan.alias_root[m.input_entry(i)]) == bound_to::internal) {
        input_set[i] = false;
        used_up[i] = true;
        ++unset_inputs;
      }
  }

  /// Input `eid` holds a parameter now (loaded or shared).
  void mark_param(const model_state& m, std::uint32_t eid) {
    const std::size_t input = m.input_index.at(std::string(m.compact().name(m.compact().node_of(eid))));
    is_param[input] = true;
    mark_set(input);
  }

  /// The streams of `lane` (lane 0: the executor's own).
  [[nodiscard]] stream_set<Backends>& lane(unsigned l) noexcept { return l == 0 ? streams : *extra_lanes[l - 1]; }
  /// Makes sure there are `n` lanes.
  void use_lanes(const model_state& m, unsigned n) {
    while (lane_objects.size() < n) {
      auto more = std::make_unique<stream_set<Backends>>(m.backends, m.devices);
      lane_objects.push_back(more->pointers());
      extra_lanes.push_back(std::move(more));
    }
  }

  // ---- storage ----------------------------------------------------------------------

  /// Allocates the executor's own memory for `eid`'s storage id, if it has none yet.
  /// Input storage is made only when something needs it; it starts zeroed.
  /// `zeroed` false: the caller overwrites all of it at once (load_params_file).
  std::shared_ptr<void>& reserve_own(const model_state& m, std::uint32_t eid, bool zeroed = true) {
    const std::size_t sid = m.storage_of(eid);
    std::shared_ptr<void>& buffer = storage[sid];
    if (buffer) return buffer;
    const storage_slot& slot = m.plan.storage[sid];
    check_storage_limit(m, slot.bytes);
    const std::uint64_t size[1] = {slot.bytes};
    buffer = std::move(allocate(m, slot.device, size)[0]);
    own_bytes += slot.bytes;
    if (zeroed) zero(m, buffer.get(), slot);
    // Groups on this storage id that use the executor's memory now have it.
    for (std::uint32_t i = m.input_roots_begin[sid]; i < m.input_roots_begin[sid + 1]; ++i) {
      const std::uint32_t root = m.input_roots[i];
      if (bindings.of(root) == bound_to::internal) bind_own(m.plan, root);
    }
    return buffer;
  }
  /// The executor's own memory for `eid`'s alias group, allocated if it has none yet.
  void* own_memory(const model_state& m, std::uint32_t eid) {
    reserve_own(m, eid);
    const std::uint32_t root = m.plan.alias_root[eid];
    return static_cast<char*>(storage[m.plan.entry_slot[root]].get()) + m.plan.entry_offset[root];
  }
  /// Returns `eid`'s alias group to the executor's own memory.
  void make_own(const model_state& m, std::uint32_t eid) { bindings.give_back(eid, own_memory(m, eid)); }
  /// Before the first run: input storage no one bound or set gets zeroed memory.
  void allocate_unbound_inputs(const model_state& m) {
    for (std::size_t sid = 0; sid < m.plan.storage.size(); ++sid)
      for (std::uint32_t i = m.input_roots_begin[sid]; i < m.input_roots_begin[sid + 1]; ++i)
        if (bindings.of(m.input_roots[i]) == bound_to::internal) {
          reserve_own(m, m.input_roots[i]);
          break;
        }
    inputs_ready = true;
  }
  /// Reads tensors of `source` (a param_source) straight into the own memory of their
  /// entries (`todo`: entry, the source's index; checked): memory already there is
  /// overwritten in place, fresh memory is zeroed only where the tensor does not cover
  /// all of its storage. False, and nothing done, where
  /// one of them is not on the host.
  template <class Source>
  bool read_params(const model_state& m, const Source& source, std::span<const std::pair<std::uint32_t, std::size_t>> todo,
                   const load_progress& progress) {
    for (auto [eid, r] : todo)
      if (m.plan.storage[m.storage_of(eid)].device.device_type != kDLCPU) return false;
    std::vector<std::size_t> unzeroed;
    for (auto [eid, r] : todo) {
      const std::size_t sid = m.storage_of(eid);
      const bool covers = m.plan.storage[sid].bytes == source.entries()[r].bytes && m.input_roots_begin[sid + 1] - m.input_roots_begin[sid] == 1;
      if (covers && !storage[sid]) unzeroed.push_back(sid);
      reserve_own(m, eid, !covers);  // may throw: before anything changes
    }
    progress_sink sink(&progress, source.input_bytes());
    try {
      for (auto [eid, r] : todo) {
        make_own(m, eid);
        source.read(r, plan.entries[eid].data, &sink);
        mark_param(m, eid);
      }
    } catch (...) {  // nothing reads memory no one wrote
      for (std::size_t sid : unzeroed) std::memset(storage[sid].get(), 0, static_cast<std::size_t>(m.plan.storage[sid].bytes));
      throw;
    }
    sink.report(source.input_bytes());
    return true;
  }

  /// A view of entry `eid` in the memory it is read from, keeping that memory alive.
  [[nodiscard]] ndarray view_of(const model_state& m, std::uint32_t eid) {
    if (plan.entries[eid].data == nullptr) reserve_own(m, eid);
    const std::uint32_t root = m.plan.alias_root[eid];
    if (bindings.of(root) == bound_to::internal) return ndarray::view(plan.entries[eid], storage[m.storage_of(eid)]);
    return ndarray::view(plan.entries[eid], bindings.owner(root));
  }

  /// Copies between tensors of equal size, complete on return; a copy that touches a
  /// device is that device's backend's job, on this executor's stream there.
  void copy_tensor(const model_state& m, const DLTensor& src, DLTensor& dst) {
    const DLDevice d = dst.device.device_type != kDLCPU ? dst.device : src.device;
    const bool on_stream = streams.on(d, [&](auto& b, auto& stream) {
      b.copy_async(src, dst, stream);
      b.synchronize(stream);
    });
    if (!on_stream) m.backends->copy(src, dst);  // a device the model does not run on: a stream of its own
  }
  /// Enqueues a copy between tensors of equal size on this executor's stream for the
  /// device it touches, behind the work already there; nothing waits. Between two host
  /// tensors, a copy done on return.
  void enqueue_copy(const model_state& m, const DLTensor& src, DLTensor& dst) {
    const DLDevice d = dst.device.device_type != kDLCPU ? dst.device : src.device;
    const bool on_stream = streams.on(d, [&](auto& b, auto& stream) { b.copy_async(src, dst, stream); });
    if (!on_stream) m.backends->copy(src, dst);  // a device the model does not run on: complete on return
  }
  /// Waits for the executor's stream on `device` (the host is about to read from it).
  void synchronize_for(DLDevice device) {
    if (device.device_type != kDLCPU) streams.synchronize(device);
  }

  /// Refuses storage that would take the executor past model_options::max_storage_bytes.
  void check_storage_limit(const model_state& m, std::uint64_t more) const {
    if (more > m.max_storage_bytes || own_bytes > m.max_storage_bytes - more)
      throw error(errc::out_of_memory, "executor storage: " + std::to_string(own_bytes + more) + " bytes would exceed the limit of " +
                                           std::to_string(m.max_storage_bytes) + " bytes (model_options::max_storage_bytes)");
  }

  /// Zeroes fresh storage: directly on the host (unless the allocator's memory reads as
  /// zeros already: model_state::host_storage_zeroed), by a copy from zeroed host memory
  /// on a device. Nothing reads memory no one wrote.
  void zero(const model_state& m, void* data, const storage_slot& slot) {
    if (slot.device.device_type == kDLCPU) {
      if (!m.host_storage_zeroed) std::memset(data, 0, static_cast<std::size_t>(slot.bytes));
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
};

}  // namespace detail
GEXEC_NAMESPACE_END
