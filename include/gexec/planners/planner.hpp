#pragma once
// The storage-planner policy: where each tensor of the graph lives.
//
// The plan hands the planner one `storage_value` per alias group (an entry with the
// __nop reshapes of it: one piece of data): its device, its size, TVM's storage id and
// the steps during which it must keep its bytes. Time is the node index of the graph,
// which is its execution order. The planner answers with storage slots (each one
// allocation per executor, or one parameter/input buffer) and, per value, a slot and a
// byte offset in it. Values whose lifetimes overlap must not overlap in memory; the
// plan checks every answer, so a wrong planner is an error at model creation, never a
// silently wrong run.
//
//   struct my_planner {
//     gexec::storage_assignment plan(const gexec::storage_problem& p) const;
//   };

#include "../config.hpp"

#include <dlpack/dlpack.h>

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "../detail/shape.hpp"
#include "../device.hpp"
#include "../error.hpp"

GEXEC_NAMESPACE_BEGIN

/// How an executor gets the memory of a storage slot.
enum class storage_kind : std::uint8_t {
  unused,      ///< no value lives there
  activation,  ///< allocated when the executor is made
  input,       ///< holds only graph inputs (parameters included): allocated on first
               ///< use, so inputs bound zero-copy or to shared parameters take nothing
};

struct storage_slot {
  DLDevice device{kDLCPU, 0};
  std::uint64_t bytes = 0;
  storage_kind kind = storage_kind::unused;
};

/// The last step of a value that must survive the run: graph inputs (parameters
/// included) and outputs, which callers may read or bind zero-copy.
inline constexpr std::uint32_t pinned_to_end = std::numeric_limits<std::uint32_t>::max();

/// One alias group: a tensor and the __nop reshapes of it.
struct storage_value {
  std::uint32_t root = 0;         ///< its root entry
  DLDevice device{kDLCPU, 0};
  std::uint64_t bytes = 0;        ///< the largest entry of the group
  std::int64_t storage_id = 0;    ///< TVM's storage id for it
  std::uint32_t first = 0;        ///< node that writes it (0 for graph inputs)
  std::uint32_t last = 0;         ///< last node that reads it, or pinned_to_end
  bool is_input = false;          ///< a graph input or parameter (arg node)
  bool is_output = false;         ///< a graph output
};

struct storage_problem {
  std::vector<storage_value> values;
  std::size_t num_storage_ids = 0;  ///< one more than the largest storage id (ids need not be dense)
  std::uint32_t num_nodes = 0;
};

struct storage_assignment {
  std::vector<storage_slot> slots;
  std::vector<std::uint32_t> slot;    ///< per value
  std::vector<std::uint64_t> offset;  ///< per value: bytes into its slot, a multiple of 64
};

template <class P>
concept storage_planner = requires(const P& planner, const storage_problem& problem) {
  { planner.plan(problem) } -> std::same_as<storage_assignment>;
};

/// Bytes a slot takes in an arena: at least one 64-byte unit.
[[nodiscard]] inline std::uint64_t arena_bytes(std::uint64_t bytes) noexcept { return detail::align_up(bytes == 0 ? 1 : bytes, 64); }

/// The three figures of a plan, in bytes of activation storage (what every executor
/// allocates; inputs and parameters are not counted).
struct storage_figures {
  std::uint64_t as_compiled = 0;  ///< one buffer per TVM storage id
  std::uint64_t planned = 0;      ///< what the planner chose
  std::uint64_t lower_bound = 0;  ///< the largest total of live values at any step, per device, summed
};

/// Per device, the largest total of activation values (64-byte units) live at one step.
[[nodiscard]] inline std::uint64_t liveness_lower_bound(const storage_problem& p) {
  std::vector<DLDevice> devices;
  std::uint32_t steps = p.num_nodes;
  for (const storage_value& v : p.values) {
    if (v.is_input) continue;
    if (std::none_of(devices.begin(), devices.end(), [&](DLDevice d) { return same_device(d, v.device); })) devices.push_back(v.device);
    steps = std::max(steps, v.first + 1);
    if (v.last != pinned_to_end) steps = std::max(steps, v.last + 1);
  }
  // Bytes that become live and that die at each step: the live bytes at a step are the
  // values begun by then less those ended before it (one pass, no sort).
  std::vector<std::uint64_t> born(steps), dead(steps);
  std::uint64_t total = 0;
  for (DLDevice d : devices) {
    std::fill(born.begin(), born.end(), 0);
    std::fill(dead.begin(), dead.end(), 0);
    for (const storage_value& v : p.values)
      if (!v.is_input && same_device(v.device, d)) {
        born[v.first] += arena_bytes(v.bytes);
        if (v.last != pinned_to_end) dead[v.last] += arena_bytes(v.bytes);
      }
    std::uint64_t live = 0, peak = 0;
    for (std::uint32_t t = 0; t < steps; ++t) {
      peak = std::max(peak, live += born[t]);
      live -= dead[t];
    }
    total += peak;
  }
  return total;
}

/// Bytes of activation slots in an assignment.
[[nodiscard]] inline std::uint64_t activation_bytes(const storage_assignment& a) {
  std::uint64_t total = 0;
  for (const storage_slot& s : a.slots)
    if (s.kind == storage_kind::activation) total += arena_bytes(s.bytes);
  return total;
}

namespace detail {

/// Throws unless `a` is a sound answer to `p`: every value in a slot on its device and
/// inside it, inputs only in input slots, and no two values that are live at one step
/// sharing a byte.
GEXEC_DECL void check_assignment(const storage_problem& p, const storage_assignment& a, const std::string& planner);

}  // namespace detail

GEXEC_NAMESPACE_END

#if GEXEC_HEADER_ONLY()
#include "planner_impl.hpp"
#endif
