// gexec in a CMake project (see CMakeLists.txt): a graph over a C++ kernel, its input
// taken from a parameter dictionary written and read back, run once, by a model that
// could also use CUDA devices (gexec::cuda): it builds without a CUDA toolkit and runs
// on the host without a GPU or driver.
#include <gexec/cuda.hpp>
#include <gexec/executor.hpp>
#include <gexec/params.hpp>

#include <iostream>

int main() {
  gexec::registry kernels;
  kernels.add("add_one", [](gexec::packed_args a) {
    const DLTensor& x = a.tensor(0);
    DLTensor& y = a.tensor(1);
    for (std::int64_t i = 0; i < x.shape[0]; ++i) static_cast<float*>(y.data)[i] = static_cast<float*>(x.data)[i] + 1;
  });
  gexec::graph_builder b;
  b.output(b.op("add", "add_one", {b.input("x", {2})}, {{{2}}}));
  gexec::basic_model<gexec::cuda_backends, gexec::pool_allocator, gexec::registry> m(b.build(), kernels);
  auto ex = m.instantiate();

  gexec::param_dict d;
  d.set("x", gexec::ndarray::from_values<float>({2}, {1.0f, 2.5f}));
  const gexec::param_dict back = gexec::load_param_dict(gexec::save_param_dict(d));
  ex.set_input("x", back.at("x"));
  ex.run();
  const auto y = ex.get_output(0).values<float>();
  const bool ok = y[0] == 2.0f && y[1] == 3.5f;
  std::cout << (ok ? "consumer ok" : "consumer: wrong output") << ": y = " << y[0] << ' ' << y[1] << " (gexec "
            << GEXEC_VERSION_STRING << ")\n";
  return ok ? 0 : 1;
}
