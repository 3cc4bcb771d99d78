#pragma once
// Whether a parallel call site pays for its threads. A site is the lambda a kernel hands
// to TVMBackendParallelLaunch; the pool runs it in parallel or alone, as the times it
// observed say is faster, and keeps checking the way it did not choose, so the choice
// follows the machine's load.
//
// Per site: the first calls alternate the two ways (the first one, cold, is not timed);
// after that the faster way runs, about one call in 64 timed, every call where calls
// take 10 us or more. Each way's figure is the mean of its recent timed calls (a sum and
// a count, both halved when the count reaches kWindow and at each new try of that way,
// so older calls weigh less). The other way is tried again once the chosen one has
// spent about kPatience times the other's figure, so trying costs at most 1/kPatience
// of the time spent (2%) however slow the other way is: a tiny kernel whose parallel
// launch waits a scheduler quantum for a descheduled worker tries it again after
// thousands of calls, a convolution whose serial run takes twice its parallel one after
// a hundred. The wait is counted in time, not in
// calls, so a chosen way that turns slow (the machine got busy) is questioned sooner.
// A try runs the other way for up to kTrial calls in a row and switches on its mean,
// stopping as soon as that mean loses: the calls it adds all beat the chosen way.
//
// The table is fixed (kSites entries, open addressing on the lambda's address, filled
// with a compare-and-swap, never emptied); a site that finds no room runs in parallel
// as if nothing were learnt. Threads sharing a site update it without a lock: the
// fields are relaxed atomics, and a lost update costs at worst one more or one fewer
// timed call.

#include "../config.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>

#include "../detail/clock.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

/// A clock for comparing two short durations on one machine: the time-stamp counter
/// where reading it costs a few nanoseconds, else the monotonic clock.
inline std::uint64_t cheap_ticks() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_ia32_rdtsc();  // the compiler's own: no intrinsics header (about 46,000 lines) for one read
#elif defined(__aarch64__)
  std::uint64_t v;
  asm volatile("mrs %0, cntvct_el0" : "=r"(v));
  return v;
#else
  return static_cast<std::uint64_t>(monotonic_ns());
#endif
}

/// Ticks of cheap_ticks() in a microsecond, roughly: read from the counter's frequency
/// on aarch64; on x86 the time-stamp counter runs near the nominal clock, taken as 3 GHz.
inline std::uint64_t ticks_per_microsecond() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  return 3000;
#elif defined(__aarch64__)
  std::uint64_t hz;
  asm volatile("mrs %0, cntfrq_el0" : "=r"(hz));
  return std::max<std::uint64_t>(hz / 1000000, 1);
#else
  return 1000;
#endif
}

/// How many runs the run in progress on this thread stands for: 1, or more for a run
/// that learns after runs that learnt nothing (serial_runs.hpp). Samples count for as
/// many calls, so that the time a choice has cost is counted in full.
inline std::uint32_t& runs_per_run() noexcept {
  thread_local std::uint32_t runs = 1;
  return runs;
}

class launch_sites {
 public:
  /// How a call runs, and what to note of it afterwards.
  struct plan {
    std::uint32_t site = kNoSite;  ///< kNoSite: nothing is learnt (no room), run in parallel
    bool alone = false;            ///< run on the calling thread only
    bool timed = false;            ///< measure the call and record() the time
    std::uint8_t warmup = 0;       ///< the call's number among the first kWarmup, else 0
  };
  static constexpr std::uint32_t kNoSite = UINT32_MAX;

  /// A table, unless `enabled` is false (every call then runs in parallel, learning nothing).
  explicit launch_sites(bool enabled = true) : hot_(enabled ? new (std::nothrow) hot[kSites] : nullptr) {}
  launch_sites(const launch_sites&) = delete;
  launch_sites& operator=(const launch_sites&) = delete;
  ~launch_sites() {
    for (auto& b : figure_blocks_) delete[] b.load(std::memory_order_relaxed);
  }

  /// How the call of `key` about to be made runs. Once a site has learnt, this reads its
  /// line and writes nothing there: threads calling the same kernel do not pass it around.
  plan choose(const void* key) noexcept {
    const std::uint32_t i = find(key);
    if (i == kNoSite) return {};
    hot* const s = &hot_[i];
    const std::uint8_t mode = s->mode.load(std::memory_order_relaxed);
    if (!(mode & kLearnt)) {
      const std::uint8_t n = static_cast<std::uint8_t>(std::min<unsigned>(s->calls.load(std::memory_order_relaxed) + 1u, kWarmup));
      s->calls.store(n, std::memory_order_relaxed);
      return {i, n % 2 == 0, n > 1, n};  // in parallel, alone, in parallel, ...: the first is cold
    }
    const bool alone = mode & kAlone;
    if (mode & kRetry) {
      s->mode.store(static_cast<std::uint8_t>(mode & ~kRetry), std::memory_order_relaxed);
      return {i, !alone, true, 0};
    }
    return {i, alone, (mode & kEvery) || sample(), 0};
  }

  /// Notes that a timed call planned by choose() took `ticks`.
  void record(const plan& p, std::uint64_t ticks) noexcept {
    hot& h = hot_[p.site];
    figures& s = figures_of(h);
    const std::uint64_t seen = std::max<std::uint64_t>(ticks, 1);
    const std::uint8_t mode = h.mode.load(std::memory_order_relaxed);
    const bool chosen = mode & kAlone;
    if (p.warmup == 0 && p.alone != chosen && s.trial_calls.load(std::memory_order_relaxed) == 0)
      s.forget(p.alone);  // a new try of the other way: what it did long ago counts for less
    s.add(p.alone, seen);
    if (p.warmup != 0) {
      if (p.warmup == kWarmup) decide(h, s);
    } else if (p.alone != chosen) {
      // The other way, tried again: up to kTrial calls in a row, while its mean beats
      // the chosen way's. One call is not enough to go back to it: a parallel launch
      // beside a busy core is mostly fast and sometimes waits a scheduler quantum for
      // its worker, and one lucky call would switch a site that loses on average.
      const std::uint32_t n = s.trial_calls.load(std::memory_order_relaxed) + 1;
      if (n < kTrial && s.mean(p.alone) < s.mean(chosen)) {
        s.trial_calls.store(n, std::memory_order_relaxed);
        h.mode.store(static_cast<std::uint8_t>(mode | kRetry), std::memory_order_relaxed);
        return;
      }
      s.trial_calls.store(0, std::memory_order_relaxed);
      decide(h, s);
    } else {
      // A sample stands for the kSampleEvery calls around it (and for as many in each run
      // that looked nothing up, serial_runs.hpp); a long call is timed every time.
      const std::uint64_t calls = (mode & kEvery) ? 1 : kSampleEvery * runs_per_run();
      const std::uint64_t spent = s.spent.load(std::memory_order_relaxed) + calls * seen;
      s.spent.store(spent, std::memory_order_relaxed);
      if (spent >= s.patience.load(std::memory_order_relaxed)) h.mode.store(static_cast<std::uint8_t>(mode | kRetry), std::memory_order_relaxed);
    }
  }

  /// Whether the site of `key` runs alone now (false for one never seen): for tests and tools.
  bool runs_alone(const void* key) const noexcept {
    const std::uint32_t i = lookup(key);
    return i != kNoSite && (hot_[i].mode.load(std::memory_order_relaxed) & (kLearnt | kAlone)) == (kLearnt | kAlone);
  }

  static constexpr std::uint8_t kWarmup = 6;
  static constexpr std::uint32_t kTrial = 4;
  static constexpr std::uint64_t kSampleEvery = 64;
  static constexpr std::uint64_t kPatience = 50;
  static constexpr std::size_t kSites = 512;

 private:
  enum : std::uint8_t { kAlone = 1, kRetry = 2, kLearnt = 4, kEvery = 8 };
  /// Timed calls a way's mean covers, about: past that, its figures are halved.
  static constexpr std::uint32_t kWindow = 64;

  // What a call reads, packed (16 bytes a site) so that a model's sites share few lines:
  // a run that comes after a pause misses the cache on as few as it can. Written only
  // while a site learns, and when its choice changes.
  struct hot {
    std::atomic<std::uintptr_t> key{0};
    std::atomic<std::uint8_t> mode{0};   ///< kLearnt, kAlone (the chosen way), kRetry (the next call tries the other), kEvery (time every call)
    std::atomic<std::uint8_t> calls{0};  ///< calls so far, up to kWarmup
    std::atomic<std::uint16_t> figure{0};  ///< 1 + the site's place among figure_blocks_, once it has one
  };
  // What timed calls write.
  struct alignas(64) figures {
    // Per way ([0] in parallel, [1] alone): the ticks and count of its recent timed calls.
    // A mean, not a running average of a few samples: a parallel launch beside a busy
    // core takes a scheduler quantum now and then, and its cost is in those.
    std::atomic<std::uint64_t> sum[2] = {};
    std::atomic<std::uint32_t> count[2] = {};
    std::atomic<std::uint32_t> trial_calls{0};  ///< calls of the other way in the try under way
    std::atomic<std::uint64_t> spent{0};        ///< ticks the chosen way took since the other was tried
    std::atomic<std::uint64_t> patience{0};     ///< ticks after which the other way is tried again

    std::uint64_t mean(bool way) const noexcept {
      const std::uint32_t n = count[way].load(std::memory_order_relaxed);
      return n == 0 ? 0 : sum[way].load(std::memory_order_relaxed) / n;
    }
    void add(bool way, std::uint64_t ticks) noexcept {
      std::uint64_t t = sum[way].load(std::memory_order_relaxed) + ticks;
      std::uint32_t n = count[way].load(std::memory_order_relaxed) + 1;
      if (n >= kWindow) {
        t /= 2;
        n /= 2;
      }
      sum[way].store(t, std::memory_order_relaxed);
      count[way].store(n, std::memory_order_relaxed);
    }
    void forget(bool way) noexcept {
      const std::uint32_t n = count[way].load(std::memory_order_relaxed);
      if (n < 2) return;
      sum[way].store(sum[way].load(std::memory_order_relaxed) / 2, std::memory_order_relaxed);
      count[way].store(n / 2, std::memory_order_relaxed);
    }
  };

  // About one call in kSampleEvery: a per-thread countdown (no shared line written),
  // restarted at a length drawn from the clock, so that no site a graph calls at a fixed
  // stride is always skipped.
  static bool sample() noexcept {
    thread_local std::uint32_t countdown = kSampleEvery;
    if (--countdown != 0) return false;
    countdown = static_cast<std::uint32_t>(kSampleEvery / 2 + (cheap_ticks() >> 4) % kSampleEvery);
    return true;
  }

  static void decide(hot& h, figures& s) noexcept {
    const std::uint64_t parallel = s.mean(false), alone = s.mean(true);
    const bool go_alone = alone <= parallel;
    s.spent.store(0, std::memory_order_relaxed);
    s.patience.store(kPatience * (go_alone ? parallel : alone), std::memory_order_relaxed);
    const bool every = (go_alone ? alone : parallel) >= long_call_ticks();
    h.mode.store(static_cast<std::uint8_t>(kLearnt | (go_alone ? kAlone : 0) | (every ? kEvery : 0)), std::memory_order_relaxed);
  }

  // A call long enough (10 us) that reading the clock twice around it costs nothing
  // measurable: such a site times every call, and its means hold every stall.
  static std::uint64_t long_call_ticks() noexcept {
    static const std::uint64_t ticks = 10 * ticks_per_microsecond();
    return ticks;
  }

  static std::size_t slot_of(std::uintptr_t key) noexcept {
    return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> 32) % kSites;
  }

  std::uint32_t lookup(const void* key) const noexcept {
    if (!hot_) return kNoSite;
    const auto k = reinterpret_cast<std::uintptr_t>(key);
    for (std::size_t i = slot_of(k), probes = 0; probes < kProbes; i = (i + 1) % kSites, ++probes) {
      const std::uintptr_t there = hot_[i].key.load(std::memory_order_acquire);
      if (there == k) return static_cast<std::uint32_t>(i);
      if (there == 0) return kNoSite;
    }
    return kNoSite;
  }

  // The site of `key`, claimed where it has none. Until the thread that claimed it has
  // given it its figures, other threads' calls there learn nothing.
  std::uint32_t find(const void* key) noexcept {
    if (!hot_ || key == nullptr) return kNoSite;
    const auto k = reinterpret_cast<std::uintptr_t>(key);
    for (std::size_t i = slot_of(k), probes = 0; probes < kProbes; i = (i + 1) % kSites, ++probes) {
      std::uintptr_t there = hot_[i].key.load(std::memory_order_acquire);
      if (there == 0 && hot_[i].key.compare_exchange_strong(there, k, std::memory_order_acq_rel))
        return give_figures(hot_[i]) ? static_cast<std::uint32_t>(i) : kNoSite;
      // `there` is the key here now (a failed exchange reads the one another thread wrote)
      if (there == k) return hot_[i].figure.load(std::memory_order_acquire) != 0 ? static_cast<std::uint32_t>(i) : kNoSite;
    }
    return kNoSite;
  }

  // The figures are handed out in the order sites are claimed, a block of kBlock (4 KB)
  // at a time: a model's few dozen sites write one or two pages of them, not a table's
  // worth (32 KB, in every process of a served model).
  bool give_figures(hot& h) noexcept {
    const std::uint32_t n = next_figure_.fetch_add(1, std::memory_order_relaxed);
    if (n >= kSites) return false;  // not reached: a site's key is claimed once
    std::atomic<figures*>& b = figure_blocks_[n / kBlock];
    if (!b.load(std::memory_order_acquire)) {
      figures* fresh = new (std::nothrow) figures[kBlock];
      if (!fresh) return false;
      figures* expected = nullptr;
      if (!b.compare_exchange_strong(expected, fresh, std::memory_order_acq_rel)) delete[] fresh;
    }
    h.figure.store(static_cast<std::uint16_t>(n + 1), std::memory_order_release);
    return true;
  }
  figures& figures_of(const hot& h) noexcept {
    const std::uint32_t n = h.figure.load(std::memory_order_acquire) - 1u;
    return figure_blocks_[n / kBlock].load(std::memory_order_acquire)[n % kBlock];
  }

  static constexpr std::size_t kProbes = 16;
  static constexpr std::size_t kBlock = 64;
  std::unique_ptr<hot[]> hot_;
  std::array<std::atomic<figures*>, kSites / kBlock> figure_blocks_{};
  std::atomic<std::uint32_t> next_figure_{0};
};

}  // namespace detail
GEXEC_NAMESPACE_END
