// A device backend without streams, events or workspace is not a device_backend.
#include <gexec/backends/emulated.hpp>
#include <gexec/executor.hpp>

struct memory_only {
  static constexpr int device_type = kDLExtDev;
  void* allocate(DLDevice, std::uint64_t) { return nullptr; }
  void free(DLDevice, void*) noexcept {}
};

#ifdef GEXEC_COMPILE_FAIL
using two = gexec::backends<gexec::cpu_backend, memory_only>;
#else
using two = gexec::backends<gexec::cpu_backend, gexec::emulated_backend<>>;
#endif
two devices;
