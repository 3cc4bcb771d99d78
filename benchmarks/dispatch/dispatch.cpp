// Dispatch overhead: a chain of N nodes, each one kernel call, run by gexec and, as
// the baseline in the same process, by a plain loop calling the same function
// pointers with prebuilt arguments over the same two ping-pong buffers. Kernels of
// both ABIs: packed C (the sample kernels) and TVM-FFI (TVM >= 0.21), whose plain loop
// calls __tvm_ffi_<name> with prebuilt TVMFFIAny arguments, as TVM-FFI callers do.
//
//   gexec_bench_dispatch [--tvm-ffi-lib LIB.so] [N...]      (default N: 1000 10000 100000)
//
// LIB.so: a library today's TVM compiled with a kernel add_one_16 (float32[16] -> +1),
// as tests/tvm_ffi/make_kernels.sh builds one (build/tvm_ffi/kernels.so).
// Prints ns per node for both and their ratio (gexec / plain loop).

#include <gexec/executor.hpp>

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
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

/// The kernel the plain loop calls, in the library's own ABI.
struct plain_kernel {
  gexec::packed_c_func packed = nullptr;
  gexec::tvm_ffi_safe_call ffi = nullptr;
};

plain_kernel plain_kernel_of(const gexec::module& lib, const char* kernel) {
  plain_kernel k;
  if (!lib.tvm_ffi()) {
    k.packed = lib.get_function(kernel).fn;
    return k;
  }
  void* handle = dlopen(lib.path().c_str(), RTLD_LAZY | RTLD_NOLOAD);  // the loaded library, not a second copy
  if (handle) k.ffi = reinterpret_cast<gexec::tvm_ffi_safe_call>(dlsym(handle, (std::string("__tvm_ffi_") + kernel).c_str()));
  if (!k.ffi) {
    std::fprintf(stderr, "gexec_bench_dispatch: %s has no __tvm_ffi_%s\n", lib.path().c_str(), kernel);
    std::exit(1);
  }
  return k;
}

row measure(const gexec::module& lib, const char* kernel, int n) {
  // The graph as TVM's planner would lay out a chain: two storages used in turn.
  gexec::graph_builder b;
  gexec::node_entry prev = b.input("x", {16});
  for (int i = 0; i < n; ++i) prev = b.op("n" + std::to_string(i), kernel, {prev}, {{{16}, gexec::dtypes::float32, 0, 1 + i % 2}});
  b.output(prev);
  auto ex = gexec::create(b.build(), lib);
  ex.set_input("x", gexec::ndarray::empty({16}, gexec::dtypes::float32));

  // Baseline: the same calls, arguments prebuilt, no executor.
  const plain_kernel fn = plain_kernel_of(lib, kernel);
  auto x = gexec::ndarray::empty({16}, gexec::dtypes::float32);
  auto p = gexec::ndarray::empty({16}, gexec::dtypes::float32);
  auto q = gexec::ndarray::empty({16}, gexec::dtypes::float32);
  const auto slots = static_cast<std::size_t>(2 * n);
  std::vector<DLTensor> tensors;
  tensors.reserve(slots);
  std::vector<TVMValue> values(slots);
  std::vector<int> codes(slots, gexec::tc_dltensor);
  std::vector<TVMFFIAny> ffi_values(slots);
  for (int i = 0; i < n; ++i) {
    const gexec::ndarray& in = i == 0 ? x : (i % 2 ? p : q);
    const gexec::ndarray& out = i % 2 ? q : p;
    tensors.push_back(in.dltensor());
    tensors.push_back(out.dltensor());
  }
  for (std::size_t s = 0; s < slots; ++s) {
    values[s].v_handle = &tensors[s];
    ffi_values[s].type_index = gexec::ffi_dltensor_ptr;
    ffi_values[s].zero_padding = 0;
    ffi_values[s].v_ptr = &tensors[s];
  }
  auto plain = [&] {
    if (fn.ffi) {
      for (int i = 0; i < n; ++i) {
        TVMFFIAny result;
        result.type_index = gexec::ffi_none;
        if (fn.ffi(nullptr, &ffi_values[static_cast<std::size_t>(2 * i)], 2, &result) != 0) std::abort();
      }
      return;
    }
    for (int i = 0; i < n; ++i) {
      TVMValue ret;
      int ret_code = gexec::tc_null;
      if (fn.packed(&values[static_cast<std::size_t>(2 * i)], &codes[static_cast<std::size_t>(2 * i)], 2, &ret, &ret_code, nullptr) != 0)
        std::abort();
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
  const char* tvm_ffi_lib = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--tvm-ffi-lib") == 0 && i + 1 < argc) tvm_ffi_lib = argv[++i];
    else sizes.push_back(std::atoi(argv[i]));
  }
  if (sizes.empty()) sizes = {1000, 10000, 100000};
  struct subject {
    gexec::module lib;
    const char* abi;
    const char* kernel;
  };
  std::vector<subject> subjects;
  auto packed = gexec::load_module(GEXEC_TEST_KERNELS);
  auto ffi = gexec::load_module(GEXEC_TEST_FFI);
  subjects.push_back({packed, "packed C", "test_noop"});
  subjects.push_back({packed, "packed C", "test_add_one_16"});
  subjects.push_back({ffi, "TVM-FFI", "ffi_noop"});
  subjects.push_back({ffi, "TVM-FFI", "ffi_add_one"});
  if (tvm_ffi_lib) subjects.push_back({gexec::load_module(tvm_ffi_lib), "TVM-FFI (TVM)", "add_one_16"});
  std::printf("%-14s %-16s %8s %14s %14s %8s\n", "abi", "kernel", "nodes", "gexec ns/node", "plain ns/node", "ratio");
  for (const subject& s : subjects)
    for (int n : sizes) {
      row r = measure(s.lib, s.kernel, n);
      std::printf("%-14s %-16s %8d %14.2f %14.2f %8.3f\n", s.abi, s.kernel, n, r.gexec_ns, r.plain_ns, r.gexec_ns / r.plain_ns);
    }
}
