// Per-call time of Relax executables built by today's TVM (the Relax suite's libraries,
// tests/relax/make_models.sh): gexec's graph form of each function, gexec's interpreter
// over the same bytecode, and, as the baseline in the same run, TVM's own VM on the same
// library (benchmarks/relax/time_tvm_vm.py, run with the suite's TVM).
//
//   TVM_NUM_THREADS=N gexec_bench_relax SUITE_DIR [--tvm-python PYTHON]
//
// gexec and TVM both take their thread count from TVM_NUM_THREADS. Each figure is the
// median of 5 repeats of at least 50 ms (10 calls at least), as TVM's time_evaluator
// measures; a call is vm.run(function, inputs) with the inputs prepared, its outputs
// returned in a new vector (TVM's VM returns new objects too); "graph, kept" is the graph
// form called as vm.run(function, inputs, outputs), into a vector the loop keeps.

#include <gexec/benchmark.hpp>
#include <gexec/npz.hpp>
#include <gexec/relax.hpp>

#include <cstdio>
#include <cstdlib>
#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "../machine.hpp"

namespace fs = std::filesystem;

namespace {

struct bench_case {
  const char* name;
  const char* library;
  const char* function;
  const char* data;
  int inputs;
  const char* params;  // bound from this file, or null
};

constexpr bench_case cases[] = {
    {"tiny", "tiny.so", "main", "tiny.npz", 1, nullptr},
    {"mlp_constants", "mlp_constants.so", "main", "mlp_constants.npz", 1, nullptr},
    {"convnet_constants", "convnet_constants.so", "main", "convnet_constants.npz", 1, nullptr},
    {"nn_mlp/params", "nn_mlp.so", "forward", "nn_mlp.npz", 1, "nn_mlp.params"},
};

/// The median us of `call`, timed as TVM's time_evaluator times (number 10, repeat 5, 50 ms).
template <class F>
double median_us(F&& call) {
  gexec::benchmark_options opt;
  opt.number = 10;
  opt.repeat = 5;
  opt.min_repeat_ms = 50;
  return gexec::benchmark(std::forward<F>(call), opt).median * 1e6;
}

double median_us(gexec::relax::virtual_machine& vm, const char* function, const std::vector<gexec::ndarray>& inputs) {
  return median_us([&] { (void)vm.run(function, inputs); });
}

/// The same into a vector the loop keeps (vm.run(function, inputs, outputs)).
double median_kept_us(gexec::relax::virtual_machine& vm, const char* function, const std::vector<gexec::ndarray>& inputs) {
  std::vector<gexec::ndarray> outputs;
  return median_us([&] { vm.run(function, inputs, outputs); });
}

/// {case: median_us} from time_tvm_vm.py's JSON, read without a JSON library (its shape is fixed).
std::map<std::string, double> read_tvm_times(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  std::map<std::string, double> out;
  for (const bench_case& c : cases) {
    const std::string key = "\"" + std::string(c.name) + "\": {\"median_us\": ";
    const auto at = text.find(key);
    if (at != std::string::npos) out[c.name] = std::strtod(text.c_str() + at + key.size(), nullptr);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: gexec_bench_relax SUITE_DIR [--tvm-python PYTHON]\n");
    return 2;
  }
  const fs::path suite = argv[1];
  std::string tvm_python;
  for (int i = 2; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--tvm-python") tvm_python = argv[i + 1];
  if (!fs::exists(suite / "manifest.txt")) {
    std::printf("gexec_bench_relax: SKIPPED (no Relax suite in %s)\n", suite.c_str());
    return 0;
  }
  const char* threads = std::getenv("TVM_NUM_THREADS");
  std::map<std::string, double> tvm;
  if (!tvm_python.empty()) {
    const fs::path out = fs::temp_directory_path() / ("gexec_bench_relax_" + std::to_string(::getpid()) + ".json");
    std::string cmd = "'" + tvm_python + "' '" + std::string(GEXEC_SOURCE_DIR) + "/benchmarks/relax/time_tvm_vm.py' '" + suite.string() + "' '" + out.string() + "'";
    for (const bench_case& c : cases) cmd += std::string(" '") + c.name + "'";
    if (std::system(cmd.c_str()) == 0) tvm = read_tvm_times(out);
    else std::printf("gexec_bench_relax: TVM's VM could not be timed (%s)\n", cmd.c_str());
    fs::remove(out);
  }
  std::printf("Relax executables, per call (median us), %s thread(s), load %s:\n", threads ? threads : "default", bench::load_average().c_str());
  std::printf("  %-18s %12s %12s %12s %10s %10s %12s %10s\n", "case", "gexec graph", "interpreter", "TVM VM", "graph/TVM", "interp/TVM", "graph, kept", "kept/TVM");
  for (const bench_case& c : cases) {
    std::map<std::string, gexec::ndarray> arrays;
    for (auto& [n, a] : gexec::load_npz_file(suite / c.data)) arrays.emplace(n, a);
    std::vector<gexec::ndarray> inputs;
    for (int i = 0; i < c.inputs; ++i) inputs.push_back(arrays.at("in" + std::to_string(i)));
    gexec::relax::executable_options graph_opts, interp_opts;
    interp_opts.graphs = false;
    auto load = [&](gexec::relax::executable_options o) {
      return c.params ? gexec::relax::load_executable(suite / c.library, suite / c.params, std::move(o))
                      : gexec::relax::load_executable(suite / c.library, std::move(o));
    };
    const auto graph_exe = load(graph_opts);
    const auto interp_exe = load(interp_opts);
    gexec::relax::virtual_machine graph_vm(graph_exe), interp_vm(interp_exe);
    const char* form = graph_exe.graph_of(c.function) ? "" : " (interpreted)";
    const double g = median_us(graph_vm, c.function, inputs);
    const double i = median_us(interp_vm, c.function, inputs);
    const double k = median_kept_us(graph_vm, c.function, inputs);
    const auto t = tvm.find(c.name);
    if (t == tvm.end())
      std::printf("  %-18s %12.3f %12.3f %12s %10s %10s %12.3f %10s%s\n", c.name, g, i, "-", "-", "-", k, "-", form);
    else
      std::printf("  %-18s %12.3f %12.3f %12.3f %10.3f %10.3f %12.3f %10.3f%s\n", c.name, g, i, t->second, g / t->second, i / t->second, k,
                  k / t->second, form);
  }
  return 0;
}
