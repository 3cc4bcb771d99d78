#pragma once
// Whether a parallel call site pays for its threads. A site is the lambda a kernel hands
// to TVMBackendParallelLaunch; the pool runs it in parallel or alone, as the times it
// observed say is faster, and keeps checking the way it did not choose, so the choice
// follows the machine's load.
//
// Per site: the first calls alternate the two ways (the first one, cold, is not timed);
// after that the faster way runs, one call in 16 timed (a running average), and the other
// way is tried again once the chosen one has spent about kPatience times the other's
// last time, so trying costs at most 1/kPatience of the time spent (2%) however slow the
// other way is: a tiny kernel whose parallel launch waits a scheduler quantum for a
// descheduled worker tries it again after thousands of calls, a convolution whose serial
// run takes twice its parallel one after a hundred. The wait is counted in time, not in
// calls, so a chosen way that turns slow (the machine got busy) is questioned sooner.
//
// The table is fixed (kSites entries, open addressing on the lambda's address, filled
// with a compare-and-swap, never emptied); a site that finds no room runs in parallel
// as if nothing were learnt. Threads sharing a site update it without a lock: the
// fields are relaxed atomics, and a lost update costs at worst one more or one fewer
// timed call.

#include "../config.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

GEXEC_NAMESPACE_BEGIN
namespace detail {

/// A clock for comparing two short durations on one machine: the time-stamp counter
/// where reading it costs a few nanoseconds, else steady_clock.
inline std::uint64_t cheap_ticks() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#elif defined(__aarch64__)
  std::uint64_t v;
  asm volatile("mrs %0, cntvct_el0" : "=r"(v));
  return v;
#else
  return static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
#endif
}

class launch_sites {
 public:
  /// How a call runs, and what to note of it afterwards.
  struct plan {
    void* site = nullptr;  ///< null: nothing is learnt (no room), run in parallel
    bool alone = false;    ///< run on the calling thread only
    bool timed = false;    ///< measure the call and record() the time
  };

  launch_sites() : sites_(new (std::nothrow) site[kSites]) {}

  /// How the call of `key` about to be made runs.
  plan choose(const void* key) noexcept {
    site* s = find(key);
    if (s == nullptr) return {};
    const std::uint64_t n = s->calls.load(std::memory_order_relaxed) + 1;
    s->calls.store(n, std::memory_order_relaxed);
    if (n <= kWarmup) return {s, n % 2 == 0, n > 1};  // in parallel, alone, in parallel, ...: the first is cold
    const bool alone = s->alone.load(std::memory_order_relaxed);
    if (s->retry.load(std::memory_order_relaxed)) {
      s->retry.store(false, std::memory_order_relaxed);
      return {s, !alone, true};
    }
    return {s, alone, n % kSampleEvery == 0};
  }

  /// Notes that a timed call planned by choose() took `ticks`.
  void record(const plan& p, std::uint64_t ticks) noexcept {
    site& s = *static_cast<site*>(p.site);
    const std::uint64_t n = s.calls.load(std::memory_order_relaxed);
    std::atomic<std::uint64_t>& mine = s.ticks[p.alone];
    const std::uint64_t seen = std::max<std::uint64_t>(ticks, 1);
    if (n <= kWarmup) {
      const std::uint64_t before = mine.load(std::memory_order_relaxed);
      mine.store(before == 0 ? seen : std::min(before, seen), std::memory_order_relaxed);
      if (n == kWarmup) decide(s);
    } else if (p.alone != s.alone.load(std::memory_order_relaxed)) {
      mine.store(seen, std::memory_order_relaxed);  // the other way, tried again: its figure now
      decide(s);
    } else {
      const std::uint64_t before = mine.load(std::memory_order_relaxed);
      const auto average = static_cast<std::int64_t>(before) + (static_cast<std::int64_t>(seen) - static_cast<std::int64_t>(before)) / 8;
      mine.store(static_cast<std::uint64_t>(std::max<std::int64_t>(average, 1)), std::memory_order_relaxed);
      // This sample stands for the kSampleEvery calls since the last one.
      const std::uint64_t spent = s.spent.load(std::memory_order_relaxed) + kSampleEvery * seen;
      s.spent.store(spent, std::memory_order_relaxed);
      if (spent >= s.patience.load(std::memory_order_relaxed)) s.retry.store(true, std::memory_order_relaxed);
    }
  }

  /// Whether the site of `key` runs alone now (false for one never seen): for tests and tools.
  bool runs_alone(const void* key) const noexcept {
    const site* s = lookup(key);
    return s != nullptr && s->calls.load(std::memory_order_relaxed) > kWarmup && s->alone.load(std::memory_order_relaxed);
  }

  static constexpr std::uint64_t kWarmup = 6;
  static constexpr std::uint64_t kSampleEvery = 16;
  static constexpr std::uint64_t kPatience = 50;
  static constexpr std::size_t kSites = 512;

 private:
  struct alignas(64) site {  // a line each: sites of kernels running at once do not share one
    std::atomic<std::uintptr_t> key{0};
    std::atomic<std::uint64_t> calls{0};
    std::atomic<std::uint64_t> ticks[2] = {};  ///< per call: [0] in parallel, [1] alone
    std::atomic<std::uint64_t> spent{0};       ///< ticks the chosen way took since the other was tried
    std::atomic<std::uint64_t> patience{0};    ///< ticks after which the other way is tried again
    std::atomic<bool> alone{false};            ///< the chosen way
    std::atomic<bool> retry{false};            ///< the next call tries the other way
  };

  static void decide(site& s) noexcept {
    const std::uint64_t parallel = s.ticks[0].load(std::memory_order_relaxed), alone = s.ticks[1].load(std::memory_order_relaxed);
    const bool go_alone = alone <= parallel;
    s.alone.store(go_alone, std::memory_order_relaxed);
    s.spent.store(0, std::memory_order_relaxed);
    s.patience.store(kPatience * (go_alone ? parallel : alone), std::memory_order_relaxed);
  }

  static std::size_t slot_of(std::uintptr_t key) noexcept {
    return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> 32) % kSites;
  }

  const site* lookup(const void* key) const noexcept {
    if (!sites_) return nullptr;
    const auto k = reinterpret_cast<std::uintptr_t>(key);
    for (std::size_t i = slot_of(k), probes = 0; probes < kProbes; i = (i + 1) % kSites, ++probes) {
      const std::uintptr_t there = sites_[i].key.load(std::memory_order_acquire);
      if (there == k) return &sites_[i];
      if (there == 0) return nullptr;
    }
    return nullptr;
  }

  site* find(const void* key) noexcept {
    if (!sites_ || key == nullptr) return nullptr;
    const auto k = reinterpret_cast<std::uintptr_t>(key);
    for (std::size_t i = slot_of(k), probes = 0; probes < kProbes; i = (i + 1) % kSites, ++probes) {
      std::uintptr_t there = sites_[i].key.load(std::memory_order_acquire);
      if (there == k) return &sites_[i];
      if (there == 0 && (sites_[i].key.compare_exchange_strong(there, k, std::memory_order_acq_rel) || there == k)) return &sites_[i];
    }
    return nullptr;
  }

  static constexpr std::size_t kProbes = 16;
  std::unique_ptr<site[]> sites_;
};

}  // namespace detail
GEXEC_NAMESPACE_END
