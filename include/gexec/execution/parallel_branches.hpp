#pragma once
// parallel_branches: independent steps at once on the runtime's pool. Each thread
// takes a ready step, runs it, and counts down its successors' dependencies (data,
// storage reuse, control_deps); a step whose count reaches zero is ready, and the
// thread that readied it keeps one for itself. A graph without two independent steps
// runs as the sequential loop.
//
// Kernels that launch parallel work of their own (TVMBackendParallelLaunch) run it
// serially while branches run in parallel: the branches hold the cores, so nothing is
// oversubscribed and nothing waits on a thread that is waiting.

#include "../config.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>

#include "policy.hpp"

GEXEC_NAMESPACE_BEGIN

struct parallel_branches {
  template <basic_step_program P>
  auto execute(P& steps) const {
    const std::uint32_t n = steps.size();
    const step_graph& deps = steps.dependencies();
    const int tasks = std::min<int>(steps.max_concurrency(), static_cast<int>(std::min<std::uint32_t>(deps.width, n)));
    if (tasks <= 1) {
      steps.run(0, n);
      return;
    }
    auto pending = steps.counters();  // per step: dependencies not yet done
    auto queue = steps.slots();       // ready steps, each pushed once
    std::uint32_t head = 0, tail = 0, done = 0;
    for (std::uint32_t k = 0; k < n; ++k) {
      pending[k].store(deps.num_preds[k], std::memory_order_relaxed);
      if (deps.num_preds[k] == 0) queue[tail++] = k;
    }
    std::mutex mu;
    std::condition_variable cv;
    std::exception_ptr failure;

    steps.parallel_for(tasks, [&](int, int) {
      auto context = steps.thread_context();
      std::uint32_t next = UINT32_MAX;  // a step this thread readied and kept
      for (;;) {
        std::uint32_t k = next;
        next = UINT32_MAX;
        if (k == UINT32_MAX) {
          std::unique_lock lock(mu);
          cv.wait(lock, [&] { return head < tail || done == n || failure; });
          if (failure || (head == tail && done == n)) return;
          k = queue[head++];
        }
        try {
          steps.run_step(k);
        } catch (...) {
          std::lock_guard lock(mu);
          if (!failure) failure = std::current_exception();
          cv.notify_all();
          return;
        }
        std::uint32_t readied = 0;
        std::unique_lock lock(mu, std::defer_lock);
        for (std::uint32_t i = deps.succ_begin[k]; i < deps.succ_begin[k + 1]; ++i) {
          const std::uint32_t s = deps.succ[i];
          if (pending[s].fetch_sub(1, std::memory_order_acq_rel) != 1) continue;
          if (next == UINT32_MAX) {
            next = s;
            continue;
          }
          if (!lock.owns_lock()) lock.lock();
          queue[tail++] = s;
          ++readied;
        }
        if (!lock.owns_lock()) lock.lock();
        const bool finished = ++done == n;
        lock.unlock();
        if (finished) cv.notify_all();
        else if (readied == 1) cv.notify_one();
        else if (readied > 1) cv.notify_all();
      }
    });
    if (failure) std::rethrow_exception(failure);
  }
};
static_assert(execution_policy<parallel_branches>);

GEXEC_NAMESPACE_END
