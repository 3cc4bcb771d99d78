// gexec built the way a user without CMake builds it, over the source tree or with
// the installed gexec.pc (tests package_plain_gxx and package_pkg_config):
//   g++ -std=c++20 -I include main.cpp -lboost_json -ldl -pthread
//   g++ -std=c++20 main.cpp $(pkg-config --cflags --libs gexec)
// Everything gexec needs from its dependencies' configuration comes from its headers.

#include <gexec/executor.hpp>

#include <iostream>

int main() {
  gexec::registry kernels;
  kernels.add("double_it", [](gexec::packed_args a) {
    const DLTensor& x = a.tensor(0);
    DLTensor& y = a.tensor(1);
    for (std::int64_t i = 0; i < x.shape[0]; ++i) static_cast<float*>(y.data)[i] = 2 * static_cast<float*>(x.data)[i];
  });
  gexec::graph_builder b;
  b.output(b.op("d", "double_it", {b.input("x", {3})}, {{{3}}}));
  gexec::basic_model m(b.build(), kernels);  // a model over C++ kernels
  auto ex = m.instantiate();
  ex.set_input("x", gexec::ndarray::from_values<float>({3}, {1.0f, 2.0f, 3.5f}));
  ex.run();
  const auto y = ex.get_output(0).values<float>();
  const bool ok = y[0] == 2.0f && y[1] == 4.0f && y[2] == 7.0f;
  std::cout << (ok ? "plain build ok" : "plain build: wrong output") << " (gexec " << GEXEC_VERSION_MAJOR << '.' << GEXEC_VERSION_MINOR
            << '.' << GEXEC_VERSION_PATCH << ")\n";
  return ok ? 0 : 1;
}
