// An allocator gives shared_ptr buffers for a list of sizes on one device.
#include <gexec/executor.hpp>

struct raw_allocator {
#ifdef GEXEC_COMPILE_FAIL
  void* allocate(std::uint64_t bytes) { return ::operator new(bytes); }
#else
  template <gexec::device_backend B>
  std::vector<std::shared_ptr<void>> allocate(std::shared_ptr<B> b, DLDevice d, std::span<const std::uint64_t> sizes) {
    return gexec::buffer_allocator{}.allocate(b, d, sizes);
  }
#endif
};

std::size_t size = sizeof(gexec::basic_model<gexec::backends<gexec::cpu_backend>, raw_allocator, gexec::registry>);
