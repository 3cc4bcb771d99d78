// parallel_streams needs a step program with lanes (gexec::lane_step_program).
#include <gexec/execution/parallel_streams.hpp>
#include <gexec/execution/sequential.hpp>

/// A program with the basic members only.
struct basic_only : gexec::detail::basic_program_archetype {};
static_assert(gexec::basic_step_program<basic_only>);

void run(basic_only& steps) {
#ifdef GEXEC_COMPILE_FAIL
  gexec::parallel_streams{}.execute(steps);
#else
  gexec::sequential{}.execute(steps);
#endif
}
