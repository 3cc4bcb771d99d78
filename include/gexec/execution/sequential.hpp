#pragma once
// sequential: every step in the plan's order on the calling thread; the flat loop over
// the step arrays, as cheap as a hand-written loop of the same calls. The default.

#include "../config.hpp"

#include "policy.hpp"

GEXEC_NAMESPACE_BEGIN

struct sequential {
  template <class Program>
  void execute(Program& steps) const {
    steps.run(0, steps.size());
  }
};
static_assert(execution_policy<sequential>);

GEXEC_NAMESPACE_END
