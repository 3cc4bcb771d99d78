#pragma once
// The umbrella header: everything gexec offers on the host. The CUDA backend is
// opt-in and not included here.

#include "benchmark.hpp"           // TVM's time evaluator
#include "factory.hpp"             // single-file libraries (export_library)
#include "function_registry.hpp"   // functions kernels look up at run time
#include "graph_builder.hpp"       // graphs built in C++
#include "graph_executor.hpp"      // graph_executor: one instance of a model
#include "model.hpp"               // model: graph + kernels + plan + parameters; create()
#include "runtime.hpp"             // runtime: thread pool, registered functions, modules
