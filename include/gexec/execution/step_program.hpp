#pragma once
// gexec::step_program: what an execution policy drives, the steps of one run of one
// executor. It models every concept of execution/policy.hpp: the steps and their edges,
// the runtime's pool and per-step scratch (basic), the devices and their drivers,
// lanes of streams ordered by events, and what a driver capturing the steps needs.

#include "../config.hpp"

#include <dlpack/dlpack.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <type_traits>
#include <utility>

#include "../detail/last_error.hpp"
#include "../device.hpp"
#include "../executor/instance.hpp"
#include "../executor/model_state.hpp"
#include "../executor/step_graph.hpp"
#include "../runtime/run_context.hpp"
#include "policy.hpp"
#include "run_loop.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {
/// Names the type of an executor's policy state (step_program::state, policy_state).
template <class S>
inline constexpr char policy_state_tag = 0;

/// workspace_lender::region for an executor of a model_state<Backends> (`state`): the
/// gap of the call step running (executor/workspace_gaps.hpp) in the executor's storage.
template <class Backends>
lent_region activation_gap(const void* state, const run_context& c) noexcept {
  const auto& m = *static_cast<const model_state<Backends>*>(state);
  const auto& s = *static_cast<const executor_instance<Backends>*>(c.executor);
  // The step this thread runs, if it is one of this executor's call steps: compared as
  // addresses, as a step of another executor (a kernel running a model) or a kernel's
  // message (detail/last_error.hpp) is none of them.
  const auto step = reinterpret_cast<std::uintptr_t>(running_step());
  const auto calls = reinterpret_cast<std::uintptr_t>(s.plan.calls.data());
  const auto ffis = reinterpret_cast<std::uintptr_t>(s.plan.ffi_calls.data());
  std::size_t k;
  if (step - calls < s.plan.calls.size() * sizeof(call_step)) k = (step - calls) / sizeof(call_step);
  else if (step - ffis < s.plan.ffi_calls.size() * sizeof(ffi_step)) k = (step - ffis) / sizeof(ffi_step);
  else return {};
  try {
    const workspace_gap& gap = m.workspace_gaps()[k];
    if (gap.bytes == 0 || !s.storage[gap.slot]) return {};
    return {static_cast<std::byte*>(s.storage[gap.slot].get()) + gap.offset, gap.bytes};
  } catch (...) {  // the gaps could not be made: the thread's own workspace serves
    return {};
  }
}
}  // namespace detail

template <class Backends, class Observer>
class step_program {
 public:
  using model_state = gexec::model_state<Backends>;
  using instance = detail::executor_instance<Backends>;

  step_program(const model_state& m, instance& s, Observer& observer) noexcept : m_(m), s_(s), observer_(observer) {}

  [[nodiscard]] std::uint32_t size() const noexcept { return static_cast<std::uint32_t>(m_.plan.step_node.size()); }
  /// Steps [begin, end) in order, on this thread (the fast path).
  void run(std::uint32_t begin, std::uint32_t end) { detail::run_steps(s_, m_, begin, std::min(end, size()), observer_); }
  void run_step(std::uint32_t step) { detail::run_steps(s_, m_, step, step + 1, observer_); }
  /// Steps [begin, end) in order, on this thread, while no other step of the run runs
  /// (sequential): the executor lends this thread's kernels, as host workspace, the
  /// activation bytes the step running leaves free.
  void run_alone(std::uint32_t begin, std::uint32_t end) {
    detail::run_context& c = s_.context;
    c.lender = {&detail::activation_gap<Backends>, &m_, &detail::workspace_arena::this_thread()};
    struct stop_lending {
      detail::run_context& c;
      ~stop_lending() { c.lender = {}; }
    } stop{c};
    run(begin, end);
  }
  /// The steps' edges (data, storage reuse, control_deps), made on first use.
  [[nodiscard]] const step_graph& dependencies() const { return m_.dependencies(); }
  /// Threads the runtime's pool can run at once (this one included).
  [[nodiscard]] int max_concurrency() const noexcept { return s_.context.pool->max_concurrency(); }
  /// f(task, num_tasks) on up to `num_tasks` of the pool's threads at once.
  template <class F>
  void parallel_for(int num_tasks, F&& f) {
    s_.context.pool->parallel_for(num_tasks, std::forward<F>(f));
  }
  /// f(0, env, cdata) on a worker of the pool that is idle now, without waiting for it;
  /// false if none is (thread_pool::post_detached).
  bool post_detached(FTVMParallelLambda f, void* cdata) noexcept { return s_.context.pool->post_detached(f, cdata); }
  /// Per-step scratch owned by the executor: atomic and plain.
  [[nodiscard]] std::span<std::atomic<std::uint32_t>> counters() {
    if (!s_.counters) s_.counters = std::make_unique<std::atomic<std::uint32_t>[]>(size());
    return {s_.counters.get(), size()};
  }
  [[nodiscard]] std::span<std::uint32_t> slots() {
    if (!s_.slots) s_.slots = std::make_unique<std::uint32_t[]>(size());
    return {s_.slots.get(), size()};
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
  [[nodiscard]] context_guard thread_context() const { return context_guard(s_.context); }
  /// The executor's object of type S for this policy, made on first use; kept with the
  /// executor (a policy of another type asking replaces it).
  template <class S>
  [[nodiscard]] S& state() {
    if (s_.policy_state_type != &detail::policy_state_tag<S>) {
      s_.policy_state.reset();
      s_.policy_state = std::make_shared<S>();
      s_.policy_state_type = &detail::policy_state_tag<S>;
    }
    return *static_cast<S*>(s_.policy_state.get());
  }

  // ---- devices ---------------------------------------------------------------------
  [[nodiscard]] std::span<const DLDevice> devices() const noexcept { return m_.devices; }
  [[nodiscard]] void* native_stream(std::size_t d) const noexcept { return s_.streams.native_handle(d); }
  [[nodiscard]] const void* launch_services(std::size_t d) const noexcept {
    return m_.device_table->launch_services(m_.backends.get(), m_.devices[d]);
  }

  // ---- lanes: several streams per device (parallel_streams) --------------------------
  // Lane 0 is the executor's own stream; the others are made on first use and kept
  // with the executor. On the host every lane is the host itself.
  /// The model device (index into devices()) step k runs on.
  [[nodiscard]] std::uint16_t step_device(std::uint32_t k) const noexcept { return m_.plan.order[m_.plan.run_of(k)].device; }
  /// Makes sure there are `n` lanes.
  void use_lanes(unsigned n) { s_.use_lanes(m_, n); }
  /// Runs step k on `lane`'s stream of its device.
  void run_step_on(std::uint32_t k, unsigned lane) {
    s_.active_lane = lane;
    detail::run_steps(s_, m_, k, k + 1, observer_);
  }
  /// Marks, on `lane`, that step k is done (what wait_for waits for).
  void signal(std::uint32_t k, unsigned lane) {
    const std::uint16_t d = step_device(k);
    const DLDevice device = m_.devices[d];
    if (device.device_type == kDLCPU) return;  // done when it returned
    if (!s_.events) s_.events = std::make_unique<detail::step_events<Backends>>(m_.backends, size());
    s_.lane(lane).on(d, [&](auto& b, auto& stream) { b.record(s_.events->make(k, b, device), stream); });
  }
  /// Makes `lane`'s stream on model device `d` wait until step k (signalled on
  /// `k_lane`) is done; the host waits where `d` is the host or another device type.
  void wait_for(std::uint32_t k, unsigned k_lane, std::uint16_t d, unsigned lane) {
    const std::uint16_t dk = step_device(k);
    const DLDevice from = m_.devices[dk], to = m_.devices[d];
    if (from.device_type == kDLCPU || (dk == d && k_lane == lane)) return;
    s_.lane(k_lane).on(dk, [&](auto& b, auto& k_stream) {
      using B = std::decay_t<decltype(b)>;
      auto* event = s_.events ? s_.events->template find<B>(k) : nullptr;
      if (to.device_type == from.device_type && event) b.wait(s_.lane(lane).template get<B>(d), *event);
      else b.synchronize(k_stream);
    });
  }

  // ---- capture: for a driver that records the steps (cuda_graph) ----------------------
  /// Changes whenever a pointer the steps hand to kernels may have changed.
  [[nodiscard]] std::uint64_t bindings_version() const noexcept { return s_.plan.version; }

 private:
  const model_state& m_;
  instance& s_;
  Observer& observer_;
};

GEXEC_NAMESPACE_END
