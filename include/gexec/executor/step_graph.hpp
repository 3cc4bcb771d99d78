#pragma once
// The dependency edges between the steps of a plan, for execution policies that run
// steps out of order. Step b depends on step a when
//   - b reads what a writes (data),
//   - b's node names a's node in control_deps,
//   - b writes memory that a value written or read by a occupied before (storage
//     reuse: the planner gave two values with disjoint lifetimes the same bytes, so b
//     must wait until every reader of the earlier value is done).
// Made once per model, on first use. This header declares make_step_graph;
// step_graph_impl.hpp defines it (compiled once in compiled mode).

#include "../config.hpp"

#include <cstdint>
#include <vector>

#include "../graph/compact.hpp"
#include "../plan.hpp"

GEXEC_NAMESPACE_BEGIN

/// Which steps must finish before which: what an execution policy may reorder within.
struct step_graph {
  std::vector<std::uint32_t> num_preds;   ///< per step
  std::vector<std::uint32_t> succ_begin;  ///< CSR of successors, per step
  std::vector<std::uint32_t> succ;
  std::uint32_t width = 1;                ///< the most steps on one level of the longest-path layering
};

namespace detail {

GEXEC_DECL step_graph make_step_graph(const compact_graph& g, const plan& p);

}  // namespace detail
GEXEC_NAMESPACE_END

#if GEXEC_HEADER_ONLY()
#include "step_graph_impl.hpp"
#endif
