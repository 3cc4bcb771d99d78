#pragma once
// parallel_branches: independent steps at once on the runtime's pool. The run's thread
// takes a ready step, runs it, and counts down its successors' dependencies (data,
// storage reuse, control_deps); a step whose count reaches zero is ready, and the
// thread that readied it keeps one for itself. Ready steps it does not keep wait in a
// queue, and for each one a helper is posted to an idle worker of the pool (up to one
// fewer than the threads the pool may run): a helper runs steps while the queue has
// some, then gives its worker back, and hands the step it readied to the run's thread
// when that one is idle. A graph without two independent steps runs as the sequential
// loop.
//
// Kernels that launch parallel work of their own (TVMBackendParallelLaunch) take the
// workers no branch holds at that moment: a chain before or after the branches runs its
// kernels on every core, and so does a branch whose sibling is done. The pool hands
// out only idle workers, so the threads never outnumber the cores, and nothing waits
// on a thread that is waiting.

#include "../config.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>

#include "../detail/futex.hpp"
#include "policy.hpp"

GEXEC_NAMESPACE_BEGIN

struct parallel_branches {
  template <basic_step_program P>
  auto execute(P& steps) const {
    const std::uint32_t n = steps.size();
    const step_graph& deps = steps.dependencies();
    const int threads = std::min<int>(steps.max_concurrency(), static_cast<int>(std::min<std::uint32_t>(deps.width, n)));
    if (threads <= 1) {
      steps.run(0, n);
      return;
    }
    branch_run<P> run{steps, deps, n, threads - 1};
    run.start();
    run.work(false);
    run.finish();
  }

 private:
  template <class P>
  struct branch_run {
    static constexpr std::uint32_t kNoStep = UINT32_MAX;

    branch_run(P& s, const step_graph& d, std::uint32_t count, int helpers_at_most)
        : steps(s), deps(d), n(count), most(helpers_at_most), pending(s.counters()), queue(s.slots()) {}

    void start() {
      for (std::uint32_t k = 0; k < n; ++k) {
        pending[k].store(deps.num_preds[k], std::memory_order_relaxed);
        if (deps.num_preds[k] == 0) queue[tail++] = k;
      }
      std::unique_lock lock(mu);
      recruit(lock, 1);  // the run's thread takes the first
    }

    // Runs steps until the graph is done (the run's thread) or the queue is empty (a helper).
    void work(bool helper) {
      auto context = steps.thread_context();
      std::uint32_t next = kNoStep;  // a step this thread readied and kept
      for (;;) {
        std::uint32_t k = next;
        next = kNoStep;
        if (k == kNoStep) {
          std::unique_lock lock(mu);
          if (helper) {
            if (failure || head == tail) return leave(lock);
          } else {
            waiting = true;
            wait(lock, [&] { return head < tail || done == n || failure; });
            waiting = false;
            if (failure || (head == tail && done == n)) return;
          }
          k = queue[head++];
        }
        try {
          steps.run_step(k);
        } catch (...) {
          std::unique_lock lock(mu);
          if (!failure) failure = std::current_exception();
          notify();
          if (helper) leave(lock);
          return;
        }
        std::unique_lock lock(mu, std::defer_lock);
        bool queued = false;
        for (std::uint32_t i = deps.succ_begin[k]; i < deps.succ_begin[k + 1]; ++i) {
          const std::uint32_t s = deps.succ[i];
          if (pending[s].fetch_sub(1, std::memory_order_acq_rel) != 1) continue;
          if (next == kNoStep) {
            next = s;
            continue;
          }
          if (!lock.owns_lock()) lock.lock();
          queue[tail++] = s;
          queued = true;
        }
        if (!lock.owns_lock()) lock.lock();
        const bool finished = ++done == n;
        // A helper whose next step the idle run's thread can take hands it over and gives
        // its worker back: the steps after the branches then launch on every core.
        const bool hand_over = helper && waiting && next != kNoStep;
        if (hand_over) {
          queue[tail++] = next;
          queued = true;
        }
        if (queued) recruit(lock, waiting ? 1 : 0);
        if (finished || queued) notify();  // the run's thread may wait for either
        if (hand_over) return leave(lock);
      }
    }

    // The run's thread, its own work done: waits for the helpers, then reports.
    void finish() {
      std::unique_lock lock(mu);
      wait(lock, [&] { return helpers == 0; });
      if (failure) std::rethrow_exception(failure);
    }

   private:
    static int helper_entry(int, TVMParallelGroupEnv*, void* cdata) {
      auto& run = *static_cast<branch_run*>(cdata);
      try {
        run.work(true);
      } catch (...) {  // outside a step (no memory for the context's copy): the run fails all the same
        std::unique_lock lock(run.mu);
        if (!run.failure) run.failure = std::current_exception();
        run.leave(lock);
      }
      return 0;
    }

    // Posts helpers for the queued steps beyond those `takers` threads waiting will take,
    // as long as workers are idle and fewer than `most` helpers are out. A helper posted
    // for a step somebody else takes first finds the queue empty and leaves.
    void recruit(std::unique_lock<std::mutex>& lock, std::uint32_t takers) {
      std::uint32_t posted_now = 0;
      while (helpers < most && tail - head > takers + posted_now) {
        ++helpers;  // counted before it can start and leave
        lock.unlock();
        const bool posted = steps.post_detached(&helper_entry, this);
        lock.lock();
        if (!posted) {
          --helpers;
          return;
        }
        ++posted_now;
      }
    }

    // Only the run's thread waits (for a step, the last step, a failure, the helpers to
    // leave): until `ready` holds, it sleeps on `changes`, which every change bumps
    // under the lock, so that one made after it looked wakes it.
    template <class Ready>
    void wait(std::unique_lock<std::mutex>& lock, Ready ready) {
      while (!ready()) {
        const std::uint32_t seen = changes.load(std::memory_order_relaxed);
        lock.unlock();
        detail::futex_wait(changes, seen);
        lock.lock();
      }
    }
    void notify() noexcept {  // under the lock
      changes.fetch_add(1, std::memory_order_relaxed);
      detail::futex_wake(changes, false);
    }

    // A helper's last touch of the run: the run's thread may return once it is out.
    void leave(std::unique_lock<std::mutex>&) {
      --helpers;
      notify();  // under the lock: the run's thread cannot end the run (and its `changes`) first
    }

    P& steps;
    const step_graph& deps;
    const std::uint32_t n;
    const int most;  // helpers at once
    std::span<std::atomic<std::uint32_t>> pending;  // per step: dependencies not yet done
    std::span<std::uint32_t> queue;                 // ready steps, each pushed once
    std::mutex mu;
    std::atomic<std::uint32_t> changes{0};  // bumped under `mu` at each change the run's thread may wait for
    std::uint32_t head = 0, tail = 0, done = 0;
    int helpers = 0;       // posted and not yet left
    bool waiting = false;  // the run's thread waits for a step
    std::exception_ptr failure;
  };
};
static_assert(execution_policy<parallel_branches>);

GEXEC_NAMESPACE_END
