#pragma once
// TVM's debug executor, as functions over any executor: per-node timings
// (run_individual, run_individual_node) and a profile report printed as TVM's debug
// executor printed its table, with per-function totals.
//
//   auto ex = m.instantiate();
//   ex.set_input("data", x);
//   gexec::profile_report r = gexec::profile(ex);   // a few warm-up runs, then timed runs
//   std::cout << r.table();
//
// profile() times every node in place, inside whole runs, through the observer hook:
// caches hold what a real run leaves in them. run_individual() times each node alone,
// repeated, as TVM's run_individual did; it runs the steps of one node again and again,
// so it reads whatever the last whole run left in that node's inputs.

#include "../config.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <dlpack/dlpack.h>

#include "../benchmark.hpp"
#include "../detail/shape.hpp"
#include "../device.hpp"
#include "../dtype.hpp"
#include "../error.hpp"
#include "../execution/policy.hpp"
#include "../graph.hpp"
#include "../observers/node_timer.hpp"

GEXEC_NAMESPACE_BEGIN

/// One node of a profile: where it ran, what it read and wrote, and its time per run.
struct node_profile {
  std::uint32_t node_id = 0;
  std::string name;
  std::string func_name;
  DLDevice device{kDLCPU, 0};
  std::vector<std::vector<std::int64_t>> input_shapes, output_shapes;
  std::vector<DLDataType> input_dtypes, output_dtypes;
  std::vector<double> times;  ///< seconds per run, one figure per repeat
  double mean = 0;            ///< seconds per run, the mean of `times`
  double share = 0;           ///< of the profile's total, in [0, 1]
};

/// The nodes that call one function, together.
struct function_profile {
  std::string func_name;
  std::uint32_t nodes = 0;
  double total = 0;  ///< seconds per run, summed over its nodes
  double share = 0;
};

struct profile_report {
  std::vector<node_profile> nodes;          ///< nodes that ran, slowest first
  std::vector<function_profile> functions;  ///< slowest first
  double total = 0;                         ///< seconds per run, summed over the nodes
  double run_time = 0;                      ///< seconds per whole timed run, hooks included

  /// The per-node table of TVM's debug executor (node name, function, time, share,
  /// shapes and dtypes, one measurement per repeat), then the per-function totals.
  [[nodiscard]] std::string table() const;
};

struct profile_options {
  int warmup = 3;  ///< untimed runs first (TVM's profile() made 3)
  int repeat = 3;  ///< measurements per node
  int number = 1;  ///< runs per measurement
};

namespace detail {

/// Steps [begin, end) only, each measured by gexec::benchmark inside one run.
struct timed_steps {
  std::uint32_t begin, end;
  benchmark_options options;
  benchmark_result* result;
  template <basic_step_program P>
  auto execute(P& steps) const {
    *result = benchmark([&steps, this] { steps.run(begin, end); }, options);
  }
};

/// The steps of node `nid`: [first, last) in the run order (empty for nodes with none).
template <class Executor>
std::pair<std::uint32_t, std::uint32_t> steps_of_node(const Executor& ex, std::uint32_t nid) {
  const auto& order = ex.get_plan().step_node;
  const auto lo = std::lower_bound(order.begin(), order.end(), nid);
  const auto hi = std::upper_bound(lo, order.end(), nid);
  return {static_cast<std::uint32_t>(lo - order.begin()), static_cast<std::uint32_t>(hi - order.begin())};
}

inline std::string format_us(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", seconds * 1e6);
  return buf;
}

inline std::string format_percent(double share) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", share * 100);
  return buf;
}

/// "float32[1, 64], float32[32, 64] -> float32[1, 32]"
inline std::string signature(const node_profile& n) {
  auto list = [](const std::vector<std::vector<std::int64_t>>& shapes, const std::vector<DLDataType>& dtypes) {
    std::string s;
    for (std::size_t i = 0; i < shapes.size(); ++i) s += (i ? ", " : "") + to_string(dtypes[i]) + shape_to_string(shapes[i]);
    return s;
  };
  return list(n.input_shapes, n.input_dtypes) + " -> " + list(n.output_shapes, n.output_dtypes);
}

/// Left-aligned columns two spaces apart, a dashed rule under the header.
inline std::string format_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width;
  for (const auto& row : rows)
    for (std::size_t c = 0; c < row.size(); ++c) {
      if (width.size() <= c) width.push_back(0);
      width[c] = std::max(width[c], row[c].size());
    }
  std::string out;
  auto line = [&](const std::vector<std::string>& row) {
    std::string l;
    for (std::size_t c = 0; c < row.size(); ++c) {
      l += row[c];
      if (c + 1 < row.size()) l.append(width[c] - row[c].size() + 2, ' ');
    }
    out += l + '\n';
  };
  for (std::size_t r = 0; r < rows.size(); ++r) {
    line(rows[r]);
    if (r == 0) {
      std::vector<std::string> rule;
      for (const auto& h : rows[0]) rule.emplace_back(h.size(), '-');
      line(rule);
    }
  }
  return out;
}

/// Shapes, dtypes and device of node `nid` as the executor's entries hold them.
template <class Executor>
node_profile describe_node(const Executor& ex, std::uint32_t nid) {
  const graph& g = ex.get_graph();
  const auto& entries = ex.get_instance_plan().entries;
  const node& n = g.nodes[nid];
  node_profile p;
  p.node_id = nid;
  p.name = n.name;
  p.func_name = n.func_name;
  for (const node_entry& in : n.inputs) {
    const DLTensor& t = entries[g.entry_id(in)];
    p.input_shapes.emplace_back(t.shape, t.shape + t.ndim);
    p.input_dtypes.push_back(t.dtype);
  }
  for (std::uint32_t k = 0; k < n.num_outputs; ++k) {
    const DLTensor& t = entries[g.entry_id(nid, k)];
    p.output_shapes.emplace_back(t.shape, t.shape + t.ndim);
    p.output_dtypes.push_back(t.dtype);
    if (k == 0) p.device = t.device;
  }
  return p;
}

}  // namespace detail

/// Node `node_id` alone, measured as gexec::benchmark measures (`options.number` calls
/// per measurement, `options.repeat` measurements): seconds per call, one per repeat.
/// A node without steps (inputs, parameters, `__nop` aliases) takes 0. The executor's
/// inputs must be set; the node reads what the last run left in its inputs.
template <class Executor>
std::vector<double> run_individual_node(Executor& ex, std::uint32_t node_id, const benchmark_options& options = {}) {
  const graph& g = ex.get_graph();
  if (node_id >= g.nodes.size())
    throw error(errc::invalid_argument, "run_individual_node: node " + std::to_string(node_id) + " out of range (" +
                                            std::to_string(g.nodes.size()) + " nodes)");
  if (options.repeat < 1 || options.number < 1)
    throw error(errc::invalid_argument, "run_individual_node: repeat and number must be at least 1");
  const auto [begin, end] = detail::steps_of_node(ex, node_id);
  if (begin == end) return std::vector<double>(static_cast<std::size_t>(options.repeat), 0.0);
  benchmark_result r;
  ex.run(detail::timed_steps{begin, end, options, &r});
  return r.results;
}

/// Every node alone, as TVM's run_individual: one warm-up run of the whole graph, then
/// run_individual_node for each node. Indexed by node id; nodes without steps take 0.
template <class Executor>
std::vector<std::vector<double>> run_individual(Executor& ex, const benchmark_options& options = {}) {
  ex.run();
  std::vector<std::vector<double>> times;
  for (std::uint32_t nid = 0; nid < ex.get_graph().nodes.size(); ++nid) times.push_back(run_individual_node(ex, nid, options));
  return times;
}

/// Times every node in place: `warmup` whole runs, then `repeat` measurements of
/// `number` whole runs each, with a node_timer observing them all (the warm-up too, its
/// times dropped).
template <class Executor>
profile_report profile(Executor& ex, const profile_options& options = {}) {
  if (options.warmup < 0 || options.repeat < 1 || options.number < 1)
    throw error(errc::invalid_argument, "profile: warmup must be >= 0, repeat and number >= 1");
  const graph& g = ex.get_graph();
  node_timer timer(g);
  // The warm-up runs take the measured path, timer included, so that the first
  // measurement finds it warm too (caches, pages, the timer's own storage).
  for (int i = 0; i < options.warmup; ++i) ex.run(timer);
  std::vector<std::vector<double>> per_node(g.nodes.size());
  std::vector<bool> ran(g.nodes.size(), false);
  double run_seconds = 0;
  for (int r = 0; r < options.repeat; ++r) {
    timer.reset();
    const auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < options.number; ++k) ex.run(timer);
    run_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::vector<double> this_repeat(g.nodes.size(), 0.0);
    for (const auto& t : timer.report()) {
      this_repeat[t.node_id] = t.total_us / 1e6 / options.number;
      ran[t.node_id] = true;
    }
    for (std::size_t n = 0; n < g.nodes.size(); ++n) per_node[n].push_back(this_repeat[n]);
  }
  profile_report report;
  report.run_time = run_seconds / (static_cast<double>(options.repeat) * options.number);
  for (std::uint32_t nid = 0; nid < g.nodes.size(); ++nid) {
    if (!ran[nid]) continue;
    node_profile p = detail::describe_node(ex, nid);
    p.times = std::move(per_node[nid]);
    double sum = 0;
    for (double t : p.times) sum += t;
    p.mean = sum / static_cast<double>(p.times.size());
    report.total += p.mean;
    report.nodes.push_back(std::move(p));
  }
  for (node_profile& p : report.nodes) {
    p.share = report.total > 0 ? p.mean / report.total : 0;
    auto f = std::find_if(report.functions.begin(), report.functions.end(),
                          [&](const function_profile& x) { return x.func_name == p.func_name; });
    if (f == report.functions.end()) f = report.functions.insert(report.functions.end(), function_profile{p.func_name, 0, 0, 0});
    ++f->nodes;
    f->total += p.mean;
  }
  for (function_profile& f : report.functions) f.share = report.total > 0 ? f.total / report.total : 0;
  std::stable_sort(report.nodes.begin(), report.nodes.end(), [](const node_profile& a, const node_profile& b) { return a.mean > b.mean; });
  std::stable_sort(report.functions.begin(), report.functions.end(),
                   [](const function_profile& a, const function_profile& b) { return a.total > b.total; });
  return report;
}

inline std::string profile_report::table() const {
  std::vector<std::vector<std::string>> rows{{"Node Name", "Function", "Time(us)", "Time(%)", "Device", "Shapes", "Measurements(us)"}};
  for (const node_profile& n : nodes) {
    std::string measured = "[";
    for (std::size_t i = 0; i < n.times.size(); ++i) measured += (i ? ", " : "") + detail::format_us(n.times[i]);
    measured += "]";
    rows.push_back({n.name, n.func_name, detail::format_us(n.mean), detail::format_percent(n.share), to_string(n.device),
                    detail::signature(n), measured});
  }
  rows.push_back({"Total_time", "-", detail::format_us(total), "-", "-", "-", "-"});
  std::string out = detail::format_table(rows);
  std::vector<std::vector<std::string>> funcs{{"Function", "Nodes", "Time(us)", "Time(%)"}};
  for (const function_profile& f : functions)
    funcs.push_back({f.func_name, std::to_string(f.nodes), detail::format_us(f.total), detail::format_percent(f.share)});
  out += '\n' + detail::format_table(funcs);
  out += "\nrun(): " + detail::format_us(run_time) + " us per run with per-node timing\n";
  return out;
}

GEXEC_NAMESPACE_END
