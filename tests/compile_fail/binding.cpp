// An op binding resolves names to packed functions and describes itself.
#include <gexec/executor.hpp>

struct lookup_table {
  gexec::packed_function resolve(std::string_view) const { return {}; }
#ifndef GEXEC_COMPILE_FAIL
  std::string describe() const { return "a lookup table"; }
#endif
};

std::size_t size = sizeof(gexec::basic_model<gexec::backends<gexec::cpu_backend>, gexec::pool_allocator, lookup_table>);
