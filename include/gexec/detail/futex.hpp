#pragma once
// Waiting for a 32-bit atomic word to change, and waking its waiters: the thread pool's
// workers and launchers, and the run's thread of parallel_branches.

#include "../config.hpp"

#include <atomic>
#include <climits>
#include <cstdint>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

GEXEC_NAMESPACE_BEGIN
namespace detail {

// Raw futexes on Linux: libstdc++'s atomic::wait spins and calls sched_yield before it
// sleeps, which is what a thread sharing its core with the one it waits for must not do.
inline void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t old) noexcept {
#if defined(__linux__)
  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT_PRIVATE, old, nullptr, nullptr, 0);
#else
  word.wait(old, std::memory_order_acquire);
#endif
}

inline void futex_wake(std::atomic<std::uint32_t>& word, bool all) noexcept {
#if defined(__linux__)
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE_PRIVATE, all ? INT_MAX : 1, nullptr, nullptr, 0);
#else
  all ? word.notify_all() : word.notify_one();
#endif
}

}  // namespace detail
GEXEC_NAMESPACE_END
