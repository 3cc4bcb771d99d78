#pragma once
// What a static program of tests/relax_static runs: for each model linked into it, the
// function to call, and TVM's inputs and outputs for it (an .npz embedded in the
// program), with the weights it takes as arguments (gexec_add_relax_model's WEIGHTS).

#include <cstddef>
#include <span>

struct relax_static_case {
  const char* name;
  const char* function;
  int inputs, outputs;
  double atol, rtol;  ///< both 0: bit for bit
  std::span<const std::byte> expected;  ///< in0..., out0... as TVM's VM returned them
  std::span<const std::byte> weights;   ///< the weights the function takes as arguments, if any
};

/// Defined by the file CMakeLists.txt writes for each program: the models it links (one,
/// or every model of the suite for static_all_models).
std::span<const relax_static_case> linked_cases();
