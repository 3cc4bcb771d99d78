// The smallest useful static deployment: one embedded model (gexec_add_model), run once
// on zero inputs. Its weights are read where the program holds them (static_model: in
// place where the embedded blob was written aligned, copied once otherwise). Prints
// the first output element, then what the run held:
//
//   first output: <value>
//   params_bytes <embedded blob> weights_in_place <bytes> weights_copied <bytes> storage_bytes <executor storage> max_rss_kib <ru_maxrss> load_ms <model + executor> run_ms <run()>
//
// benchmarks/footprint/run.sh measures its size, its resident memory and the time from
// exec to the first line.

#include <gexec/executor.hpp>
#include <gexec/static_model.hpp>

#include <gexec_models/model.hpp>

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>

int main() {
  try {
    using clock = std::chrono::steady_clock;
    const auto ms = [](clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
    const clock::time_point start = clock::now();
    const auto m = gexec::static_model(gexec_models::model::graph_json(), gexec_models::model::params());
    auto ex = m.instantiate();
    for (const gexec::tensor_info& in : ex.get_input_info()) {
      if (m.param(in.name).defined()) continue;
      gexec::ndarray zeros = gexec::ndarray::empty(in.shape, in.dtype, gexec::cpu());
      std::memset(zeros.data(), 0, zeros.byte_size());
      ex.set_input(in.name, zeros);
    }
    const clock::time_point loaded = clock::now();
    ex.run();
    const clock::time_point ran = clock::now();
    const gexec::ndarray& out = ex.get_output(0);
    float first = 0;
    std::memcpy(&first, out.data(), sizeof first);
    std::printf("first output: %g\n", static_cast<double>(first));
    std::fflush(stdout);
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    std::printf("params_bytes %zu weights_in_place %llu weights_copied %llu storage_bytes %llu max_rss_kib %ld load_ms %.3f run_ms %.3f\n",
                gexec_models::model::params().size(), static_cast<unsigned long long>(m.weights().in_place_bytes),
                static_cast<unsigned long long>(m.weights().copied_bytes), static_cast<unsigned long long>(ex.storage_bytes()), usage.ru_maxrss,
                ms(loaded - start), ms(ran - loaded));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "footprint runner: %s\n", e.what());
    return 1;
  }
}
