// Memory of N instances of one model against N full copies of it: resident memory
// (/proc/self/statm) after the model is built, then after 1, 2 and 4 instances are made
// and each run once, and, as the baseline measured in the same run, 4 separate models
// that each own a copy of the weights, with one instance each, run once.
//
//   gexec_bench_instances [CONFORMANCE_DIR]
//
// Workload A: four test_dense layers (11.7 M float32 weights, ResNet-18's count) built
// with graph_builder, weights made here. Workload B (with CONFORMANCE_DIR): the
// conformance resnet's model.so through model::load, through one factory's create()
// and through load_factory(path).create() per instance. MB = 10^6 bytes.

#include <gexec/executor.hpp>
#include <gexec/load.hpp>

#include <malloc.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

constexpr double MB = 1e6;

// Resident bytes, and the file-backed part of them (mapped libraries, their blobs).
struct rss {
  double total = 0, file = 0;
  [[nodiscard]] double anon() const { return total - file; }
  rss operator-(const rss& o) const { return {total - o.total, file - o.file}; }
};

rss read_rss() {
  std::ifstream in("/proc/self/statm");
  long size = 0, resident = 0, shared = 0;
  in >> size >> resident >> shared;
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  return {static_cast<double>(resident) * page, static_cast<double>(shared) * page};
}

// Freed heap goes back to the system first, so that a delta counts only what is live.
rss settled_rss() {
  malloc_trim(0);
  return read_rss();
}

using executor = gexec::graph_executor<>;

// Zero-filled inputs of the right shapes, made before any measurement.
std::vector<std::pair<std::string, gexec::ndarray>> zero_inputs(const executor& ex) {
  std::vector<std::pair<std::string, gexec::ndarray>> in;
  for (const gexec::tensor_info& t : ex.get_input_info()) in.emplace_back(t.name, gexec::ndarray::empty(t.shape, t.dtype));
  return in;
}

struct workload {
  std::string name;
  std::function<gexec::model()> build;                       // weights loaded once
  std::function<std::vector<executor>()> naive;              // 4 models, own weights each, 1 instance each
  std::vector<std::pair<std::string, gexec::ndarray>> inputs;
};

void run_once(executor& ex, const workload& w) {
  for (const auto& [name, value] : w.inputs) ex.set_input(name, value);
  ex.run();
}

struct shared_result {
  rss model, after[5];  // after[k]: k instances made and run (deltas from before the model)
  std::uint64_t storage = 0;
};

void print_row(const char* step, const rss& d) { std::printf("  %-34s %+10.2f %+10.2f %+10.2f\n", step, d.total / MB, d.anon() / MB, d.file / MB); }

// Steps 1, 2, 4 of `make_instance` after `build`; both measured from before `build`.
shared_result measure_shared(const workload& w, const std::function<void()>& build, const std::function<executor()>& make_instance) {
  shared_result r;
  const rss base = settled_rss();
  build();
  r.model = settled_rss() - base;
  std::vector<executor> instances;
  for (int k = 1; k <= 4; ++k) {
    instances.push_back(make_instance());
    run_once(instances.back(), w);
    r.after[k] = settled_rss() - base;
  }
  r.storage = instances.front().storage_bytes();
  return r;
}

void report(const workload& w, const char* variant, const shared_result& r, const rss& naive, std::uint64_t weights, bool has_model_step) {
  std::printf("\n%s, %s\n", w.name.c_str(), variant);
  std::printf("  %-34s %10s %10s %10s\n", "RSS delta from before the model", "total MB", "anon MB", "file MB");
  if (has_model_step) print_row("model built (weights loaded)", r.model);
  print_row("+ 1 instance, run once", r.after[1]);
  print_row("+ 2 instances, run once each", r.after[2]);
  print_row("+ 4 instances, run once each", r.after[4]);
  const double per_instance = (r.after[4].total - r.after[1].total) / 3, activations = (r.after[4].total - r.model.total) / 4;
  std::printf("  per-instance RSS increment: %.3f MB (instances 2-4), %.3f MB (first); storage_bytes(): %.3f MB\n", per_instance / MB,
              (r.after[1].total - r.model.total) / MB, static_cast<double>(r.storage) / MB);
  if (per_instance > 0.5 * static_cast<double>(weights))
    std::printf("  4 instances cost %.2f MB = 4 x (weights + activations): each instance holds its own weights\n", r.after[4].total / MB);
  else if (!has_model_step)  // the first instance brought the model with it
    std::printf("  4 instances cost %.2f MB = first %.2f MB (weights %.2f MB + its activations) + 3 x activations (%.3f MB)\n",
                r.after[4].total / MB, r.after[1].total / MB, static_cast<double>(weights) / MB, per_instance / MB);
  else
    std::printf("  4 instances cost %.2f MB = model %.2f MB (weights %.2f MB, mapped library +%.2f MB) + 4 x activations (%.3f MB)\n",
                r.after[4].total / MB, r.model.total / MB, static_cast<double>(weights) / MB, r.model.file / MB, activations / MB);
  std::printf("  baseline, 4 full copies: %.2f MB (anon %.2f MB);  4 instances / 4 copies = %.3f (anon only: %.3f)\n", naive.total / MB,
              naive.anon() / MB, r.after[4].total / naive.total, r.after[4].anon() / naive.anon());
}

rss measure_naive(const workload& w) {
  const rss base = settled_rss();
  std::vector<executor> copies = w.naive();
  for (executor& ex : copies) run_once(ex, w);
  return settled_rss() - base;
}

gexec::param_dict copy_params(const gexec::param_dict& p) {
  gexec::param_dict out;
  for (const auto& [name, value] : p) out.set(name, value.copy());
  return out;
}

// ---- workload A: dense layers on test kernels ------------------------------------

constexpr std::int64_t batch = 8;
struct layer {
  std::int64_t out, in;
};
constexpr layer layers[] = {{2048, 512}, {2048, 2048}, {2048, 2048}, {1100, 2048}};

gexec::validated_graph dense_graph() {
  gexec::graph_builder b;
  gexec::node_entry h = b.input("x", {batch, layers[0].in});
  for (std::size_t i = 0; i < std::size(layers); ++i) {
    const std::string n = std::to_string(i);
    auto w = b.input("w" + n, {layers[i].out, layers[i].in});
    h = b.op("dense" + n, "test_dense", {h, w}, {{{batch, layers[i].out}}});
    if (i + 1 < std::size(layers)) h = b.op("relu" + n, "test_relu", {h}, {{{batch, layers[i].out}}});
  }
  b.output(h);
  return b.build();
}

gexec::param_dict dense_weights() {
  gexec::param_dict p;
  for (std::size_t i = 0; i < std::size(layers); ++i) {
    auto w = gexec::ndarray::empty({layers[i].out, layers[i].in}, gexec::dtypes::float32);
    float* v = static_cast<float*>(w.data());
    for (std::uint64_t j = 0; j < w.numel(); ++j) v[j] = 0.001f * static_cast<float>(static_cast<int>(j % 17) - 8);
    p.set("w" + std::to_string(i), std::move(w));
  }
  return p;
}

struct variant {
  const char* label;
  bool has_model_step;
  std::function<shared_result()> measure;
};

void run_workload(workload& w, const std::vector<variant>& variants, std::uint64_t weights) {
  // Baseline first, then the shared variants, each from a settled RSS.
  const rss naive = measure_naive(w);
  for (const variant& v : variants) report(w, v.label, v.measure(), naive, weights, v.has_model_step);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::printf("resident memory (/proc/self/statm) deltas; MB = 10^6 bytes; each step after malloc_trim(0)\n");

    // ---- A ----
    gexec::module lib = gexec::load_module(GEXEC_TEST_KERNELS);
    const gexec::validated_graph g = dense_graph();
    workload a;
    a.name = "A: synthetic, 4 x test_dense, batch 8";
    a.build = [&] { return gexec::model(g, gexec::packed_c_abi(lib), dense_weights()); };
    a.naive = [&] {
      std::vector<executor> out;
      const gexec::param_dict source = dense_weights();
      for (int i = 0; i < 4; ++i) out.push_back(gexec::model(g, gexec::packed_c_abi(lib), copy_params(source)).instantiate());
      return out;
    };
    std::uint64_t weights_a = 0;
    {
      // Warm-up: library pages, allocator arenas, thread pool (not counted anywhere).
      gexec::model m = a.build();
      weights_a = m.param_bytes();
      executor ex = m.instantiate();
      a.inputs = zero_inputs(ex);
      run_once(ex, a);
    }
    std::printf("\n== %s: weights %llu bytes = %.2f MB (param_bytes())\n", a.name.c_str(), static_cast<unsigned long long>(weights_a),
                static_cast<double>(weights_a) / MB);
    std::optional<gexec::model> ma;
    run_workload(a,
                 {{"model + instantiate()", true, [&] {
                     shared_result r = measure_shared(a, [&] { ma = a.build(); }, [&] { return ma->instantiate(); });
                     ma.reset();
                     return r;
                   }}},
                 weights_a);
    ma.reset();

    // ---- B ----
    if (argc < 2) {
      std::printf("\nworkload B skipped: no conformance directory given\n");
      return 0;
    }
    const fs::path so = fs::path(argv[1]) / "resnet" / "model.so";
    if (!fs::exists(so)) {
      std::printf("\nworkload B skipped: %s not found (conformance models not built)\n", so.string().c_str());
      return 0;
    }
    workload b;
    b.name = "B: conformance resnet, model.so";
    b.build = [&] { return gexec::model::load(so); };
    b.naive = [&] {
      std::vector<executor> out;
      gexec::factory f = gexec::load_factory(so);
      const gexec::validated_graph graph = gexec::parse_graph(f.graph_json());
      for (int i = 0; i < 4; ++i) out.push_back(gexec::model(graph, gexec::packed_c_abi(f.lib()), copy_params(f.params())).instantiate());
      return out;
    };
    std::uint64_t weights_b = 0;
    {
      // Warm-up, as for A. Loading model.so maps its embedded blob, resident (file-backed)
      // while the library is loaded, next to the parsed weights: each step below pays it.
      const rss before = settled_rss();
      gexec::model m = b.build();
      const rss loaded = settled_rss() - before;
      weights_b = m.param_bytes();
      executor ex = m.instantiate();
      b.inputs = zero_inputs(ex);
      run_once(ex, b);
      std::printf("\n== %s: weights %llu bytes = %.2f MB (param_bytes()); %s\n", b.name.c_str(), static_cast<unsigned long long>(weights_b),
                  static_cast<double>(weights_b) / MB, so.string().c_str());
      std::printf("  model::load alone: %+.2f MB total = %+.2f MB anon (parsed weights) %+.2f MB file-backed (the mapped blob)\n",
                  loaded.total / MB, loaded.anon() / MB, loaded.file / MB);
    }
    std::optional<gexec::model> mb;
    std::optional<gexec::factory> fb;
    run_workload(b,
                 {{"gexec::model::load + instantiate()", true,
                   [&] {
                     shared_result r = measure_shared(b, [&] { mb = gexec::model::load(so); }, [&] { return mb->instantiate(); });
                     mb.reset();
                     return r;
                   }},
                  {"one load_factory, create() x4", true,
                   [&] {
                     shared_result r = measure_shared(b, [&] { fb = gexec::load_factory(so); }, [&] { return fb->create(); });
                     fb.reset();
                     return r;
                   }},
                  {"load_factory(path).create() per instance (TVM style)", false,
                   [&] { return measure_shared(b, [] {}, [&] { return gexec::load_factory(so).create(); }); }}},
                 weights_b);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gexec_bench_instances: %s\n", e.what());
    return 1;
  }
  return 0;
}
