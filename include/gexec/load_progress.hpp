#pragma once
// A callback for long loads (parameter files, graph files, models): how many bytes have
// been read of how many, for a progress bar.

#include "config.hpp"

#include <cstdint>
#include <functional>

GEXEC_NAMESPACE_BEGIN

/// Called from the loading thread with the bytes read so far and the total: `done` never
/// decreases between calls, and the last call of a load that succeeds has done == total.
/// Calls come every few MiB, so a callback may draw directly. What it throws ends the load.
using load_progress = std::function<void(std::uint64_t done, std::uint64_t total)>;

namespace detail {

/// Reports to a load_progress, if there is one, only when `done` has grown; `base` is
/// added to what a part of a larger load reports (a graph file, then a parameter file).
class progress_sink {
 public:
  progress_sink() = default;
  progress_sink(const load_progress* fn, std::uint64_t total, std::uint64_t base = 0) : fn_(fn && *fn ? fn : nullptr), total_(total), base_(base) {}

  [[nodiscard]] explicit operator bool() const noexcept { return fn_ != nullptr; }
  void report(std::uint64_t done) {
    if (!fn_ || (done <= last_ && reported_)) return;
    last_ = done;
    reported_ = true;
    (*fn_)(base_ + done, total_);
  }

 private:
  const load_progress* fn_ = nullptr;
  std::uint64_t total_ = 0, base_ = 0, last_ = 0;
  bool reported_ = false;
};

}  // namespace detail
GEXEC_NAMESPACE_END
