#pragma once
// The definition of executor/step_graph.hpp's make_step_graph. Included by
// step_graph.hpp in header-only mode and by src/gexec.cpp in compiled mode.

#include "step_graph.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

GEXEC_NAMESPACE_BEGIN
namespace detail {

GEXEC_DECL step_graph make_step_graph(const compact_graph& g, const plan& p) {
  const auto n_steps = static_cast<std::uint32_t>(p.step_node.size());
  const auto n_entries = static_cast<std::uint32_t>(g.num_entries());
  const auto n_nodes = static_cast<std::uint32_t>(g.num_nodes());
  constexpr std::uint32_t none = UINT32_MAX;
  // A node may have several steps (a __nop whose outputs do not alias its inputs is a
  // copy per output), always consecutive: node n's steps are [steps_begin[n], steps_begin[n + 1]).
  std::vector<std::uint32_t> steps_begin(std::size_t{n_nodes} + 1, 0);
  for (std::uint32_t k = 0; k < n_steps; ++k) ++steps_begin[p.step_node[k] + 1];
  for (std::uint32_t n = 0; n < n_nodes; ++n) steps_begin[n + 1] += steps_begin[n];

  // What step k reads and writes: a call reads its node's inputs and writes its outputs;
  // a copy reads and writes one entry each.
  auto for_each_access = [&](std::uint32_t k, auto&& read, auto&& write) {
    const detail::step_run& r = p.order[p.run_of(k)];
    if (r.kind == detail::step_kind::copy) {
      const copy_template& c = p.copies[r.begin + (k - r.step)];
      read(c.from);
      write(c.to);
      return;
    }
    const std::uint32_t nid = p.step_node[k];
    for (const node_entry& in : g.node_inputs(nid)) read(g.entry_id(in));
    for (std::uint32_t o = 0; o < g.num_outputs(nid); ++o) write(g.entry_id(nid, o));
  };
  auto ignore = [](std::uint32_t) {};

  // Per value (an alias group, named by its root entry): the step writing it and the
  // steps reading it (CSR).
  const auto& root = p.alias_root;
  std::vector<std::uint32_t> writer(n_entries, none);
  std::vector<std::uint32_t> readers_begin(std::size_t{n_entries} + 1, 0), readers;
  for (std::uint32_t k = 0; k < n_steps; ++k)
    for_each_access(
        k, [&](std::uint32_t e) { ++readers_begin[root[e] + 1]; },
        [&](std::uint32_t e) {
          if (root[e] == e) writer[e] = k;
        });
  for (std::size_t v = 0; v < n_entries; ++v) readers_begin[v + 1] += readers_begin[v];
  readers.resize(readers_begin.back());
  {
    std::vector<std::uint32_t> fill(readers_begin.begin(), readers_begin.end() - 1);
    for (std::uint32_t k = 0; k < n_steps; ++k) for_each_access(k, [&](std::uint32_t e) { readers[fill[root[e]]++] = k; }, ignore);
  }

  std::vector<std::pair<std::uint32_t, std::uint32_t>> edges;
  auto edge = [&](std::uint32_t from, std::uint32_t to) {
    if (from != none && to != none && from != to) edges.emplace_back(from, to);
  };
  for (std::uint32_t k = 0; k < n_steps; ++k) {
    for_each_access(k, [&](std::uint32_t e) { edge(writer[root[e]], k); }, ignore);
    if (const auto* extra = g.extra(p.step_node[k]))
      for (std::uint32_t dep : extra->control_deps) {
        if (steps_begin[dep] != steps_begin[dep + 1]) {  // after every step of that node
          for (std::uint32_t d = steps_begin[dep]; d < steps_begin[dep + 1]; ++d) edge(d, k);
        } else {  // a node without a step (an input, an aliasing __nop): what it stands for
          for (const node_entry& in : g.node_inputs(dep)) edge(writer[root[g.entry_id(in)]], k);
        }
      }
  }

  // Storage reuse: per slot, the values in order of the node writing them (entries are
  // numbered in node order); a value's writer waits for the readers (and the writer) of
  // each earlier value sharing its bytes. Only the latest value on each byte needs the
  // edges: an earlier one is ordered before that value's writer already. So a sweep
  // keeps, per slot, the byte ranges of the latest value written on them (disjoint,
  // ordered by offset), takes the edges from those a value overlaps and paints it over
  // them: each range is visited once before it is painted over, O(log n) a value.
  // Inputs in input storage never share it; a donated input (plan::donated) is in
  // activation storage, written before the run: only its readers order later values.
  std::vector<std::vector<std::uint32_t>> by_slot(p.storage.size());
  for (std::uint32_t v = 0; v < n_entries; ++v)
    if (p.alias_root[v] == v && p.storage[p.entry_slot[v]].kind == storage_kind::activation) by_slot[p.entry_slot[v]].push_back(v);
  std::map<std::uint64_t, std::pair<std::uint64_t, std::uint32_t>> latest;  // begin -> (end, value)
  std::vector<std::uint32_t> waited_by(n_entries, none);  // the last value whose writer waits for each
  auto extent = [&](std::uint32_t v) { return std::max<std::uint64_t>(p.alias_group_bytes(g, v), 1); };
  for (auto& members : by_slot) {
    latest.clear();
    for (const std::uint32_t v : members) {
      const std::uint64_t lo = p.entry_offset[v], hi = lo + extent(v);
      auto it = latest.lower_bound(lo);
      if (it != latest.begin() && std::prev(it)->second.first > lo) --it;
      while (it != latest.end() && it->first < hi) {
        const std::uint64_t begin = it->first, end = it->second.first;
        const std::uint32_t u = it->second.second;
        if (waited_by[u] != v) {
          waited_by[u] = v;
          edge(writer[u], writer[v]);
          for (std::uint32_t r = readers_begin[u]; r < readers_begin[u + 1]; ++r) edge(readers[r], writer[v]);
        }
        it = latest.erase(it);  // what sticks out on either side stays u's
        if (begin < lo) latest.emplace(begin, std::make_pair(lo, u));
        if (end > hi) it = latest.emplace(hi, std::make_pair(end, u)).first;
      }
      latest.emplace(lo, std::make_pair(hi, v));
    }
  }

  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  step_graph sg;
  sg.num_preds.assign(n_steps, 0);
  sg.succ_begin.assign(n_steps + 1, 0);
  for (const auto& [from, to] : edges) {
    ++sg.num_preds[to];
    ++sg.succ_begin[from + 1];
  }
  for (std::uint32_t k = 0; k < n_steps; ++k) sg.succ_begin[k + 1] += sg.succ_begin[k];
  sg.succ.resize(edges.size());
  for (std::size_t i = 0; i < edges.size(); ++i) sg.succ[i] = edges[i].second;  // edges are sorted by source

  // Width: steps per level of the longest path from a source (edges go forward in step order).
  std::vector<std::uint32_t> level(n_steps, 0), per_level;
  for (std::uint32_t k = 0; k < n_steps; ++k) {
    for (std::uint32_t i = sg.succ_begin[k]; i < sg.succ_begin[k + 1]; ++i) level[sg.succ[i]] = std::max(level[sg.succ[i]], level[k] + 1);
    if (level[k] >= per_level.size()) per_level.resize(level[k] + 1, 0);
    sg.width = std::max(sg.width, ++per_level[level[k]]);
  }
  return sg;
}

}  // namespace detail
GEXEC_NAMESPACE_END
