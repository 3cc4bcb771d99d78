// gexec::model and its instances: one copy of the weights however many executors,
// executors that hold only their activations, and the TVM-style API built on that.

#include <gexec/executor.hpp>

#include "test_support.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

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
  // A storage id out of range, which planning a raw graph would index with.
  gexec::graph g = weighted_graph();
  g.attrs.storage_id[3] = 1000;
  auto e = error_of([&] { (void)gexec::create(g, kernels()); });
  CHECK(e.code() == gexec::errc::invalid_graph);
  CHECK(std::string(e.what()).find("storage id 1000 out of range") != std::string::npos);
}
