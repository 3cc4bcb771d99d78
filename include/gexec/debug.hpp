#pragma once
// TVM's debug executor, for any gexec executor: per-node profiles and timings
// (debug/profile.hpp), every node's outputs (debug/node_outputs.hpp), Chrome traces
// (observers/trace_recorder.hpp), the graph for Graphviz (debug/dot.hpp), and every node's
// outputs against a dump of TVM's debug executor (debug/compare_dump.hpp).

#include "debug/compare_dump.hpp"
#include "debug/dot.hpp"
#include "debug/node_outputs.hpp"
#include "debug/profile.hpp"
#include "observers/trace_recorder.hpp"
