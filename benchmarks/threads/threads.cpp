// run() time of one model on a runtime with 1 thread (the baseline) and on a runtime
// with N threads, both measured in the same run, interleaved.
//
//   gexec_bench_threads [--threads N] [CONFORMANCE_DIR]      (N defaults to 2)
//
// Workloads: compute-bound (test_parallel_heavy over 128K floats, 4 nodes), tiny
// (test_parallel_scale2 over 64 floats, 10 nodes: per-launch overhead dominates), and
// with CONFORMANCE_DIR each model of its manifest (graph.json + lib.so + params.bin,
// inputs from inputs.bin). Prints the median time per run() for each runtime, the ratio
// N-thread / 1-thread, the targets for the cores this process may use, and how busy
// other processes kept the machine meanwhile (figures taken beside them are not clean).

#include <boost/json.hpp>

#include <gexec/executor.hpp>

#include "../machine.hpp"

#include <gexec/contrib/sort.hpp>

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

using executor = gexec::graph_executor<>;

// Builds the workload's executor on the given runtime.
struct workload {
  std::string name;
  std::function<executor(std::shared_ptr<gexec::runtime>)> make;
  bool compute_bound = false;
  int launches = 0;  // per run, where overhead per launch is the figure
};

struct timing {
  double one_s, n_s;
};

double seconds_for(executor& ex, int number) {
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < number; ++i) ex.run();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Repeats of `number` runs, alternating the two runtimes so both see the same machine;
// about `budget_s` in all, whichever is slower.
timing measure(executor& one, executor& n, double budget_s) {
  one.run();
  n.run();
  double t = std::max(seconds_for(one, 1), seconds_for(n, 1));
  int number = std::max(1, static_cast<int>(0.02 / t));
  const double pair = (seconds_for(one, number) + seconds_for(n, number)) / number;
  number = std::max(1, static_cast<int>(0.04 / pair));
  const int repeats = std::clamp(static_cast<int>(budget_s / (number * pair)), 5, 51);
  std::vector<double> a, b;
  for (int r = 0; r < repeats; ++r) {
    a.push_back(seconds_for(one, number) / number);
    b.push_back(seconds_for(n, number) / number);
  }
  return {bench::median(a), bench::median(b)};
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

gexec::model_options on(std::shared_ptr<gexec::runtime> rt) {
  gexec::model_options o;
  o.runtime = std::move(rt);
  return o;
}

// A chain of `nodes` calls of `kernel` over `n` floats, two storages used in turn.
workload chain(std::string name, const gexec::module& lib, const char* kernel, std::int64_t n, int nodes) {
  gexec::graph_builder b;
  gexec::node_entry prev = b.input("x", {n});
  for (int i = 0; i < nodes; ++i) prev = b.op("n" + std::to_string(i), kernel, {prev}, {{{n}, gexec::dtypes::float32, 0, 1 + i % 2}});
  b.output(prev);
  gexec::validated_graph g = b.build();
  auto x = gexec::ndarray::empty({n}, gexec::dtypes::float32);
  for (float& v : x.values<float>()) v = 0.25f;
  return {std::move(name), [lib, g, x](std::shared_ptr<gexec::runtime> rt) {
            executor ex = gexec::model(g, gexec::packed_c_abi(lib), on(std::move(rt))).instantiate();
            ex.set_input("x", x);
            return ex;
          }};
}

workload conformance_model(const fs::path& dir, const std::string& name) {
  const fs::path m = dir / name;
  json::object info = json::parse(read_text(m / "info.json")).as_object();
  gexec::validated_graph g = gexec::load_graph_file(m / "graph.json");
  gexec::module lib = gexec::load_module(m / "lib.so");
  gexec::param_dict params = gexec::load_param_dict_file(m / "params.bin");
  gexec::param_dict all_inputs = gexec::load_param_dict_file(m / "inputs.bin");
  std::vector<std::pair<std::string, gexec::ndarray>> inputs;
  for (const json::value& v : info.at("input_names").as_array()) {
    std::string input(v.as_string());
    inputs.emplace_back(input, all_inputs.at(input));
  }
  return {name, [g, lib, params, inputs](std::shared_ptr<gexec::runtime> rt) {
            executor ex = gexec::model(g, gexec::packed_c_abi(lib), params, on(std::move(rt))).instantiate();
            for (const auto& [input, value] : inputs) ex.set_input(input, value);
            return ex;
          }};
}

// Round trip of a cache line between two threads pinned to the first two usable cores,
// in seconds. On the development VM it moves between about 90 and 420 ns as the host
// places the virtual CPUs, and a launch's overhead moves with it.
double core_round_trip() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0 || CPU_COUNT(&set) < 2) return 0;
  int cpu[2], found = 0;
  for (int c = 0; c < CPU_SETSIZE && found < 2; ++c)
    if (CPU_ISSET(c, &set)) cpu[found++] = c;
  auto pin = [](int c) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(c, &one);
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
  };
  constexpr int rounds = 100000;
  alignas(64) std::atomic<int> line{0};
  std::thread echo([&] {
    pin(cpu[1]);
    for (int i = 0; i < rounds; ++i) {
      while (line.load(std::memory_order_acquire) != 2 * i + 1) {
      }
      line.store(2 * i + 2, std::memory_order_release);
    }
  });
  pin(cpu[0]);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < rounds; ++i) {
    line.store(2 * i + 1, std::memory_order_release);
    while (line.load(std::memory_order_acquire) != 2 * i + 2) {
    }
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / rounds;
  echo.join();
  sched_setaffinity(0, sizeof set, &set);  // the benchmark itself runs unpinned
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2;
  fs::path dir;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (argv[i][0] == '-') {
      std::fprintf(stderr, "usage: %s [--threads N] [CONFORMANCE_DIR]\n", argv[0]);
      return 2;
    } else {
      dir = argv[i];
    }
  }
  if (threads < 1) {
    std::fprintf(stderr, "--threads must be at least 1\n");
    return 2;
  }
  const int cores = bench::usable_cores();
  const char* env = std::getenv("GEXEC_NUM_THREADS");
  std::printf("runtime of 1 thread (baseline) vs runtime of %d threads; cores this process may use: %d; GEXEC_NUM_THREADS=%s; load average: %s\n",
              threads, cores, env ? env : "(unset)", bench::load_average().c_str());
  const double round_trip = core_round_trip();
  if (round_trip > 0) std::printf("cross-core round trip (two pinned threads, one cache line): %.0f ns\n", round_trip * 1e9);

  int failures = 0;
  std::vector<workload> work;
  try {
    gexec::module lib = gexec::load_module(GEXEC_TEST_KERNELS);
    // 128K floats, not 1M: the kernel's 256-step chain does not vectorize, and 1M floats
    // take 350 ms a node on one thread here, too long for the time budget.
    work.push_back(chain("compute-bound (heavy, 128K floats, 4 nodes)", lib, "test_parallel_heavy", 1 << 17, 4));
    work.back().compute_bound = true;
    work.push_back(chain("tiny (scale2, 64 floats, 10 nodes)", lib, "test_parallel_scale2", 64, 10));
    work.back().launches = 10;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gexec_bench_threads: %s\n", e.what());
    return 1;
  }
  if (dir.empty()) {
    std::printf("conformance models skipped: no directory given\n");
  } else if (!fs::exists(dir / "manifest.json")) {
    std::printf("conformance models skipped: no manifest.json in %s\n", dir.string().c_str());
  } else {
    gexec::contrib::register_sort_functions();
    const json::value manifest = json::parse(read_text(dir / "manifest.json"));
    for (const json::value& v : manifest.at("models").as_array()) {
      const std::string name(v.as_string());
      try {
        work.push_back(conformance_model(dir, name));
      } catch (const std::exception& e) {
        ++failures;
        std::printf("%s: cannot load: %s\n", name.c_str(), e.what());
      }
    }
  }

  const bool one_core = cores == 1;
  std::printf("\nmedian time per run(), microseconds; others: cores other processes kept busy meanwhile\n%-44s %12s %12s %10s %7s  %s\n",
              "workload", "1 thread", (std::to_string(threads) + " threads").c_str(), (std::to_string(threads) + "/1").c_str(), "others",
              "target");
  auto rt1 = gexec::runtime::create({.num_threads = 1});
  auto rtn = gexec::runtime::create({.num_threads = threads});
  for (const workload& w : work) {
    try {
      executor one = w.make(rt1), n = w.make(rtn);
      const bench::ticks t0 = bench::read_ticks();
      const auto w0 = std::chrono::steady_clock::now();
      const timing t = measure(one, n, 1.5);
      const bench::ticks t1 = bench::read_ticks();
      const double wall_ticks = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count() * static_cast<double>(sysconf(_SC_CLK_TCK));
      const double others = static_cast<double>((t1.machine - t0.machine) - (t1.own - t0.own)) / wall_ticks;
      const double ratio = t.n_s / t.one_s;
      std::string target;
      if (one_core) {
        target = std::string(ratio <= 1.5 ? "met" : "MISSED") + " (<= 1.5x on one core)";
      } else if (w.compute_bound && threads >= 2 && cores >= 2) {
        const double speedup = t.one_s / t.n_s;
        char s[64];
        std::snprintf(s, sizeof s, "%s (speed-up %.2fx, >= 1.6x)", speedup >= 1.6 ? "met" : "MISSED", speedup);
        target = s;
      }
      if (others > 0.2) {
        target += target.empty() ? "" : "; ";
        target += "disturbed, re-run";
      }
      std::printf("%-44s %12.3f %12.3f %10.3f %7.2f  %s\n", w.name.c_str(), t.one_s * 1e6, t.n_s * 1e6, ratio, others, target.c_str());
      if (w.launches > 0) {
        const double extra = (t.n_s - t.one_s) / w.launches;
        std::printf("  (%.3f us more per launch on %d threads than on 1", extra * 1e6, threads);
        if (round_trip > 0 && !one_core) std::printf(" = %.1f cross-core round trips", extra / round_trip);
        std::printf(")\n");
      }
    } catch (const std::exception& e) {
      ++failures;
      std::printf("%-44s failed: %s\n", w.name.c_str(), e.what());
    }
    std::fflush(stdout);
  }
  std::printf("\ntargets: 2 threads on 2 free cores: speed-up >= 1.6x on compute-bound");
  if (one_core) std::printf("; 2 threads confined to one core: <= 1.5x the 1-thread time");
  std::printf("\n");
  return failures ? 1 : 0;
}
