// The pool behind TVMBackendParallelLaunch / ParallelBarrier: barriers, core counting,
// failures and exceptions, concurrent launchers, stealing, fork, nesting, context.

#include <gexec/runtime/thread_pool.hpp>

#include "test_support.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <dirent.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__SANITIZE_THREAD__)
#define GEXEC_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GEXEC_TEST_TSAN 1
#endif
#endif

namespace {

using gexec::detail::thread_pool;

constexpr int kMaxTasks = 64;

/// What the tasks of one launch saw. Task t writes only its own entries; the barrier
/// makes them visible to the others.
struct barrier_check {
  int rounds = 20;
  int stage[kMaxTasks] = {};
  std::atomic<int> runs[kMaxTasks] = {};
  std::atomic<int> num_task{0};
  std::atomic<int> wrong{0};
};

int barrier_task(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  auto& c = *static_cast<barrier_check*>(cdata);
  c.num_task.store(penv->num_task, std::memory_order_relaxed);
  c.runs[task_id].fetch_add(1, std::memory_order_relaxed);
  for (int round = 1; round <= c.rounds; ++round) {
    c.stage[task_id] = round;
    thread_pool::barrier(penv);
    for (int t = 0; t < penv->num_task; ++t)
      if (c.stage[t] != round) c.wrong.fetch_add(1, std::memory_order_relaxed);
    thread_pool::barrier(penv);
  }
  return 0;
}

/// The number of tasks the launch ran, or -1 if a task ran twice or a barrier leaked.
int launch_and_check(thread_pool& pool, int requested, int rounds = 20) {
  barrier_check c;
  c.rounds = rounds;
  if (pool.launch(&barrier_task, &c, requested) != 0) return -1;
  const int n = c.num_task.load();
  if (n < 1 || n > kMaxTasks || c.wrong.load() != 0) return -1;
  for (int t = 0; t < kMaxTasks; ++t)
    if (c.runs[t].load() != (t < n ? 1 : 0)) return -1;
  return n;
}

int expected_tasks(const thread_pool& pool, int requested) {
  return requested <= 0 || requested > pool.max_concurrency() ? pool.max_concurrency() : requested;
}

/// Runs f on another thread; unless it is done within `seconds`, ends the process with
/// a failure at once (a deadlocked pool cannot be torn down).
void run_with_timeout(int seconds, std::function<void()> f) {
  std::packaged_task<void()> task(std::move(f));
  std::future<void> done = task.get_future();
  std::thread t(std::move(task));
  if (done.wait_for(std::chrono::seconds(seconds)) != std::future_status::ready) {
    std::fprintf(stderr, "FAILED: not done within %d s: deadlock\n", seconds);
    std::_Exit(1);
  }
  t.join();
  done.get();
}

int affinity_count() {
  cpu_set_t set;
  CPU_ZERO(&set);
  REQUIRE(sched_getaffinity(0, sizeof set, &set) == 0);
  return CPU_COUNT(&set);
}

/// Confines the calling thread to the first CPU it may run on. (CHECK, not REQUIRE:
/// it runs on threads of the test's own, which must not throw.)
void pin_to_one_cpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  CHECK(sched_getaffinity(0, sizeof set, &set) == 0);
  int first = 0;
  while (first < CPU_SETSIZE - 1 && !CPU_ISSET(first, &set)) ++first;
  CPU_ZERO(&set);
  CPU_SET(first, &set);
  CHECK(sched_setaffinity(0, sizeof set, &set) == 0);
}

int thread_count() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') ++n;
    closedir(d);
  }
  return n;
}

// A joined thread may linger in /proc for a moment.
int thread_count_once(int expected) {
  int n = thread_count();
  for (int i = 0; i < 200 && n != expected; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    n = thread_count();
  }
  return n;
}

int settled_thread_count() {
  int n = thread_count();
  for (int i = 0; i < 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const int m = thread_count();
    if (m == n) break;
    n = m;
  }
  return n;
}

/// Sets an environment variable for a scope and restores it.
class env_var {
 public:
  env_var(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    value ? setenv(name, value, 1) : unsetenv(name);
  }
  ~env_var() { old_ ? setenv(name_, old_->c_str(), 1) : unsetenv(name_); }
  env_var(const env_var&) = delete;
  env_var& operator=(const env_var&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace

TEST_CASE("a launch runs every task at once, so repeated barriers hold") {
  for (int threads : {1, 2, 3, 4, 8}) {
    CAPTURE(threads);
    thread_pool pool(threads);
    CHECK(pool.num_threads() == threads);
    CHECK(pool.max_concurrency() == std::min(threads, gexec::detail::available_cores()));
    for (int requested : {0, 2, 64}) {
      CAPTURE(requested);
      for (int launch = 0; launch < 50; ++launch) {
        const int n = launch_and_check(pool, requested);
        REQUIRE(n == expected_tasks(pool, requested));  // all workers are idle between launches
      }
    }
  }
}

TEST_CASE("the pool counts the cores it may use") {
  const int cores = gexec::detail::available_cores();
  CHECK(cores >= 1);
  const int cap = gexec::detail::cgroup_cpu_cap();
  if (cap == 0 || cap >= affinity_count())
    CHECK(cores == affinity_count());
  else
    CHECK(cores == cap);

  CHECK(gexec::detail::parse_cpu_max("max 100000\n") == 0);
  CHECK(gexec::detail::parse_cpu_max("100000 100000\n") == 1);
  CHECK(gexec::detail::parse_cpu_max("150000 100000\n") == 2);
  CHECK(gexec::detail::parse_cpu_max("50000 100000\n") == 1);
  CHECK(gexec::detail::parse_cpu_max("400000 100000") == 4);
  CHECK(gexec::detail::parse_cpu_max("") == 0);
  CHECK(gexec::detail::cpu_cap(-1, 100000) == 0);  // cgroup v1's "no quota"

  // The affinity mask is per thread: a thread confined to one CPU sees one core, and a
  // pool made there runs every launch in the caller.
  std::thread([] {
    pin_to_one_cpu();
    CHECK(gexec::detail::available_cores() == 1);
    thread_pool pool(4);
    CHECK(pool.num_threads() == 4);
    CHECK(pool.max_concurrency() == 1);
  }).join();
}

TEST_CASE("the thread count comes from GEXEC_NUM_THREADS, else TVM_NUM_THREADS, else the cores") {
  using gexec::detail::default_num_threads;
  const int cores = gexec::detail::available_cores();
  {
    env_var g("GEXEC_NUM_THREADS", nullptr), t("TVM_NUM_THREADS", nullptr);
    CHECK(default_num_threads() == cores);
  }
  {
    env_var g("GEXEC_NUM_THREADS", "3"), t("TVM_NUM_THREADS", "5");
    CHECK(default_num_threads() == 3);
  }
  {
    env_var g("GEXEC_NUM_THREADS", nullptr), t("TVM_NUM_THREADS", "5");
    CHECK(default_num_threads() == 5);
  }
  for (const char* bad : {"0", "-2", "1025", "3x", "", "abc"}) {
    CAPTURE(bad);
    env_var g("GEXEC_NUM_THREADS", bad), t("TVM_NUM_THREADS", "7");
    CHECK(default_num_threads() == 7);
    env_var t2("TVM_NUM_THREADS", bad);
    CHECK(default_num_threads() == cores);
  }
  {
    env_var g("GEXEC_NUM_THREADS", "1024"), t("TVM_NUM_THREADS", nullptr);
    CHECK(default_num_threads() == 1024);
  }
}

TEST_CASE("a pool with one core's worth of concurrency runs every launch in the caller, starting no thread") {
  auto check_serial = [](thread_pool& pool) {  // CHECKs only: also runs on a thread of ours
    CHECK(pool.max_concurrency() == 1);
    struct seen {
      std::thread::id caller = std::this_thread::get_id();
      int tasks = 0, wrong = 0;
    } s;
    for (int requested : {0, 1, 2, 64}) {
      CHECK(pool.launch(
                  [](int task_id, TVMParallelGroupEnv* penv, void* cdata) -> int {
                    auto& s = *static_cast<seen*>(cdata);
                    ++s.tasks;
                    if (task_id != 0 || penv->num_task != 1 || std::this_thread::get_id() != s.caller) ++s.wrong;
                    thread_pool::barrier(penv);  // one task: returns at once
                    return 0;
                  },
                  &s, requested) == 0);
    }
    CHECK(s.tasks == 4);
    CHECK(s.wrong == 0);
  };
  const int before = settled_thread_count();
  thread_pool one(1);
  check_serial(one);
  std::thread([&] {
    pin_to_one_cpu();
    thread_pool two(2);
    check_serial(two);
  }).join();
  CHECK(thread_count_once(before) == before);

  // Lazily: a pool starts workers on the first launch that needs them.
  thread_pool wide(4);
  REQUIRE(wide.launch([](int, TVMParallelGroupEnv*, void*) { return 0; }, nullptr, 1) == 0);
  CHECK(thread_count() == before);
  REQUIRE(wide.launch([](int, TVMParallelGroupEnv*, void*) { return 0; }, nullptr, 0) == 0);
  CHECK(thread_count() == before + wide.max_concurrency() - 1);
}

TEST_CASE("a failing task's message reaches the launching thread") {
  thread_pool pool(3);
  auto fail_last = [](int task_id, TVMParallelGroupEnv* penv, void*) -> int {
    if (task_id != penv->num_task - 1) return 0;
    gexec::detail::set_last_error("the last task says no");
    return -1;
  };
  gexec::detail::last_error().clear();
  CHECK(pool.launch(fail_last, nullptr, 0) == -1);
  CHECK(gexec::detail::take_last_error() == "the last task says no");

  auto fail_silently = [](int task_id, TVMParallelGroupEnv* penv, void*) -> int { return task_id == penv->num_task - 1 ? 1 : 0; };
  CHECK(pool.launch(fail_silently, nullptr, 0) == -1);
  CHECK(gexec::detail::take_last_error() == "parallel task " + std::to_string(pool.max_concurrency() - 1) + " failed");
  CHECK(pool.launch(fail_silently, nullptr, 1) == -1);
  CHECK(gexec::detail::take_last_error() == "parallel task 0 failed");

  CHECK(launch_and_check(pool, 0) == pool.max_concurrency());
}

TEST_CASE("an exception from a task reaches the launcher, and the pool stays healthy") {
  thread_pool pool(2);
  for (int thrower : {0, 1}) {
    CAPTURE(thrower);
    static std::atomic<int> which;
    which = thrower < pool.max_concurrency() ? thrower : 0;
    auto throwing = [](int task_id, TVMParallelGroupEnv* penv, void*) -> int {
      thread_pool::barrier(penv);
      if (task_id == which) throw std::runtime_error("boom in task " + std::to_string(task_id));
      return 0;
    };
    CHECK(pool.launch(throwing, nullptr, 0) == -1);
    CHECK(gexec::detail::take_last_error() == "boom in task " + std::to_string(which.load()));

    auto throws_int = [](int task_id, TVMParallelGroupEnv*, void*) -> int {
      if (task_id == which) throw 42;
      return 0;
    };
    CHECK(pool.launch(throws_int, nullptr, 0) == -1);
    CHECK(gexec::detail::take_last_error() == "unknown exception");

    std::atomic<int> calls{0};
    try {
      pool.parallel_for(0, [&](int task_id, int) {
        ++calls;
        if (task_id == which) throw std::runtime_error("parallel_for says no");
      });
      FAIL("parallel_for did not throw");
    } catch (const gexec::error& e) {
      CHECK(e.code() == gexec::errc::kernel_failed);
      CHECK(std::string(e.what()).find("parallel_for says no") != std::string::npos);
    }
    CHECK(calls == pool.max_concurrency());

    // Launches go on, from another thread too.
    int n = 0;
    std::thread([&] { n = launch_and_check(pool, 0); }).join();
    CHECK(n == pool.max_concurrency());
  }

  std::vector<int> hits(kMaxTasks, 0);
  int tasks = 0;
  pool.parallel_for(0, [&](int task_id, int num_tasks) {
    hits[static_cast<std::size_t>(task_id)] = num_tasks;
    if (task_id == 0) tasks = num_tasks;
  });
  CHECK(tasks == pool.max_concurrency());
  for (int t = 0; t < tasks; ++t) CHECK(hits[static_cast<std::size_t>(t)] == tasks);
}

TEST_CASE("concurrent launchers all progress, sharing the workers, without deadlock") {
  thread_pool pool(3);
  std::atomic<int> bad{0}, parallel{0};
  run_with_timeout(60, [&] {
    std::vector<std::thread> launchers;
    for (int l = 0; l < 4; ++l) {
      launchers.emplace_back([&] {
        for (int i = 0; i < 2000; ++i) {
          const int n = launch_and_check(pool, i % 3, 2);
          if (n < 1 || n > pool.max_concurrency()) ++bad;
          if (n > 1) ++parallel;
        }
      });
    }
    for (auto& t : launchers) t.join();
  });
  CHECK(bad == 0);
  MESSAGE(parallel.load() << " of 8000 launches ran on more than one thread");
  CHECK(launch_and_check(pool, 0) == pool.max_concurrency());  // every worker was given back
}

TEST_CASE("the launcher runs tasks a slow worker has not started, each exactly once") {
  // Launcher and worker share one CPU (the worker inherits the launcher's mask), so the
  // worker is often not running when the launcher finishes task 0.
  struct record {
    std::thread::id launcher;
    std::atomic<int> runs[2] = {};
    std::atomic<int> num_task{0};
    std::atomic<bool> task1_on_launcher{false};
  };
  int bad = 0, stolen = 0, parallel = 0;
  std::thread([&] {
    thread_pool pool(2);
    pin_to_one_cpu();
    for (int i = 0; i < 10000; ++i) {
      record r;
      r.launcher = std::this_thread::get_id();
      const int rc = pool.launch(
          [](int task_id, TVMParallelGroupEnv* penv, void* cdata) -> int {
            auto& r = *static_cast<record*>(cdata);
            r.num_task = penv->num_task;
            r.runs[task_id].fetch_add(1);
            if (task_id == 1) r.task1_on_launcher = std::this_thread::get_id() == r.launcher;
            return 0;
          },
          &r, 2);
      const int n = r.num_task;
      if (rc != 0 || n != pool.max_concurrency() || r.runs[0] != 1 || r.runs[1] != (n == 2 ? 1 : 0)) ++bad;
      if (n == 2) ++parallel;
      if (r.task1_on_launcher) ++stolen;
    }
  }).join();
  CHECK(bad == 0);
  MESSAGE("the launcher ran task 1 itself in " << stolen << " of " << parallel << " two-task launches");
  if (parallel > 0) CHECK(stolen > 0);
}

TEST_CASE("a worker whose task was taken back is woken for the next launch") {
  // Tiny launches often end before their worker wakes; the launcher runs the task and
  // gives the worker back. A worker that then sleeps through the next post would hang
  // the next launch that needs it, which one with barriers does.
  thread_pool pool(2);
  std::atomic<int> bad{0};
  run_with_timeout(60, [&] {
    for (int i = 0; i < 30000; ++i) {
      if (i % 100 == 99) {
        if (launch_and_check(pool, 0, 1) != pool.max_concurrency()) ++bad;
      } else if (pool.launch([](int, TVMParallelGroupEnv*, void*) { return 0; }, nullptr, 0) != 0) {
        ++bad;
      }
    }
  });
  CHECK(bad == 0);
}

TEST_CASE("a forked child launches on a pool whose workers its parent started") {
#if defined(GEXEC_TEST_TSAN)
  MESSAGE("skipped under ThreadSanitizer, which does not model fork");
#else
  thread_pool pool(2);
  auto* other = new thread_pool(2);
  REQUIRE(launch_and_check(pool, 0) == pool.max_concurrency());
  REQUIRE(launch_and_check(*other, 0) == other->max_concurrency());

  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    bool ok = true;
    for (int i = 0; i < 100 && ok; ++i) ok = launch_and_check(pool, 0) == pool.max_concurrency();
    delete other;  // its workers do not exist here: leaked, not joined
    _exit(ok ? 0 : 1);
  }
  CHECK(test::child_succeeded(child));
  CHECK(launch_and_check(pool, 0) == pool.max_concurrency());  // the parent's pool is unharmed
  delete other;
#endif
}

TEST_CASE("nested launches run serially in the calling task") {
  thread_pool pool(4), other(4);
  struct seen {
    thread_pool* pool;
    thread_pool* other;
    std::atomic<int> outer{0}, inner{0}, wrong{0};
  } s{&pool, &other};
  auto outer = [](int, TVMParallelGroupEnv* penv, void* cdata) -> int {
    auto& s = *static_cast<seen*>(cdata);
    s.outer = penv->num_task;
    struct inner_arg {
      seen* s;
      std::thread::id caller;
    } a{&s, std::this_thread::get_id()};
    auto inner = [](int task_id, TVMParallelGroupEnv* penv, void* cdata) -> int {
      auto& a = *static_cast<inner_arg*>(cdata);
      ++a.s->inner;
      if (task_id != 0 || penv->num_task != 1 || std::this_thread::get_id() != a.caller) ++a.s->wrong;
      return 0;
    };
    if (s.pool->launch(inner, &a, 4) != 0 || s.other->launch(inner, &a, 0) != 0) return -1;
    return 0;
  };
  CHECK(pool.launch(outer, &s, 0) == 0);
  CHECK(s.outer == pool.max_concurrency());
  CHECK(s.inner == 2 * s.outer);  // two single-task inner launches per outer task
  CHECK(s.wrong == 0);
  CHECK(launch_and_check(pool, 0) == pool.max_concurrency());  // the flag is cleared after
}

TEST_CASE("every task sees the launcher's run context, and workers drop it afterwards") {
  using gexec::detail::current_context;
  thread_pool pool(4);
  struct seen {
    gexec::detail::run_context* context[kMaxTasks] = {};
    std::atomic<int> num_task{0};
  };
  auto record = [](int task_id, TVMParallelGroupEnv* penv, void* cdata) -> int {
    auto& s = *static_cast<seen*>(cdata);
    s.num_task = penv->num_task;
    s.context[task_id] = current_context();
    return 0;
  };
  gexec::detail::run_context ctx;
  for (int launch = 0; launch < 100; ++launch) {
    seen inside, after;
    {
      gexec::detail::context_scope scope(&ctx);
      REQUIRE(pool.launch(record, &inside, 0) == 0);
      CHECK(current_context() == &ctx);
    }
    CHECK(current_context() == nullptr);
    REQUIRE(pool.launch(record, &after, 0) == 0);
    REQUIRE(inside.num_task == pool.max_concurrency());
    REQUIRE(after.num_task == pool.max_concurrency());
    for (int t = 0; t < pool.max_concurrency(); ++t) {
      CHECK(inside.context[t] == &ctx);
      CHECK(after.context[t] == nullptr);
    }
  }
}

namespace {

using gexec::detail::launch_options;
using gexec::detail::task_kind;

/// What the tasks of an independent launch saw.
struct independent_check {
  std::atomic<int> runs[4 * kMaxTasks] = {};
  std::atomic<int> num_task{0};
  std::atomic<int> threads_seen{0};
  std::atomic<std::uint64_t> thread_mask{0};
};

int independent_task(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  auto& c = *static_cast<independent_check*>(cdata);
  c.num_task.store(penv->num_task, std::memory_order_relaxed);
  if (task_id < 0 || task_id >= 4 * kMaxTasks) return -1;
  c.runs[task_id].fetch_add(1, std::memory_order_relaxed);
  return 0;
}

}  // namespace

TEST_CASE("an independent launch runs kTasksPerThread tasks per thread, or the count asked for, each once") {
  thread_pool pool(4);
  for (int requested : {0, 3, 37, 2 * kMaxTasks}) {
    for (int launch = 0; launch < 200; ++launch) {
      independent_check c;
      REQUIRE(pool.launch(&independent_task, &c, requested, {.tasks = task_kind::independent}) == 0);
      const int n = c.num_task.load();
      if (pool.max_concurrency() == 1) {
        REQUIRE(n == 1);  // one core: a plain call
      } else if (requested > 0) {
        REQUIRE(n == requested);
      } else {
        // as many threads as were idle to reserve: all of them here, nobody else launches
        REQUIRE(n == thread_pool::kTasksPerThread * pool.max_concurrency());
      }
      for (int t = 0; t < 4 * kMaxTasks; ++t) REQUIRE(c.runs[t].load() == (t < n ? 1 : 0));
    }
  }
}

TEST_CASE("an independent launch's tasks cannot meet at a barrier: the barrier fails with a message") {
  thread_pool pool(2);
  if (pool.max_concurrency() < 2) {
    MESSAGE("SKIPPED: one core, every launch is a plain call");
    return;
  }
  auto task = [](int, TVMParallelGroupEnv* penv, void*) -> int { return thread_pool::barrier(penv); };
  CHECK(pool.launch(task, nullptr, 0, {.tasks = task_kind::independent}) == -1);
  CHECK(gexec::detail::take_last_error().find("do not run together") != std::string::npos);
  CHECK(launch_and_check(pool, 0) == pool.max_concurrency());  // together launches still meet
}

TEST_CASE("with a descheduled worker, the launcher runs the independent tasks it has not taken") {
  thread_pool pool(2);
  if (pool.max_concurrency() < 2) {
    MESSAGE("SKIPPED: one core, every launch is a plain call");
    return;
  }
  // The worker sleeps 20 ms in every task it takes: the launcher must take the rest, so a
  // launch waits for at most the one task the worker holds, not for a quarter of them each.
  struct state {
    std::thread::id launcher;
    std::atomic<int> runs[16] = {};
    std::atomic<int> by_launcher{0};
  } s;
  auto task = [](int task_id, TVMParallelGroupEnv*, void* cdata) -> int {
    auto& s = *static_cast<state*>(cdata);
    s.runs[task_id].fetch_add(1);
    if (std::this_thread::get_id() == s.launcher)
      s.by_launcher.fetch_add(1);
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return 0;
  };
  run_with_timeout(60, [&] {
    s.launcher = std::this_thread::get_id();
    for (int launch = 0; launch < 10; ++launch) {
      for (auto& r : s.runs) r = 0;
      s.by_launcher = 0;
      REQUIRE(pool.launch(task, &s, 0, {.tasks = task_kind::independent}) == 0);
      const int n = 2 * thread_pool::kTasksPerThread;
      for (int t = 0; t < 16; ++t) CHECK(s.runs[t].load() == (t < n ? 1 : 0));
      CHECK(s.by_launcher.load() >= n - 1);  // the worker took at most one
    }
  });
}

TEST_CASE("a launch that learns runs alone where threads cost more than they give, and in parallel where they pay") {
  thread_pool pool(2);
  if (pool.max_concurrency() < 2) {
    MESSAGE("SKIPPED: one core, every launch is a plain call");
    return;
  }
  // Two call sites, each a different lambda: one whose tasks on a worker are slow (as a
  // descheduled worker is), one whose single-task run is slow (as a big kernel alone is).
  static std::atomic<bool> flipped{false};
  auto slow_on_workers = [](int task_id, TVMParallelGroupEnv* penv, void*) -> int {
    const bool slow = flipped ? penv->num_task == 1 : task_id != 0;
    if (slow) std::this_thread::sleep_for(std::chrono::microseconds(500));
    return 0;
  };
  auto slow_alone = [](int, TVMParallelGroupEnv* penv, void*) -> int {
    if (penv->num_task == 1) std::this_thread::sleep_for(std::chrono::microseconds(500));
    return 0;
  };
  const launch_options learn{.tasks = task_kind::together, .learn = true};
  int alone_runs = 0;
  auto count_alone = [](int, TVMParallelGroupEnv* penv, void* cdata) -> int {
    if (penv->num_task == 1) ++*static_cast<int*>(cdata);
    return 0;
  };
  for (int i = 0; i < 200; ++i) {
    REQUIRE(pool.launch(slow_on_workers, nullptr, 0, learn) == 0);
    REQUIRE(pool.launch(slow_alone, nullptr, 0, learn) == 0);
  }
  CHECK(pool.runs_alone(slow_on_workers));
  CHECK_FALSE(pool.runs_alone(slow_alone));
  // The machine changes: now the site's single-task run is the slow one. It is tried again
  // after about 50 times its last parallel time, and the choice follows.
  flipped = true;
  const auto start = std::chrono::steady_clock::now();
  while (pool.runs_alone(slow_on_workers) && std::chrono::steady_clock::now() - start < std::chrono::seconds(20))
    REQUIRE(pool.launch(slow_on_workers, nullptr, 0, learn) == 0);
  CHECK_FALSE(pool.runs_alone(slow_on_workers));
  // A launch that does not learn always runs in parallel.
  for (int i = 0; i < 50; ++i) {
    int before = alone_runs;
    REQUIRE(pool.launch(count_alone, &alone_runs, 0) == 0);
    CHECK(alone_runs == before);
  }
}

namespace {
/// Drives a launch_sites table as a pool does (choose, run, record the time taken), with
/// the time each way takes given by `ticks_of(alone, call)` instead of measured: the
/// learning is exact, whatever else the machine is doing. Returns how many of the
/// `calls` ran alone.
template <class TicksOf>
int drive(gexec::detail::launch_sites& sites, const void* key, int calls, TicksOf&& ticks_of) {
  int alone = 0;
  for (int i = 0; i < calls; ++i) {
    const auto p = sites.choose(key);
    alone += p.alone ? 1 : 0;
    if (p.timed) sites.record(p, ticks_of(p.alone, i));
  }
  return alone;
}
}  // namespace

TEST_CASE("each of many sites learns its own way, its figures its own, from threads claiming them together") {
  // 150 kernels (the figures are handed out 64 at a time, in the order sites are
  // claimed): the even ones run faster alone, the odd ones in parallel. Two threads drive
  // every site at once, in opposite orders, so that both claim sites and hand out figures
  // together; each site must still learn from its own times only.
  gexec::detail::launch_sites sites;
  const std::uint64_t us = gexec::detail::ticks_per_microsecond();
  constexpr int kKernels = 150;
  std::vector<int> keys(kKernels);
  auto ticks_of = [&](int k) {
    return [k, us](bool alone, int) -> std::uint64_t { return (k % 2 == 0) == alone ? 50 * us : 400 * us; };
  };
  auto drive_all = [&](bool backwards) {
    for (int round = 0; round < 40; ++round)
      for (int j = 0; j < kKernels; ++j) {
        const int k = backwards ? kKernels - 1 - j : j;
        (void)drive(sites, &keys[k], 1, ticks_of(k));
      }
  };
  std::thread other(drive_all, true);
  drive_all(false);
  other.join();
  int wrong = 0;
  for (int k = 0; k < kKernels; ++k) wrong += sites.runs_alone(&keys[k]) != (k % 2 == 0) ? 1 : 0;
  CHECK(wrong == 0);
  // A site claimed on one thread and driven on another learns as well.
  int late = 0;
  std::thread([&] { (void)sites.choose(&late); }).join();
  (void)drive(sites, &late, 100, ticks_of(0));
  CHECK(sites.runs_alone(&late));
}

TEST_CASE("a site whose parallel calls stall now and then runs alone, though most of its parallel calls are faster") {
  // Beside a busy core, a parallel launch is mostly fast and waits a scheduler quantum
  // for a descheduled worker now and then; what it costs is in those waits. Here one
  // parallel call in five takes 3 ms, the others 50 us, and a call alone takes 200 us:
  // parallel costs 640 us a call on average, three times alone. The times are given,
  // not measured (the wall-clock behaviour is gexec_bench_threads' to show).
  gexec::detail::launch_sites sites;
  const std::uint64_t us = gexec::detail::ticks_per_microsecond();
  int parallel_calls = 0;
  auto ticks_of = [&](bool alone, int) -> std::uint64_t {
    if (alone) return 200 * us;
    return ++parallel_calls % 5 == 0 ? 3000 * us : 50 * us;
  };
  int key = 0;
  (void)drive(sites, &key, 100, ticks_of);  // learning
  const int alone = drive(sites, &key, 200, ticks_of);
  CAPTURE(alone);
  CHECK(sites.runs_alone(&key));
  CHECK(alone >= 196);  // each try of the parallel way is at most kTrial calls, after kPatience x its cost alone
  // A site whose parallel calls never stall runs in parallel, and one that alternates
  // fast and slow parallel calls is judged by their mean.
  gexec::detail::launch_sites fast;
  int fast_key = 0;
  (void)drive(fast, &fast_key, 100, [&](bool alone, int) -> std::uint64_t { return alone ? 200 * us : 60 * us; });
  CHECK_FALSE(fast.runs_alone(&fast_key));
  CHECK(drive(fast, &fast_key, 200, [&](bool alone, int) -> std::uint64_t { return alone ? 200 * us : 60 * us; }) <= 4);
  // The machine changes (the workers come back): the parallel way is tried again after
  // kPatience times its mean in calls alone, and each try forgets half of what the stalls
  // left in that mean, until it wins and is kept.
  int calls = 0;
  while (sites.runs_alone(&key) && calls < 10000) {
    (void)drive(sites, &key, 1, [&](bool alone, int) -> std::uint64_t { return alone ? 200 * us : 50 * us; });
    ++calls;
  }
  CAPTURE(calls);
  CHECK_FALSE(sites.runs_alone(&key));
  CHECK(calls < 1000);  // 424 with these times: the stalls' history fades over a few tries
}

