// Dispatch overhead: a chain of N nodes, each one packed call, run by gexec and, as
// the baseline in the same process, by a plain loop calling the same function
// pointers with prebuilt arguments over the same two ping-pong buffers.
//
//   gexec_bench_dispatch [N...]      (default: 1000 10000 100000)
//
// Prints ns per node for both and their ratio (gexec / plain loop).

#include <gexec/executor.hpp>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

// The best of several TVM-style measurements, in seconds per call.
template <class F>
double best_seconds(F&& f, int n_nodes) {
  gexec::benchmark_options opt;
  opt.repeat = 15;
  opt.number = std::max(1, 2000000 / n_nodes);
  return gexec::benchmark(f, opt).min;
}

struct row {
  double gexec_ns, plain_ns;
};

row measure(const gexec::module& lib, const char* kernel, int n) {
  // The graph as TVM's planner would lay out a chain: two storages used in turn.
  gexec::graph_builder b;
  gexec::node_entry prev = b.input("x", {16});
  for (int i = 0; i < n; ++i) prev = b.op("n" + std::to_string(i), kernel, {prev}, {{{16}, gexec::dtypes::float32, 0, 1 + i % 2}});
  b.output(prev);
  auto ex = gexec::create(b.build(), lib);
  ex.set_input("x", gexec::ndarray::empty({16}, gexec::dtypes::float32));

  // Baseline: the same calls, arguments prebuilt, no executor.
  gexec::packed_c_func fn = lib.get_function(kernel).fn;
  auto x = gexec::ndarray::empty({16}, gexec::dtypes::float32);
  auto p = gexec::ndarray::empty({16}, gexec::dtypes::float32);
  auto q = gexec::ndarray::empty({16}, gexec::dtypes::float32);
  std::vector<DLTensor> tensors;
  tensors.reserve(static_cast<std::size_t>(2 * n));
  std::vector<TVMValue> values(static_cast<std::size_t>(2 * n));
  std::vector<int> codes(static_cast<std::size_t>(2 * n), gexec::tc_dltensor);
  for (int i = 0; i < n; ++i) {
    const gexec::ndarray& in = i == 0 ? x : (i % 2 ? p : q);
    const gexec::ndarray& out = i % 2 ? q : p;
    tensors.push_back(in.dltensor());
    tensors.push_back(out.dltensor());
    values[static_cast<std::size_t>(2 * i)].v_handle = &tensors[static_cast<std::size_t>(2 * i)];
    values[static_cast<std::size_t>(2 * i + 1)].v_handle = &tensors[static_cast<std::size_t>(2 * i + 1)];
  }
  auto plain = [&] {
    for (int i = 0; i < n; ++i) {
      TVMValue ret;
      int ret_code = gexec::tc_null;
      if (fn(&values[static_cast<std::size_t>(2 * i)], &codes[static_cast<std::size_t>(2 * i)], 2, &ret, &ret_code, nullptr) != 0) std::abort();
    }
  };

  // Interleave so that both see the same machine state.
  double g = 1e9, base = 1e9;
  for (int round = 0; round < 3; ++round) {
    g = std::min(g, best_seconds([&] { ex.run(); }, n));
    base = std::min(base, best_seconds(plain, n));
  }
  return {g / n * 1e9, base / n * 1e9};
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes;
  for (int i = 1; i < argc; ++i) sizes.push_back(std::atoi(argv[i]));
  if (sizes.empty()) sizes = {1000, 10000, 100000};
  auto lib = gexec::load_module(GEXEC_TEST_KERNELS);
  std::printf("%-16s %8s %14s %14s %8s\n", "kernel", "nodes", "gexec ns/node", "plain ns/node", "ratio");
  for (const char* kernel : {"test_noop", "test_add_one_16"})
    for (int n : sizes) {
      row r = measure(lib, kernel, n);
      std::printf("%-16s %8d %14.2f %14.2f %8.3f\n", kernel, n, r.gexec_ns, r.plain_ns, r.gexec_ns / r.plain_ns);
    }
}
