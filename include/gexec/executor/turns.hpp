#pragma once
// Who is inside an executor: one thread at a time. A call that changes the executor
// marks it busy for its length (busy_guard) and is refused with errc::busy while
// another thread is inside; run_in_turn callers instead wait in line (in_turn).

#include "../config.hpp"

#include <atomic>
#include <cstdint>
#include <string>

#include <pthread.h>
#include <sched.h>

#include "../detail/clock.hpp"
#include "../error.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

/// Whether `t` is this thread: pthread_self(), a read of the thread's own register where
/// a thread_local would cost a call in a shared library, and no <thread>, whose C++20
/// <stop_token> and <semaphore> every program would preprocess. A default pthread_t is
/// no thread's (glibc and musl: the thread's control block address; elsewhere a pointer).
inline bool is_this_thread(pthread_t t) noexcept { return t != pthread_t{} && ::pthread_equal(t, ::pthread_self()) != 0; }

/// An executor's occupancy: whether a thread is inside, and run_in_turn's line.
struct occupancy {
  std::atomic<bool> busy{false};
  /// The thread inside while busy (cleared before busy is), so that a thread calling
  /// back into the executor it is inside is told so instead of waiting for itself.
  std::atomic<pthread_t> owner{};  ///< pthread_self() of the thread inside, or pthread_t{}
  std::atomic<std::uint32_t> next{0}, now{0};  ///< tickets given, ticket served
};

[[noreturn]] inline void refuse_reentry(const char* what) {
  throw error(errc::busy, std::string(what) + ": this thread is inside the executor already (a kernel or observer calling back into "
                                              "it); it would wait for itself");
}

/// A place in the line of run_in_turn callers (a ticket lock, so that nobody starves):
/// made, it has waited until this thread is first in line and the executor is free;
/// gone, the next in line goes. Nothing of it is on the path of calls that do not wait.
class in_turn {
 public:
  explicit in_turn(occupancy& o, const char* what = "run_in_turn") : o_(o) {
    if (o_.busy.load(std::memory_order_acquire) && is_this_thread(o_.owner.load(std::memory_order_relaxed)))
      refuse_reentry(what);
    const std::uint32_t ticket = o_.next.fetch_add(1, std::memory_order_relaxed);
    for (std::uint32_t now = o_.now.load(std::memory_order_acquire); now != ticket; now = o_.now.load(std::memory_order_acquire))
      o_.now.wait(now, std::memory_order_acquire);
    // First in line, this thread takes the executor; a call that does not wait may still
    // be inside (the line is for run_in_turn callers), so wait for it too.
    for (unsigned tries = 0; o_.busy.exchange(true, std::memory_order_acquire); ++tries) {
      if (tries < 64) ::sched_yield();
      else detail::sleep_ns(50'000);  // 50 us
    }
    o_.owner.store(::pthread_self(), std::memory_order_relaxed);
  }
  ~in_turn() {
    o_.now.fetch_add(1, std::memory_order_release);
    o_.now.notify_all();
  }
  in_turn(const in_turn&) = delete;
  in_turn& operator=(const in_turn&) = delete;

 private:
  occupancy& o_;
};

/// Marks the executor in use for one call; a second thread entering is refused.
class busy_guard {
 public:
  struct taken_t {};
  static constexpr taken_t taken{};
  /// For an executor this thread has taken already (in_turn).
  busy_guard(occupancy& o, taken_t) noexcept : o_(o) {}
  busy_guard(occupancy& o, const char* what) : o_(o) {
    if (o_.busy.exchange(true, std::memory_order_acquire)) [[unlikely]]
      refuse(o_, what);
    o_.owner.store(::pthread_self(), std::memory_order_relaxed);
  }
  ~busy_guard() {
    o_.owner.store(pthread_t{}, std::memory_order_relaxed);
    o_.busy.store(false, std::memory_order_release);
  }
  busy_guard(const busy_guard&) = delete;
  busy_guard& operator=(const busy_guard&) = delete;

 private:
  /// The refusal, out of every run()'s way.
  [[noreturn, gnu::cold, gnu::noinline]] static void refuse(const occupancy& o, const char* what) {
    if (is_this_thread(o.owner.load(std::memory_order_relaxed))) refuse_reentry(what);
    throw error(errc::busy, std::string(what) + ": the executor is in use by another thread; an executor serves one "
                                                "thread at a time (make one per thread with model::instantiate)");
  }

  occupancy& o_;
};

}  // namespace detail
GEXEC_NAMESPACE_END
