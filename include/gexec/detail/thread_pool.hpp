#pragma once
// TVMBackendParallelLaunch / ParallelBarrier: a process-wide pool of worker threads.
// Task 0 runs on the launching thread, tasks 1..n-1 on workers; all tasks of a launch
// run at once, so a barrier between them works. The pool size comes from
// GEXEC_NUM_THREADS, else TVM_NUM_THREADS, else the number of cores.

#include "../config.hpp"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../tvm_abi.hpp"
#include "last_error.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/// Spins briefly, then sleeps in the kernel, until `a` no longer holds `old`.
template <class T>
void wait_while_equal(const std::atomic<T>& a, T old) noexcept {
  for (int i = 0; i < 4000; ++i) {
    if (a.load(std::memory_order_acquire) != old) return;
    cpu_relax();
  }
  while (a.load(std::memory_order_acquire) == old) a.wait(old, std::memory_order_acquire);
}

/// Threads requested by the environment, else the core count.
inline int default_num_threads() {
  for (const char* name : {"GEXEC_NUM_THREADS", "TVM_NUM_THREADS"}) {
    if (const char* v = std::getenv(name)) {
      char* end = nullptr;
      long n = std::strtol(v, &end, 10);
      if (end != v && *end == '\0' && n > 0 && n <= 1024) return static_cast<int>(n);
    }
  }
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

class thread_pool {
 public:
  explicit thread_pool(int num_threads)
      : num_threads_(num_threads < 1 ? 1 : num_threads), slots_(static_cast<std::size_t>(num_threads_)) {
    for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { work(slots_[static_cast<std::size_t>(i)]); });
  }
  ~thread_pool() {
    for (std::size_t i = 1; i < slots_.size(); ++i) {
      slots_[i].job.store(&stop_job_, std::memory_order_release);
      slots_[i].job.notify_one();
    }
    for (auto& t : workers_) t.join();
  }
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  static thread_pool& instance() {
    static thread_pool pool(default_num_threads());
    return pool;
  }

  /// Threads a launch can use, the caller's included.
  [[nodiscard]] int num_threads() const noexcept { return num_threads_; }

  /// Runs `num_task` tasks (0: one per thread; never more than the threads, so that
  /// barriers cannot deadlock). Returns 0, or -1 with the first failing task's message
  /// as the caller's last error.
  int launch(FTVMParallelLambda f, void* cdata, int num_task) {
    int n = (num_task <= 0 || num_task > num_threads_) ? num_threads_ : num_task;
    // Nested launches, and launches while another thread holds the pool, run in the caller.
    std::unique_lock lock(launch_mu_, std::try_to_lock);
    if (in_task() || !lock.owns_lock() || n == 1) return run_serial(f, cdata);

    job j;
    j.f = f;
    j.cdata = cdata;
    j.env.sync_handle = &j;
    j.env.num_task = n;
    pending_.store(n - 1, std::memory_order_relaxed);
    for (int i = 1; i < n; ++i) {
      slot& s = slots_[static_cast<std::size_t>(i)];
      s.task_id = i;
      s.job.store(&j, std::memory_order_release);
      s.job.notify_one();
    }
    run_task(j, 0);
    // Workers touch `j` only before they count down, so it may die once pending_ is 0.
    for (int left = pending_.load(std::memory_order_acquire); left != 0; left = pending_.load(std::memory_order_acquire))
      wait_while_equal(pending_, left);
    if (j.failed.load(std::memory_order_acquire)) {
      set_last_error(j.error);
      return -1;
    }
    return 0;
  }

  /// TVMBackendParallelBarrier: every task of the launch waits for the others.
  static int barrier(TVMParallelGroupEnv* penv) {
    if (penv == nullptr || penv->num_task <= 1 || penv->sync_handle == nullptr) return 0;
    auto* j = static_cast<job*>(penv->sync_handle);
    int phase = j->barrier_phase.load(std::memory_order_acquire);
    if (j->barrier_count.fetch_add(1, std::memory_order_acq_rel) + 1 == penv->num_task) {
      j->barrier_count.store(0, std::memory_order_relaxed);
      j->barrier_phase.fetch_add(1, std::memory_order_acq_rel);
      j->barrier_phase.notify_all();
    } else {
      wait_while_equal(j->barrier_phase, phase);
    }
    return 0;
  }

 private:
  struct job {
    FTVMParallelLambda f = nullptr;
    void* cdata = nullptr;
    TVMParallelGroupEnv env{};
    std::atomic<bool> failed{false};
    std::mutex error_mu;
    std::string error;
    std::atomic<int> barrier_count{0};
    std::atomic<int> barrier_phase{0};
  };
  // One mailbox per worker, on its own cache line.
  struct alignas(64) slot {
    std::atomic<thread_pool::job*> job{nullptr};
    int task_id = 0;
  };

  static bool& in_task() {
    thread_local bool flag = false;
    return flag;
  }

  static int run_serial(FTVMParallelLambda f, void* cdata) {
    TVMParallelGroupEnv env{nullptr, 1};
    bool outer = !in_task();
    in_task() = true;
    int rc = f(0, &env, cdata);
    if (outer) in_task() = false;
    return rc == 0 ? 0 : -1;
  }

  static void run_task(job& j, int task_id) {
    in_task() = true;
    int rc = j.f(task_id, &j.env, j.cdata);
    in_task() = false;
    if (rc != 0) {
      std::lock_guard g(j.error_mu);
      if (!j.failed.exchange(true, std::memory_order_acq_rel)) {
        j.error = take_last_error();
        if (j.error.empty()) j.error = "parallel task " + std::to_string(task_id) + " failed";
      }
    }
  }

  void work(slot& s) {
    for (;;) {
      wait_while_equal(s.job, static_cast<job*>(nullptr));
      job* j = s.job.load(std::memory_order_acquire);
      if (j == &stop_job_) return;
      run_task(*j, s.task_id);
      s.job.store(nullptr, std::memory_order_relaxed);
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
    }
  }

  int num_threads_;
  std::vector<slot> slots_;
  std::vector<std::thread> workers_;
  std::atomic<int> pending_{0};
  std::mutex launch_mu_;
  job stop_job_;
};

}  // namespace detail
GEXEC_NAMESPACE_END
