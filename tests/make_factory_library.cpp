// Writes a C source defining __tvm_dev_mblob for a graph and its parameters, the way
// export_library embeds them, so tests can build a single-file library without TVM.
// With ALIGN, the symbol and every parameter's data in it are ALIGN-byte aligned
// (write_module_blob's save_options::align): a library whose weights are read in place.
//
//   gexec_make_factory_blob graph.json params.bin out.c [ALIGN]

#include <gexec/packed_c/module_blob.hpp>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) {
    std::cerr << "usage: gexec_make_factory_blob graph.json params.bin out.c [ALIGN]\n";
    return 2;
  }
  const std::size_t align = argc == 5 ? std::strtoull(argv[4], nullptr, 10) : 0;
  std::ifstream json_file(argv[1]);
  gexec::graph_factory_blob factory;
  factory.graph_json.assign(std::istreambuf_iterator<char>(json_file), std::istreambuf_iterator<char>());
  factory.params = gexec::load_param_dict_file(argv[2]);
  factory.module_name = "default";
  auto blob = gexec::write_module_blob(factory, {}, gexec::save_options{align});
  std::ofstream out(argv[3]);
  out << "__attribute__((visibility(\"default\")";
  if (align) out << ", aligned(" << align << ")";
  out << ")) const unsigned char __tvm_dev_mblob[" << blob.size() << "] = {";
  for (std::size_t i = 0; i < blob.size(); ++i) out << (i % 16 ? "" : "\n ") << static_cast<unsigned>(blob[i]) << ',';
  out << "\n};\n";
}
