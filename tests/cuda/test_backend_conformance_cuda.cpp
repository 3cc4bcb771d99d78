// The backend conformance suite (tests/backend_conformance.hpp) over the CUDA backend.
// As test_cuda: with GEXEC_CUDA_DRIVER naming the host-emulated driver (CTest label
// cuda-emulated) it runs here, the graph's kernels being host implementations of
// kernels.cu; without it, on a GPU through libcuda.so.1 (label gpu), the kernels being
// nvcc's PTX. Without a driver or a device it prints SKIPPED and exits 77.

#define DOCTEST_CONFIG_IMPLEMENT
#include "../backend_conformance.hpp"

#include <gexec/cuda.hpp>

#include <dlfcn.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

struct cuda_subject {
  using backend = gexec::cuda_backend;
  static constexpr const char* name = "cuda_backend";
  static backend make() { return backend(); }
  static int device_count() { return gexec::cuda_driver::process_default()->device_count(); }
  static constexpr std::array<conformance::gap, 0> unsupported{};
  using binding = gexec::packed_c_abi;
  /// The CUDA test library (host_library.c): TVM's CUDA protocol, kernels from kernels.cu.
  static binding kernels() { return gexec::packed_c_abi(gexec::load_module(GEXEC_CUDA_HOST_PTX)); }
  static constexpr const char* scale_shift = "fused_scale_shift";
  static constexpr const char* add = "fused_add";
};

}  // namespace

TYPE_TO_STRING(cuda_subject);

GEXEC_BACKEND_CONFORMANCE(cuda_subject);

int main(int argc, char** argv) {
  const char* emulated = std::getenv("GEXEC_CUDA_DRIVER");
  try {
    auto d = gexec::cuda_driver::process_default();
    std::printf("CUDA driver %s (version %d), %d device(s)%s\n", d->path().c_str(), d->version(), d->device_count(),
                emulated ? ": the host-emulated driver, not a GPU" : "");
  } catch (const gexec::error& e) {
    std::printf("SKIPPED: %s\n", e.what());
    return 77;
  }
  if (emulated) {  // the host kernels the emulated driver runs for kernels.cu
    void* kernels = dlopen(GEXEC_CUDA_EMULATED_KERNELS, RTLD_NOW | RTLD_LOCAL);
    auto register_all = kernels ? reinterpret_cast<void (*)()>(dlsym(kernels, "gexec_test_register_emulated_kernels")) : nullptr;
    if (!register_all) {
      std::fprintf(stderr, "test_backend_conformance_cuda: cannot register the emulated kernels of %s\n", GEXEC_CUDA_EMULATED_KERNELS);
      return 1;
    }
    register_all();
  }
  doctest::Context context(argc, argv);
  return context.run();
}
