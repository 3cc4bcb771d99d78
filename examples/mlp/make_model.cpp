// Writes examples/mlp: a two-layer perceptron (dense, relu, dense, softmax) over the
// kernels of gexec's sample kernel library, as graph.json and params.bin.
//
//   gexec_make_mlp <output-dir>

#include <gexec/graph.hpp>
#include <gexec/params.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>

namespace {

// Deterministic weights that need no random number generator to reproduce.
gexec::ndarray weights(std::int64_t rows, std::int64_t cols, float phase) {
  auto w = gexec::ndarray::empty({rows, cols}, gexec::dtypes::float32);
  auto v = w.values<float>();
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::round(std::sin(phase + 0.7f * static_cast<float>(i)) * 64.0f) / 128.0f;
  return w;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: gexec_make_mlp <output-dir>\n";
    return 2;
  }
  std::filesystem::path out = argv[1];
  std::filesystem::create_directories(out);

  gexec::graph_builder b;
  auto x = b.input("x", {1, 4});
  auto w1 = b.input("w1", {8, 4});
  auto w2 = b.input("w2", {3, 8});
  auto h = b.op("dense1", "test_dense", {x, w1}, {{{1, 8}}});
  auto a = b.op("relu1", "test_relu", {h}, {{{1, 8}}});
  auto logits = b.op("dense2", "test_dense", {a, w2}, {{{1, 3}}});
  b.output(b.op("softmax", "test_softmax", {logits}, {{{1, 3}}}));
  std::ofstream(out / "graph.json") << gexec::to_json(b.build()) << '\n';

  gexec::param_dict params;
  params.set("w1", weights(8, 4, 0.0f));
  params.set("w2", weights(3, 8, 1.0f));
  gexec::save_param_dict_file(params, out / "params.bin");
  std::cout << "wrote " << (out / "graph.json").string() << " and " << (out / "params.bin").string() << '\n';
}
