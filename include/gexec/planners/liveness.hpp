#pragma once
// liveness: one arena per device for everything computed, each value at an offset
// chosen by its lifetime over the execution order, so that values that are never live
// at one step share bytes. Graph inputs and parameters keep a buffer each (taken on
// first use, so shared parameters and inputs bound zero-copy cost nothing), and graph
// outputs live to the end of the run, so that they can be read or bound zero-copy.
//
// Offsets are chosen greedily, largest value first, each into the tightest gap left
// by the values already placed that are live at the same time ("greedy by size",
// Pisarchyk and Lee, 2020). Where that would take more bytes on a device than the
// compiled plan, the compiled plan is kept: never more than as_compiled.

#include "../config.hpp"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "as_compiled.hpp"
#include "planner.hpp"

GEXEC_NAMESPACE_BEGIN

struct liveness {
  [[nodiscard]] storage_assignment plan(const storage_problem& p) const {
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

 private:
  /// Greedy by size into slot `arena`: each value, largest first, at the lowest offset of
  /// the smallest gap that holds it among the values already placed that overlap it in time.
  static void place(const storage_problem& p, storage_assignment& a, std::uint32_t arena) {
    std::vector<std::uint32_t> order;
    for (std::uint32_t i = 0; i < p.values.size(); ++i)
      if (a.slot[i] == arena && !p.values[i].is_input) order.push_back(i);
    std::stable_sort(order.begin(), order.end(), [&](std::uint32_t x, std::uint32_t y) {
      return arena_bytes(p.values[x].bytes) > arena_bytes(p.values[y].bytes);
    });
    // Placed values indexed by blocks of time, so that finding the ones live beside a
    // value costs the length of its life, not the number of values.
    constexpr std::uint32_t block = 64;
    const std::uint32_t end_time = std::max<std::uint32_t>(p.num_nodes, 1) - 1;
    auto last_of = [&](const storage_value& v) { return std::min(v.last, end_time); };
    std::vector<std::vector<std::uint32_t>> by_block(end_time / block + 1);
    std::vector<std::uint32_t> seen(p.values.size(), UINT32_MAX);
    std::vector<std::pair<std::uint64_t, std::uint64_t>> taken;  // [begin, end) of neighbours in time
    std::uint64_t top = 0;
    for (std::uint32_t i : order) {
      const storage_value& v = p.values[i];
      const std::uint64_t size = arena_bytes(v.bytes);
      const std::uint32_t first = std::min(v.first, end_time), last = last_of(v);
      taken.clear();
      for (std::uint32_t b = first / block; b <= last / block; ++b)
        for (std::uint32_t j : by_block[b]) {
          if (seen[j] == i) continue;
          seen[j] = i;
          const storage_value& u = p.values[j];
          if (u.first <= last && first <= last_of(u)) taken.emplace_back(a.offset[j], a.offset[j] + arena_bytes(u.bytes));
        }
      std::sort(taken.begin(), taken.end());
      std::uint64_t best = UINT64_MAX, best_gap = UINT64_MAX, cursor = 0;
      for (const auto& [lo, hi] : taken) {
        if (lo > cursor && lo - cursor >= size && lo - cursor < best_gap) {
          best = cursor;
          best_gap = lo - cursor;
        }
        cursor = std::max(cursor, hi);
      }
      if (best == UINT64_MAX) best = cursor;
      a.offset[i] = best;
      top = std::max(top, best + size);
      for (std::uint32_t b = first / block; b <= last / block; ++b) by_block[b].push_back(i);
    }
    a.slots[arena].bytes = top;
  }
};
static_assert(storage_planner<liveness>);

GEXEC_NAMESPACE_END
