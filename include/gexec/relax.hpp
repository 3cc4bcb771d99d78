#pragma once
// Relax VM executables, what TVM >= 0.20 deploys (relax.build(mod, "llvm").export_library):
// the reader (relax/executable.hpp), the builtins the bytecode calls
// (relax/builtins.hpp) and the virtual machine (relax/vm.hpp).
//
//   auto exe = gexec::relax::load_executable("model.so");
//   gexec::relax::virtual_machine vm(exe);
//   std::vector<gexec::ndarray> out = vm.run("main", {x});

#include "relax/builtins.hpp"
#include "relax/executable.hpp"
#include "relax/value.hpp"
#include "relax/vm.hpp"
