// A planner must answer a storage_problem with a storage_assignment.
#include <gexec/executor.hpp>

struct sizes_only {
  std::vector<std::uint64_t> plan(const std::vector<std::uint64_t>& sizes) const { return sizes; }
};

#ifdef GEXEC_COMPILE_FAIL
using planner = sizes_only;
#else
using planner = gexec::liveness;
#endif
using model = gexec::basic_model<gexec::backends<gexec::cpu_backend>, gexec::pool_allocator, gexec::registry, planner>;
std::size_t size = sizeof(model);
