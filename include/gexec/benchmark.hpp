#pragma once
// gexec::benchmark: TVM's time evaluator (module.benchmark / time_evaluator) for
// anything with a run() member, or any callable: one warm-up call, then `repeat`
// measurements of `number` calls each, growing `number` until a measurement lasts
// at least `min_repeat_ms`.

#include "config.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <vector>

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
};

namespace detail {
/// Fills the mean, median, deviation, min and max of r.results.
GEXEC_DECL void summarize(benchmark_result& r);
}  // namespace detail

template <class F>
  requires std::is_invocable_v<F&>
benchmark_result benchmark(F&& f, benchmark_options opt = {}) {
  using clock = std::chrono::steady_clock;
  benchmark_result r;
  f();  // warm-up, as TVM's time evaluator does
  // Calls per measurement, in 64 bits and capped: a call too fast for the clock (or one
  // the compiler removed) makes the estimate below huge or infinite, and growing `number`
  // must neither overflow nor go on for ever. A measurement made at the cap is the last
  // of its repeat, however short it was.
  constexpr std::int64_t max_number = std::int64_t{1} << 40;
  std::int64_t number = std::clamp<std::int64_t>(opt.number, 1, max_number);
  for (int i = 0; i < opt.repeat; ++i) {
    if (i > 0 && opt.cooldown_interval_ms > 0 && opt.repeats_to_cooldown > 0 && i % opt.repeats_to_cooldown == 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(opt.cooldown_interval_ms));
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
      auto t0 = clock::now();
      for (std::int64_t j = 0; j < number; ++j) f();
      ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
      if (ms == 0) ++zero_times;
    } while (ms < opt.min_repeat_ms && zero_times < opt.limit_zero_time_iterations && !at_cap);
    r.results.push_back(ms / 1e3 / static_cast<double>(number));
  }
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
