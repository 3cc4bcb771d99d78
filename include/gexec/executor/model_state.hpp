#pragma once
// What a model holds, shared read-only by all its executors: the validated graph, the
// bound kernels (in the plan), the backends, the parameters and the name tables.

#include "../config.hpp"

#include <dlpack/dlpack.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "../detail/name_index.hpp"
#include "../graph/validated.hpp"
#include "../ndarray.hpp"
#include "../plan.hpp"
#include "../runtime.hpp"
#include "../runtime/run_context.hpp"
#include "step_graph.hpp"
#include "workspace_gaps.hpp"

GEXEC_NAMESPACE_BEGIN

/// Where a model's parameters live (model::weights()): read where they lie (a mapped
/// parameter file, a loaded library's data, a program's own read-only data, or tensors
/// the caller handed over, aligned for kernels) or copied into memory of the model's
/// own, and why. Either way a model holds one copy, shared by all its executors.
struct weights_report {
  std::size_t in_place = 0;          ///< tensors read where they lie
  std::uint64_t in_place_bytes = 0;
  std::size_t copied = 0;            ///< tensors the model or its reader copied
  std::uint64_t copied_bytes = 0;
  /// The first copied tensor and why ("\"p3\": its data is not 64-byte aligned in the
  /// file"); empty when none was copied.
  std::string why_copied;
};

/// A model's storage allocator as a value: the buffers of `sizes` bytes on `device`, from
/// the model's backends (see storage_allocator in backends/backend.hpp).
template <class Backends>
using allocate_function =
    std::function<std::vector<std::shared_ptr<void>>(const std::shared_ptr<Backends>& backends, DLDevice device, std::span<const std::uint64_t> sizes)>;

/// The state of a model over device backends `Backends`. The op binding and the storage
/// allocator it was made with are values here, not parts of its type: the binding
/// resolved every kernel into the plan, and is kept only so that what it loaded lives.
template <class Backends>
struct model_state {
  validated_graph graph;
  std::shared_ptr<const void> binding;  ///< what resolved the plan's kernels (a kernel library), kept alive
  std::vector<DLDevice> devices;
  std::shared_ptr<runtime> rt;
  std::shared_ptr<Backends> backends;   // shared with the deleters of executors' storage
  allocate_function<Backends> allocate;  ///< copied into each executor
  /// Host storage fresh from `allocate` already reads as zeros (the allocator passes on
  /// the host backend's memory, which its allocate() returns zeroed): executors do not
  /// write zeros over it, and a page no kernel writes is never touched.
  bool host_storage_zeroed = false;
  gexec::plan plan;
  /// Per input storage id, the alias groups (their root entries) living there (CSR).
  std::vector<std::uint32_t> input_roots_begin;
  std::vector<std::uint32_t> input_roots;
  detail::name_index input_index;   ///< input name -> its index
  detail::name_index output_index;  ///< "node:i" -> output index
  std::vector<std::string> output_names;  ///< "node:i", as TVM names outputs
  /// Per input index: the model's own value of a parameter (undefined for other inputs),
  /// on the input's device, compact and aligned for kernels. Every executor reads these
  /// bytes in place.
  std::vector<ndarray> params;
  std::uint64_t param_bytes = 0;
  weights_report weights;  ///< where the parameters live (see model::weights)
  /// What the graph and parameters came from, kept alive so that later loads of the
  /// same library share it (the parsed embedded factory); may be null.
  std::shared_ptr<const void> source;

  /// The graph as planning reads it (the node-per-struct form is made only on request).
  [[nodiscard]] const compact_graph& compact() const noexcept { return graph.compact(); }
  [[nodiscard]] std::uint32_t input_entry(std::size_t index) const { return compact().entry_id(compact().arg_nodes[index], 0); }
  /// Limits from model_options, and whether inputs never given a value run as zeros.
  std::uint64_t max_storage_bytes = UINT64_MAX;
  std::uint64_t max_workspace_bytes = UINT64_MAX;
  bool zero_unset_inputs = false;

  /// The running executor's backends, for the hooks compiled code calls.
  const detail::device_table* device_table = nullptr;

  [[nodiscard]] std::size_t storage_of(std::uint32_t eid) const { return plan.entry_slot[eid]; }

  /// The steps' dependency edges, made on first use (by a parallel execution policy).
  [[nodiscard]] const step_graph& dependencies() const {
    std::call_once(step_graph_once_, [&] { step_graph_ = std::make_unique<step_graph>(detail::make_step_graph(graph.compact(), plan)); });
    return *step_graph_;
  }
  /// Per call step, the host activation bytes free while it runs (executor/workspace_gaps.hpp),
  /// made when a kernel of a sequential run first asks for workspace.
  [[nodiscard]] const std::vector<detail::workspace_gap>& workspace_gaps() const {
    std::call_once(gaps_once_, [&] { gaps_ = detail::make_workspace_gaps(graph.compact(), plan); });
    return gaps_;
  }

 private:
  mutable std::once_flag step_graph_once_;
  mutable std::unique_ptr<step_graph> step_graph_;
  mutable std::once_flag gaps_once_;
  mutable std::vector<detail::workspace_gap> gaps_;
};

GEXEC_NAMESPACE_END
