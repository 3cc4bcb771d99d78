#pragma once
// The definition of planners/planner.hpp's check_assignment. Included by planner.hpp in
// header-only mode and by src/gexec.cpp in compiled mode.

#include "planner.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

GEXEC_NAMESPACE_BEGIN
namespace detail {

GEXEC_DECL void check_assignment(const storage_problem& p, const storage_assignment& a, const std::string& planner) {
  auto fail = [&](const std::string& why) { throw error(errc::invalid_graph, "storage plan (" + planner + "): " + why); };
  const std::size_t n = p.values.size();
  if (a.slot.size() != n || a.offset.size() != n) fail("it places " + std::to_string(a.slot.size()) + " of " + std::to_string(n) + " values");
  auto name = [&](std::size_t i) {
    return "entry " + std::to_string(p.values[i].root) + " (storage id " + std::to_string(p.values[i].storage_id) + ")";
  };
  std::vector<std::vector<std::uint32_t>> by_slot(a.slots.size());
  for (std::size_t i = 0; i < n; ++i) {
    const storage_value& v = p.values[i];
    if (a.slot[i] >= a.slots.size()) fail(name(i) + " is in no slot");
    const storage_slot& s = a.slots[a.slot[i]];
    if (!same_device(s.device, v.device)) fail(name(i) + " is on " + to_string(v.device) + " but its storage is on " + to_string(s.device));
    if (a.offset[i] % 64 != 0 || a.offset[i] > s.bytes || v.bytes > s.bytes - a.offset[i]) fail(name(i) + " does not fit its storage");
    if (s.kind == storage_kind::unused || (s.kind == storage_kind::input) != v.is_input)
      fail(name(i) + (v.is_input ? " is a graph input in activation storage" : " is computed into input storage"));
    by_slot[a.slot[i]].push_back(static_cast<std::uint32_t>(i));
  }
  // Per slot, a sweep over time: the byte ranges of the values still live when a value is
  // written, disjoint and ordered by offset, of which only the two beside its own can
  // share a byte with it. O(log n) a value, however many are live at once.
  std::map<std::uint64_t, std::pair<std::uint64_t, std::uint32_t>> live;  // begin -> (end, value)
  using ending = std::pair<std::uint32_t, std::uint64_t>;                 // (last step, begin)
  std::vector<ending> ends;  // a min-heap on the last step (std::push_heap with std::greater)
  std::vector<std::pair<std::uint32_t, std::uint32_t>> keyed;  // (first step, value): a slot's members to sort
  for (auto& members : by_slot) {
    if (members.size() < 2) continue;  // a value alone in its slot shares no byte (most slots as compiled)
    auto by_first = [&](std::uint32_t x, std::uint32_t y) { return p.values[x].first < p.values[y].first; };
    if (!std::is_sorted(members.begin(), members.end(), by_first)) {  // mostly in order already
      // Sorted as pairs, ties by value: the pairs' sort is the one make_plan links anyway
      // (a static program carries one sort the fewer).
      keyed.clear();
      for (std::uint32_t i : members) keyed.emplace_back(p.values[i].first, i);
      std::sort(keyed.begin(), keyed.end());
      for (std::size_t k = 0; k < keyed.size(); ++k) members[k] = keyed[k].second;
    }
    live.clear();
    ends.clear();
    for (std::uint32_t i : members) {
      const storage_value& v = p.values[i];
      for (; !ends.empty() && ends.front().first < v.first; ends.pop_back()) {
        live.erase(ends.front().second);
        std::pop_heap(ends.begin(), ends.end(), std::greater<>());
      }
      const std::uint64_t lo = a.offset[i], hi = lo + std::max<std::uint64_t>(v.bytes, 1);
      auto next = live.lower_bound(lo);
      std::uint32_t clash = UINT32_MAX;
      if (next != live.end() && next->first < hi) clash = next->second.second;
      else if (next != live.begin() && std::prev(next)->second.first > lo) clash = std::prev(next)->second.second;
      if (clash != UINT32_MAX) {
        const storage_value& u = p.values[clash];
        fail(name(i) + " and " + name(clash) + " share memory while both are live" + (u.is_input && v.is_input ? " (two graph inputs)" : ""));
      }
      live.emplace(lo, std::make_pair(hi, i));
      ends.emplace_back(v.last, lo);
      std::push_heap(ends.begin(), ends.end(), std::greater<>());
    }
  }
}

}  // namespace detail
GEXEC_NAMESPACE_END
