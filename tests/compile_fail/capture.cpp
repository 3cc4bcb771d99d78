// cuda_graph needs a step program a driver can capture (gexec::capture_step_program).
#include <gexec/cuda/cuda_graph.hpp>
#include <gexec/execution/parallel_streams.hpp>

/// A program with devices and lanes, and nothing for capture.
struct lanes_only : gexec::detail::lane_program_archetype {};
static_assert(gexec::lane_step_program<lanes_only>);

void run(lanes_only& steps) {
#ifdef GEXEC_COMPILE_FAIL
  gexec::cuda_graph{}.execute(steps);
#else
  gexec::parallel_streams{}.execute(steps);
#endif
}
