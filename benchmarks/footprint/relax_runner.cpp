// The smallest useful static deployment of a Relax model (TVM >= 0.21): one model's
// objects linked in (gexec_add_relax_model: lib0.o's kernels, devc.o's executable), its
// function "main" run once on zero inputs through the executable of
// gexec::system_module(), as a gexec graph. Prints the first output element, then what
// the run took:
//
//   first output: <value>
//   max_rss_kib <ru_maxrss> load_ms <load_executable + virtual_machine> run_ms <the first run>
//
// benchmarks/footprint/run.sh measures its size and the time from exec to the first line.

#include <gexec/library/system_module.hpp>
#include <gexec/relax.hpp>

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <vector>

int main() {
  try {
    using clock = std::chrono::steady_clock;
    const auto ms = [](clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
    const clock::time_point start = clock::now();
    const gexec::relax::executable exe = gexec::relax::load_executable(gexec::system_module());
    const gexec::relax::graph_program* g = exe.graph_of("main");
    if (!g) {
      std::fprintf(stderr, "footprint relax runner: main is interpreted (%s), not a graph\n", exe.interpreted_because("main").c_str());
      return 1;
    }
    gexec::relax::virtual_machine vm(exe);
    std::vector<gexec::ndarray> inputs;
    for (std::size_t i = 0; i < g->function.inputs.size(); ++i) {
      gexec::ndarray zeros = gexec::ndarray::empty(g->function.input_shapes[i], g->function.input_dtypes[i]);
      std::memset(zeros.data(), 0, zeros.byte_size());
      inputs.push_back(std::move(zeros));
    }
    const clock::time_point loaded = clock::now();
    const std::vector<gexec::ndarray> out = vm.run("main", inputs);
    const clock::time_point ran = clock::now();
    float first = 0;
    std::memcpy(&first, out.at(0).data(), sizeof first);
    std::printf("first output: %g\n", static_cast<double>(first));
    std::fflush(stdout);
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    std::printf("max_rss_kib %ld load_ms %.3f run_ms %.3f\n", usage.ru_maxrss, ms(loaded - start), ms(ran - loaded));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "footprint relax runner: %s\n", e.what());
    return 1;
  }
}
