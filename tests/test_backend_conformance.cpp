// The backend conformance suite (backend_conformance.hpp) over the backends whose device
// memory is host memory: the host itself, the emulated test device and the null backend,
// the skeleton to copy for a new device. The CUDA backend registers in
// tests/cuda/test_backend_conformance_cuda.cpp. A new backend adds a subject here (or
// beside its own tests) and names it in GEXEC_BACKEND_CONFORMANCE.

#include "backend_conformance.hpp"

#include <gexec/backends/emulated.hpp>
#include <gexec/backends/null.hpp>

#include <array>

namespace {

using conformance::check;
using conformance::gap;

struct cpu_subject {
  using backend = gexec::cpu_backend;
  static constexpr const char* name = "cpu_backend";
  static backend make() { return {}; }
  static int device_count() { return 1; }
  static constexpr std::array unsupported = {
      gap{check::refuses_foreign_device, "the host backend serves whatever DLDevice it is handed; it checks none"},
      gap{check::refuses_size_mismatch, "cpu_backend::copy copies the source's bytes without comparing the destination's size"},
      gap{check::copies_between_device_ids, "gexec's host is one device, cpu:0"},
  };
  using binding = gexec::registry;
  static binding kernels() { return conformance::host_memory_kernels<kDLCPU>(); }
  static constexpr const char* scale_shift = "conformance_scale_shift";
  static constexpr const char* add = "conformance_add";
};

struct emulated_subject {
  using backend = gexec::emulated_backend<>;
  static constexpr const char* name = "emulated_backend";
  static backend make() { return backend(); }
  static int device_count() { return gexec::emulated_stats::max_devices; }
  static constexpr std::array unsupported = {
      gap{check::refuses_foreign_workspace, "free_workspace frees any pointer it is handed: the emulator counts workspace, it does not track it"},
  };
  using binding = gexec::registry;
  static binding kernels() { return conformance::host_memory_kernels<gexec::emulated_device_type>(); }
  static constexpr const char* scale_shift = "conformance_scale_shift";
  static constexpr const char* add = "conformance_add";
};

struct null_subject {
  using backend = gexec::null_backend;
  static constexpr const char* name = "null_backend";
  static backend make() { return {}; }
  static int device_count() { return 2; }  // any id serves: host memory
  static constexpr std::array<gap, 0> unsupported{};
  using binding = gexec::registry;
  static binding kernels() { return conformance::host_memory_kernels<gexec::null_device_type>(); }
  static constexpr const char* scale_shift = "conformance_scale_shift";
  static constexpr const char* add = "conformance_add";
};

}  // namespace

TYPE_TO_STRING(cpu_subject);
TYPE_TO_STRING(emulated_subject);
TYPE_TO_STRING(null_subject);

GEXEC_BACKEND_CONFORMANCE(cpu_subject, emulated_subject, null_subject);

// What the null backend shows beyond the suite: a graph placed on it is placed there,
// and its workspace is its own.
TEST_CASE("null backend: a graph's entries on null_device_type reach it, and nothing else does") {
  gexec::graph_builder b;
  auto x = b.input("x", {4});
  auto on = b.copy("to_null", x, gexec::null_device_type);
  b.output(b.op("y", "conformance_scale_shift", {on}, {{{4}, gexec::dtypes::float32, gexec::null_device_type}}));
  using with_null = gexec::backends<gexec::cpu_backend, gexec::null_backend>;
  gexec::basic_model<with_null, gexec::pool_allocator, gexec::registry> m(
      b.build(), conformance::host_memory_kernels<gexec::null_device_type>(), gexec::detail::on_devices({gexec::cpu(), gexec::null_device()}));
  auto ex = m.instantiate();
  ex.set_input("x", test::tensor({4}, {1, 2, 3, 4}));
  ex.run();
  CHECK(ex.get_output(0).device().device_type == gexec::null_device_type);
  auto out = gexec::ndarray::empty({4}, gexec::dtypes::float32);
  ex.copy_output_to(0, out);
  CHECK(test::values_of(out) == std::vector<float>{2.5f, 4.5f, 6.5f, 8.5f});
  CHECK(gexec::to_string(gexec::null_device(1)) == "device_type(6):1");
  // Without a device for its type the model is refused at load.
  auto e = test::error_of([&] {
    gexec::graph_builder g;
    auto in = g.input("x", {4});
    g.output(g.op("y", "conformance_scale_shift", {g.copy("to_null", in, gexec::null_device_type)}, {{{4}, gexec::dtypes::float32, gexec::null_device_type}}));
    (void)gexec::basic_model(g.build(), conformance::host_memory_kernels<gexec::null_device_type>());
  });
  CHECK(e.code() == gexec::errc::device_mismatch);
  CHECK(test::contains(e, "device_type(6)"));
}
