#pragma once
// The execution policy: how the steps of a run are run. The executor hands the policy
// a step program (gexec::step_program, execution/step_program.hpp); the policy runs
// every step exactly once, in an order the program's dependency edges allow, and
// returns when all are done (or throws the first error).
//
//   struct my_policy {
//     template <gexec::basic_step_program P>
//     auto execute(P& steps) const { steps.run(0, steps.size()); }
//   };
//   ex.run(my_policy{});
//
// What a policy may use of the program is one of four concepts, each the list of its
// members; a policy constrains its execute on the one it needs:
//   basic_step_program   every policy: size, run, run_step, dependencies,
//                        max_concurrency, parallel_for, post_detached, counters, slots,
//                        thread_context, and state<S>, an object the policy keeps per executor
//   device_step_program  + the devices and their drivers: devices, step_device, native_stream, launch_services
//   lane_step_program    + several streams per device ordered by events:
//                        use_lanes, run_step_on, signal, wait_for (parallel_streams)
//   capture_step_program + what a driver that records the steps needs: bindings_version
//                        (cuda_graph)
// execution_policy<E> holds when E's execute takes the archetype of one of them: a
// program with exactly those members. Where execute's return type is deduced (`auto`),
// checking the concept compiles its body against the archetype, so a policy that uses
// a member outside its concept fails to compile there and then.
// Every call but run/run_step/run_step_on is cheap; those throw gexec::error.

#include "../config.hpp"

#include <dlpack/dlpack.h>

#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <span>

#include "../executor/step_graph.hpp"
#include "../tvm_abi.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {
/// A type a policy might keep with state<S>(), for checking the concepts.
struct policy_state_probe {};
}  // namespace detail

/// What every policy may use: the steps, their edges, the runtime's pool, per-step
/// scratch, the run's context for other threads, and per-executor state.
template <class P>
concept basic_step_program = requires(P& steps, const P& csteps, std::uint32_t k, void (*task)(int, int), FTVMParallelLambda detached) {
  { csteps.size() } -> std::same_as<std::uint32_t>;
  steps.run(k, k);
  steps.run_step(k);
  { csteps.dependencies() } -> std::same_as<const step_graph&>;
  { csteps.max_concurrency() } -> std::same_as<int>;
  steps.parallel_for(1, task);
  { steps.post_detached(detached, nullptr) } -> std::same_as<bool>;
  { steps.counters() } -> std::same_as<std::span<std::atomic<std::uint32_t>>>;
  { steps.slots() } -> std::same_as<std::span<std::uint32_t>>;
  steps.thread_context();
  { steps.template state<detail::policy_state_probe>() } -> std::same_as<detail::policy_state_probe&>;
};

/// The model's devices, the one each step runs on, and per device the driver's handle of
/// the executor's stream there (a CUstream; null on the host) and what launchers need
/// there (the CUDA driver).
template <class P>
concept device_step_program = basic_step_program<P> && requires(const P& csteps, std::size_t d, std::uint32_t k) {
  { csteps.devices() } -> std::same_as<std::span<const DLDevice>>;
  { csteps.step_device(k) } -> std::same_as<std::uint16_t>;
  { csteps.native_stream(d) } -> std::same_as<void*>;
  { csteps.launch_services(d) } -> std::same_as<const void*>;
};

/// Lanes: several streams per device, ordered by events (parallel_streams).
template <class P>
concept lane_step_program = device_step_program<P> && requires(P& steps, std::uint32_t k, unsigned lane, std::uint16_t d) {
  steps.use_lanes(lane);
  steps.run_step_on(k, lane);
  steps.signal(k, lane);
  steps.wait_for(k, lane, d, lane);
};

/// For policies that hand the work to a device driver that records it (cuda_graph):
/// a number that changes whenever a pointer the steps hand to kernels may have changed.
template <class P>
concept capture_step_program = device_step_program<P> && requires(const P& csteps) {
  { csteps.bindings_version() } -> std::same_as<std::uint64_t>;
};

namespace detail {

/// Programs with exactly the members of each concept, for checking policies.
struct basic_program_archetype {
  struct context_guard {
    context_guard() = default;
    ~context_guard() {}  // like the real one: holding it is using it
    context_guard(const context_guard&) = delete;
    context_guard& operator=(const context_guard&) = delete;
  };
  [[nodiscard]] std::uint32_t size() const noexcept;
  void run(std::uint32_t begin, std::uint32_t end);
  void run_step(std::uint32_t step);
  [[nodiscard]] const step_graph& dependencies() const;
  [[nodiscard]] int max_concurrency() const noexcept;
  template <class F>
  void parallel_for(int, F&&) {}  // defined: F may be a policy's lambda
  bool post_detached(FTVMParallelLambda, void*) noexcept;
  [[nodiscard]] std::span<std::atomic<std::uint32_t>> counters();
  [[nodiscard]] std::span<std::uint32_t> slots();
  [[nodiscard]] context_guard thread_context() const;
  template <class S>
  [[nodiscard]] S& state() {  // defined: S may be a policy's local type
    std::terminate();  // never called
  }
};
struct device_program_archetype : basic_program_archetype {
  [[nodiscard]] std::span<const DLDevice> devices() const noexcept;
  [[nodiscard]] std::uint16_t step_device(std::uint32_t k) const noexcept;
  [[nodiscard]] void* native_stream(std::size_t d) const noexcept;
  [[nodiscard]] const void* launch_services(std::size_t d) const noexcept;
};
struct lane_program_archetype : device_program_archetype {
  void use_lanes(unsigned n);
  void run_step_on(std::uint32_t k, unsigned lane);
  void signal(std::uint32_t k, unsigned lane);
  void wait_for(std::uint32_t k, unsigned k_lane, std::uint16_t d, unsigned lane);
};
struct capture_program_archetype : device_program_archetype {
  [[nodiscard]] std::uint64_t bindings_version() const noexcept;
};
/// Every member: for a policy constrained on lanes and capture at once.
struct full_program_archetype : lane_program_archetype {
  [[nodiscard]] std::uint64_t bindings_version() const noexcept;
};

static_assert(basic_step_program<basic_program_archetype> && !device_step_program<basic_program_archetype>);
static_assert(device_step_program<device_program_archetype> && !lane_step_program<device_program_archetype> &&
              !capture_step_program<device_program_archetype>);
static_assert(lane_step_program<lane_program_archetype> && !capture_step_program<lane_program_archetype>);
static_assert(capture_step_program<capture_program_archetype> && !lane_step_program<capture_program_archetype>);
static_assert(lane_step_program<full_program_archetype> && capture_step_program<full_program_archetype>);

template <class E, class Archetype>
concept executes_on = requires(const E& policy, Archetype& steps) { policy.execute(steps); };

}  // namespace detail

/// A policy: its execute takes the archetype of the least of the concepts it accepts
/// (tried in order: basic, devices, lanes, capture, all of them).
template <class E>
concept execution_policy = detail::executes_on<E, detail::basic_program_archetype> || detail::executes_on<E, detail::device_program_archetype> ||
                           detail::executes_on<E, detail::lane_program_archetype> || detail::executes_on<E, detail::capture_program_archetype> ||
                           detail::executes_on<E, detail::full_program_archetype>;

GEXEC_NAMESPACE_END
