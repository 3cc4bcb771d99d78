#pragma once
// Where a kernel's host workspace can go while its step runs alone: for every call step
// of a plan, the largest run of bytes of the host activation storage that no value holds
// while that step runs (its inputs and outputs, and everything alive across it, excluded).
// A sequential run lends it to the thread running the step (detail::workspace_arena::lend),
// so workspace a thread would otherwise keep on its own takes no memory at all where the
// activations leave room. Made once per model, when a kernel first asks for workspace.
// This header declares make_workspace_gaps; workspace_gaps_impl.hpp defines it (compiled
// once in compiled mode).

#include "../config.hpp"

#include <cstdint>
#include <vector>

#include "../graph/compact.hpp"
#include "../plan.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

/// Free bytes of storage slot `slot`: [offset, offset + bytes), offset a multiple of 64;
/// bytes 0 where there are none.
struct workspace_gap {
  std::uint32_t slot = 0;
  std::uint64_t offset = 0;
  std::uint64_t bytes = 0;
};

/// Per call of `p` (indexed as plan::calls), its gap. The values' lifetimes are the
/// planner's: from the node writing a value (a run's start for a donated input) to its
/// last reader, outputs to the end.
GEXEC_DECL std::vector<workspace_gap> make_workspace_gaps(const compact_graph& g, const plan& p);

}  // namespace detail
GEXEC_NAMESPACE_END

#if GEXEC_HEADER_ONLY()
#include "workspace_gaps_impl.hpp"
#endif
