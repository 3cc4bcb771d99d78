// Activation storage of the liveness planner against the graph's own storage ids
// (as_compiled, the baseline) and against the liveness lower bound, all three taken from
// one model's plan (basic_model<..., gexec::liveness>::storage()).
//
//   gexec_bench_planner [--n N] [CONFORMANCE_DIR]
//
// Synthetic graphs (graph_builder, a registry of no-op kernels), each twice: with a
// storage id per entry, as a naive compiler gives them, and with TVM-like reuse (each
// output takes the smallest freed storage id at least as large, else a new one; inputs
// are freed after the node's outputs are allocated, as TVM's planner does). The graphs:
// a chain of 200 ops of varying sizes, residual blocks (x -> a -> b, add(x, b)) in four
// stages, a U-net with long skip connections, a random DAG (fixed seed), and a
// self-attention block (q, k and v of x, per-head scores, softmax, context, projection,
// residual add).
//
// Then the time of planning as the shapes grow: make_plan with liveness and with
// as_compiled, and the step graph of the liveness plan (make_step_graph), on a chain,
// a fan-out (one input read by N ops, every one an output), a wide concatenation (N ops
// of the input feeding one concat) and a random DAG (long edges), each of N and of 10 N
// nodes (N = 5,000 unless --n says otherwise; TVM-like ids), best of 3. Prints the time
// per node and its ratio from N to 10 N nodes: about 1 where the cost grows as n (log n
// adds about 0.27 from 5,000 to 50,000), 10 where it grows as n^2.
//
// With CONFORMANCE_DIR, each model of its manifest (graph.json, lib.so, params.bin,
// inputs from inputs.bin) too, and its outputs under both plans compared byte for byte:
// as_compiled run once, liveness run twice (the second on an arena the first left dirty).
//
// Fails (exit 1) when outputs differ, when planned > as_compiled, or when
// planned > 1.10 x lower bound.

#include <boost/json.hpp>

#include <gexec/executor.hpp>

#include <gexec/contrib/sort.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

constexpr double bound_slack = 1.10;

using cpu = gexec::backends<gexec::cpu_backend>;
template <class Binding, class Planner>
using model_t = gexec::basic_model<cpu, gexec::pool_allocator, Binding, Planner>;

// ---- synthetic graphs ---------------------------------------------------------------

// A DAG over float32 values: value 0 is the graph input, value k + 1 the output of op k.
struct dag {
  struct op {
    std::string kernel;
    std::vector<int> inputs;  // value indices, each < this op's own value
    std::int64_t elems;
  };
  std::int64_t input_elems = 0;
  std::vector<op> ops;
  std::vector<int> outputs;  // value indices

  int add(std::string kernel, std::vector<int> inputs, std::int64_t elems) {
    ops.push_back({std::move(kernel), std::move(inputs), elems});
    return static_cast<int>(ops.size());
  }
};

// Storage ids for the ops' outputs as TVM's planner would reuse them: in node order,
// each output takes the smallest free storage id at least as large (else a new one),
// then the inputs whose last reader this op is are freed. The graph input keeps id 0 and
// graph outputs are never freed.
std::vector<std::int32_t> tvm_like_ids(const dag& d) {
  const int n_values = static_cast<int>(d.ops.size()) + 1;
  std::vector<int> last(static_cast<std::size_t>(n_values), -1);
  for (int k = 0; k < static_cast<int>(d.ops.size()); ++k)
    for (int v : d.ops[static_cast<std::size_t>(k)].inputs) last[static_cast<std::size_t>(v)] = k;
  std::vector<bool> pinned(static_cast<std::size_t>(n_values), false);
  pinned[0] = true;
  for (int v : d.outputs) pinned[static_cast<std::size_t>(v)] = true;

  std::vector<std::int32_t> id(static_cast<std::size_t>(n_values), 0);
  std::vector<std::uint64_t> size_of_id = {static_cast<std::uint64_t>(d.input_elems) * 4};
  std::multimap<std::uint64_t, std::int32_t> free_ids;  // bytes -> id
  auto release = [&](int v) {
    const auto sid = id[static_cast<std::size_t>(v)];
    free_ids.emplace(size_of_id[static_cast<std::size_t>(sid)], sid);
  };
  for (int k = 0; k < static_cast<int>(d.ops.size()); ++k) {
    const dag::op& o = d.ops[static_cast<std::size_t>(k)];
    const int v = k + 1;
    const auto bytes = static_cast<std::uint64_t>(o.elems) * 4;
    auto it = free_ids.lower_bound(bytes);
    if (it != free_ids.end()) {
      id[static_cast<std::size_t>(v)] = it->second;
      free_ids.erase(it);
    } else {
      id[static_cast<std::size_t>(v)] = static_cast<std::int32_t>(size_of_id.size());
      size_of_id.push_back(bytes);
    }
    std::vector<int> seen;
    for (int in : o.inputs) {
      if (pinned[static_cast<std::size_t>(in)] || last[static_cast<std::size_t>(in)] != k) continue;
      if (std::find(seen.begin(), seen.end(), in) != seen.end()) continue;
      seen.push_back(in);
      release(in);
    }
    if (last[static_cast<std::size_t>(v)] < 0 && !pinned[static_cast<std::size_t>(v)]) release(v);  // never read
  }
  return id;
}

// The graph, each op's output on a storage id of its own (naive) or TVM-like.
gexec::validated_graph build(const dag& d, bool reuse) {
  const std::vector<std::int32_t> ids = reuse ? tvm_like_ids(d) : std::vector<std::int32_t>{};
  gexec::graph_builder b;
  std::vector<gexec::node_entry> value;
  value.push_back(b.input("x", {d.input_elems}));
  for (std::size_t k = 0; k < d.ops.size(); ++k) {
    const dag::op& o = d.ops[k];
    std::vector<gexec::node_entry> in;
    for (int v : o.inputs) in.push_back(value[static_cast<std::size_t>(v)]);
    const std::int32_t sid = reuse ? ids[k + 1] : -1;
    value.push_back(b.op(o.kernel + std::to_string(k), o.kernel, std::move(in), {{{o.elems}, gexec::dtypes::float32, 0, sid}}));
  }
  for (int v : d.outputs) b.output(value[static_cast<std::size_t>(v)]);
  return b.build();
}

// A deterministic generator (64-bit LCG), the same on every platform.
struct lcg {
  std::uint64_t s;
  std::uint64_t next() {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return s >> 33;
  }
  std::int64_t in(std::int64_t lo, std::int64_t hi) { return lo + static_cast<std::int64_t>(next() % static_cast<std::uint64_t>(hi - lo + 1)); }
};

// 200 ops, each reading the previous one; sizes from 4K to 256K floats, in runs.
dag chain_200() {
  dag d;
  lcg r{42};
  d.input_elems = 64 * 1024;
  int prev = 0;
  std::int64_t elems = d.input_elems;
  for (int k = 0; k < 200; ++k) {
    if (k % 4 == 0) elems = 4096 * r.in(1, 64);  // a new size every 4 ops, like layers of one resolution
    prev = d.add(k % 2 ? "relu" : "conv", {prev}, elems);
  }
  d.outputs = {prev};
  return d;
}

// Residual blocks as in ResNet: a = conv(x), b = conv(a), y = add(x, b), three blocks a
// stage, four stages (each halving the elements); a stage's first block takes a 1x1
// projection of x for the shortcut.
dag residual() {
  dag d;
  std::int64_t elems = 64 * 56 * 56;
  d.input_elems = 3 * 224 * 224;
  int x = d.add("stem", {0}, elems);
  for (int stage = 0; stage < 4; ++stage) {
    for (int block = 0; block < 3; ++block) {
      int shortcut = x;
      if (stage > 0 && block == 0) {
        elems /= 2;
        shortcut = d.add("proj", {x}, elems);
      }
      const int a = d.add("conv", {x}, elems);
      const int b = d.add("conv", {a}, elems);
      x = d.add("add", {shortcut, b}, elems);
    }
  }
  const int pool = d.add("pool", {x}, 512);
  d.outputs = {d.add("dense", {pool}, 1000)};
  return d;
}

// U-net, 5 levels: two convs a level, pooled on the way down; on the way up, upsample,
// concatenate with the encoder's output of that level (the long skip) and two convs.
dag unet() {
  dag d;
  constexpr int levels = 5;
  d.input_elems = 256 * 256;
  std::int64_t hw = 256 * 256, ch = 32;
  int x = 0;
  std::vector<int> skip;
  std::vector<std::int64_t> skip_elems;
  for (int l = 0; l < levels; ++l) {
    x = d.add("conv", {x}, ch * hw);
    x = d.add("conv", {x}, ch * hw);
    skip.push_back(x);
    skip_elems.push_back(ch * hw);
    if (l + 1 < levels) {
      hw /= 4;
      x = d.add("pool", {x}, ch * hw);
      ch *= 2;
    }
  }
  for (int l = levels - 2; l >= 0; --l) {
    hw *= 4;
    ch /= 2;
    const int up = d.add("upsample", {x}, ch * hw);
    const int cat = d.add("concat", {up, skip[static_cast<std::size_t>(l)]}, 2 * ch * hw);
    x = d.add("conv", {cat}, ch * hw);
    x = d.add("conv", {x}, ch * hw);
  }
  d.outputs = {d.add("head", {x}, hw)};
  return d;
}

// 150 ops, each reading 1 to 3 earlier values (mostly recent ones, one in eight from
// anywhere before: long edges), sizes from 1K to 128K floats; the last op and two others
// are outputs.
dag random_dag() {
  dag d;
  lcg r{2024};
  d.input_elems = 16 * 1024;
  for (int k = 0; k < 150; ++k) {
    const int v = k + 1;
    std::vector<int> in = {v - 1};  // keeps the graph connected, as a topological order
    const int extra = static_cast<int>(r.in(0, 2));
    for (int e = 0; e < extra; ++e) {
      const int from = r.in(0, 7) == 0 ? static_cast<int>(r.in(0, v - 1)) : std::max(0, v - 1 - static_cast<int>(r.in(0, 5)));
      if (std::find(in.begin(), in.end(), from) == in.end()) in.push_back(from);
    }
    d.add(in.size() > 1 ? "add" : "conv", std::move(in), 1024 * r.in(1, 128));
  }
  d.outputs = {static_cast<int>(d.ops.size()), 50, 100};
  return d;
}

// Self-attention over 16 tokens of 16 features, 2 heads, as TVM lowers it: q, k and v
// dense layers of x, each transposed per head, scores and their softmax per head, the
// context per head, transposed back, projected and added to x. Many values of a few sizes
// live at once: the order values are placed in matters.
dag attention() {
  constexpr std::int64_t tokens = 16, features = 16, heads = 2;
  dag d;
  d.input_elems = tokens * features;
  const int q = d.add("dense", {0}, tokens * features);
  const int k = d.add("dense", {0}, tokens * features);
  const int v = d.add("dense", {0}, tokens * features);
  const int qt = d.add("transpose", {q}, tokens * features);
  const int kt = d.add("transpose", {k}, tokens * features);
  const int vt = d.add("transpose", {v}, tokens * features);
  const int scores = d.add("batch_matmul", {qt, kt}, heads * tokens * tokens);
  const int soft = d.add("softmax", {scores}, heads * tokens * tokens);
  const int context = d.add("batch_matmul", {soft, vt}, tokens * features);
  const int back = d.add("transpose", {context}, tokens * features);
  const int out = d.add("dense", {back}, tokens * features);
  d.outputs = {d.add("add", {out, 0}, tokens * features)};
  return d;
}

// ---- shapes that grow -----------------------------------------------------------------

// n ops, each reading the one before; sizes from 1K to 64K floats.
dag chain_of(int n) {
  dag d;
  lcg r{7};
  d.input_elems = 4096;
  int prev = 0;
  for (int k = 0; k < n; ++k) prev = d.add("conv", {prev}, 1024 * r.in(1, 64));
  d.outputs = {prev};
  return d;
}

// n ops of the input, every one a graph output: n values live together to the end.
dag fan_out_of(int n) {
  dag d;
  d.input_elems = 64;
  for (int k = 0; k < n; ++k) d.outputs.push_back(d.add("relu", {0}, 16 * (1 + k % 4)));
  return d;
}

// n - 1 ops of the input feeding one concat: n - 1 values live together until it runs.
dag wide_concat_of(int n) {
  dag d;
  d.input_elems = 64;
  std::vector<int> parts;
  for (int k = 0; k + 1 < n; ++k) parts.push_back(d.add("relu", {0}, 16 * (1 + k % 4)));
  d.outputs = {d.add("concat", std::move(parts), 16 * 4 * n)};
  return d;
}

// As random_dag, with n ops and outputs every 500 ops: one read in eight goes anywhere
// before, so values live long and many at once.
dag random_dag_of(int n) {
  dag d;
  lcg r{2024};
  d.input_elems = 16 * 1024;
  for (int k = 0; k < n; ++k) {
    const int v = k + 1;
    std::vector<int> in = {v - 1};
    const int extra = static_cast<int>(r.in(0, 2));
    for (int e = 0; e < extra; ++e) {
      const int from = r.in(0, 7) == 0 ? static_cast<int>(r.in(0, v - 1)) : std::max(0, v - 1 - static_cast<int>(r.in(0, 5)));
      if (std::find(in.begin(), in.end(), from) == in.end()) in.push_back(from);
    }
    d.add(in.size() > 1 ? "add" : "conv", std::move(in), 1024 * r.in(1, 128));
    if (v % 500 == 0) d.outputs.push_back(v);
  }
  d.outputs.push_back(n);
  return d;
}

// ---- reporting ----------------------------------------------------------------------

int failures = 0;

void header() {
  std::printf("%-46s %14s %14s %14s %10s %10s  %s\n", "graph", "as_compiled", "planned", "lower_bound", "plan/comp", "plan/bound", "check");
}

// One row; a failed check counts as a failure.
void row(const std::string& name, const gexec::storage_figures& f) {
  const double to_compiled = static_cast<double>(f.planned) / static_cast<double>(f.as_compiled);
  const double to_bound = static_cast<double>(f.planned) / static_cast<double>(f.lower_bound);
  std::string check;
  if (f.planned > f.as_compiled) check += "FAIL: planned > as_compiled; ";
  if (static_cast<double>(f.planned) > bound_slack * static_cast<double>(f.lower_bound)) check += "FAIL: planned > 1.10 x lower_bound; ";
  if (check.empty()) check = "ok";
  else ++failures;
  std::printf("%-46s %14llu %14llu %14llu %10.3f %10.3f  %s\n", name.c_str(), static_cast<unsigned long long>(f.as_compiled),
              static_cast<unsigned long long>(f.planned), static_cast<unsigned long long>(f.lower_bound), to_compiled, to_bound, check.c_str());
}

void synthetic(const std::string& name, const dag& d, const gexec::registry& kernels) {
  for (bool reuse : {false, true}) {
    const gexec::validated_graph g = build(d, reuse);
    model_t<gexec::registry, gexec::as_compiled> compiled(g, kernels);  // checks the ids: no two live values share one
    gexec::model_options zeros;  // the no-op kernels read nothing: the inputs may stay zero
    zeros.zero_unset_inputs = true;
    model_t<gexec::registry, gexec::liveness> m(g, kernels, zeros);
    auto ex = m.instantiate();  // the arena can be made and the steps run
    ex.run();
    row(name + (reuse ? " (TVM-like ids)" : " (id per entry)"), m.storage());
  }
}

// ---- conformance models -------------------------------------------------------------

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

using inputs_t = std::vector<std::pair<std::string, gexec::ndarray>>;

// The model's inputs from inputs.bin (names from info.json); without them, each input
// (that is not a parameter) filled with small values by its index.
template <class Executor>
inputs_t inputs_for(const fs::path& m, const Executor& ex) {
  inputs_t inputs;
  if (fs::exists(m / "inputs.bin") && fs::exists(m / "info.json")) {
    const json::object info = json::parse(read_text(m / "info.json")).as_object();
    const gexec::param_dict all = gexec::load_param_dict_file(m / "inputs.bin");
    for (const json::value& v : info.at("input_names").as_array()) {
      std::string name = json::value_to<std::string>(v);
      inputs.emplace_back(name, all.at(name));
    }
    return inputs;
  }
  for (const gexec::tensor_info& t : ex.get_input_info()) {
    auto a = gexec::ndarray::empty(t.shape, t.dtype);
    auto* bytes = static_cast<unsigned char*>(a.data());
    for (std::uint64_t i = 0; i < a.byte_size(); ++i) bytes[i] = static_cast<unsigned char>(i % 7);
    inputs.emplace_back(t.name, std::move(a));
  }
  return inputs;
}

// Host copies of every output after one run.
template <class Executor>
std::vector<gexec::ndarray> run_outputs(Executor& ex, const inputs_t& inputs) {
  for (const auto& [name, value] : inputs) ex.set_input(name, value);
  ex.run();
  std::vector<gexec::ndarray> out;
  for (int i = 0; i < ex.get_num_outputs(); ++i) out.push_back(ex.get_output(i).copy());
  return out;
}

// The first output that differs (shape, dtype or any byte), or -1.
int first_difference(const std::vector<gexec::ndarray>& a, const std::vector<gexec::ndarray>& b) {
  if (a.size() != b.size()) return 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const bool same = std::ranges::equal(a[i].shape(), b[i].shape()) && gexec::same_dtype(a[i].dtype(), b[i].dtype()) &&
                      a[i].byte_size() == b[i].byte_size() && std::memcmp(a[i].data(), b[i].data(), a[i].byte_size()) == 0;
    if (!same) return static_cast<int>(i);
  }
  return -1;
}

void conformance_model(const fs::path& dir, const std::string& name) {
  const fs::path m = dir / name;
  const gexec::validated_graph g = gexec::load_graph_file(m / "graph.json");
  const gexec::module lib = gexec::load_module(m / "lib.so");
  const gexec::param_dict params = gexec::load_param_dict_file(m / "params.bin");
  model_t<gexec::packed_c_abi, gexec::as_compiled> compiled(g, gexec::packed_c_abi(lib), params);
  model_t<gexec::packed_c_abi, gexec::liveness> planned(g, gexec::packed_c_abi(lib), params);
  row(name, planned.storage());

  auto a = compiled.instantiate();
  auto b = planned.instantiate();
  const inputs_t inputs = inputs_for(m, a);
  const auto want = run_outputs(a, inputs);
  const auto first = run_outputs(b, inputs);
  const auto second = run_outputs(b, inputs);  // on the arena the first run left
  const int d1 = first_difference(want, first), d2 = first_difference(want, second);
  std::uint64_t bytes = 0;
  for (const gexec::ndarray& o : want) bytes += o.byte_size();
  if (d1 < 0 && d2 < 0) {
    std::printf("  outputs identical: yes (%zu outputs, %llu bytes; liveness run twice)\n", want.size(), static_cast<unsigned long long>(bytes));
  } else {
    ++failures;
    std::printf("  outputs identical: no (output %d differs on the %s liveness run)\n", d1 >= 0 ? d1 : d2, d1 >= 0 ? "first" : "second");
  }
}

// ---- timing as the shapes grow ----------------------------------------------------------

using clock_type = std::chrono::steady_clock;

// Best of 3 runs of f, in seconds.
template <class F>
double best_of_3(F&& f) {
  double best = 1e300;
  for (int i = 0; i < 3; ++i) {
    const auto t0 = clock_type::now();
    f();
    best = std::min(best, std::chrono::duration<double>(clock_type::now() - t0).count());
  }
  return best;
}

struct timings {
  double liveness = 0, compiled = 0, steps = 0;  // seconds
  gexec::storage_figures figures;
};

timings time_planning(const dag& d, const gexec::registry& kernels) {
  const gexec::validated_graph g = build(d, true);
  cpu backends;
  const std::vector<DLDevice> devices = {gexec::cpu()};
  timings t;
  gexec::plan p;
  t.liveness = best_of_3([&] { p = gexec::make_plan(g, kernels, devices, backends, gexec::liveness{}); });
  t.compiled = best_of_3([&] { (void)gexec::make_plan(g, kernels, devices, backends, gexec::as_compiled{}); });
  t.steps = best_of_3([&] { (void)gexec::detail::make_step_graph(g.compact(), p); });
  t.figures = p.figures;
  return t;
}

void scaling(int n, const gexec::registry& kernels) {
  std::printf("\nplanning time as the graph grows (best of 3; per node: time / nodes; 10n/n: the ratio of time per node, 1.0 = linear)\n\n");
  std::printf("%-28s %7s %12s %12s %12s %10s %10s %10s %10s\n", "shape", "nodes", "liveness ms", "compiled ms", "steps ms", "live ns/n",
              "comp ns/n", "steps ns/n", "plan/bound");
  struct shape {
    const char* name;
    dag (*make)(int);
  };
  const shape shapes[] = {{"chain", chain_of}, {"fan-out, all outputs", fan_out_of}, {"wide concat", wide_concat_of}, {"random DAG, long edges", random_dag_of}};
  for (const shape& s : shapes) {
    timings at[2];
    for (int i = 0; i < 2; ++i) {
      const int nodes = i ? 10 * n : n;
      at[i] = time_planning(s.make(nodes), kernels);
      const auto per = [&](double seconds) { return seconds * 1e9 / nodes; };
      std::printf("%-28s %7d %12.2f %12.2f %12.2f %10.0f %10.0f %10.0f %10.3f\n", s.name, nodes, at[i].liveness * 1e3, at[i].compiled * 1e3,
                  at[i].steps * 1e3, per(at[i].liveness), per(at[i].compiled), per(at[i].steps),
                  static_cast<double>(at[i].figures.planned) / static_cast<double>(at[i].figures.lower_bound));
    }
    const auto ratio = [&](double timings::*field) { return at[1].*field / (10 * at[0].*field); };
    std::printf("%-28s %7s %12s %12s %12s %9.2fx %9.2fx %9.2fx\n", "", "10n/n", "", "", "", ratio(&timings::liveness), ratio(&timings::compiled),
                ratio(&timings::steps));
  }
}

}  // namespace

int main(int argc, char** argv) {
  fs::path dir;
  int n = 5000;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--n") == 0 && i + 1 < argc && std::atoi(argv[i + 1]) > 0) {
      n = std::atoi(argv[++i]);
    } else if (argv[i][0] == '-') {
      std::fprintf(stderr, "usage: %s [--n N] [CONFORMANCE_DIR]\n", argv[0]);
      return 2;
    } else {
      dir = argv[i];
    }
  }
  std::printf("activation storage in bytes (inputs and parameters not counted): as_compiled = one buffer per storage id (the baseline),\n"
              "planned = the liveness planner, lower_bound = the most bytes live at one step; checks: planned <= as_compiled,\n"
              "planned <= %.2f x lower_bound\n\n",
              bound_slack);
  header();
  gexec::registry kernels;
  for (const char* k : {"stem", "conv", "relu", "proj", "add", "pool", "dense", "upsample", "concat", "head", "transpose", "batch_matmul", "softmax"})
    kernels.add(k, [](gexec::packed_args) {});
  try {
    synthetic("chain of 200, varying sizes", chain_200(), kernels);
    synthetic("residual blocks, 4 stages", residual(), kernels);
    synthetic("U-net, 5 levels, long skips", unet(), kernels);
    synthetic("random DAG, 150 ops, seed 2024", random_dag(), kernels);
    synthetic("self-attention, 16 x 16, 2 heads", attention(), kernels);
  } catch (const std::exception& e) {
    ++failures;
    std::printf("synthetic graphs failed: %s\n", e.what());
  }
  try {
    scaling(n, kernels);
  } catch (const std::exception& e) {
    ++failures;
    std::printf("planning time failed: %s\n", e.what());
  }

  if (dir.empty()) {
    std::printf("\nconformance models skipped: no directory given\n");
  } else if (!fs::exists(dir / "manifest.json")) {
    std::printf("\nconformance models skipped: no manifest.json in %s\n", dir.string().c_str());
  } else {
    gexec::contrib::register_sort_functions();
    std::printf("\nconformance models (%s); outputs: as_compiled against liveness, byte for byte\n", dir.string().c_str());
    const json::value manifest = json::parse(read_text(dir / "manifest.json"));
    for (const json::value& v : manifest.at("models").as_array()) {
      const std::string name = json::value_to<std::string>(v);
      try {
        conformance_model(dir, name);
      } catch (const std::exception& e) {
        ++failures;
        std::printf("%-46s failed: %s\n", name.c_str(), e.what());
      }
      std::fflush(stdout);
    }
  }
  std::printf("\n%s\n", failures ? "FAILED: see the rows marked FAIL or outputs identical: no" : "all checks passed");
  return failures ? 1 : 0;
}
