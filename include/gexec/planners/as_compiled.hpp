#pragma once
// as_compiled: TVM's own plan. One buffer per storage id, as large as the largest
// value on it; a storage id holding nothing but graph inputs is input storage. Storage
// ids shared by values live at one time, or by an input and a computed value, are
// rejected by the plan's check: the graph's plan is wrong, and running it would be too.

#include "../config.hpp"

#include <algorithm>

#include "planner.hpp"

GEXEC_NAMESPACE_BEGIN

struct as_compiled {
  [[nodiscard]] storage_assignment plan(const storage_problem& p) const {
    storage_assignment a;
    a.slots.resize(p.num_storage_ids);
    a.slot.resize(p.values.size());
    a.offset.assign(p.values.size(), 0);
    std::vector<bool> only_inputs(p.num_storage_ids, true);
    for (std::size_t i = 0; i < p.values.size(); ++i) {
      const storage_value& v = p.values[i];
      const auto sid = static_cast<std::size_t>(v.storage_id);
      storage_slot& s = a.slots[sid];
      if (s.kind != storage_kind::unused && !same_device(s.device, v.device))
        throw error(errc::invalid_graph, "storage id " + std::to_string(sid) + " holds entries on " + to_string(s.device) + " and on " +
                                             to_string(v.device));
      s.device = v.device;
      s.bytes = std::max(s.bytes, v.bytes);
      s.kind = storage_kind::activation;
      if (!v.is_input) only_inputs[sid] = false;
      a.slot[i] = static_cast<std::uint32_t>(sid);
    }
    for (std::size_t sid = 0; sid < a.slots.size(); ++sid)
      if (a.slots[sid].kind == storage_kind::activation && only_inputs[sid]) a.slots[sid].kind = storage_kind::input;
    return a;
  }
};
static_assert(storage_planner<as_compiled>);

GEXEC_NAMESPACE_END
