// gexec against TVM's own graph executor on the conformance models
// (tests/conformance/make_models.sh), both timed in the same run on the same machine:
// benchmarks/tvm_models/run.sh measures TVM with time_tvm.py, then runs this.
//
//   gexec_bench_tvm_models CONFORMANCE_DIR TVM_TIMES_JSON
//
// Per model: the split form (graph.json + lib.so + params.bin) is created, given the
// conformance inputs and timed with gexec::benchmark(ex, {.repeat = 5, .number = 10,
// .min_repeat_ms = 50}), TVM's time_evaluator settings in time_tvm.py. The table gives
// ms per run(), mean and median, and the ratio gexec / TVM of the means; and how long
// the single file takes to become an executor (load_factory + create) and the split
// form (load_module + create + load_params_file). Correctness is the conformance
// test's job (test_conformance). Threads: GEXEC_NUM_THREADS, else TVM_NUM_THREADS,
// else the number of cores.

#include <boost/json.hpp>

#include <gexec/executor.hpp>
#include <gexec/load.hpp>

#include <gexec/contrib/sort.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

json::value read_json(const fs::path& path) { return json::parse(read_text(path)); }

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s CONFORMANCE_DIR TVM_TIMES_JSON\n", argv[0]);
    return 2;
  }
  const fs::path dir = argv[1];
  if (fs::exists(dir / "SKIPPED")) {
    std::printf("no models: %s", read_text(dir / "SKIPPED").c_str());
    return 0;
  }
  gexec::contrib::register_sort_functions();

  int failures = 0;
  try {
    json::value manifest = read_json(dir / "manifest.json");
    const json::object tvm_times = read_json(argv[2]).at("models").as_object();
    std::printf("TVM %s; gexec thread pool: %d threads\n", json::value_to<std::string>(manifest.at("tvm_version")).c_str(),
                gexec::runtime::global().num_threads());
    std::printf("run(): ms per call, both timed here with repeat 5, number 10, min_repeat_ms 50\n\n");
    std::printf("%-14s %12s %12s %12s %12s %10s %15s %14s\n", "model", "gexec mean", "gexec median", "TVM mean", "TVM median",
                "gexec/TVM", "single load ms", "split load ms");
    for (const json::value& entry : manifest.at("models").as_array()) {
      const std::string name = json::value_to<std::string>(entry);
      const fs::path mdir = dir / name;
      try {
        json::object info = read_json(mdir / "info.json").as_object();
        gexec::param_dict inputs = gexec::load_param_dict_file(mdir / "inputs.bin");

        auto t0 = std::chrono::steady_clock::now();
        double single_ms;
        {
          gexec::factory f = gexec::load_factory(mdir / "model.so");
          auto single = f.create();
          single_ms = ms_since(t0);
        }

        t0 = std::chrono::steady_clock::now();
        gexec::module lib = gexec::load_module(mdir / "lib.so");
        auto ex = gexec::create(read_text(mdir / "graph.json"), lib, {gexec::cpu()});
        ex.load_params_file(mdir / "params.bin");
        const double split_ms = ms_since(t0);

        for (const json::value& input : info.at("input_names").as_array()) {
          const std::string input_name = json::value_to<std::string>(input);
          ex.set_input(input_name, inputs.at(input_name));
        }
        gexec::benchmark_result r = gexec::benchmark(ex, {.repeat = 5, .number = 10, .min_repeat_ms = 50});
        if (const json::value* t = tvm_times.if_contains(name)) {
          const double tvm_mean = t->at("mean_ms").to_number<double>(), tvm_median = t->at("median_ms").to_number<double>();
          std::printf("%-14s %12.6f %12.6f %12.6f %12.6f %10.2f %15.2f %14.2f\n", name.c_str(), r.mean * 1e3, r.median * 1e3,
                      tvm_mean, tvm_median, r.mean * 1e3 / tvm_mean, single_ms, split_ms);
        } else {
          std::printf("%-14s %12.6f %12.6f %12s %12s %10s %15.2f %14.2f\n", name.c_str(), r.mean * 1e3, r.median * 1e3, "-", "-", "-",
                      single_ms, split_ms);
        }
      } catch (const std::exception& e) {
        ++failures;
        std::printf("%-14s failed: %s\n", name.c_str(), e.what());
      }
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return failures ? 1 : 0;
}
