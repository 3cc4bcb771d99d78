// The names the C++ fragments of the documentation take from the text around them
// (tests/docs/check_docs.py compiles each fragment marked "compile: fragment" as the body
// of a function that sees these declarations). Declared, never defined: the fragments
// are compiled with -fsyntax-only, not run.
#pragma once

#include <gexec/cuda.hpp>
#include <gexec/debug.hpp>
#include <gexec/executor.hpp>
#include <gexec/relax.hpp>

#include <cstddef>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace doc_prelude {
extern std::string graph_json;                 // a graph's JSON text
extern std::vector<std::byte> param_bytes;     // tvm.runtime.save_param_dict's bytes
extern gexec::validated_graph graph;
extern gexec::module lib;
extern gexec::registry kernels;
extern gexec::param_dict params;
extern gexec::graph_executor<> ex;
extern gexec::relax::virtual_machine vm;
extern gexec::ndarray x, w, host_tensor, host_out;
gexec::ndarray next_request();
void my_argsort(gexec::packed_args args);
}  // namespace doc_prelude
