// run(x) takes an execution policy (execute(steps)) or an observer (before/after).
#include <gexec/executor.hpp>

struct not_a_policy {
  void operator()() const {}
};

void run(gexec::graph_executor<>& ex) {
#ifdef GEXEC_COMPILE_FAIL
  ex.run(not_a_policy{});
#else
  ex.run(gexec::parallel_branches{});
#endif
}
