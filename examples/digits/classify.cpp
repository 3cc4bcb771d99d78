// Classifies handwritten digits with the model in examples/digits (trained by train.py on
// scikit-learn's 8x8 digits): loads graph.json, the kernel library and params.bin, runs
// each image of samples.npy, prints the predicted class beside labels.npy's, the accuracy
// and the latency of one inference.
//
//   gexec_digits [--model-dir examples/digits] [--lib libgexec_test_kernels.so]
//   gexec_digits --check examples/digits/expected.json   # exit 1 unless gexec agrees with numpy
//
// The defaults are the source folder and the sample kernel library of the build that
// made this program.

#include <gexec/executor.hpp>
#include <gexec/npy.hpp>

#include <CLI/CLI.hpp>
#include <boost/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#ifndef GEXEC_DIGITS_DIR
#define GEXEC_DIGITS_DIR "examples/digits"
#endif
#ifndef GEXEC_EXAMPLE_KERNELS
#define GEXEC_EXAMPLE_KERNELS "libgexec_test_kernels.so"
#endif

namespace {

std::string shape_text(std::span<const std::int64_t> shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::vector<std::int64_t> json_shape(const boost::json::value& v) {
  std::vector<std::int64_t> shape;
  for (const auto& d : v.as_array()) shape.push_back(d.to_number<std::int64_t>());
  return shape;
}

// What expected.json (written by train.py from numpy) says, set against what gexec has.
// Each difference is printed and counted.
class checker {
 public:
  explicit checker(const std::filesystem::path& path) {
    std::ifstream in(path);
    if (!in) throw gexec::error(gexec::errc::io, "cannot open " + path.string());
    std::stringstream text;
    text << in.rdbuf();
    expected_ = boost::json::parse(text.str()).as_object();
  }

  // Input, output and parameter shapes and dtypes, from the graph and from the blob.
  void shapes(const gexec::model::executor& ex, const gexec::param_dict& params) {
    const auto& input = expected_.at("input").as_object();
    const std::string name = boost::json::value_to<std::string>(input.at("name"));
    const auto inputs = ex.get_input_info();
    auto x = std::find_if(inputs.begin(), inputs.end(), [&](const auto& i) { return i.name == name; });
    if (x == inputs.end()) return differ("the graph has no input \"" + name + "\"");
    same("input " + name, x->shape, x->dtype, json_shape(input.at("shape")), boost::json::value_to<std::string>(input.at("dtype")));
    const auto& output = expected_.at("output").as_object();
    const auto out = ex.get_output_info();
    if (out.size() != 1) differ("the graph has " + std::to_string(out.size()) + " outputs, not 1");
    else same("output 0", out[0].shape, out[0].dtype, json_shape(output.at("shape")),
              boost::json::value_to<std::string>(output.at("dtype")));
    for (const auto& [key, shape] : expected_.at("params").as_object()) {
      const std::string param(key);
      const gexec::ndarray* p = params.find(param);
      if (!p) differ("params.bin has no \"" + param + "\"");
      else same("param " + param, {p->shape().begin(), p->shape().end()}, p->dtype(), json_shape(shape), "float32");
    }
    if (params.size() != expected_.at("params").as_object().size())
      differ("params.bin holds " + std::to_string(params.size()) + " tensors, expected.json names " +
             std::to_string(expected_.at("params").as_object().size()));
  }

  // Per sample: the label, the predicted class, and every probability within 1e-5.
  void predictions(std::span<const std::int64_t> labels, const std::vector<std::vector<float>>& probabilities) {
    const auto& want_labels = expected_.at("labels").as_array();
    const auto& want_predicted = expected_.at("predicted").as_array();
    const auto& want_p = expected_.at("probabilities").as_array();
    if (want_labels.size() != labels.size() || want_predicted.size() != labels.size() || want_p.size() != labels.size())
      return differ(std::to_string(labels.size()) + " samples; expected.json has " + std::to_string(want_labels.size()) +
                    " labels, " + std::to_string(want_predicted.size()) + " predictions, " + std::to_string(want_p.size()) +
                    " rows of probabilities");
    std::int64_t correct = 0;
    for (std::size_t i = 0; i < labels.size(); ++i) {
      const std::string at = "sample " + std::to_string(i) + ": ";
      if (labels[i] != want_labels.at(i).to_number<std::int64_t>()) differ(at + "label differs from expected.json's");
      const auto& p = probabilities[i];
      const auto predicted = std::max_element(p.begin(), p.end()) - p.begin();
      correct += predicted == labels[i];
      if (predicted != want_predicted.at(i).to_number<std::int64_t>())
        differ(at + "predicted " + std::to_string(predicted) + ", numpy predicted " +
               std::to_string(want_predicted.at(i).to_number<std::int64_t>()));
      const auto& row = want_p.at(i).as_array();
      if (row.size() != p.size()) differ(at + std::to_string(p.size()) + " classes, numpy had " + std::to_string(row.size()));
      for (std::size_t c = 0; c < row.size() && c < p.size(); ++c)
        if (std::abs(p[c] - row[c].to_number<double>()) > 1e-5)
          differ(at + "probability of class " + std::to_string(c) + " is " + std::to_string(p[c]) + ", numpy's " +
                 std::to_string(row[c].to_number<double>()));
    }
    if (correct != expected_.at("correct").to_number<std::int64_t>())
      differ(std::to_string(correct) + " correct, numpy had " + std::to_string(expected_.at("correct").to_number<std::int64_t>()));
  }

  [[nodiscard]] int differences() const { return differences_; }

 private:
  void same(const std::string& what, const std::vector<std::int64_t>& shape, DLDataType dtype,
            const std::vector<std::int64_t>& want_shape, std::string_view want_dtype) {
    if (shape != want_shape || gexec::to_string(dtype) != want_dtype)
      differ(what + " is " + gexec::to_string(dtype) + shape_text(shape) + ", expected.json says " + std::string(want_dtype) +
             shape_text(want_shape));
  }
  void differ(const std::string& what) {
    std::cout << "check: " << what << '\n';
    ++differences_;
  }
  boost::json::object expected_;
  int differences_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Classify 8x8 digit images with a TVM graph-executor model run by gexec"};
  std::filesystem::path dir = GEXEC_DIGITS_DIR, lib = GEXEC_EXAMPLE_KERNELS, check_path;
  bool shapes_only = false;
  int repeat = 20;
  app.add_option("-m,--model-dir", dir, "folder with graph.json, params.bin, samples.npy, labels.npy")->check(CLI::ExistingDirectory);
  app.add_option("-l,--lib", lib, "kernel library the graph calls")->check(CLI::ExistingFile);
  app.add_option("--check", check_path, "exit 1 unless shapes, predictions and probabilities match this file (expected.json)")
      ->check(CLI::ExistingFile);
  app.add_flag("--shapes-only", shapes_only, "with --check: compare the model's shapes only, classify nothing")->needs("--check");
  app.add_option("-r,--repeat", repeat, "timed repeats (of 100 inferences each)")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  try {
    // The model is the graph bound to its kernels with the weights loaded once; an
    // executor holds one inference's activations.
    const gexec::param_dict params = gexec::load_param_dict_file(dir / "params.bin");
    const gexec::model model(gexec::load_graph_file(dir / "graph.json"), gexec::load_module(lib), params);
    auto ex = model.instantiate();

    std::optional<checker> check;
    if (!check_path.empty()) {
      check.emplace(check_path);
      check->shapes(ex, params);
      if (shapes_only) {
        std::cout << "check: " << (check->differences() ? "FAILED" : "shapes match expected.json") << '\n';
        return check->differences() ? 1 : 0;
      }
    }

    const gexec::ndarray samples = gexec::load_npy_file(dir / "samples.npy");  // float32 [N, 64]
    const gexec::ndarray labels = gexec::load_npy_file(dir / "labels.npy");    // int64 [N]
    constexpr std::int64_t image_size = 64;  // 8x8 pixels, the graph's input x[1, 64]
    const auto truth = labels.values<std::int64_t>();
    const auto n = truth.size();
    if (n == 0 || samples.ndim() != 2 || samples.shape()[1] != image_size || static_cast<std::size_t>(samples.shape()[0]) != n)
      throw gexec::error(gexec::errc::shape_mismatch, "samples.npy is " + shape_text(samples.shape()) + ", expected [" +
                                                          std::to_string(n) + ", 64] for " + std::to_string(n) + " labels");
    const auto pixels = samples.values<float>();
    auto x = gexec::ndarray::empty({1, image_size}, gexec::dtypes::float32);

    std::vector<std::vector<float>> probabilities;
    std::size_t correct = 0;
    for (std::size_t i = 0; i < n; ++i) {
      std::memcpy(x.data(), pixels.data() + i * image_size, image_size * sizeof(float));
      ex.set_input("x", x);
      ex.run();
      const auto p = ex.get_output(0).values<float>();  // softmax over the 10 classes
      probabilities.emplace_back(p.begin(), p.end());
      const auto predicted = std::max_element(p.begin(), p.end()) - p.begin();
      correct += predicted == truth[i];
      std::printf("sample %2zu: predicted %td (p = %.3f), label %lld%s\n", i, predicted, static_cast<double>(p[predicted]),
                  static_cast<long long>(truth[i]), predicted == truth[i] ? "" : "   <- wrong");
    }
    std::printf("accuracy: %zu/%zu (%.1f%%)\n", correct, n, n ? 100.0 * static_cast<double>(correct) / static_cast<double>(n) : 0.0);

    // run() alone, on the first image: TVM's time evaluator, `repeat` times 100 runs.
    std::memcpy(x.data(), pixels.data(), image_size * sizeof(float));
    ex.set_input("x", x);
    const auto t = gexec::benchmark(ex, {.repeat = repeat, .number = 100});
    std::printf("latency: %.2f us per inference, run() alone (median of %d x 100 runs; min %.2f us)\n", t.median * 1e6, repeat,
                t.min * 1e6);

    if (check) {
      check->predictions(truth, probabilities);
      std::cout << "check: " << (check->differences() ? "FAILED" : "predictions and probabilities match numpy's (expected.json)")
                << '\n';
      return check->differences() ? 1 : 0;
    }
  } catch (const gexec::error& e) {
    std::cerr << e.what() << '\n';
    return 1;
  } catch (const std::exception& e) {  // expected.json that is not what train.py writes
    std::cerr << "error: " << e.what() << '\n';
    return 1;
  }
}
