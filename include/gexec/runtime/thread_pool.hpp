#pragma once
// TVMBackendParallelLaunch / ParallelBarrier. Task 0 runs on the launching thread; the
// others on idle workers that the launch reserves for itself, so concurrent launchers
// share the workers without a lock. A launch never runs more threads than there are
// cores to run them: on one core every launch is a plain call. Workers start on the
// first launch that needs them, and again in the child after fork().
//
// Tasks of a launch run one of two ways:
// - together: one task per thread, all at once, so TVMBackendParallelBarrier works;
// - independent (kernels of a library that cannot call the barrier): kTasksPerThread
//   tasks per thread, each taken by whichever thread is free next, so a worker the OS
//   deschedules holds back at most the one small task it took, and the launcher runs
//   the rest.
// Launches from kernels also learn, per call site, whether their threads pay for
// themselves (launch_sites.hpp), and run alone where they do not.

#include "../config.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>

#include <pthread.h>
#include <unistd.h>
#if defined(__linux__)
#include <fcntl.h>
#include <sched.h>
#endif

#include "../detail/clock.hpp"
#include "../detail/futex.hpp"
#include "../detail/last_error.hpp"
#include "../detail/workspace.hpp"
#include "../error.hpp"
#include "../tvm_abi.hpp"
#include "launch_sites.hpp"
#include "run_context.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

/// Spins until done() or for about `budget_ns` nanoseconds; whether done() held.
template <class Done>
bool spin_until(Done done, std::int64_t budget_ns) noexcept {
  const std::int64_t deadline = monotonic_ns() + budget_ns;
  do {
    for (int i = 0; i < 32; ++i) {
      if (done()) return true;
      cpu_relax();
    }
  } while (monotonic_ns() < deadline);
  return done();
}

#if defined(__linux__)
inline bool read_small_file(const char* path, char* buf, std::size_t size) noexcept {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  std::size_t n = 0;
  while (n + 1 < size) {
    const ssize_t r = ::read(fd, buf + n, size - 1 - n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    n += static_cast<std::size_t>(r);
  }
  ::close(fd);
  buf[n] = '\0';
  return n > 0;
}
#endif

/// ceil(quota / period), or 0 (no cap) unless both are positive.
inline int cpu_cap(long long quota, long long period) noexcept {
  if (quota <= 0 || period <= 0) return 0;
  const long long cap = quota / period + (quota % period != 0);
  return cap > INT_MAX ? 0 : static_cast<int>(cap);
}

/// The cap in cgroup v2's cpu.max text, "QUOTA PERIOD" or "max PERIOD" (no cap).
inline int parse_cpu_max(const char* text) noexcept {
  char* end = nullptr;
  const long long quota = std::strtoll(text, &end, 10);
  if (end == text) return 0;
  return cpu_cap(quota, std::strtoll(end, nullptr, 10));
}

/// The cgroup's CPU bandwidth cap (v2, else v1), 0 if none or unreadable.
inline int cgroup_cpu_cap() noexcept {
#if defined(__linux__)
  char buf[64];
  if (read_small_file("/sys/fs/cgroup/cpu.max", buf, sizeof buf)) return parse_cpu_max(buf);
  if (!read_small_file("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", buf, sizeof buf)) return 0;
  const long long quota = std::strtoll(buf, nullptr, 10);
  if (!read_small_file("/sys/fs/cgroup/cpu/cpu.cfs_period_us", buf, sizeof buf)) return 0;
  return cpu_cap(quota, std::strtoll(buf, nullptr, 10));
#else
  return 0;
#endif
}

/// How many times available_cores() has looked at the machine (its affinity mask and
/// cgroup files): a pool is made with one look.
inline std::atomic<unsigned>& core_probes() noexcept {
  static std::atomic<unsigned> n{0};
  return n;
}

/// The cores this process may run on: its affinity mask, capped by its cgroup quota.
inline int available_cores() noexcept {
  core_probes().fetch_add(1, std::memory_order_relaxed);
  int n = 0;
#if defined(__linux__)
  for (std::size_t cpus = CPU_SETSIZE; n == 0 && cpus <= (std::size_t{1} << 20); cpus *= 2) {
    cpu_set_t* set = CPU_ALLOC(cpus);
    if (set == nullptr) break;
    const std::size_t bytes = CPU_ALLOC_SIZE(cpus);
    CPU_ZERO_S(bytes, set);
    const bool ok = sched_getaffinity(0, bytes, set) == 0;
    const bool too_small = !ok && errno == EINVAL;
    if (ok) n = CPU_COUNT_S(bytes, set);
    CPU_FREE(set);
    if (!ok && !too_small) break;
  }
#endif
  if (n <= 0) n = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  const int cap = cgroup_cpu_cap();
  if (cap > 0 && cap < n) n = cap;
  return n < 1 ? 1 : n;
}

/// GEXEC_NUM_THREADS, else TVM_NUM_THREADS (1..1024), else `cores`.
inline int default_num_threads(int cores) {
  for (const char* name : {"GEXEC_NUM_THREADS", "TVM_NUM_THREADS"}) {
    if (const char* v = std::getenv(name)) {
      char* end = nullptr;
      const long n = std::strtol(v, &end, 10);
      if (end != v && *end == '\0' && n > 0 && n <= 1024) return static_cast<int>(n);
    }
  }
  return cores;
}
inline int default_num_threads() { return default_num_threads(available_cores()); }

/// Bumped in the child of every fork(): workers started before it do not exist there.
inline std::atomic<unsigned>& fork_generation() noexcept {
  static std::atomic<unsigned> generation{0};
  return generation;
}

inline void watch_forks() noexcept {
  static std::once_flag once;
  try {
    std::call_once(once, [] {
      pthread_atfork(nullptr, nullptr, [] { fork_generation().fetch_add(1, std::memory_order_relaxed); });
    });
  } catch (...) {
  }
}

/// Whether this thread is running a task: launches from inside one run serially.
inline bool& in_parallel_task() noexcept {
  thread_local bool flag = false;
  return flag;
}

/// Launches and posts of this thread that reached a worker: serial_runs.hpp reads it
/// around a run to learn whether the run used any.
inline std::uint32_t& worker_uses() noexcept {
  thread_local std::uint32_t count = 0;
  return count;
}

/// How the tasks of a launch may run.
enum class task_kind : std::uint8_t {
  together,     ///< one per thread, all at once: the lambda may call TVMBackendParallelBarrier
  independent,  ///< any number, in any order, each taken by a thread that is free: no barrier
};
struct launch_options {
  task_kind tasks = task_kind::together;
  /// Learn per lambda whether running it in parallel beats running it alone, and run it
  /// alone where it does not (launch_sites.hpp). For kernels' launches, whose tasks
  /// never wait for another thread unless they are together.
  bool learn = false;
};

class thread_pool {
 public:
  /// `num_threads` counts the launching thread.
  explicit thread_pool(int num_threads) noexcept : thread_pool(num_threads, available_cores()) {}

  ~thread_pool() {
    worker_set* ws = set_.load(std::memory_order_acquire);
    // Workers started before a fork do not exist in the child: their objects are leaked
    // (there is no thread to join).
    if (ws == nullptr || ws->generation != fork_generation().load(std::memory_order_relaxed)) return;
    slot* const slots = ws->slots.get();
    worker_thread* const threads = ws->threads.get();
    for (int i = 0; i < ws->count; ++i) {
      slots[i].state.store(kStop, std::memory_order_seq_cst);
      slots[i].wake.fetch_add(2, std::memory_order_seq_cst);
      futex_wake(slots[i].wake, true);
    }
    for (int i = 0; i < ws->count; ++i)
      if (threads[i].started) ::pthread_join(threads[i].id, nullptr);
    delete ws;
  }
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  [[nodiscard]] int num_threads() const noexcept { return num_threads_; }

  /// The most tasks a launch runs: more could not run at once.
  [[nodiscard]] int max_concurrency() const noexcept { return max_concurrency_; }

  /// Tasks per thread of an independent launch that leaves the count to the pool: a
  /// descheduled worker holds back at most one of them.
  static constexpr int kTasksPerThread = 4;

  /// Runs n tasks and sets penv->num_task = n. Together: n >= 1 of the pool's choosing
  /// when num_task <= 0, else at most num_task, one per thread. Independent: num_task
  /// when it is positive, else kTasksPerThread per thread. Returns 0, or -1 with the
  /// first failing task's message as this thread's last error.
  int launch(FTVMParallelLambda f, void* cdata, int num_task, launch_options o = {}) noexcept {
    if (max_concurrency_ <= 1 || num_task == 1 || in_parallel_task()) return run_serial(f, cdata);
    const launch_sites::plan p = o.learn ? sites_.choose(reinterpret_cast<const void*>(f)) : launch_sites::plan{};
    if (p.alone && !p.timed) return run_serial(f, cdata);  // the common case of a tiny kernel: no worker touched
    return launch_on_workers(f, cdata, num_task, o.tasks, p);
  }

  /// Whether launches of `f` that learn run alone now (false before they have decided).
  [[nodiscard]] bool runs_alone(FTVMParallelLambda f) const noexcept { return sites_.runs_alone(reinterpret_cast<const void*>(f)); }

  /// TVMBackendParallelBarrier: every task of the launch waits for the others.
  static int barrier(TVMParallelGroupEnv* penv) noexcept {
    if (penv == nullptr || penv->num_task <= 1 || penv->sync_handle == nullptr) return 0;
    job& j = *static_cast<job*>(penv->sync_handle);
    if (j.independent) {
      set_last_error("TVMBackendParallelBarrier called by a task of a launch whose tasks do not run together (a library "
                     "without the __TVMBackendParallelBarrier slot)");
      return -1;
    }
    const std::uint32_t phase = j.phase.load(std::memory_order_acquire);
    if (j.arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == static_cast<std::uint32_t>(penv->num_task)) {
      j.arrived.store(0, std::memory_order_relaxed);
      j.phase.store(phase + 1, std::memory_order_seq_cst);
      std::atomic_thread_fence(std::memory_order_seq_cst);  // the store before the load, on every machine
      if (j.sleepers.load(std::memory_order_seq_cst) != 0) futex_wake(j.phase, true);
      return 0;
    }
    auto passed = [&] { return j.phase.load(std::memory_order_acquire) != phase; };
    if (j.spin && spin_until(passed, kSpinForNs)) return 0;
    j.sleepers.fetch_add(1, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    while (j.phase.load(std::memory_order_seq_cst) == phase) futex_wait(j.phase, phase);
    j.sleepers.fetch_sub(1, std::memory_order_relaxed);
    return 0;
  }

  /// Calls f(task_id, num_tasks) on each of n tasks, as launch() picks n; throws
  /// gexec::error (kernel_failed) with the first failure's message.
  template <class F>
  void parallel_for(int num_task, F&& f) {
    using fn = std::remove_reference_t<F>;
    auto call = [](int task_id, TVMParallelGroupEnv* penv, void* cdata) -> int {
      (*static_cast<fn*>(cdata))(task_id, static_cast<int>(penv->num_task));
      return 0;
    };
    void* cdata = const_cast<void*>(static_cast<const void*>(std::addressof(f)));
    if (launch(call, cdata, num_task) != 0) throw error(errc::kernel_failed, take_last_error());
  }

  /// Runs f(0, env, cdata) on a worker that is idle now, outside any run's context,
  /// without waiting for it; false, and nothing runs, if no worker is idle. Unlike a launch's tasks, f may launch
  /// parallel work, which takes idle workers as a launch from outside does, so the
  /// threads never outnumber the cores. f's result is ignored: it reports its own
  /// failures, and tells the caller through cdata when it is done; the caller keeps
  /// cdata alive until then, and keeps the pool alive until f has returned.
  bool post_detached(FTVMParallelLambda f, void* cdata) noexcept {
    if (max_concurrency_ <= 1) return false;
    worker_set* ws = workers();
    if (ws == nullptr) return false;
    slot* const slots = ws->slots.get();
    for (int i = 0; i < ws->count; ++i) {
      slot& s = slots[i];
      std::uint32_t idle = kIdle;
      if (!s.state.compare_exchange_strong(idle, kReserved, std::memory_order_acquire, std::memory_order_relaxed)) continue;
      s.task = kDetached;
      s.env = TVMParallelGroupEnv{nullptr, 1};
      s.f = f;
      s.cdata = cdata;
      s.context = nullptr;  // f sets up its own: the poster's may be gone before f runs
      s.lead = &s;
      s.state.store(kPosted, std::memory_order_seq_cst);
      std::atomic_thread_fence(std::memory_order_seq_cst);  // see run_parallel()
      if (s.wake.load(std::memory_order_seq_cst) & 1) wake_worker(s);
      ++worker_uses();
      return true;
    }
    return false;
  }

 private:
  // Spinning pays only while the threads we wait for have cores of their own; a wait
  // that outlasts this sleeps.
  static constexpr std::int64_t kSpinForNs = 10'000;  // 10 us

  enum : std::uint32_t { kOff, kIdle, kReserved, kPosted, kRunning, kStop };
  static constexpr std::uint16_t kNone = 0xffff;
  static constexpr std::uint16_t kTake = 0xffff;      ///< a slot's task: take tasks until none is left
  static constexpr std::uint16_t kDetached = 0xfffe;  ///< a slot's task: post_detached()'s
  static constexpr std::uint32_t kSleeping = 0x80000000u;

  // Shared by the tasks of one launch; lives on the launcher's stack.
  struct job {
    TVMParallelGroupEnv env{};
    bool spin = false;
    bool independent = false;
    alignas(64) std::atomic<std::uint32_t> next{0};  ///< the next task to take, when independent
    std::atomic<bool> failed{false};
    std::string error;
    alignas(64) std::atomic<std::uint32_t> arrived{0};
    std::atomic<std::uint32_t> phase{0};
    std::atomic<std::uint32_t> sleepers{0};
  };

  // One worker's mailbox, one cache line: all a worker reads to run its task. The plain
  // fields belong to the launch that reserved the slot.
  struct alignas(64) slot {
    std::atomic<std::uint32_t> state{kOff};
    // Bit 0: the worker sleeps, or is about to. A wake clears it and counts in the bits
    // above, so a worker that slept through a post and its stealing never misses the
    // next, and a worker woken but not yet running is not woken again (a system call
    // per launch while it waits for a busy core).
    std::atomic<std::uint32_t> wake{0};
    // Tasks still running on workers, when this slot is a launch's first: it outlives
    // the launch, so a worker may still touch it after the launcher has returned.
    std::atomic<std::uint32_t> pending{0};
    std::uint16_t task = 0;
    std::uint16_t next = kNone;  // the launch's next slot
    TVMParallelGroupEnv env{};   // a copy per task: kernels only read it
    FTVMParallelLambda f = nullptr;
    void* cdata = nullptr;
    run_context* context = nullptr;
    slot* lead = nullptr;
  };
  static_assert(sizeof(slot) == 64);

  /// A worker: a POSIX thread running work() on its slot (no std::thread: <thread>
  /// brings C++20's <stop_token> and <semaphore> into every program that includes gexec).
  struct worker_thread {
    pthread_t id{};
    thread_pool* pool = nullptr;
    slot* work_slot = nullptr;
    bool started = false;
    static void* entry(void* self) noexcept {
      auto& t = *static_cast<worker_thread*>(self);
      t.pool->work(*t.work_slot);
      return nullptr;
    }
  };

  struct worker_set {
    worker_set(int n, unsigned gen)
        : count(n),
          generation(gen),
          slots(new slot[static_cast<std::size_t>(n)]),
          threads(new worker_thread[static_cast<std::size_t>(n)]) {}
    int count;
    unsigned generation;
    std::unique_ptr<slot[]> slots;
    std::unique_ptr<worker_thread[]> threads;
  };

 public:
  /// With the cores this process may use (available_cores()) already known.
  thread_pool(int num_threads, int cores) noexcept
      : num_threads_(std::clamp(num_threads, 1, int{kNone} / kTasksPerThread)),
        max_concurrency_(std::min(num_threads_, cores)),
        spin_(num_threads_ <= cores),
        sites_(max_concurrency_ > 1) {}

 private:
  static void report(const std::string& message) noexcept {
    try {
      set_last_error(message.empty() ? std::string("parallel task failed") : message);
    } catch (...) {
    }
  }

  static void fail(job& j, int task_id, const char* what) noexcept {
    std::string message = take_last_error();  // clears this thread's either way
    if (j.failed.exchange(true, std::memory_order_acq_rel)) return;
    try {
      if (what != nullptr)
        j.error = what;
      else if (!message.empty())
        j.error = std::move(message);
      else
        j.error = "parallel task " + std::to_string(task_id) + " failed";
    } catch (...) {  // no memory for the message: the launch fails all the same
    }
  }

  // Out of line: the fast path of launch() stays a few instructions.
  [[gnu::noinline]] int launch_on_workers(FTVMParallelLambda f, void* cdata, int num_task, task_kind tasks,
                                          const launch_sites::plan& p) noexcept {
    worker_set* ws = workers();
    if (ws == nullptr) return run_serial(f, cdata);
    if (!p.timed) return p.alone ? run_serial(f, cdata) : run_parallel(*ws, f, cdata, num_task, tasks);
    const std::uint64_t start = cheap_ticks();
    const int rc = p.alone ? run_serial(f, cdata) : run_parallel(*ws, f, cdata, num_task, tasks);
    const std::uint64_t ticks = cheap_ticks() - start;
    if (rc == 0) sites_.record(p, ticks);
    return rc;
  }

  static bool call_task(job& j, FTVMParallelLambda f, void* cdata, TVMParallelGroupEnv* env, int task_id) noexcept {
    try {
      if (f(task_id, env, cdata) == 0) return true;
      fail(j, task_id, nullptr);
    } catch (const std::exception& e) {
      fail(j, task_id, e.what());
    } catch (...) {
      fail(j, task_id, "unknown exception");
    }
    return false;
  }

  /// Runs task `task_id`, or with kTake the launch's tasks not yet taken, one at a time.
  static void run_task(FTVMParallelLambda f, void* cdata, TVMParallelGroupEnv* env, run_context* context,
                       int task_id) noexcept {
    bool& in_task = in_parallel_task();
    in_task = true;
    context_scope scope(context);
    workspace_scope workspace;  // what a task leaves allocated is given back when it ends
    job& j = *static_cast<job*>(env->sync_handle);
    if (task_id != kTake) {
      call_task(j, f, cdata, env, task_id);
    } else {
      const auto n = static_cast<std::uint32_t>(env->num_task);
      for (std::uint32_t t = j.next.fetch_add(1, std::memory_order_relaxed); t < n; t = j.next.fetch_add(1, std::memory_order_relaxed))
        if (!call_task(j, f, cdata, env, static_cast<int>(t))) break;
    }
    in_task = false;
  }

  int run_parallel(worker_set& ws, FTVMParallelLambda f, void* cdata, int num_task, task_kind kind) noexcept {
    const bool independent = kind == task_kind::independent;
    const int wanted = num_task <= 0 || num_task > max_concurrency_ ? max_concurrency_ : num_task;
    slot* const slots = ws.slots.get();
    int first = kNone, last = kNone, reserved = 0;
    for (int i = 0; i < ws.count && reserved < wanted - 1; ++i) {
      std::uint32_t idle = kIdle;
      if (!slots[i].state.compare_exchange_strong(idle, kReserved, std::memory_order_acquire, std::memory_order_relaxed))
        continue;
      if (last == kNone)
        first = i;
      else
        slots[last].next = static_cast<std::uint16_t>(i);
      last = i;
      ++reserved;
    }
    if (reserved == 0) return run_serial(f, cdata);  // every core is busy with other launches
    slots[last].next = kNone;
    ++worker_uses();

    job j;
    j.env.sync_handle = &j;
    j.env.num_task = independent ? (num_task > 0 ? num_task : kTasksPerThread * (1 + reserved)) : 1 + reserved;
    j.independent = independent;
    j.spin = spin_;
    run_context* const context = current_context();
    slot& lead = slots[first];
    lead.pending.store(static_cast<std::uint32_t>(reserved), std::memory_order_relaxed);
    std::uint16_t task = 1;
    for (int i = first; i != kNone; i = slots[i].next) {
      slot& s = slots[i];
      s.task = independent ? kTake : task++;
      s.env = j.env;
      s.f = f;
      s.cdata = cdata;
      s.context = context;
      s.lead = &lead;
      s.state.store(kPosted, std::memory_order_seq_cst);
      // The worker sets its sleep bit, then reads the state; this thread stores the state,
      // then reads the bit: a fence between each pair, so one of them sees the other's.
      std::atomic_thread_fence(std::memory_order_seq_cst);
      if (s.wake.load(std::memory_order_seq_cst) & 1) wake_worker(s);
    }

    run_task(f, cdata, &j.env, context, independent ? kTake : 0);
    // Task 0 is done, so it passed all its barriers: a task not started yet belongs to a
    // lambda without barriers, and this thread may as well run it as wait for a worker.
    // Independent tasks are all taken by now: a worker not started yet has none to run.
    std::uint32_t stolen = 0;
    for (int i = first; i != kNone; i = slots[i].next) {
      std::uint32_t posted = kPosted;
      if (slots[i].state.compare_exchange_strong(posted, kReserved, std::memory_order_acquire, std::memory_order_relaxed)) {
        if (!independent) run_task(f, cdata, &j.env, context, slots[i].task);
        ++stolen;
      }
    }
    wait_for_workers(lead, stolen);
    for (int i = first; i != kNone;) {
      const int next = slots[i].next;  // the slot is another launch's once released
      slots[i].state.store(kIdle, std::memory_order_release);
      i = next;
    }
    if (j.failed.load(std::memory_order_acquire)) {
      report(j.error);
      return -1;
    }
    return 0;
  }

  static void run_detached(FTVMParallelLambda f, void* cdata, run_context* context) noexcept {
    context_scope scope(context);
    workspace_scope workspace;
    TVMParallelGroupEnv env{nullptr, 1};
    try {
      (void)f(0, &env, cdata);
    } catch (...) {  // f reports its own failures
    }
    (void)take_last_error();
  }

  static int run_serial(FTVMParallelLambda f, void* cdata) noexcept {
    TVMParallelGroupEnv env{nullptr, 1};
    bool& in_task = in_parallel_task();
    const bool outer = in_task;
    in_task = true;
    int rc = -1;
    try {
      rc = f(0, &env, cdata);
    } catch (const std::exception& e) {
      report(e.what());
    } catch (...) {
      report("unknown exception");
    }
    in_task = outer;
    return rc == 0 ? 0 : serial_failed();
  }

  [[gnu::noinline, gnu::cold]] static int serial_failed() noexcept {
    const std::string m = take_last_error();  // the kernel's message, or the exception's
    report(m.empty() ? std::string("parallel task 0 failed") : m);
    return -1;
  }

  void wait_for_workers(slot& lead, std::uint32_t stolen) noexcept {
    std::uint32_t left = stolen == 0 ? lead.pending.load(std::memory_order_acquire)
                                     : lead.pending.fetch_sub(stolen, std::memory_order_acq_rel) - stolen;
    if (left == 0) return;
    if (spin_ && spin_until([&] { return lead.pending.load(std::memory_order_acquire) == 0; }, kSpinForNs)) return;
    left = lead.pending.fetch_or(kSleeping, std::memory_order_acq_rel);
    while ((left & ~kSleeping) != 0) {
      futex_wait(lead.pending, left | kSleeping);
      left = lead.pending.load(std::memory_order_acquire);
    }
  }

  static void wake_worker(slot& s) noexcept {
    s.wake.fetch_add(1, std::memory_order_seq_cst);  // odd + 1: clears bit 0, counts a wake
    futex_wake(s.wake, false);
  }

  static std::uint32_t wait_for_post(slot& s, bool spin) noexcept {
    std::uint32_t v = 0;
    auto ready = [&] {
      v = s.state.load(std::memory_order_acquire);
      return v == kPosted || v == kStop;
    };
    if (ready() || (spin && spin_until(ready, kSpinForNs))) return v;
    for (;;) {
      const std::uint32_t w = s.wake.fetch_or(1, std::memory_order_seq_cst) | 1;
      std::atomic_thread_fence(std::memory_order_seq_cst);  // see run_parallel()
      v = s.state.load(std::memory_order_seq_cst);
      if (v == kPosted || v == kStop) break;
      futex_wait(s.wake, w);
    }
    s.wake.fetch_and(~1u, std::memory_order_relaxed);
    return v;
  }

  void work(slot& s) noexcept {
    bool spin = false;
    for (;;) {
      if (wait_for_post(s, spin) == kStop) return;
      std::uint32_t posted = kPosted;
      if (!s.state.compare_exchange_strong(posted, kRunning, std::memory_order_acquire, std::memory_order_relaxed)) {
        spin = spin_;  // the launcher ran it: its tasks are short, the next launch is near
        continue;
      }
      if (s.task == kDetached) {
        run_detached(s.f, s.cdata, s.context);
        std::uint32_t running = kRunning;  // nobody waits for it: it gives its slot back itself (unless stopped)
        if (!s.state.compare_exchange_strong(running, kIdle, std::memory_order_release, std::memory_order_relaxed)) return;
        spin = spin_;
        continue;
      }
      run_task(s.f, s.cdata, &s.env, s.context, s.task);
      slot& lead = *s.lead;
      if (lead.pending.fetch_sub(1, std::memory_order_acq_rel) == (kSleeping | 1)) futex_wake(lead.pending, false);
      spin = spin_;  // launches tend to come in bursts
    }
  }

  worker_set* workers() noexcept {
    worker_set* ws = set_.load(std::memory_order_acquire);
    if (ws != nullptr && ws->generation == fork_generation().load(std::memory_order_relaxed)) return ws;
    return start_workers(ws);
  }

  // On the first launch that needs workers, and on the first in the child of a fork.
  worker_set* start_workers(worker_set* old) noexcept {
    watch_forks();
    const unsigned gen = fork_generation().load(std::memory_order_relaxed);
    std::unique_ptr<worker_set> fresh;
    try {
      fresh = std::make_unique<worker_set>(max_concurrency_ - 1, gen);
    } catch (...) {
      return nullptr;
    }
    if (!set_.compare_exchange_strong(old, fresh.get(), std::memory_order_acq_rel, std::memory_order_acquire))
      return old != nullptr && old->generation == gen ? old : nullptr;  // another launcher started them
    worker_set* ws = fresh.release();  // `old`, from before a fork, is leaked on purpose
    for (int i = 0; i < ws->count; ++i) {
      slot& s = ws->slots.get()[i];
      worker_thread& t = ws->threads.get()[i];
      t.pool = this;
      t.work_slot = &s;
      t.started = ::pthread_create(&t.id, nullptr, &worker_thread::entry, &t) == 0;
      if (t.started) s.state.store(kIdle, std::memory_order_release);  // else no thread: the slot stays off
    }
    return ws;
  }

  int num_threads_;
  int max_concurrency_;
  bool spin_;
  launch_sites sites_;  ///< what launches that learn have learnt; no table where launches are plain calls
  std::atomic<worker_set*> set_{nullptr};
};

/// The process default runtime's pool: made on first use, never destroyed (its
/// workers may be serving compiled code while static destructors run).
inline thread_pool& default_pool() {
  static auto* pool = [] {
    const int cores = available_cores();  // one look at the machine, for the size and the cap
    return new thread_pool(default_num_threads(cores), cores);
  }();
  return *pool;
}

}  // namespace detail
GEXEC_NAMESPACE_END
