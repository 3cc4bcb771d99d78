#pragma once
// node_timer: wall time per node, summed over the runs it observed, like the per-op
// table of TVM's debug executor.
//
//   gexec::node_timer timer(ex.get_graph());
//   for (int i = 0; i < 10; ++i) ex.run(timer);
//   for (const auto& n : timer.report()) std::printf("%s %.3f us\n", n.name.c_str(), n.mean_us);

#include "../config.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "../detail/clock.hpp"
#include "../graph/data.hpp"
#include "observer.hpp"

GEXEC_NAMESPACE_BEGIN

class node_timer {
 public:
  struct node_time {
    std::uint32_t node_id;
    std::string name;
    std::string func_name;
    std::uint64_t calls;
    double total_us;
    double mean_us;
  };

  explicit node_timer(const graph& g) : graph_(&g), per_node_(g.nodes.size()) {}

  // A node can have several steps (a __nop copying several outputs), which a parallel
  // policy may run at once on different threads: a step's start is kept by the thread
  // running it (its before and after run on that thread, with no other step between),
  // and the node's figures are summed atomically.
  void before(const step_event&) noexcept { started() = detail::monotonic_ns(); }
  void after(const step_event& e) noexcept {
    slot& s = per_node_[e.node_id];
    s.total_ns.fetch_add(detail::monotonic_ns() - started(), std::memory_order_relaxed);
    s.calls.fetch_add(1, std::memory_order_relaxed);
  }

  /// Nodes that ran, slowest first.
  [[nodiscard]] std::vector<node_time> report() const {
    std::vector<node_time> out;
    for (std::uint32_t nid = 0; nid < per_node_.size(); ++nid) {
      const slot& s = per_node_[nid];
      const std::uint64_t calls = s.calls.load(std::memory_order_relaxed);
      if (calls == 0) continue;
      const double us = static_cast<double>(s.total_ns.load(std::memory_order_relaxed)) / 1e3;
      out.push_back({nid, graph_->nodes[nid].name, graph_->nodes[nid].func_name, calls, us, us / static_cast<double>(calls)});
    }
    std::stable_sort(out.begin(), out.end(), [](const node_time& a, const node_time& b) { return a.total_us > b.total_us; });
    return out;
  }
  void reset() noexcept {
    for (slot& s : per_node_) {
      s.total_ns.store(0, std::memory_order_relaxed);
      s.calls.store(0, std::memory_order_relaxed);
    }
  }

 private:
  static std::int64_t& started() noexcept {
    thread_local std::int64_t t = 0;
    return t;
  }
  // One cache line per node: steps of different nodes may be timed on different threads.
  struct alignas(64) slot {
    std::atomic<std::int64_t> total_ns{0};
    std::atomic<std::uint64_t> calls{0};
  };
  const graph* graph_;
  std::vector<slot> per_node_;
};
static_assert(step_observer<node_timer>);

GEXEC_NAMESPACE_END
