#pragma once
// The umbrella header: everything gexec offers on the host. The CUDA backend is
// opt-in and not included here.

#include "backends/cpu.hpp"        // device backends: the host
#include "backends/emulated.hpp"   //   a second device type served from host memory
#include "benchmark.hpp"           // TVM's time evaluator
#include "execution/parallel_branches.hpp"  // execution policies: independent steps at once
#include "execution/sequential.hpp"         //   the flat loop (default)
#include "factory.hpp"             // single-file libraries (export_library)
#include "function_registry.hpp"   // functions kernels look up at run time
#include "graph_builder.hpp"       // graphs built in C++
#include "graph_executor.hpp"      // graph_executor: one instance of a model
#include "model.hpp"               // model: graph + kernels + plan + parameters; create()
#include "observers/node_timer.hpp"  // observers: time per node
#include "planners/as_compiled.hpp"  // storage planners: TVM's storage ids (default)
#include "planners/liveness.hpp"     //   one arena per device by lifetime
#include "runtime.hpp"             // runtime: thread pool, registered functions, modules
