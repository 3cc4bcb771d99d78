// Runs a TVM graph: graph JSON + kernel library + parameters, inputs from the command
// line or a parameter-format file, and prints the outputs and the run time.
//
//   gexec_run_model --graph examples/mlp/graph.json --lib build/tests/kernels/libgexec_test_kernels.so \
//                   --params examples/mlp/params.bin --input x=0.5,-1,2,0.25

#include <gexec/executor.hpp>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

namespace {

// "name=v1,v2,..." as a tensor of the input's shape and dtype (float or int types).
gexec::ndarray parse_values(const std::string& text, const gexec::tensor_info& info) {
  auto a = gexec::ndarray::empty(info.shape, info.dtype);
  std::vector<double> v;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) v.push_back(std::stod(item));
  if (v.size() != a.numel())
    throw gexec::error(gexec::errc::shape_mismatch, "--input " + info.name + ": " + std::to_string(v.size()) + " values for " +
                                                        std::to_string(a.numel()) + " elements");
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (gexec::same_dtype(info.dtype, gexec::dtypes::float32)) a.values<float>()[i] = static_cast<float>(v[i]);
    else if (gexec::same_dtype(info.dtype, gexec::dtypes::float64)) a.values<double>()[i] = v[i];
    else if (gexec::same_dtype(info.dtype, gexec::dtypes::int32)) a.values<std::int32_t>()[i] = static_cast<std::int32_t>(v[i]);
    else if (gexec::same_dtype(info.dtype, gexec::dtypes::int64)) a.values<std::int64_t>()[i] = static_cast<std::int64_t>(v[i]);
    else throw gexec::error(gexec::errc::unsupported, "--input " + info.name + ": dtype " + gexec::to_string(info.dtype));
  }
  return a;
}

void print_tensor(const std::string& name, const gexec::ndarray& a) {
  std::cout << name << ": " << gexec::to_string(a.dtype()) << gexec::detail::shape_to_string(a.shape()) << " =";
  const std::uint64_t shown = std::min<std::uint64_t>(a.numel(), 16);
  for (std::uint64_t i = 0; i < shown; ++i) {
    if (gexec::same_dtype(a.dtype(), gexec::dtypes::float32)) std::cout << ' ' << a.values<float>()[i];
    else if (gexec::same_dtype(a.dtype(), gexec::dtypes::int32)) std::cout << ' ' << a.values<std::int32_t>()[i];
    else if (gexec::same_dtype(a.dtype(), gexec::dtypes::int64)) std::cout << ' ' << a.values<std::int64_t>()[i];
    else if (gexec::same_dtype(a.dtype(), gexec::dtypes::float64)) std::cout << ' ' << a.values<double>()[i];
  }
  std::cout << (a.numel() > shown ? " ...\n" : "\n");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Run a TVM graph-executor model with gexec"};
  std::string graph_path, lib_path, params_path, inputs_path;
  std::vector<std::string> inputs;
  int repeat = 0;
  app.add_option("-g,--graph", graph_path, "graph JSON")->required()->check(CLI::ExistingFile);
  app.add_option("-l,--lib", lib_path, "kernel library (.so)")->required()->check(CLI::ExistingFile);
  app.add_option("-p,--params", params_path, "parameter blob")->check(CLI::ExistingFile);
  app.add_option("-i,--input", inputs, "input values: name=v1,v2,... (others are zero)");
  app.add_option("--inputs", inputs_path, "inputs as a parameter blob keyed by input name")->check(CLI::ExistingFile);
  app.add_option("-r,--repeat", repeat, "also time run() this many times");
  CLI11_PARSE(app, argc, argv);

  try {
    std::ifstream json_file(graph_path);
    std::string json((std::istreambuf_iterator<char>(json_file)), std::istreambuf_iterator<char>());
    auto ex = gexec::create(json, gexec::load_module(lib_path));
    if (!params_path.empty()) ex.load_params_file(params_path);
    const auto info = ex.get_input_info();
    for (const auto& i : info) {  // inputs not given below are zero, as the help says
      auto zeros = gexec::ndarray::empty(i.shape, i.dtype);
      std::memset(zeros.data(), 0, static_cast<std::size_t>(zeros.byte_size()));
      ex.set_input(i.name, zeros);
    }
    if (!inputs_path.empty())
      for (const auto& [name, value] : gexec::load_param_dict_file(inputs_path)) ex.set_input(name, value);
    for (const std::string& spec : inputs) {
      auto eq = spec.find('=');
      std::string name = spec.substr(0, eq);
      auto it = std::find_if(info.begin(), info.end(), [&](const auto& i) { return i.name == name; });
      if (eq == std::string::npos || it == info.end()) throw gexec::error(gexec::errc::not_found, "--input " + spec + ": no such input");
      ex.set_input(name, parse_values(spec.substr(eq + 1), *it));
    }
    ex.run();
    for (int i = 0; i < ex.get_num_outputs(); ++i) print_tensor(ex.get_output_info()[static_cast<std::size_t>(i)].name, ex.get_output(i));
    if (repeat > 0) {
      auto r = gexec::benchmark(ex, {.repeat = repeat, .number = 10});
      std::cout << "run(): mean " << r.mean * 1e6 << " us, median " << r.median * 1e6 << " us, min " << r.min * 1e6 << " us over "
                << r.results.size() << " repeats\n";
    }
  } catch (const gexec::error& e) {
    std::cerr << e.what() << '\n';
    return 1;
  }
}
