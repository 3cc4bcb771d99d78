// An observer has before(step_event) and after(step_event).
#include <gexec/executor.hpp>

struct before_only {
  void before(const gexec::step_event&) {}
#ifndef GEXEC_COMPILE_FAIL
  void after(const gexec::step_event&) {}
#endif
};

void run(gexec::graph_executor<>& ex) {
  before_only observer;
  ex.run(gexec::sequential{}, observer);
}
