#pragma once
// sequential: every step in the plan's order on the calling thread; the flat loop over
// the step arrays, as cheap as a hand-written loop of the same calls. The default.

#include "../config.hpp"

#include <cstdint>

#include "policy.hpp"

GEXEC_NAMESPACE_BEGIN

struct sequential {
  template <basic_step_program P>
  auto execute(P& steps) const {
    steps.run(0, steps.size());
  }
};
static_assert(execution_policy<sequential>);

namespace detail {
/// The first `end` steps in order: a run up to a node (debug_get_output).
struct first_steps {
  std::uint32_t end;
  template <basic_step_program P>
  auto execute(P& steps) const {
    steps.run(0, end);
  }
};
static_assert(execution_policy<first_steps>);
}  // namespace detail

GEXEC_NAMESPACE_END
