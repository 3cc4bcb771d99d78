// A policy uses only the members of the step-program concept it is constrained on:
// checking it (execution_policy) compiles its body against that concept's archetype.
#include <gexec/execution/policy.hpp>

struct runs_everything {
  template <gexec::basic_step_program P>
  auto execute(P& steps) const {
#ifdef GEXEC_COMPILE_FAIL
    steps.no_such_member();
#else
    steps.run(0, steps.size());
#endif
  }
};
static_assert(gexec::execution_policy<runs_everything>);
