// A static program that lets a gexec::error escape main, linked with
// gexec_small_terminate_handler (cmake/gexecModel.cmake): run.sh checks that it still says
// what was thrown (the type, mangled, and what()) and aborts, and that libstdc++'s
// demangler is not linked in.

#include <gexec/error.hpp>

int main(int argc, char**) {
  throw gexec::error(gexec::errc::invalid_graph, "uncaught on purpose (" + std::to_string(argc) + " argument)");
}
