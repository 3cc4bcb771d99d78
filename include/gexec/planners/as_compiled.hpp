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
    std::vector<std::int64_t> ids;
    ids.reserve(p.values.size());
    for (const storage_value& v : p.values) ids.push_back(v.storage_id);
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    storage_assignment a;
    a.slots.resize(ids.size());
    a.slot.resize(p.values.size());
    a.offset.assign(p.values.size(), 0);
    std::vector<bool> only_inputs(ids.size(), true);
    for (std::size_t i = 0; i < p.values.size(); ++i) {
      const storage_value& v = p.values[i];
      const auto slot = static_cast<std::size_t>(std::lower_bound(ids.begin(), ids.end(), v.storage_id) - ids.begin());
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
