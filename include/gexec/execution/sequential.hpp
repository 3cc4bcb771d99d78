#pragma once
// sequential: every step in the plan's order on the calling thread; the flat loop over
// the step arrays, as cheap as a hand-written loop of the same calls. The default.

#include "../config.hpp"

#include <cstdint>

#include "policy.hpp"

GEXEC_NAMESPACE_BEGIN

namespace detail {
/// Steps [begin, end) in order on this thread, nothing else of the run beside them: with
/// workspace lent from the activations where the program can (step_program::run_alone).
template <class P>
void run_in_order(P& steps, std::uint32_t begin, std::uint32_t end) {
  if constexpr (requires { steps.run_alone(begin, end); }) steps.run_alone(begin, end);
  else steps.run(begin, end);
}
}  // namespace detail

struct sequential {
  template <basic_step_program P>
  auto execute(P& steps) const {
    detail::run_in_order(steps, 0, steps.size());
  }
};
static_assert(execution_policy<sequential>);

namespace detail {
/// The first `end` steps in order: a run up to a node (debug_get_output).
struct first_steps {
  std::uint32_t end;
  template <basic_step_program P>
  auto execute(P& steps) const {
    run_in_order(steps, 0, end);
  }
};
static_assert(execution_policy<first_steps>);
}  // namespace detail

GEXEC_NAMESPACE_END
