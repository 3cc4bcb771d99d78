#pragma once
// trace_recorder: when each step of a run started and ended, and on which thread, as a
// Chrome trace (JSON) that Perfetto and chrome://tracing open.
//
//   gexec::trace_recorder trace(ex);
//   ex.run(gexec::parallel_branches{}, trace);
//   trace.end_run();                        // keeps the run; record more runs if wanted
//   std::ofstream("trace.json") << trace.chrome_trace();
//
// Each step writes only its own slot, so steps may be recorded on several threads at
// once; end_run() must not overlap a run.

#include "../config.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "../detail/json_path.hpp"
#include "../executor/executor_view.hpp"
#include "../graph.hpp"
#include "../plan.hpp"
#include "observer.hpp"

GEXEC_NAMESPACE_BEGIN

class trace_recorder {
 public:
  /// One step of one run: times in nanoseconds since the recorder was made.
  struct event {
    std::uint32_t run;
    std::uint32_t step;
    std::uint32_t node_id;
    std::uint32_t thread;  ///< a number per thread of the process, in the order threads first recorded
    std::int64_t start_ns;
    std::int64_t end_ns;
  };

  /// A recorder for runs of `ex` (any executor), which must outlive it.
  explicit trace_recorder(executor_view ex)
      : graph_(&ex.get_graph()), slots_(ex.get_plan().step_node.size()), origin_(clock::now()) {}

  void before(const step_event& e) noexcept {
    slot& s = slots_[e.step];
    s.node_id = e.node_id;
    s.thread = thread_number();
    s.start = since_origin();
    s.end = -1;
  }
  void after(const step_event& e) noexcept { slots_[e.step].end = since_origin(); }

  /// Moves the steps recorded since the last end_run() into events(), as run number
  /// runs(). A step that failed (no end) is kept with its end at the time of this call.
  void end_run() {
    const std::int64_t now = since_origin();
    bool any = false;
    for (std::uint32_t k = 0; k < slots_.size(); ++k) {
      slot& s = slots_[k];
      if (s.start < 0) continue;
      events_.push_back({runs_, k, s.node_id, s.thread, s.start, s.end < 0 ? now : s.end});
      s = slot{};
      any = true;
    }
    if (any) ++runs_;
  }

  [[nodiscard]] const std::vector<event>& events() const noexcept { return events_; }
  [[nodiscard]] std::uint32_t runs() const noexcept { return runs_; }

  /// The Chrome trace event format: one complete ("X") event per step, named after the
  /// node, its function as the category, on a track per thread.
  [[nodiscard]] std::string chrome_trace() const {
    std::string out = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[";
    std::vector<std::uint32_t> threads;
    for (const event& e : events_) {
      if (std::find(threads.begin(), threads.end(), e.thread) == threads.end()) threads.push_back(e.thread);
      const node& n = graph_->nodes[e.node_id];
      out += (&e == events_.data() ? "\n" : ",\n");
      out += "{\"name\":" + quoted(n.name) + ",\"cat\":" + quoted(n.func_name) + ",\"ph\":\"X\",\"ts\":" + micros(e.start_ns) +
             ",\"dur\":" + micros(e.end_ns - e.start_ns) + ",\"pid\":1,\"tid\":" + std::to_string(e.thread) +
             ",\"args\":{\"node\":" + std::to_string(e.node_id) + ",\"step\":" + std::to_string(e.step) +
             ",\"run\":" + std::to_string(e.run) + "}}";
    }
    for (const std::uint32_t t : threads)
      out += ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":" + std::to_string(t) +
             ",\"args\":{\"name\":\"gexec thread " + std::to_string(t) + "\"}}";
    out += "\n]}\n";
    return out;
  }

 private:
  using clock = std::chrono::steady_clock;
  // One cache line per step: steps recorded on different threads write different lines.
  struct alignas(64) slot {
    std::int64_t start = -1;
    std::int64_t end = -1;
    std::uint32_t node_id = 0;
    std::uint32_t thread = 0;
  };

  [[nodiscard]] std::int64_t since_origin() const noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now() - origin_).count();
  }
  static std::uint32_t thread_number() noexcept {
    static std::atomic<std::uint32_t> next{0};
    thread_local const std::uint32_t mine = next.fetch_add(1, std::memory_order_relaxed);
    return mine;
  }
  static std::string micros(std::int64_t ns) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%lld.%03lld", static_cast<long long>(ns / 1000), static_cast<long long>(ns % 1000));
    return buf;
  }
  /// A JSON string: quotes, backslashes and control characters escaped.
  static std::string quoted(std::string_view s) { return detail::json_quoted(s); }

  const graph* graph_;
  std::vector<slot> slots_;
  clock::time_point origin_;
  std::vector<event> events_;
  std::uint32_t runs_ = 0;
};
static_assert(step_observer<trace_recorder>);

GEXEC_NAMESPACE_END
