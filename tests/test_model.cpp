// gexec::model and its instances: one copy of the weights however many executors,
// executors that hold only their activations, and the TVM-style API built on that.

#include <gexec/executor.hpp>

#include "test_support.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

namespace {

using namespace test;

// y = relu((x + w) * v): two parameters of 1,000 floats and one input.
constexpr std::int64_t kN = 1000;
gexec::validated_graph weighted_graph() {
  gexec::graph_builder b;
  auto x = b.input("x", {kN});
  auto w = b.input("w", {kN});
  auto v = b.input("v", {kN});
  auto s = b.op("add", "test_add", {x, w}, {{{kN}}});
  auto m = b.op("mul", "test_multiply", {s, v}, {{{kN}}});
  b.output(b.op("relu", "test_relu", {m}, {{{kN}}}));
  return b.build();
}

std::vector<float> ramp(float start, float step) {
  std::vector<float> r(kN);
  for (std::int64_t i = 0; i < kN; ++i) r[static_cast<std::size_t>(i)] = start + step * static_cast<float>(i);
  return r;
}

gexec::param_dict weights() {
  gexec::param_dict p;
  p.set("w", tensor({kN}, ramp(-2.0f, 0.01f)));
  p.set("v", tensor({kN}, ramp(0.5f, -0.002f)));
  return p;
}

std::vector<float> expected(const std::vector<float>& x, const gexec::param_dict& p) {
  auto w = p.at("w").values<float>(), v = p.at("v").values<float>();
  std::vector<float> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = std::max((x[i] + w[i]) * v[i], 0.0f);
  return y;
}

// The host backend, counting the bytes it hands out: an independent measure of what
// models and executors allocate.
std::atomic<std::int64_t> g_allocated{0};
struct counting_cpu_backend : gexec::cpu_backend {
  void* allocate(DLDevice d, std::uint64_t bytes) {
    g_allocated += static_cast<std::int64_t>(bytes);
    return gexec::cpu_backend::allocate(d, bytes);
  }
};
using counting_model = gexec::basic_model<gexec::backends<counting_cpu_backend>, gexec::buffer_allocator, gexec::packed_c_abi>;

}  // namespace

TEST_CASE("instances of one model read one copy of the weights and hold only activations") {
  const auto params = weights();
  gexec::model m(weighted_graph(), kernels(), params);
  CHECK(m.param_bytes() == 2 * kN * 4);
  // Aligned host tensors are kept as they are: no copy at all.
  CHECK(m.param("w").data() == params.at("w").data());

  std::vector<gexec::model::executor> instances;
  for (int i = 0; i < 4; ++i) instances.push_back(m.instantiate());
  for (auto& ex : instances) {
    CHECK(ex.get_input("w").data() == m.param("w").data());
    CHECK(ex.get_input("v").data() == m.param("v").data());
    // Three intermediate tensors; the weights are the model's, and x is taken on first use.
    CHECK(ex.storage_bytes() == 3 * kN * 4);
    CHECK(ex.get_input_info().size() == 1);  // the parameters are not inputs to set
  }
  for (std::size_t i = 0; i < instances.size(); ++i) {
    auto x = ramp(static_cast<float>(i), 0.5f);
    instances[i].set_input("x", tensor({kN}, x));
    instances[i].run();
    CHECK(values_of(instances[i].get_output(0)) == expected(x, params));
  }
}

TEST_CASE("N instances allocate the weights once and N times the activations") {
  g_allocated = 0;
  counting_model m(weighted_graph(), gexec::packed_c_abi(kernels()), weights());
  // Aligned host tensors are kept as given: the model allocates nothing for them.
  const std::int64_t after_model = g_allocated;
  CHECK(after_model == 0);
  auto a = m.instantiate();
  const std::int64_t one = g_allocated - after_model;
  CHECK(one == 3 * kN * 4);  // the add, mul and relu results
  CHECK(one == static_cast<std::int64_t>(a.storage_bytes()));
  std::vector<counting_model::executor> more;
  for (int i = 0; i < 3; ++i) more.push_back(m.instantiate());
  CHECK(g_allocated == after_model + 4 * one);
  // Running allocates nothing more: inputs set by copy take their storage once.
  a.set_input("x", tensor({kN}, ramp(0, 1)));
  const std::int64_t with_input = g_allocated;
  CHECK(with_input == after_model + 4 * one + kN * 4);
  for (int i = 0; i < 3; ++i) a.run();
  CHECK(g_allocated == with_input);
}

TEST_CASE("load_params on one instance changes that instance only; the model is immutable") {
  const auto params = weights();
  gexec::model m(weighted_graph(), kernels(), params);
  auto a = m.instantiate(), b = m.instantiate();
  gexec::param_dict other;
  other.set("w", tensor({kN}, ramp(5.0f, 0.0f)));
  a.load_params(other);
  CHECK(a.get_input("w").data() != m.param("w").data());
  CHECK(b.get_input("w").data() == m.param("w").data());
  CHECK(values_of(m.param("w")) == values_of(params.at("w")));
  auto x = ramp(0.0f, 0.001f);
  for (auto* ex : {&a, &b}) {
    ex->set_input("x", tensor({kN}, x));
    ex->run();
  }
  gexec::param_dict mixed;
  mixed.set("w", other.at("w"));
  mixed.set("v", params.at("v"));
  CHECK(values_of(a.get_output(0)) == expected(x, mixed));
  CHECK(values_of(b.get_output(0)) == expected(x, params));
}

TEST_CASE("share_params takes no storage for the shared parameters") {
  const auto params = weights();
  const auto blob = gexec::save_param_dict(params);
  const std::string json = gexec::to_json(weighted_graph());
  auto owner = gexec::create(json, kernels());
  owner.load_params(blob);
  auto sharer = gexec::create(json, kernels());
  const auto before = sharer.storage_bytes();
  sharer.share_params(owner, blob);
  CHECK(sharer.storage_bytes() == before);
  auto x = ramp(1.0f, -0.003f);
  sharer.set_input("x", tensor({kN}, x));
  sharer.run();
  CHECK(values_of(sharer.get_output(0)) == expected(x, params));
  // The owner holds the parameters it loaded; the sharer only its input and activations.
  CHECK(owner.storage_bytes() == 5 * kN * 4);
  CHECK(sharer.storage_bytes() == 4 * kN * 4);
}

TEST_CASE("every executor a factory creates for one device set shares one model") {
  gexec::factory f = gexec::load_factory(GEXEC_TEST_FACTORY);
  auto a = f.create(), b = f.create();
  CHECK(a.get_model_state() == b.get_model_state());
  const int w1 = a.get_input_index("w1");
  REQUIRE(w1 >= 0);
  CHECK(a.get_input(w1).data() == b.get_input(w1).data());
  CHECK(gexec::model::load(GEXEC_TEST_FACTORY).param_bytes() == f.get_model().param_bytes());
}

TEST_CASE("every load of one single-file library reads one copy of its weights") {
  // TVM's style: load_factory(path).create() once per executor, and model::load.
  std::vector<gexec::graph_executor<>> executors;
  for (int i = 0; i < 4; ++i) executors.push_back(gexec::load_factory(GEXEC_TEST_FACTORY).create());
  const auto m1 = gexec::model::load(GEXEC_TEST_FACTORY), m2 = gexec::model::load(GEXEC_TEST_FACTORY);
  const void* w1 = m1.param("w1").data();
  REQUIRE(w1 != nullptr);
  CHECK(m2.param("w1").data() == w1);
  for (auto& ex : executors) CHECK(ex.get_input("w1").data() == w1);
  // And the weights are what the blob holds: the embedded MLP's w1 as its params.bin has it.
  const auto on_disk = gexec::load_param_dict_file(GEXEC_SOURCE_DIR "/examples/mlp/params.bin");
  CHECK(values_of(m1.param("w1")) == values_of(on_disk.at("w1")));
}

TEST_CASE("a model checks its parameters and its devices") {
  gexec::param_dict bad;
  bad.set("w", tensor({kN + 1}, std::vector<float>(kN + 1, 0.0f)));
  auto e = error_of([&] { gexec::model(weighted_graph(), kernels(), bad); });
  CHECK(e.code() == gexec::errc::shape_mismatch);
  CHECK(std::string(e.what()).find("model parameter \"w\"") != std::string::npos);
  gexec::model_options options;
  options.devices = {};
  CHECK(error_of([&] { gexec::model(weighted_graph(), kernels(), options); }).code() == gexec::errc::invalid_argument);
}

TEST_CASE("a graph is validated before anything plans it") {
  static_assert(!std::is_constructible_v<gexec::validated_graph, gexec::graph>, "only validate() seals a graph");
  static_assert(!std::is_constructible_v<gexec::validated_graph, const gexec::graph&>);
  static_assert(!std::is_copy_constructible_v<gexec::plan>, "the plan is move-only");
  // A negative storage id, which planning a raw graph would index with.
  gexec::graph g = weighted_graph();
  g.attrs.storage_id[3] = -1;
  auto e = error_of([&] { (void)gexec::create(g, kernels()); });
  CHECK(e.code() == gexec::errc::invalid_graph);
  CHECK(std::string(e.what()).find("storage id -1 is negative") != std::string::npos);
}

namespace {

using scratch_dir = test::scratch_dir;

// The C++ kernels of weighted_graph(), for the registry binding.
gexec::registry cpp_kernels() {
  gexec::registry r;
  auto binary = [](float (*op)(float, float)) {
    return [op](gexec::packed_args a) {
      const DLTensor &x = a.tensor(0), &y = a.tensor(1);
      DLTensor& z = a.tensor(2);
      for (std::int64_t i = 0; i < x.shape[0]; ++i)
        static_cast<float*>(z.data)[i] = op(static_cast<const float*>(x.data)[i], static_cast<const float*>(y.data)[i]);
    };
  };
  r.add("test_add", binary([](float x, float y) { return x + y; }));
  r.add("test_multiply", binary([](float x, float y) { return x * y; }));
  r.add("test_relu", [](gexec::packed_args a) {
    const DLTensor& x = a.tensor(0);
    DLTensor& y = a.tensor(1);
    for (std::int64_t i = 0; i < x.shape[0]; ++i) static_cast<float*>(y.data)[i] = std::max(static_cast<const float*>(x.data)[i], 0.0f);
  });
  return r;
}

}  // namespace

TEST_CASE("create reads the graph from a file given as a std::filesystem::path; strings stay JSON text") {
  scratch_dir dir("create_path");
  const std::string json = gexec::to_json(weighted_graph());
  const std::filesystem::path file = dir.path / "graph.json";
  std::ofstream(file) << json;
  const auto params = weights();
  const auto x = ramp(0.25f, 0.125f);
  auto check_runs = [&](auto ex) {
    ex.load_params(gexec::save_param_dict(params));
    ex.set_input("x", tensor({kN}, x));
    ex.run();
    CHECK(values_of(ex.get_output(0)) == expected(x, params));
  };
  // A path: the file, over a library or over C++ kernels.
  check_runs(gexec::create(file, kernels()));
  check_runs(gexec::create(file, cpp_kernels()));
  const std::filesystem::path& file_ref = file;
  check_runs(gexec::create(file_ref, cpp_kernels(), {gexec::cpu()}));
  // Text, however it is spelled: a string, a string_view, a C string.
  check_runs(gexec::create(json, kernels()));
  check_runs(gexec::create(std::string_view(json), cpp_kernels()));
  check_runs(gexec::create(json.c_str(), cpp_kernels()));
  // A path string is text, and not JSON: the path overload is not picked for it.
  auto e = error_of([&] { (void)gexec::create(file.string(), cpp_kernels()); });
  CHECK(e.code() == gexec::errc::invalid_json);
  e = error_of([&] { (void)gexec::create(file.c_str(), kernels()); });
  CHECK(e.code() == gexec::errc::invalid_json);
  // A path that names no file, or a directory, is an io error naming it.
  for (const auto& bad : {dir.path / "missing.json", dir.path}) {
    e = error_of([&] { (void)gexec::create(bad, cpp_kernels()); });
    CHECK(e.code() == gexec::errc::io);
    CHECK(contains(e, "graph file " + bad.string()));
    e = error_of([&] { (void)gexec::create(bad, kernels()); });
    CHECK(e.code() == gexec::errc::io);
  }
}

TEST_CASE("model::load reads TVM's three files: graph JSON, kernel library and parameters") {
  scratch_dir dir("three_files");
  const auto graph_file = dir.path / "graph.json", params_file = dir.path / "params.bin";
  std::ofstream(graph_file) << gexec::to_json(weighted_graph());
  const auto params = weights();
  gexec::save_param_dict_file(params, params_file);

  const auto m = gexec::model::load(graph_file, GEXEC_TEST_KERNELS, params_file);
  CHECK(m.param_bytes() == 2 * kN * 4);
  auto ex = m.instantiate();
  const auto x = ramp(-1.0f, 0.01f);
  ex.set_input("x", tensor({kN}, x));
  ex.run();
  CHECK(values_of(ex.get_output(0)) == expected(x, params));
  // With a runtime of its own, which keeps the library loaded.
  auto rt = gexec::runtime::create({.num_threads = 1});
  gexec::model_options options;
  options.runtime = rt;
  CHECK(gexec::model::load(graph_file, GEXEC_TEST_KERNELS, params_file, options).get_runtime() == rt);

  // Each file is checked, and named when it is at fault.
  auto e = error_of([&] { (void)gexec::model::load(dir.path / "missing.json", GEXEC_TEST_KERNELS, params_file); });
  CHECK(e.code() == gexec::errc::io);
  CHECK(contains(e, "graph file " + (dir.path / "missing.json").string()));
  e = error_of([&] { (void)gexec::model::load(graph_file, dir.path, params_file); });
  CHECK(e.code() == gexec::errc::io);
  CHECK(contains(e, "kernel library " + dir.path.string() + " is a directory, not a regular file"));
  e = error_of([&] { (void)gexec::model::load(graph_file, GEXEC_TEST_KERNELS, dir.path); });
  CHECK(e.code() == gexec::errc::io);
  CHECK(contains(e, "parameter file " + dir.path.string() + " is a directory, not a regular file"));
  e = error_of([&] { (void)gexec::model::load(graph_file, GEXEC_TEST_KERNELS, graph_file); });
  CHECK(e.code() == gexec::errc::invalid_params);
}

TEST_CASE("every failure to read a model's files is a gexec::error naming the file") {
  scratch_dir dir("bad_files");
  const auto text = dir.path / "notes.txt";
  std::ofstream(text) << "not a kernel library\n";
  const auto fifo = dir.path / "model.fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // The single-file form: a directory, a FIFO (which must not block), a text file.
  auto e = error_of([&] { (void)gexec::model::load(dir.path); });
  CHECK(e.code() == gexec::errc::io);
  CHECK(contains(e, "kernel library " + dir.path.string() + " is a directory, not a regular file"));
  e = error_of([&] { (void)gexec::model::load(fifo); });
  CHECK(e.code() == gexec::errc::io);
  CHECK(contains(e, "kernel library " + fifo.string() + " is a FIFO, not a regular file"));
  e = error_of([&] { (void)gexec::model::load(text); });
  CHECK(e.code() == gexec::errc::io);
  CHECK(contains(e, "cannot load kernel library " + text.string() + ": "));
  CHECK_FALSE(contains(e, "Bad file descriptor"));
  // Parameters: a directory, a FIFO, a file this process may not read.
  for (auto mode : {gexec::load_mode::copy, gexec::load_mode::mmap}) {
    e = error_of([&] { (void)gexec::load_param_dict_file(dir.path, mode); });
    CHECK(e.code() == gexec::errc::io);
    e = error_of([&] { (void)gexec::load_param_dict_file(fifo, mode); });
    CHECK(e.code() == gexec::errc::io);
  }
  const auto locked = dir.path / "locked.bin";
  gexec::save_param_dict_file(weights(), locked);
  std::filesystem::permissions(locked, std::filesystem::perms::none);
  if (::access(locked.c_str(), R_OK) == 0) {
    MESSAGE("this process reads files whatever their permissions (root); the unreadable-file case is skipped");
  } else {
    for (auto mode : {gexec::load_mode::copy, gexec::load_mode::mmap}) {
      e = error_of([&] { (void)gexec::load_param_dict_file(locked, mode); });
      CHECK(e.code() == gexec::errc::io);
      CHECK(contains(e, "cannot open parameter file " + locked.string() + ": Permission denied"));
    }
  }
}

TEST_CASE("load_params_file reads into the executor's own memory: fresh, then in place") {
  scratch_dir dir("load_in_place");
  const auto params_file = dir.path / "params.bin";
  const auto params = weights();
  gexec::save_param_dict_file(params, params_file);
  const auto x = ramp(-1.0f, 0.01f);
  for (auto make : {std::function<gexec::graph_executor<>()>([] { return gexec::create(weighted_graph(), kernels()); }),
                    std::function<gexec::graph_executor<>()>([&] { return gexec::model(weighted_graph(), kernels(), weights()).instantiate(); })}) {
    auto ex = make();
    std::vector<std::pair<std::uint64_t, std::uint64_t>> calls;
    ex.load_params_file(params_file, [&](std::uint64_t done, std::uint64_t total) { calls.emplace_back(done, total); });
    REQUIRE(!calls.empty());
    CHECK(calls.back().first == std::filesystem::file_size(params_file));
    CHECK(calls.back().second == std::filesystem::file_size(params_file));
    for (std::size_t i = 1; i < calls.size(); ++i) CHECK(calls[i].first > calls[i - 1].first);
    ex.set_input("x", tensor({kN}, x));
    ex.run();
    CHECK(values_of(ex.get_output(0)) == expected(x, params));
    CHECK(values_of(ex.get_input("w")) == values_of(params.at("w")));
    // A second load overwrites the same memory.
    const void* w_at = ex.get_input("w").data();
    gexec::param_dict other;
    other.set("w", tensor({kN}, ramp(3.0f, 0.5f)));
    other.set("v", tensor({kN}, ramp(1.0f, 0.0f)));
    other.set("not_an_input", tensor({2}, {1, 2}));
    gexec::save_param_dict_file(other, params_file, {.align = 64});
    ex.load_params_file(params_file);
    CHECK(ex.get_input("w").data() == w_at);
    ex.run();
    CHECK(values_of(ex.get_output(0)) == expected(x, other));
    // A malformed file, or one whose tensor does not fit, changes nothing.
    gexec::param_dict bad;
    bad.set("w", tensor({kN}, ramp(100.0f, 0.0f)));
    bad.set("v", tensor({3}, {0, 0, 0}));
    gexec::save_param_dict_file(bad, params_file);
    auto e = error_of([&] { ex.load_params_file(params_file); });
    CHECK(e.code() == gexec::errc::shape_mismatch);
    CHECK(contains(e, "load_params \"v\""));
    auto blob = gexec::save_param_dict(weights());
    blob.resize(blob.size() - 1);
    std::ofstream(params_file, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(blob.data()), static_cast<std::streamsize>(blob.size()));
    CHECK(error_of([&] { ex.load_params_file(params_file); }).code() == gexec::errc::invalid_params);
    ex.run();
    CHECK(values_of(ex.get_output(0)) == expected(x, other));
    gexec::save_param_dict_file(params, params_file);
  }
}

TEST_CASE("load_params_file reads a .safetensors file as load_param_dict_file and model::load do") {
  scratch_dir dir("load_safetensors");
  const auto file = dir.path / "params.safetensors";
  gexec::save_safetensors_file(weights(), file);
  const auto x = ramp(-1.0f, 0.01f);
  auto ex = gexec::create(weighted_graph(), kernels());
  ex.load_params_file(file);
  ex.set_input("x", tensor({kN}, x));
  ex.run();
  CHECK(values_of(ex.get_output(0)) == expected(x, weights()));
  CHECK(values_of(ex.get_input("w")) == values_of(weights().at("w")));
  // A malformed one changes nothing, and is named as a .safetensors file.
  gexec::param_dict bad;
  bad.set("w", tensor({kN}, ramp(100.0f, 0.0f)));
  bad.set("v", tensor({3}, {0, 0, 0}));
  gexec::save_safetensors_file(bad, file);
  auto e = error_of([&] { ex.load_params_file(file); });
  CHECK(e.code() == gexec::errc::shape_mismatch);
  std::filesystem::resize_file(file, std::filesystem::file_size(file) - 1);
  e = error_of([&] { ex.load_params_file(file); });
  CHECK(e.code() == gexec::errc::invalid_params);
  CHECK(contains(e, "safetensors " + file.string()));
  ex.run();
  CHECK(values_of(ex.get_output(0)) == expected(x, weights()));
}

TEST_CASE("model::load reports progress over the graph and parameter files together") {
  scratch_dir dir("load_progress");
  const auto graph_file = dir.path / "graph.json", params_file = dir.path / "params.bin";
  std::ofstream(graph_file) << gexec::to_json(weighted_graph());
  gexec::save_param_dict_file(weights(), params_file);
  const std::uint64_t total = std::filesystem::file_size(graph_file) + std::filesystem::file_size(params_file);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> calls;
  gexec::model_options options;
  options.progress = [&](std::uint64_t done, std::uint64_t all) { calls.emplace_back(done, all); };
  const auto m = gexec::model::load(graph_file, GEXEC_TEST_KERNELS, params_file, options);
  CHECK(m.param_bytes() == 2 * kN * 4);
  REQUIRE(calls.size() >= 2);
  for (std::size_t i = 0; i < calls.size(); ++i) {
    CHECK(calls[i].second == total);
    if (i) CHECK(calls[i].first >= calls[i - 1].first);
  }
  CHECK(calls.front().first == std::filesystem::file_size(graph_file));  // the graph, read whole
  CHECK(calls.back().first == total);
  // load_graph_file on its own.
  calls.clear();
  (void)gexec::load_graph_file(graph_file, [&](std::uint64_t done, std::uint64_t all) { calls.emplace_back(done, all); });
  REQUIRE(!calls.empty());
  CHECK(calls.back() == std::pair<std::uint64_t, std::uint64_t>(std::filesystem::file_size(graph_file), std::filesystem::file_size(graph_file)));
}

TEST_CASE("model::load of a single-file library reports progress over its embedded blob") {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> calls;
  gexec::model_options options;
  options.progress = [&](std::uint64_t done, std::uint64_t all) { calls.emplace_back(done, all); };
  const auto m = gexec::model::load(GEXEC_TEST_FACTORY, options);
  REQUIRE(!calls.empty());
  const std::uint64_t total = calls.front().second;
  CHECK(total > m.param_bytes());  // the graph JSON and the parameters' headers besides
  for (std::size_t i = 0; i < calls.size(); ++i) {
    CHECK(calls[i].second == total);
    if (i) CHECK(calls[i].first >= calls[i - 1].first);
  }
  CHECK(calls.back().first == total);
  // Loaded again while the first model holds the parsed blob: all of it at once.
  calls.clear();
  const auto again = gexec::model::load(GEXEC_TEST_FACTORY, options);
  CHECK(calls == std::vector<std::pair<std::uint64_t, std::uint64_t>>{{total, total}});
}

TEST_CASE("a single-file library's parameters are held once: the factory's are the model's") {
  gexec::factory f = gexec::load_factory(GEXEC_TEST_FACTORY);
  const gexec::model m = f.get_model();
  REQUIRE(f.params().size() == 2);
  for (const auto& item : f.params()) {
    CAPTURE(item.first);
    REQUIRE(m.param(item.first).defined());
    CHECK(m.param(item.first).data() == item.second.data());
  }
  std::uint64_t bytes = 0;
  for (const auto& [name, value] : f.params()) bytes += value.byte_size();
  CHECK(m.param_bytes() == bytes);
  // And an executor reads them in place.
  auto ex = f.create();
  for (const auto& [name, value] : f.params()) CHECK(ex.get_input(name).data() == value.data());
}

// ---- weights used where they lie ------------------------------------------------------

namespace {

// The mapping of this process that holds `p`, as /proc/self/smaps describes it.
struct mapping_info {
  bool found = false;
  std::string path;
  std::uint64_t shared_clean_kib = 0, private_kib = 0;
};
mapping_info mapping_of(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  mapping_info m;
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    unsigned long long begin = 0, end = 0;
    char dash = 0;
    if (std::istringstream head(line); head >> std::hex >> begin >> dash >> end && dash == '-') {
      if (inside) break;  // the next mapping: ours is done
      const auto at = reinterpret_cast<std::uintptr_t>(p);
      inside = at >= begin && at < end;
      if (inside) {
        m.found = true;
        const auto slash = line.find('/');
        if (slash != std::string::npos) m.path = line.substr(slash);
      }
      continue;
    }
    if (!inside) continue;
    std::istringstream field(line);
    std::string key;
    std::uint64_t kib = 0;
    field >> key >> kib;
    if (key == "Shared_Clean:") m.shared_clean_kib = kib;
    if (key == "Private_Clean:" || key == "Private_Dirty:") m.private_kib += kib;
  }
  return m;
}

struct weights_files {
  scratch_dir dir{"weights_in_place"};
  std::filesystem::path graph = dir.path / "graph.json", aligned = dir.path / "aligned.bin", tvm = dir.path / "tvm.bin";
  gexec::param_dict params = weights();
  weights_files() {
    std::ofstream(graph) << gexec::to_json(weighted_graph());
    gexec::save_param_dict_file(params, aligned, gexec::save_options{64});
    gexec::save_param_dict_file(params, tvm);  // TVM's layout: no padding
  }
};

}  // namespace

TEST_CASE("model::load maps an aligned parameter file: every model reads the file's pages, no copy") {
  weights_files f;
  const auto a = gexec::model::load(f.graph, GEXEC_TEST_KERNELS, f.aligned);
  const auto b = gexec::model::load(f.graph, GEXEC_TEST_KERNELS, f.aligned);
  CHECK(a.weights().in_place == 2);
  CHECK(a.weights().in_place_bytes == 2 * kN * 4);
  CHECK(a.weights().copied == 0);
  CHECK(a.weights().why_copied.empty());
  // Each weight lies in a mapping of the file itself; executors read it there.
  for (const char* name : {"w", "v"}) {
    CAPTURE(name);
    const mapping_info m = mapping_of(a.param(name).data());
    REQUIRE(m.found);
    CHECK(m.path == std::filesystem::canonical(f.aligned).string());
    auto ex1 = a.instantiate(), ex2 = a.instantiate();
    CHECK(ex1.get_input(name).data() == a.param(name).data());
    CHECK(ex2.get_input(name).data() == a.param(name).data());
  }
  // Both models run (reading the weights), and the two mappings of the file hold the
  // same pages: shared through the page cache, none private to either.
  const auto x = ramp(-1.0f, 0.01f);
  for (const auto* m : {&a, &b}) {
    auto ex = m->instantiate();
    ex.set_input("x", tensor({kN}, x));
    ex.run();
    CHECK(values_of(ex.get_output(0)) == expected(x, f.params));
  }
  const mapping_info ma = mapping_of(a.param("w").data()), mb = mapping_of(b.param("w").data());
  CHECK(a.param("w").data() != b.param("w").data());
  CHECK(ma.shared_clean_kib > 0);
  CHECK(ma.private_kib == 0);
  CHECK(mb.shared_clean_kib > 0);
  CHECK(mb.private_kib == 0);

  // Another process loading the file reads the same pages: its mapping shares them too.
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    bool ok = false;
    try {
      const auto c = gexec::model::load(f.graph, GEXEC_TEST_KERNELS, f.aligned);
      auto ex = c.instantiate();
      ex.set_input("x", tensor({kN}, x));
      ex.run();
      const mapping_info mc = mapping_of(c.param("w").data());
      ok = values_of(ex.get_output(0)) == expected(x, f.params) && mc.path == ma.path && mc.shared_clean_kib > 0 && mc.private_kib == 0 &&
           c.weights().in_place == 2;
    } catch (...) {
    }
    _exit(ok ? 0 : 1);
  }
  CHECK(child_succeeded(child));
}

TEST_CASE("model::load copies what the file holds misaligned once, says so, and keeps no mapping") {
  weights_files f;
  const auto m = gexec::model::load(f.graph, GEXEC_TEST_KERNELS, f.tvm);
  CHECK(m.weights().in_place == 0);
  CHECK(m.weights().copied == 2);
  CHECK(m.weights().copied_bytes == 2 * kN * 4);
  CHECK(m.weights().why_copied.find("aligned") != std::string::npos);
  for (const char* name : {"w", "v"}) {
    CAPTURE(name);
    CHECK(mapping_of(m.param(name).data()).path != std::filesystem::canonical(f.tvm).string());
    CHECK(m.param(name).is_aligned());
  }
  auto ex = m.instantiate();
  const auto x = ramp(-1.0f, 0.01f);
  ex.set_input("x", tensor({kN}, x));
  ex.run();
  CHECK(values_of(ex.get_output(0)) == expected(x, f.params));
  // Nothing of the file stays mapped once no weight reads it.
  std::ifstream maps("/proc/self/maps");
  const std::string all((std::istreambuf_iterator<char>(maps)), std::istreambuf_iterator<char>());
  CHECK(all.find(std::filesystem::canonical(f.tvm).string()) == std::string::npos);

  // load_mode::copy reads every tensor into memory of the model's own.
  gexec::model_options copy;
  copy.params_mode = gexec::load_mode::copy;
  const auto c = gexec::model::load(f.graph, GEXEC_TEST_KERNELS, f.aligned, copy);
  CHECK(c.weights().copied == 2);
  CHECK(c.weights().in_place == 0);
  CHECK(c.weights().why_copied.find("load_mode::copy") != std::string::npos);
  CHECK_FALSE(mapping_of(c.param("w").data()).path == std::filesystem::canonical(f.aligned).string());
}

TEST_CASE("a single-file library written aligned has its weights read in the library's pages") {
  const auto aligned = gexec::model::load(GEXEC_TEST_FACTORY_ALIGNED);
  const auto tvm = gexec::model::load(GEXEC_TEST_FACTORY);
  REQUIRE(aligned.weights().in_place + aligned.weights().copied > 0);
  CHECK(aligned.weights().copied == 0);
  CHECK(aligned.weights().in_place == tvm.weights().in_place + tvm.weights().copied);
  CHECK(aligned.weights().in_place_bytes == tvm.weights().in_place_bytes + tvm.weights().copied_bytes);
  CHECK(tvm.weights().copied > 0);  // TVM's layout: misaligned
  CHECK(tvm.weights().why_copied.find("not 64-byte aligned in the library") != std::string::npos);
  const gexec::factory f = gexec::load_factory(GEXEC_TEST_FACTORY_ALIGNED);
  for (const auto& item : f.params()) {
    const std::string& name = item.first;
    const gexec::ndarray& value = item.second;
    CAPTURE(name);
    CHECK(mapping_of(aligned.param(name).data()).path == std::filesystem::canonical(GEXEC_TEST_FACTORY_ALIGNED).string());
    CHECK(aligned.param(name).data() == value.data());  // one library, one copy: its own pages
    if (!tvm.param(name).is_aligned()) CHECK(mapping_of(tvm.param(name).data()).path != std::filesystem::canonical(GEXEC_TEST_FACTORY).string());
  }
  // Both compute the same outputs.
  auto ea = aligned.instantiate(), et = tvm.instantiate();
  for (const gexec::tensor_info& in : ea.get_input_info()) {
    if (aligned.param(in.name).defined()) continue;
    gexec::ndarray x = gexec::ndarray::empty(in.shape, in.dtype, gexec::cpu());
    auto* p = static_cast<float*>(x.data());
    for (std::uint64_t i = 0; i < x.byte_size() / 4; ++i) p[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
    ea.set_input(in.name, x);
    et.set_input(in.name, x);
  }
  ea.run();
  et.run();
  CHECK(values_of(ea.get_output(0)) == values_of(et.get_output(0)));
}
