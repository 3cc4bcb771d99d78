// A program over C++ kernels (gexec::registry): a graph built in C++, a model, one run.
// It includes only what it uses: the model, the registry binding and the graph builder,
// none of which needs Boost.DLL, the dynamic loader or Boost.JSON. Built with
// -DGEXEC_COMPILE_UMBRELLA it includes <gexec/executor.hpp> instead, as every program
// did before those were split out: run.sh times both.

#ifdef GEXEC_COMPILE_UMBRELLA
#include <gexec/executor.hpp>
#else
#include <gexec/binding/registry.hpp>
#include <gexec/graph/builder.hpp>
#include <gexec/model.hpp>
#endif

#include <cstdint>
#include <cstdio>

int main() {
  gexec::registry kernels;
  kernels.add("double_it", [](gexec::packed_args a) {
    const DLTensor& x = a.tensor(0);
    DLTensor& y = a.tensor(1);
    for (std::int64_t i = 0; i < x.shape[0]; ++i) static_cast<float*>(y.data)[i] = 2 * static_cast<float*>(x.data)[i];
  });
  gexec::graph_builder b;
  b.output(b.op("d", "double_it", {b.input("x", {3})}, {{{3}}}));
  gexec::basic_model m(b.build(), kernels);
  auto ex = m.instantiate();
  ex.set_input("x", gexec::ndarray::from_values<float>({3}, {1.0f, 2.0f, 3.5f}));
  ex.run();
  const auto y = ex.get_output(0).values<float>();
  const bool ok = y[0] == 2.0f && y[1] == 4.0f && y[2] == 7.0f;
  std::printf("%s\n", ok ? "registry ok" : "registry: wrong output");
  return ok ? 0 : 1;
}
