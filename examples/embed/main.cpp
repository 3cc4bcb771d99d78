// The shortest program that runs a TVM graph-executor model with gexec: the graph, the
// kernel library and the parameters from files, the first input from a .npy file, the
// first output (float32) printed.
//
//   gexec_embed graph.json kernels.so params.bin input.npy

#include <gexec/executor.hpp>
#include <gexec/npy.hpp>

#include <algorithm>
#include <iostream>

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "usage: gexec_embed graph.json kernels.so params.bin input.npy\n";
    return 2;
  }
  try {
    const gexec::model model(gexec::load_graph_file(argv[1]), gexec::load_module(argv[2]),
                             gexec::load_param_dict_file(argv[3]));
    auto ex = model.instantiate();  // one per thread; the model is shared
    ex.set_input(0, gexec::load_npy_file(argv[4]));
    ex.run();
    const auto out = ex.get_output(0).values<float>();
    for (std::size_t i = 0; i < out.size(); ++i) std::cout << i << ": " << out[i] << '\n';
    std::cout << "argmax: " << std::max_element(out.begin(), out.end()) - out.begin() << '\n';
  } catch (const gexec::error& e) {
    std::cerr << e.what() << '\n';
    return 1;
  }
}
