#pragma once
// The definitions of planners/liveness.hpp. Included by liveness.hpp in header-only mode
// and by src/gexec.cpp in compiled mode.

#include "liveness.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

GEXEC_NAMESPACE_BEGIN
namespace detail {
/// 0, 1, ..., m - 1: the values in their node order, to be sorted.
inline std::vector<std::uint32_t> node_order(std::uint32_t m) {
  std::vector<std::uint32_t> order(m);
  for (std::uint32_t k = 0; k < m; ++k) order[k] = k;
  return order;
}
}  // namespace detail

GEXEC_DECL storage_assignment liveness::plan(const storage_problem& p) const {
  storage_assignment a;
  const std::size_t n = p.values.size();
  a.slot.resize(n);
  a.offset.assign(n, 0);
  std::vector<DLDevice> devices;
  std::vector<std::uint32_t> arena_of_device;
  for (std::size_t i = 0; i < n; ++i) {
    const storage_value& v = p.values[i];
    if (v.is_input) {
      a.slot[i] = static_cast<std::uint32_t>(a.slots.size());
      a.slots.push_back({v.device, v.bytes, storage_kind::input});
      continue;
    }
    auto it = std::find_if(devices.begin(), devices.end(), [&](DLDevice d) { return same_device(d, v.device); });
    if (it == devices.end()) {
      devices.push_back(v.device);
      arena_of_device.push_back(static_cast<std::uint32_t>(a.slots.size()));
      a.slots.push_back({v.device, 0, storage_kind::activation});
      it = devices.end() - 1;
    }
    a.slot[i] = arena_of_device[static_cast<std::size_t>(it - devices.begin())];
  }
  for (std::uint32_t arena : arena_of_device) place(p, a, arena);

  // Never more than the compiled plan, device by device.
  const storage_assignment compiled = as_compiled{}.plan(p);
  for (DLDevice d : devices) {
    std::uint64_t mine = 0, theirs = 0;
    for (const storage_slot& s : a.slots)
      if (s.kind == storage_kind::activation && same_device(s.device, d)) mine += arena_bytes(s.bytes);
    for (const storage_slot& s : compiled.slots)
      if (s.kind == storage_kind::activation && same_device(s.device, d)) theirs += arena_bytes(s.bytes);
    if (mine > theirs) return compiled;
  }
  return a;
}

GEXEC_DECL void liveness::place(const storage_problem& p, storage_assignment& a, std::uint32_t arena) {
  arena_values v;
  const std::uint32_t end_time = std::max<std::uint32_t>(p.num_nodes, 1) - 1;
  for (std::uint32_t i = 0; i < p.values.size(); ++i)
    if (a.slot[i] == arena && !p.values[i].is_input) {
      const storage_value& s = p.values[i];
      v.id.push_back(i);
      v.size.push_back(arena_bytes(s.bytes));
      v.first.push_back(std::min(s.first, end_time));
      v.last.push_back(std::max(std::min(s.last, end_time), std::min(s.first, end_time)));
    }
  const auto m = static_cast<std::uint32_t>(v.id.size());
  if (m == 0) return;

  // By first use; the pairs live at one time are, for each value, the later ones that begin before it ends.
  std::vector<std::uint32_t> by_first = detail::node_order(m);
  std::stable_sort(by_first.begin(), by_first.end(), [&](std::uint32_t x, std::uint32_t y) {
    return v.first[x] < v.first[y] || (v.first[x] == v.first[y] && v.size[x] > v.size[y]);
  });
  std::vector<std::uint32_t> firsts(m);
  for (std::uint32_t k = 0; k < m; ++k) firsts[k] = v.first[by_first[k]];
  std::uint64_t pairs = 0;
  for (std::uint32_t k = 0; k < m; ++k)
    pairs += static_cast<std::uint64_t>(std::upper_bound(firsts.begin() + k + 1, firsts.end(), v.last[by_first[k]]) - firsts.begin() - k - 1);

  layout best = sweep(v, by_first);
  if (pairs <= pairs_per_value * m + pairs_allowance) {
    const neighbours nb = overlapping(v, by_first, firsts);
    std::vector<std::uint32_t> order;
    auto keep = [&](layout&& l) {
      if (l.top < best.top) best = std::move(l);
    };
    auto try_order = [&](auto longer) {  // stable: ties in the order of the values (their node order)
      order = detail::node_order(m);
      std::stable_sort(order.begin(), order.end(), longer);
      keep(greedy(v, nb, order));
    };
    auto life = [&](std::uint32_t x) { return std::uint64_t{v.last[x]} - v.first[x] + 1; };
    try_order([&](std::uint32_t x, std::uint32_t y) { return v.size[x] > v.size[y]; });
    try_order([&](std::uint32_t x, std::uint32_t y) { return v.size[x] * life(x) > v.size[y] * life(y); });
    try_order([&](std::uint32_t x, std::uint32_t y) { return life(x) > life(y) || (life(x) == life(y) && v.size[x] > v.size[y]); });
  }
  for (std::uint32_t k = 0; k < m; ++k) a.offset[v.id[k]] = best.offset[k];
  a.slots[arena].bytes = best.top;
}

GEXEC_DECL liveness::neighbours liveness::overlapping(const arena_values& v, const std::vector<std::uint32_t>& by_first, const std::vector<std::uint32_t>& firsts) {
  const auto m = static_cast<std::uint32_t>(v.id.size());
  neighbours nb;
  nb.begin.assign(std::size_t{m} + 1, 0);
  std::vector<std::uint32_t> until(m);  // by_first[k + 1, until[k]) begin while by_first[k] is live
  for (std::uint32_t k = 0; k < m; ++k) {
    until[k] = static_cast<std::uint32_t>(std::upper_bound(firsts.begin() + k + 1, firsts.end(), v.last[by_first[k]]) - firsts.begin());
    nb.begin[by_first[k] + 1] += until[k] - k - 1;
    for (std::uint32_t j = k + 1; j < until[k]; ++j) ++nb.begin[by_first[j] + 1];
  }
  for (std::uint32_t x = 0; x < m; ++x) nb.begin[x + 1] += nb.begin[x];
  nb.list.resize(nb.begin[m]);
  std::vector<std::uint64_t> fill(nb.begin.begin(), nb.begin.end() - 1);
  for (std::uint32_t k = 0; k < m; ++k)
    for (std::uint32_t j = k + 1; j < until[k]; ++j) {
      nb.list[fill[by_first[k]]++] = by_first[j];
      nb.list[fill[by_first[j]]++] = by_first[k];
    }
  return nb;
}

GEXEC_DECL liveness::layout liveness::greedy(const arena_values& v, const neighbours& nb, const std::vector<std::uint32_t>& order) {
  layout l;
  l.offset.assign(v.id.size(), 0);
  std::vector<bool> placed(v.id.size(), false);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> taken;  // [begin, end) of placed neighbours
  for (std::uint32_t x : order) {
    taken.clear();
    for (std::uint64_t k = nb.begin[x]; k < nb.begin[x + 1]; ++k)
      if (const std::uint32_t y = nb.list[k]; placed[y]) taken.emplace_back(l.offset[y], l.offset[y] + v.size[y]);
    std::sort(taken.begin(), taken.end());
    std::uint64_t best = UINT64_MAX, best_gap = UINT64_MAX, cursor = 0;
    for (const auto& [lo, hi] : taken) {
      if (lo > cursor && lo - cursor >= v.size[x] && lo - cursor < best_gap) {
        best = cursor;
        best_gap = lo - cursor;
      }
      cursor = std::max(cursor, hi);
    }
    if (best == UINT64_MAX) best = cursor;
    l.offset[x] = best;
    l.top = std::max(l.top, best + v.size[x]);
    placed[x] = true;
  }
  return l;
}

GEXEC_DECL liveness::layout liveness::sweep(const arena_values& v, const std::vector<std::uint32_t>& by_first) {
  const auto m = static_cast<std::uint32_t>(v.id.size());
  layout l;
  l.offset.assign(m, 0);
  std::vector<std::uint32_t> by_last = detail::node_order(m);
  std::sort(by_last.begin(), by_last.end(), [&](std::uint32_t x, std::uint32_t y) { return v.last[x] < v.last[y]; });
  std::map<std::uint64_t, std::uint64_t> live;          // begin -> end of each live value, disjoint
  // The free gaps below the top live value: (length, begin) -> end, best fit first.
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::uint64_t> gaps;
  auto release = [&](std::uint64_t begin) {
    auto it = live.find(begin);
    const std::uint64_t below = it == live.begin() ? 0 : std::prev(it)->second;
    const std::uint64_t end = it->second;
    it = live.erase(it);
    if (begin > below) gaps.erase({begin - below, below});
    if (it == live.end()) return;  // it was the top one: the gap below it is no gap any more
    if (it->first > end) gaps.erase({it->first - end, end});
    gaps.emplace(std::pair{it->first - below, below}, it->first);
  };
  std::uint32_t dead = 0;
  for (std::uint32_t x : by_first) {
    while (dead < m && v.last[by_last[dead]] < v.first[x]) release(l.offset[by_last[dead++]]);
    const std::uint64_t size = v.size[x];
    std::uint64_t at = live.empty() ? 0 : live.rbegin()->second;
    if (auto g = gaps.lower_bound({size, 0}); g != gaps.end()) {
      const auto [length, begin] = g->first;
      const std::uint64_t gap_end = g->second;
      gaps.erase(g);
      if (length > size) gaps.emplace(std::pair{length - size, begin + size}, gap_end);
      at = begin;
    }
    live.emplace(at, at + size);
    l.offset[x] = at;
    l.top = std::max(l.top, at + size);
  }
  return l;
}

GEXEC_NAMESPACE_END
