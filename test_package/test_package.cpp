// gexec from its Conan package: a two-node graph over a C++ kernel, run once. It
// includes only what a program with kernels of its own needs, which keeps the one
// translation unit conan create compiles short.
#include <gexec/binding/registry.hpp>
#include <gexec/graph.hpp>
#include <gexec/model.hpp>

#include <iostream>

int main() {
  gexec::registry kernels;
  kernels.add("scale", [](gexec::packed_args a) {
    const DLTensor& x = a.tensor(0);
    DLTensor& y = a.tensor(1);
    for (std::int64_t i = 0; i < x.shape[0]; ++i) static_cast<float*>(y.data)[i] = 3 * static_cast<float*>(x.data)[i];
  });
  gexec::graph_builder b;
  auto once = b.op("once", "scale", {b.input("x", {3})}, {{{3}}});
  b.output(b.op("twice", "scale", {once}, {{{3}}}));
  gexec::basic_model m(b.build(), kernels);
  auto ex = m.instantiate();
  ex.set_input("x", gexec::ndarray::from_values<float>({3}, {1.0f, -2.0f, 0.5f}));
  ex.run();
  const auto y = ex.get_output(0).values<float>();
  const bool ok = y[0] == 9.0f && y[1] == -18.0f && y[2] == 4.5f;
  std::cout << (ok ? "test_package ok" : "test_package: wrong output") << ": y = " << y[0] << ' ' << y[1] << ' ' << y[2]
            << " (gexec " << GEXEC_VERSION_STRING << ")\n";
  return ok ? 0 : 1;
}
