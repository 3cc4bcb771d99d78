#pragma once
// as_compiled: TVM's own plan. One buffer per storage id, as large as the largest
// value on it; a storage id holding nothing but graph inputs is input storage. Storage
// ids shared by values live at one time, or by an input and a computed value, are
// rejected by the plan's check: the graph's plan is wrong, and running it would be too.

#include "../config.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "planner.hpp"

GEXEC_NAMESPACE_BEGIN

struct as_compiled {
  [[nodiscard]] storage_assignment plan(const storage_problem& p) const {
    // Storage ids are any non-negative numbers (TVM takes them so): slots in id order,
    // one per id in use.
    // Ids as TVM writes them (below the number of values, give or take) are numbered
    // through a table; sparse ones through a sorted list.
    constexpr std::uint32_t none = UINT32_MAX;
    std::vector<std::int64_t> ids;
    std::vector<std::uint32_t> slot_of_id;
    std::int64_t min_id = 0, max_id = -1;
    for (const storage_value& v : p.values) {
      min_id = std::min(min_id, v.storage_id);
      max_id = std::max(max_id, v.storage_id);
    }
    const bool dense = min_id >= 0 && max_id < static_cast<std::int64_t>(2 * p.values.size() + 1024);
    std::size_t n_slots = 0;
    if (dense) {
      slot_of_id.assign(static_cast<std::size_t>(max_id + 1), none);
      for (const storage_value& v : p.values) slot_of_id[static_cast<std::size_t>(v.storage_id)] = 0;
      for (std::uint32_t& s : slot_of_id)
        if (s != none) s = static_cast<std::uint32_t>(n_slots++);
    } else {
      ids.reserve(p.values.size());
      for (const storage_value& v : p.values) ids.push_back(v.storage_id);
      std::sort(ids.begin(), ids.end());
      ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
      n_slots = ids.size();
    }
    storage_assignment a;
    a.slots.resize(n_slots);
    a.slot.resize(p.values.size());
    a.offset.assign(p.values.size(), 0);
    std::vector<bool> only_inputs(n_slots, true);
    for (std::size_t i = 0; i < p.values.size(); ++i) {
      const storage_value& v = p.values[i];
      const std::size_t slot = dense ? slot_of_id[static_cast<std::size_t>(v.storage_id)]
                                     : static_cast<std::size_t>(std::lower_bound(ids.begin(), ids.end(), v.storage_id) - ids.begin());
      storage_slot& s = a.slots[slot];
      if (s.kind != storage_kind::unused && !same_device(s.device, v.device))
        throw error(errc::invalid_graph, "storage id " + std::to_string(v.storage_id) + " holds entries on " + to_string(s.device) +
                                             " and on " + to_string(v.device));
      s.device = v.device;
      s.bytes = std::max(s.bytes, v.bytes);
      s.kind = storage_kind::activation;
      if (!v.is_input) only_inputs[slot] = false;
      a.slot[i] = static_cast<std::uint32_t>(slot);
    }
    for (std::size_t k = 0; k < a.slots.size(); ++k)
      if (only_inputs[k]) a.slots[k].kind = storage_kind::input;
    return a;
  }
};
static_assert(storage_planner<as_compiled>);

GEXEC_NAMESPACE_END
