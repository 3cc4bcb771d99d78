#include <gexec/executor.hpp>

#include <doctest/doctest.h>

#include "test_support.hpp"

#include <time.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <vector>

namespace {

/// The statistics of `r` are those of its results, and every result is a time.
void check_sane(const gexec::benchmark_result& r, std::size_t repeat) {
  REQUIRE(r.results.size() == repeat);
  for (double s : r.results) {
    CHECK(std::isfinite(s));
    CHECK(s >= 0);
    CHECK(s < 1e-3);  // a call of a kernel that does nothing takes far less than a millisecond
  }
  CHECK(r.min <= r.median);
  CHECK(r.median <= r.max);
  CHECK(r.mean >= r.min);
  CHECK(r.mean <= r.max);
  CHECK(std::isfinite(r.std));
}

}  // namespace

TEST_CASE("benchmark of an executor running a do-nothing kernel returns once min_repeat_ms is reached") {
  gexec::registry reg;
  int calls = 0;
  reg.add("nothing", [&calls](gexec::packed_args) { ++calls; });
  gexec::graph_builder b;
  b.output(b.op("n", "nothing", {b.input("x", {1})}, {{{1}}}));
  auto ex = gexec::create(b.build(), reg);
  ex.set_input("x", gexec::ndarray::empty({1}, gexec::dtypes::float32));
  const auto t0 = std::chrono::steady_clock::now();
  auto r = gexec::benchmark(ex, {.repeat = 2, .number = 5, .min_repeat_ms = 200});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  check_sane(r, 2);
  CHECK(r.min > 0);
  CHECK(seconds >= 0.4);  // each repeat lasted min_repeat_ms
  // Each repeat made (about) 200 ms worth of calls.
  CHECK(static_cast<double>(calls) * r.min >= 0.1);
}

TEST_CASE("a call too fast for the clock neither overflows the call count nor runs for ever") {
  // An empty callable: the optimiser removes the calls, so every measurement takes the
  // same few nanoseconds and the rate estimate runs towards infinity. Run in a child so
  // that a hang fails the test instead of stopping the suite.
#if defined(GEXEC_TEST_UNDER_TSAN)
  MESSAGE("fork() is not supported under ThreadSanitizer; skipped");
#else
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    auto r = gexec::benchmark([] {}, {.repeat = 3, .number = 5, .min_repeat_ms = 200});
    bool ok = r.results.size() == 3 && r.min >= 0 && r.min <= r.median && r.median <= r.max && std::isfinite(r.mean);
    for (double s : r.results) ok = ok && std::isfinite(s) && s >= 0 && s < 1e-3;
    // A large starting number and min_repeat_ms, as a caller may pass them.
    auto big = gexec::benchmark([] {}, {.repeat = 1, .number = 1 << 30, .min_repeat_ms = 2000});
    ok = ok && big.results.size() == 1 && std::isfinite(big.results[0]) && big.results[0] >= 0;
    _exit(ok ? 0 : 1);
  }
  CHECK(test::child_succeeded(child, std::chrono::seconds(60)));
#endif
}

TEST_CASE("benchmark with no repeats returns no results") {
  int calls = 0;
  auto r = gexec::benchmark([&] { ++calls; }, {.repeat = 0});
  CHECK(r.results.empty());
  CHECK(calls == 1);  // the warm-up
}

TEST_CASE("benchmark reports the first call, the CPU time per call and the peak resident memory") {
  // Each call burns at least 2 ms of this thread's CPU time (the clock of CPU time, not
  // of the wall, so a busy machine does not change it); the first also touches 64 MiB.
  auto thread_cpu = [] {
    timespec t{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
  };
  int calls = 0;
  std::vector<char> big;
  const gexec::benchmark_result r = gexec::benchmark(
      [&] {
        if (calls++ == 0) {
          big.assign(std::size_t{64} << 20, 1);
        }
        const double until = thread_cpu() + 2e-3;
        while (thread_cpu() < until) {
        }
      },
      {.repeat = 3, .number = 2});
  CHECK(calls == 1 + 3 * 2);
  CHECK(r.cpu_mean >= 2e-3);
  CHECK(std::isfinite(r.first));
  CHECK(r.first > 0);
  CHECK(r.peak_rss_bytes >= (std::uint64_t{64} << 20));
  CHECK(big.size() == (std::size_t{64} << 20));
}
