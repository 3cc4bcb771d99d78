#pragma once
// Whether an executor's runs use the workers at all. Each launch of a kernel learns on
// its own whether it pays for its threads (launch_sites.hpp), and a model of tiny
// kernels learns that none does; it still looks its answer up on every launch, a few
// nanoseconds each, which is a tenth of a run of five launches that takes 70 ns. So
// the executor learns the same of its run as a whole: after a short run (under
// kShortRunUs) in which no launch and no step left the running thread, the next
// kSerialRuns runs use a pool of one thread, where every launch is a plain call with
// nothing looked up, and the run after them learns again, its timed calls counting for
// the runs that were not timed. A site whose choice changes (the machine got quiet, a
// parallel try is due) launches on the workers in that run, and the runs after it
// learn on every launch, as before. Long runs always learn: the lookups cost them
// nothing measurable, and their sites re-check their choices at the usual pace.

#include "../config.hpp"

#include <cstdint>

#include "launch_sites.hpp"
#include "run_context.hpp"
#include "thread_pool.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

class serial_runs {
 public:
  /// How many runs use the one-thread pool after a short run that used no worker.
  static constexpr std::uint32_t kSerialRuns = 255;
  /// Runs up to this long (in microseconds) may be followed by serial runs.
  static constexpr std::uint64_t kShortRunUs = 50;

  /// Around one run() with the executor's context, on the thread that runs it.
  class scope {
   public:
    scope(serial_runs& runs, run_context& context) noexcept : runs_(runs), context_(context), pool_(context.pool) {
      if (runs_.left_ > 0) {
        --runs_.left_;
        context_.pool = &one_thread();
      } else if (pool_ != nullptr && pool_->max_concurrency() > 1) {
        learning_ = true;
        weight_ = runs_per_run();
        if (runs_.after_serial_) runs_per_run() = kSerialRuns + 1;
        runs_.after_serial_ = false;
        uses_before_ = worker_uses();
        start_ = cheap_ticks();
      }
    }
    ~scope() {
      context_.pool = pool_;
      if (!learning_) return;
      runs_per_run() = weight_;
      if (worker_uses() == uses_before_ && cheap_ticks() - start_ < short_run_ticks()) {
        runs_.left_ = kSerialRuns;
        runs_.after_serial_ = true;
      }
    }
    scope(const scope&) = delete;
    scope& operator=(const scope&) = delete;

   private:
    static thread_pool& one_thread() noexcept {
      static thread_pool pool(1);  // starts no thread
      return pool;
    }
    static std::uint64_t short_run_ticks() noexcept {
      static const std::uint64_t ticks = kShortRunUs * ticks_per_microsecond();
      return ticks;
    }

    serial_runs& runs_;
    run_context& context_;
    thread_pool* const pool_;
    std::uint64_t start_ = 0;
    std::uint32_t uses_before_ = 0;
    std::uint32_t weight_ = 1;
    bool learning_ = false;
  };

 private:
  std::uint32_t left_ = 0;     ///< serial runs to go before the next one learns
  bool after_serial_ = false;  ///< the next learning run follows kSerialRuns serial ones
};

}  // namespace detail
GEXEC_NAMESPACE_END
