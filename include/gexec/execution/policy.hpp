#pragma once
// The execution policy: how the steps of a run are run. The executor hands the policy
// a step program; the policy runs every step exactly once, in an order the program's
// dependency edges allow, and returns when all are done (or throws the first error).
//
//   struct my_policy {
//     template <class Program>
//     void execute(Program& steps) const { steps.run(0, steps.size()); }
//   };
//   ex.run(my_policy{});
//
// A step program offers:
//   size()                    the number of steps
//   run(begin, end)           steps [begin, end) in order, on this thread (the fast path)
//   run_step(k)               step k alone, on this thread
//   dependencies()            the steps' edges (gexec::step_graph), made on first use
//   max_concurrency()         threads the runtime's pool can run at once (this one included)
//   parallel_for(n, f)        f(task, num_tasks) on up to n of the pool's threads at once
//   counters(), slots()       per-step scratch owned by the executor (atomic and plain u32)
//   thread_context()          an object that, while it lives, gives this thread its own
//                             copy of the run's context (each thread running steps needs one)
// Every call but run/run_step is cheap; run and run_step throw gexec::error.

#include "../config.hpp"

#include <atomic>
#include <concepts>
#include <cstdint>
#include <span>

#include "../executor/step_graph.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

/// What a policy may use of a step program, for checking policies against the concept.
struct step_program_archetype {
  struct context_guard {};
  [[nodiscard]] std::uint32_t size() const noexcept;
  void run(std::uint32_t begin, std::uint32_t end);
  void run_step(std::uint32_t step);
  [[nodiscard]] const step_graph& dependencies() const;
  [[nodiscard]] int max_concurrency() const noexcept;
  template <class F>
  void parallel_for(int num_tasks, F&& f);
  [[nodiscard]] std::span<std::atomic<std::uint32_t>> counters();
  [[nodiscard]] std::span<std::uint32_t> slots();
  [[nodiscard]] context_guard thread_context();
};

}  // namespace detail

template <class E>
concept execution_policy = requires(const E& policy, detail::step_program_archetype& steps) { policy.execute(steps); };

GEXEC_NAMESPACE_END
