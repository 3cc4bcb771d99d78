// Time per TVMBackendParallelLaunch-style launch on a pool of 1 thread (the baseline)
// and on a pool of N threads (--threads N, default 2), for a tiny lambda (~400 ns of
// arithmetic: launch overhead dominates) and a compute-bound one (~2 ms), each split
// over the launch's tasks; the amounts are calibrated on one thread at start. Each figure is the median of several repeats; the pools alternate so that
// both see the same machine.

#include <gexec/runtime/thread_pool.hpp>

#include "../machine.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

using gexec::detail::thread_pool;

// Written only by whichever thread runs the task, on a cache line of its own.
struct alignas(64) partial {
  std::uint64_t value = 0;
  long runs = 0, on_launcher = 0;
};

struct work {
  std::int64_t iterations = 0;  // split over the tasks
  std::thread::id launcher;
  std::vector<partial> out;  // one per task
};

// A dependent chain the compiler can neither fold nor vectorise (the shift makes it
// non-linear); its result is stored and printed.
int kernel(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  auto& w = *static_cast<work*>(cdata);
  const std::int64_t n = penv->num_task;
  const std::int64_t begin = w.iterations * task_id / n, end = w.iterations * (task_id + 1) / n;
  std::uint64_t x = static_cast<std::uint64_t>(begin) | 1;
  for (std::int64_t i = begin; i < end; ++i) {
    x ^= x >> 29;
    x = x * 6364136223846793005ull + static_cast<std::uint64_t>(i);
  }
  partial& p = w.out[static_cast<std::size_t>(task_id)];
  p.value = x;
  ++p.runs;
  if (std::this_thread::get_id() == w.launcher) ++p.on_launcher;
  return 0;
}

double seconds_per_launch(thread_pool& pool, work& w, int launches) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < launches; ++i)
    if (pool.launch(&kernel, &w, 0) != 0) std::abort();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / launches;
}

/// Iterations that take about `seconds` on one thread.
std::int64_t calibrate(double seconds) {
  thread_pool serial(1);
  work w;
  w.iterations = 1 << 20;
  w.out.resize(1);
  double best = 1e9;
  for (int r = 0; r < 5; ++r) best = std::min(best, seconds_per_launch(serial, w, 4));
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(seconds / best * static_cast<double>(w.iterations)));
}

void compare(const char* name, thread_pool& one, thread_pool& many, std::int64_t iterations, int launches, int repeats) {
  work w;
  w.iterations = iterations;
  w.out.resize(static_cast<std::size_t>(many.max_concurrency()));
  w.launcher = std::this_thread::get_id();
  seconds_per_launch(one, w, launches / 10 + 1);  // warm up, start the workers
  seconds_per_launch(many, w, launches / 10 + 1);
  std::vector<double> t1, tn;
  for (int r = 0; r < repeats; ++r) {
    t1.push_back(seconds_per_launch(one, w, launches));
    tn.push_back(seconds_per_launch(many, w, launches));
  }
  std::uint64_t sink = 0;
  long runs = 0, on_launcher = 0;  // of tasks 1.., which the launcher ran itself
  for (const partial& p : w.out) sink ^= p.value;
  for (std::size_t t = 1; t < w.out.size(); ++t) {
    runs += w.out[t].runs;
    on_launcher += w.out[t].on_launcher;
  }
  const double a = bench::median(t1), b = bench::median(tn);
  std::printf("%-14s %8lld iterations: 1 thread %9.3f us   %d threads %9.3f us   ratio %.3f   (%.0f%% of tasks 1.. run by the launcher; checksum %llx)\n",
              name, static_cast<long long>(iterations), a * 1e6, many.num_threads(), b * 1e6, b / a,
              runs ? 100.0 * static_cast<double>(on_launcher) / static_cast<double>(runs) : 0.0,
              static_cast<unsigned long long>(sink & 0xfff));
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--threads N]\n", argv[0]);
      return 2;
    }
  }
  if (threads < 1) threads = 1;
  thread_pool one(1), many(threads);
  std::printf("available cores %d; pool of %d threads: max_concurrency %d\n", gexec::detail::available_cores(), threads,
              many.max_concurrency());
  compare("tiny", one, many, calibrate(400e-9), 20000, 9);
  compare("compute-bound", one, many, calibrate(2e-3), 100, 7);
  return 0;
}
