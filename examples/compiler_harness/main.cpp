// What a compiler's test harness does with gexec: for each case, build the graph the
// compiler would emit (gexec::graph_builder), bind the compiler's kernels by name
// (gexec::registry: C++ callables, no library file), run it, and compare every output
// with a reference written in plain C++. Prints PASS or FAIL per case and exits 1 when
// any case fails.
//
//   gexec_compiler_harness            # every case passes
//   gexec_compiler_harness --break    # binds a dense kernel that forgets its bias: caught

#include <gexec/executor.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace {

std::int64_t numel(const DLTensor& t) {
  std::int64_t n = 1;
  for (int d = 0; d < t.ndim; ++d) n *= t.shape[d];
  return n;
}
float* floats(const DLTensor& t) { return static_cast<float*>(t.data); }
void require(bool ok, const char* what) {
  if (!ok) throw gexec::error(gexec::errc::shape_mismatch, what);  // the run fails naming the node
}

// The kernels under test: arguments are the node's inputs, then its outputs.

// out[M, N] = relu(x[M, K] . w[N, K]^T + b[N])
void dense_bias_relu(gexec::packed_args a, bool with_bias) {
  const DLTensor &x = a.tensor(0), &w = a.tensor(1), &b = a.tensor(2), &out = a.tensor(3);
  require(x.ndim == 2 && w.ndim == 2 && b.ndim == 1 && out.ndim == 2, "dense_bias_relu: ranks");
  const std::int64_t m = x.shape[0], k = x.shape[1], n = w.shape[0];
  require(w.shape[1] == k && b.shape[0] == n && out.shape[0] == m && out.shape[1] == n, "dense_bias_relu: shapes");
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      float acc = with_bias ? floats(b)[j] : 0.0f;
      for (std::int64_t p = 0; p < k; ++p) acc += floats(x)[i * k + p] * floats(w)[j * k + p];
      floats(out)[i * n + j] = std::max(acc, 0.0f);
    }
}

// Softmax over the last axis of a 2-d tensor.
void softmax_rows(gexec::packed_args a) {
  const DLTensor &x = a.tensor(0), &out = a.tensor(1);
  require(x.ndim == 2 && numel(out) == numel(x), "softmax_rows: shapes");
  const std::int64_t cols = x.shape[1];
  for (std::int64_t r = 0; r < x.shape[0]; ++r) {
    const float* in = floats(x) + r * cols;
    float* o = floats(out) + r * cols;
    const float top = *std::max_element(in, in + cols);
    float sum = 0;
    for (std::int64_t c = 0; c < cols; ++c) {
      o[c] = std::exp(in[c] - top);
      sum += o[c];
    }
    for (std::int64_t c = 0; c < cols; ++c) o[c] /= sum;
  }
}

template <class Op>
void elementwise(gexec::packed_args a, Op op) {
  const DLTensor &x = a.tensor(0), &y = a.tensor(1), &out = a.tensor(2);
  require(numel(x) == numel(y) && numel(x) == numel(out), "elementwise: shapes");
  for (std::int64_t i = 0; i < numel(x); ++i) floats(out)[i] = op(floats(x)[i], floats(y)[i]);
}

// A case: a graph, its inputs, and per output the values the reference computed.
struct test_case {
  std::string name;
  gexec::validated_graph graph;
  std::vector<std::pair<std::string, gexec::ndarray>> inputs;
  std::vector<std::vector<float>> expected;
};

// Inputs in [-1, 1], the same on every platform (std::mt19937's sequence is specified).
std::vector<float> values(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(static_cast<int>(gen() % 2001) - 1000) / 1000.0f;
  return v;
}

test_case dense_case() {
  const std::int64_t m = 3, k = 8, n = 5;
  const auto x = values(m * k, 1), w = values(n * k, 2), b = values(n, 3);
  gexec::graph_builder g;
  auto y = g.op("dense", "fused_dense_bias_relu", {g.input("x", {m, k}), g.input("w", {n, k}), g.input("b", {n})}, {{{m, n}}});
  g.output(y);
  std::vector<float> ref(m * n);  // the reference: the textbook loops, in double
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double acc = b[j];
      for (std::int64_t p = 0; p < k; ++p) acc += double{x[i * k + p]} * w[j * k + p];
      ref[i * n + j] = static_cast<float>(std::max(acc, 0.0));
    }
  return {"dense_bias_relu",
          g.build(),
          {{"x", gexec::ndarray::from_values<float>({m, k}, x)},
           {"w", gexec::ndarray::from_values<float>({n, k}, w)},
           {"b", gexec::ndarray::from_values<float>({n}, b)}},
          {ref}};
}

test_case reshape_softmax_case() {  // a reshape the compiler lowered to "__nop", then softmax
  const auto x = values(24, 4);
  gexec::graph_builder g;
  auto r = g.nop("reshape", g.input("x", {24}), {4, 6});
  g.output(g.op("softmax", "softmax_rows", {r}, {{{4, 6}}}));
  std::vector<float> ref(24);
  for (int row = 0; row < 4; ++row) {
    double sum = 0;
    for (int c = 0; c < 6; ++c) sum += std::exp(double{x[row * 6 + c]});
    for (int c = 0; c < 6; ++c) ref[row * 6 + c] = static_cast<float>(std::exp(double{x[row * 6 + c]}) / sum);
  }
  return {"reshape_softmax", g.build(), {{"x", gexec::ndarray::from_values<float>({24}, x)}}, {ref}};
}

test_case two_outputs_case() {  // s = x + y, out0 = s, out1 = s + x * y: a diamond, two outputs
  const auto x = values(16, 5), y = values(16, 6);
  gexec::graph_builder g;
  auto gx = g.input("x", {16}), gy = g.input("y", {16});
  auto s = g.op("sum", "add", {gx, gy}, {{{16}}});
  auto p = g.op("product", "multiply", {gx, gy}, {{{16}}});
  g.output(s);
  g.output(g.op("sum_plus_product", "add", {s, p}, {{{16}}}));
  std::vector<float> ref_s(16), ref_out(16);
  for (int i = 0; i < 16; ++i) {
    ref_s[i] = x[i] + y[i];
    ref_out[i] = ref_s[i] + x[i] * y[i];
  }
  return {"two_outputs",
          g.build(),
          {{"x", gexec::ndarray::from_values<float>({16}, x)}, {"y", gexec::ndarray::from_values<float>({16}, y)}},
          {ref_s, ref_out}};
}

}  // namespace

int main(int argc, char** argv) {
  const bool broken = argc > 1 && std::strcmp(argv[1], "--break") == 0;
  gexec::registry kernels;
  kernels.add("fused_dense_bias_relu", [broken](gexec::packed_args a) { dense_bias_relu(a, !broken); });
  kernels.add("softmax_rows", softmax_rows);
  kernels.add("add", [](gexec::packed_args a) { elementwise(a, [](float u, float v) { return u + v; }); });
  kernels.add("multiply", [](gexec::packed_args a) { elementwise(a, [](float u, float v) { return u * v; }); });

  int passed = 0, failed = 0;
  for (const test_case& c : {dense_case(), reshape_softmax_case(), two_outputs_case()}) {
    std::string verdict;
    double worst = 0;
    try {
      const gexec::basic_model model(c.graph, kernels);  // validates, plans and binds every kernel
      auto ex = model.instantiate();
      for (const auto& [name, value] : c.inputs) ex.set_input(name, value);
      ex.run();
      for (std::size_t o = 0; o < c.expected.size(); ++o) {
        const auto got = ex.get_output(static_cast<int>(o)).values<float>();
        for (std::size_t i = 0; i < got.size(); ++i) {
          const double diff = std::abs(double{got[i]} - c.expected[o][i]);
          worst = std::max(worst, diff);
          if (verdict.empty() && diff > 1e-5 * (1 + std::abs(c.expected[o][i])))
            verdict = "output " + std::to_string(o) + "[" + std::to_string(i) + "] = " + std::to_string(got[i]) +
                      ", reference " + std::to_string(c.expected[o][i]);
        }
      }
    } catch (const gexec::error& e) {  // a kernel that fails, or a graph gexec refuses
      verdict = e.what();
    }
    ++(verdict.empty() ? passed : failed);
    std::printf("%s %-16s max |diff| %.3g%s%s\n", verdict.empty() ? "PASS" : "FAIL", c.name.c_str(), worst,
                verdict.empty() ? "" : ": ", verdict.c_str());
  }
  std::printf("harness: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
