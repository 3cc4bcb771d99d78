// A program over a TVM-compiled library: load_module, create from a graph file, load
// the parameters, one run on zeros. It includes the umbrella header, as such programs do.
//
//   tvm_library graph.json deploy_lib.so params.bin

#include <gexec/executor.hpp>

#include <cstdio>
#include <cstring>
#include <filesystem>

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s graph.json deploy_lib.so params.bin\n", argv[0]);
    return 2;
  }
  try {
    gexec::module lib = gexec::load_module(argv[2]);
    auto ex = gexec::create(std::filesystem::path(argv[1]), lib, {gexec::cpu()});
    ex.load_params_file(argv[3]);
    for (const gexec::tensor_info& in : ex.get_input_info()) {
      gexec::ndarray zeros = gexec::ndarray::empty(in.shape, in.dtype);
      std::memset(zeros.data(), 0, static_cast<std::size_t>(zeros.byte_size()));
      ex.set_input(in.name, zeros);
    }
    ex.run();
    for (int i = 0; i < ex.get_num_outputs(); ++i) {
      const gexec::ndarray out = ex.get_output(i);
      std::printf("output %d: %s, %llu bytes\n", i, gexec::to_string(out.dtype()).c_str(),
                  static_cast<unsigned long long>(out.byte_size()));
    }
  } catch (const gexec::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
