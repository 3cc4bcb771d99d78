#pragma once
// Time for gexec's own measurements and pauses, read from the system's monotonic clock
// (CLOCK_MONOTONIC, the clock std::chrono::steady_clock reads on Linux) without
// <chrono>: in C++20 that header brings the calendar, the time zones and string streams,
// about 2,000 preprocessed lines in every program that includes gexec, for one clock.

#include "../config.hpp"

#include <time.h>

#include <cerrno>
#include <cstdint>

GEXEC_NAMESPACE_BEGIN
namespace detail {

/// Nanoseconds on the monotonic clock since an unspecified start: for differences only.
inline std::int64_t monotonic_ns() noexcept {
  timespec t{};
  ::clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<std::int64_t>(t.tv_sec) * 1'000'000'000 + static_cast<std::int64_t>(t.tv_nsec);
}

/// Sleeps for at least `ns` nanoseconds, going on after a signal as
/// std::this_thread::sleep_for does; nothing for ns <= 0.
inline void sleep_ns(std::int64_t ns) noexcept {
  if (ns <= 0) return;
  timespec left{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  while (::nanosleep(&left, &left) != 0 && errno == EINTR) {
  }
}

}  // namespace detail
GEXEC_NAMESPACE_END
