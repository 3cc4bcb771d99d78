#pragma once
// The umbrella header: everything gexec offers on the host. The CUDA wing
// (<gexec/cuda.hpp>) is opt-in and not included here, nor is the emulated test device
// (<gexec/backends/emulated.hpp>).
//
// A program whose kernels are C++ callables (gexec::registry) compiles in much less time
// with <gexec/model.hpp>, <gexec/binding/registry.hpp> and <gexec/graph/builder.hpp> (or
// <gexec/graph.hpp> for graph JSON): those need neither Boost.DLL nor Boost.JSON.

#include "backends/cpu.hpp"        // device backends: the host
#include "benchmark.hpp"           // TVM's time evaluator
#include "binding/registry.hpp"    // op bindings: C++ kernels by name (registry, static_registry)
#include "execution/by_name.hpp"          // planners and execution policies chosen by name
#include "execution/parallel_branches.hpp"  // execution policies: independent steps at once
#include "execution/parallel_streams.hpp"   //   independent branches on several streams of each device
#include "execution/sequential.hpp"         //   the flat loop (default)
#include "function_registry.hpp"   // functions kernels look up at run time
#include "graph.hpp"               // the graph: data, validation, TVM's JSON, graphs built in C++
#include "graph_executor.hpp"      // graph_executor: one instance of a model
#include "instantiations.hpp"      // in compiled mode, what gexec::compiled instantiates
#include "load.hpp"                // TVM-compiled libraries (packed C ABI): load_module, create(json, lib),
                                   //   model::load, single-file libraries (load_factory)
#include "model.hpp"               // model: graph + kernels + plan + parameters; create()
#include "observers/node_timer.hpp"  // observers: time per node
#include "planners/as_compiled.hpp"  // storage planners: TVM's storage ids (default)
#include "planners/liveness.hpp"     //   one arena per device by lifetime
#include "runtime.hpp"             // runtime: thread pool, registered functions
