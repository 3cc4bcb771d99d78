// gexec::compiled: what headers only declare in compiled mode (GEXEC_COMPILED), compiled
// once: graph JSON over Boost.JSON (graph/json_impl.hpp), kernel libraries over
// Boost.DLL (library/module_impl.hpp), models from TVM's files (load_impl.hpp), the
// benchmark's statistics (benchmark_impl.hpp), .safetensors headers over gexec's JSON reader
// (safetensors_impl.hpp), the storage planners' and the step graph's algorithms
// (planners/planner_impl.hpp, planners/liveness_impl.hpp, executor/step_graph_impl.hpp,
// executor/workspace_gaps_impl.hpp),
// and the common instantiations of the model and executor (instantiations.hpp).

#ifndef GEXEC_COMPILED
#error "src/gexec.cpp builds gexec::compiled: compile it with GEXEC_COMPILED defined"
#endif

#include <gexec/benchmark_impl.hpp>
#include <gexec/executor/step_graph_impl.hpp>
#include <gexec/executor/workspace_gaps_impl.hpp>
#include <gexec/graph/json_impl.hpp>
#include <gexec/instantiations.hpp>
#include <gexec/load_impl.hpp>
#include <gexec/library/module_impl.hpp>
#include <gexec/planners/liveness_impl.hpp>
#include <gexec/planners/planner_impl.hpp>
#include <gexec/safetensors_impl.hpp>

GEXEC_NAMESPACE_BEGIN
GEXEC_DETAIL_INSTANTIATIONS()
GEXEC_NAMESPACE_END
