#pragma once
// The observer policy: a hook around each step of a run, on which per-node timing and
// tracing are built. run() without an observer compiles to the plain loop: no hook, no
// check, no cost.
//
//   struct my_observer {
//     void before(const gexec::step_event& e);  // on the thread about to run the step
//     void after(const gexec::step_event& e);   // when it returned; not after a failure
//   };
//   ex.run(obs);  ex.run(gexec::parallel_branches{}, obs);
//
// Under a parallel execution policy the hooks of different steps run on different
// threads at once; one step's before and after run on one thread.

#include "../config.hpp"

#include <concepts>
#include <cstdint>

GEXEC_NAMESPACE_BEGIN

struct step_event {
  std::uint32_t step;     ///< index in the run order
  std::uint32_t node_id;  ///< the graph node it runs
};

template <class O>
concept step_observer = requires(O& o, const step_event& e) {
  o.before(e);
  o.after(e);
};

/// No hook: run() is the plain loop.
struct no_observer {
  void before(const step_event&) noexcept {}
  void after(const step_event&) noexcept {}
};
static_assert(step_observer<no_observer>);

GEXEC_NAMESPACE_END
