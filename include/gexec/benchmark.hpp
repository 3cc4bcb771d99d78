#pragma once
// gexec::benchmark: TVM's time evaluator (module.benchmark / time_evaluator) for
// anything with a run() member, or any callable: one warm-up call, then `repeat`
// measurements of `number` calls each, growing `number` until a measurement lasts
// at least `min_repeat_ms`. Beside the wall time per call: the first (cold) call's time,
// the process's CPU time per call (all its threads: on a busy machine wall time alone
// misleads), and its peak resident memory, as LiteRT's benchmark reports them.

#include "config.hpp"

#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "detail/clock.hpp"

GEXEC_NAMESPACE_BEGIN

struct benchmark_options {
  int repeat = 5;
  int number = 5;
  int min_repeat_ms = 0;
  int limit_zero_time_iterations = 100;
  int cooldown_interval_ms = 0;
  int repeats_to_cooldown = 1;
};

/// Seconds per call, one figure per repeat, and their statistics (std is the population's).
struct benchmark_result {
  std::vector<double> results;
  double mean = 0, median = 0, std = 0, min = 0, max = 0;
  double first = 0;    ///< seconds of the first call (the warm-up, cold caches and pages)
  double cpu_mean = 0; ///< the process's CPU seconds (user + system, every thread) per measured call
  std::uint64_t peak_rss_bytes = 0;  ///< the process's peak resident memory when the measurement ended
};

namespace detail {
/// CPU seconds this process has used, all its threads, user and system.
inline double process_cpu_seconds() noexcept {
  timespec t{};
  if (::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t) != 0) return 0;
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}
/// The process's peak resident memory so far, in bytes (0 where the system does not say).
inline std::uint64_t peak_rss_bytes() noexcept {
  rusage u{};
  if (::getrusage(RUSAGE_SELF, &u) != 0 || u.ru_maxrss < 0) return 0;
  return static_cast<std::uint64_t>(u.ru_maxrss) * 1024;  // Linux: KiB
}

/// Fills the mean, median, deviation, min and max of r.results.
GEXEC_DECL void summarize(benchmark_result& r);
}  // namespace detail

template <class F>
  requires std::is_invocable_v<F&>
benchmark_result benchmark(F&& f, benchmark_options opt = {}) {
  benchmark_result r;
  const std::int64_t first_start = detail::monotonic_ns();
  f();  // warm-up, as TVM's time evaluator does
  r.first = static_cast<double>(detail::monotonic_ns() - first_start) * 1e-9;
  const double cpu_start = detail::process_cpu_seconds();
  double calls = 0;
  // Calls per measurement, in 64 bits and capped: a call too fast for the clock (or one
  // the compiler removed) makes the estimate below huge or infinite, and growing `number`
  // must neither overflow nor go on for ever. A measurement made at the cap is the last
  // of its repeat, however short it was.
  constexpr std::int64_t max_number = std::int64_t{1} << 40;
  std::int64_t number = std::clamp<std::int64_t>(opt.number, 1, max_number);
  for (int i = 0; i < opt.repeat; ++i) {
    double ms = 0;
    int zero_times = 0;
    bool at_cap = false;
    do {
      if (ms > 0) {
        // TVM's rule: enough calls for min_repeat_ms at the last rate, and at least 1.618x more.
        const double per_call_ms = ms / static_cast<double>(number);
        const double wanted = std::max(opt.min_repeat_ms / per_call_ms + 1, static_cast<double>(number) * 1.618);
        number = wanted >= static_cast<double>(max_number) ? max_number
                                                           : std::max(number + 1, static_cast<std::int64_t>(wanted));
      }
      at_cap = number >= max_number;
      const std::int64_t t0 = detail::monotonic_ns();
      for (std::int64_t j = 0; j < number; ++j) f();
      ms = static_cast<double>(detail::monotonic_ns() - t0) * 1e-6;
      calls += static_cast<double>(number);
      if (ms == 0) ++zero_times;
    } while (ms < opt.min_repeat_ms && zero_times < opt.limit_zero_time_iterations && !at_cap);
    r.results.push_back(ms / 1e3 / static_cast<double>(number));
    // TVM's time evaluator pauses after measurement i when i % repeats_to_cooldown == 0:
    // after the first, and after the last too (its callers and tests time that).
    if (opt.cooldown_interval_ms > 0 && opt.repeats_to_cooldown > 0 && i % opt.repeats_to_cooldown == 0)
      detail::sleep_ns(std::int64_t{opt.cooldown_interval_ms} * 1'000'000);
  }
  if (calls > 0) r.cpu_mean = (detail::process_cpu_seconds() - cpu_start) / calls;
  r.peak_rss_bytes = detail::peak_rss_bytes();
  detail::summarize(r);
  return r;
}

/// Benchmarks an executor's run().
template <class Executor>
  requires requires(Executor& ex) { ex.run(); }
benchmark_result benchmark(Executor& ex, benchmark_options opt = {}) {
  return benchmark([&ex] { ex.run(); }, opt);
}

GEXEC_NAMESPACE_END

#if GEXEC_HEADER_ONLY()
#include "benchmark_impl.hpp"
#endif
