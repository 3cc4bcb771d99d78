// compare_dump: every node's outputs against a dump folder in the layout of TVM's debug
// executor, over gexec_test_kernels. The dumps are written here from values computed with
// plain loops; one is changed at a known node and must be found there, with differences
// and ULPs computed by hand. (Dumps written by TVM itself are compared in the Python tests,
// where TVM's Python is at hand.)

#include <gexec/debug.hpp>
#include <gexec/executor.hpp>

#include "test_support.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <filesystem>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace test;

namespace {

// x -> add(x, y) -> relu -> inc ; node ids: x 0, y 1, add 2, relu 3, inc 4.
gexec::graph chain() {
  gexec::graph_builder b;
  auto x = b.input("x", {2, 4});
  auto y = b.input("y", {2, 4});
  auto s = b.op("add", "test_add", {x, y}, {{{2, 4}}});
  auto r = b.op("relu", "test_relu", {s}, {{{2, 4}}});
  b.output(b.op("inc", "test_add_one", {r}, {{{2, 4}}}));
  return b.build();
}

const std::vector<float> xv = iota(8, -4.0f), yv = iota(8, 0.25f, 0.5f);

/// TVM's dump of chain() for xv, yv, computed with loops: name -> values, in node order.
std::vector<std::pair<std::string, std::vector<float>>> expected_nodes() {
  std::vector<float> sum(8), relu(8), inc(8);
  for (std::size_t i = 0; i < 8; ++i) {
    sum[i] = xv[i] + yv[i];
    relu[i] = std::max(sum[i], 0.0f);
    inc[i] = relu[i] + 1.0f;
  }
  return {{"x", xv}, {"y", yv}, {"add", sum}, {"relu", relu}, {"inc", inc}};
}

/// Writes DIR/_tvmdbg_device_CPU_0/output_tensors.params as TVM's debug executor does.
fs::path write_dump(const std::string& name, const std::vector<std::pair<std::string, std::vector<float>>>& nodes) {
  const fs::path root = fs::temp_directory_path() / ("gexec_compare_dump_" + name);
  fs::remove_all(root);
  fs::create_directories(root / "_tvmdbg_device_CPU_0");
  gexec::param_dict dump;
  for (std::size_t i = 0; i < nodes.size(); ++i)
    dump.set(nodes[i].first + "____topo-index:" + std::to_string(i) + "____output-num:0", tensor({2, 4}, nodes[i].second));
  gexec::save_param_dict_file(dump, root / "_tvmdbg_device_CPU_0" / "output_tensors.params");
  return root;
}

}  // namespace

TEST_CASE("compare_dump: a dump of the same values is equal on every node, inputs and parameters included") {
  const fs::path root = write_dump("equal", expected_nodes());
  auto ex = gexec::create(chain(), kernels());
  ex.set_input("x", tensor({2, 4}, xv));
  ex.set_input("y", tensor({2, 4}, yv));
  const gexec::dump_comparison c = gexec::compare_dump(ex, root, {.atol = 0, .rtol = 0});
  CHECK(c.file == root / "_tvmdbg_device_CPU_0" / "output_tensors.params");
  REQUIRE(c.nodes.size() == 5);
  for (std::uint32_t i = 0; i < 5; ++i) {
    CHECK(c.nodes[i].node_id == i);
    CHECK(c.nodes[i].found);
    CHECK(c.nodes[i].within());
    CHECK(c.nodes[i].max_abs == 0);
    CHECK(c.nodes[i].max_ulps == 0);
    CHECK(c.nodes[i].count == 8);
  }
  CHECK(c.nodes[2].func_name == "test_add");
  CHECK(c.nodes[0].func_name.empty());
  CHECK(c.nodes[2].inputs == std::vector<std::string>{"x:0 float32[2, 4]", "y:0 float32[2, 4]"});
  CHECK(c.equal());
  CHECK(c.first_divergence() == nullptr);
  CHECK(c.missing == 0);
  // the folder itself, or the file, serve as well
  CHECK(gexec::compare_dump(ex, root / "_tvmdbg_device_CPU_0").equal());
  CHECK(gexec::compare_dump(ex, root / "_tvmdbg_device_CPU_0" / "output_tensors.params").equal());
}

TEST_CASE("compare_dump: a changed node is the first divergence, with its differences in absolute, relative and ULP terms") {
  auto nodes = expected_nodes();
  // relu's element 5 (sum 1 + 2.75 = 3.75 there) off by two ULPs; element 6 off by 0.5
  const float base = nodes[3].second[5];
  REQUIRE(base == 3.75f);
  const float two_ulps = std::bit_cast<float>(std::bit_cast<std::uint32_t>(base) + 2);
  nodes[3].second[5] = two_ulps;
  nodes[3].second[6] += 0.5f;
  const float want6 = nodes[3].second[6];
  const fs::path root = write_dump("changed", nodes);
  auto ex = gexec::create(chain(), kernels());
  ex.set_input("x", tensor({2, 4}, xv));
  ex.set_input("y", tensor({2, 4}, yv));

  const gexec::dump_comparison strict = gexec::compare_dump(ex, root, {.atol = 0, .rtol = 0});
  const gexec::node_comparison* first = strict.first_divergence();
  REQUIRE(first != nullptr);
  CHECK(first->node_id == 3);
  CHECK(first->name == "relu");
  CHECK(first->func_name == "test_relu");
  CHECK(first->mismatched == 2);
  CHECK(first->first_mismatch == 5);
  CHECK(first->max_abs == doctest::Approx(0.5));
  CHECK(first->max_rel == doctest::Approx(0.5 / want6));
  CHECK(first->max_ulps == std::bit_cast<std::uint32_t>(want6) - std::bit_cast<std::uint32_t>(want6 - 0.5f));
  CHECK(strict.nodes[4].within());  // inc computes from gexec's relu, not the dump's
  CHECK(!strict.equal());
  const std::string table = strict.table();
  CHECK(table.find("first divergence") != std::string::npos);
  CHECK(table.find("relu") != std::string::npos);
  const std::string d = strict.describe(*first);
  CHECK(d.find("function: test_relu") != std::string::npos);
  CHECK(d.find("input: add:0 float32[2, 4]") != std::string::npos);
  CHECK(d.find("2 of 8 elements") != std::string::npos);

  // two ULPs of 3.75 are within an atol of 1e-6; the 0.5 is not, and is still first at relu
  const gexec::dump_comparison loose = gexec::compare_dump(ex, root, {.atol = 1e-6, .rtol = 0});
  REQUIRE(loose.first_divergence() != nullptr);
  CHECK(loose.first_divergence()->mismatched == 1);
  CHECK(loose.first_divergence()->first_mismatch == 6);
  CHECK(gexec::compare_dump(ex, root, {.atol = 0.5, .rtol = 0}).equal());
  CHECK(gexec::compare_dump(ex, root, {.atol = 0, .rtol = 0.5 / want6 + 1e-9}).equal());
}

TEST_CASE("compare_dump: inputs from the dump; wrong shapes, dtypes, missing nodes and bad folders reported") {
  const fs::path root = write_dump("inputs", expected_nodes());
  auto ex = gexec::create(chain(), kernels());
  const gexec::param_dict dump = gexec::load_param_dict_file(gexec::find_dump_file(root));
  CHECK(gexec::set_inputs_from_dump(ex, dump, {"y"}) == std::vector<std::string>{"x"});
  CHECK(gexec::set_inputs_from_dump(ex, dump) == std::vector<std::string>{"x", "y"});
  CHECK(values_of(ex.get_input(0)) == xv);
  CHECK(gexec::compare_dump(ex, dump).equal());

  gexec::param_dict odd;  // relu with another shape, inc with another dtype, add missing
  for (const auto& [name, value] : dump) {
    if (name.starts_with("add____")) continue;
    if (name.starts_with("relu____")) {
      odd.set(name, tensor({8}, values_of(value)));
    } else if (name.starts_with("inc____")) {
      auto d = gexec::ndarray::empty({2, 4}, gexec::dtypes::float64);
      odd.set(name, d);
    } else {
      odd.set(name, value);
    }
  }
  const gexec::dump_comparison c = gexec::compare_dump(ex, odd);
  CHECK(c.missing == 1);
  CHECK(!c.nodes[2].found);
  CHECK(c.first_divergence()->node_id == 3);
  CHECK(c.nodes[3].problem == "the dump's shape is [8], gexec's [2, 4]");
  CHECK(c.nodes[4].problem == "the dump's dtype is float64, gexec's float32");
  CHECK(c.table().find("missing") != std::string::npos);

  gexec::param_dict other;
  other.set("conv____topo-index:0____output-num:0", tensor({1}, {1.0f}));
  CHECK(contains(error_of([&] { (void)gexec::compare_dump(ex, other); }), "a dump of another model?"));
  CHECK(contains(error_of([&] { (void)gexec::compare_dump(ex, dump, {.atol = -1}); }), "atol and rtol must be finite and >= 0, rtol below 1"));
  // a tolerance that cannot fail is no check
  CHECK(contains(error_of([&] { (void)gexec::compare_dump(ex, dump, {.atol = INFINITY}); }), "must be finite"));
  CHECK(contains(error_of([&] { (void)gexec::compare_dump(ex, dump, {.atol = 0, .rtol = NAN}); }), "must be finite"));
  CHECK(contains(error_of([&] { (void)gexec::compare_dump(ex, dump, {.atol = 0, .rtol = 1e300}); }), "rtol below 1"));
  // a dump that lacks computed nodes agrees with them nowhere: not equal, and it says so
  gexec::param_dict inputs_only;
  for (const auto& [name, value] : dump)
    if (name.starts_with("x____") || name.starts_with("y____")) inputs_only.set(name, value);
  const gexec::dump_comparison partial = gexec::compare_dump(ex, inputs_only);
  CHECK(partial.first_divergence() == nullptr);
  CHECK(partial.missing == 3);
  CHECK(!partial.complete());
  CHECK(!partial.equal());
  CHECK(contains(error_of([&] { (void)gexec::find_dump_file(root / "nothing"); }), "no such file or directory"));
  fs::create_directories(root / "empty");
  CHECK(contains(error_of([&] { (void)gexec::find_dump_file(root / "empty"); }), "holds neither output_tensors.params"));
  fs::create_directories(root / "_tvmdbg_device_CUDA_0");
  fs::copy_file(root / "_tvmdbg_device_CPU_0" / "output_tensors.params", root / "_tvmdbg_device_CUDA_0" / "output_tensors.params");
  CHECK(contains(error_of([&] { (void)gexec::find_dump_file(root); }), "several devices"));
  fs::remove_all(root);
}

namespace {
template <class T>
gexec::ndarray integers(std::vector<T> v) {
  auto a = gexec::ndarray::empty({static_cast<std::int64_t>(v.size())}, gexec::dtype_of<T>());
  std::memcpy(a.data(), v.data(), v.size() * sizeof(T));
  return a;
}
template <class T>
gexec::node_comparison compared(std::vector<T> got, std::vector<T> want, gexec::compare_tolerance t) {
  gexec::node_comparison c;
  gexec::detail::compare_tensors(integers(std::move(got)), integers(std::move(want)), t, c);
  return c;
}
}  // namespace

TEST_CASE("integers compare as integers: 2^53 + 1 is not 2^53, at any width and sign") {
  const std::int64_t big = std::int64_t{1} << 53;
  auto c = compared<std::int64_t>({big + 1, 7}, {big, 7}, {.atol = 0, .rtol = 0});
  CHECK(c.mismatched == 1);
  CHECK(c.first_mismatch == 0);
  CHECK(c.max_abs == 1);
  CHECK(!c.is_float);
  CHECK(compared<std::int64_t>({big + 1}, {big}, {.atol = 1, .rtol = 0}).mismatched == 0);
  CHECK(compared<std::uint64_t>({~std::uint64_t{0}}, {~std::uint64_t{0} - 1}, {.atol = 0, .rtol = 0}).mismatched == 1);
  CHECK(compared<std::uint64_t>({~std::uint64_t{0}}, {~std::uint64_t{0}}, {.atol = 0, .rtol = 0}).mismatched == 0);
  // the extremes of int64 are 2^64 - 1 apart, which a double would round
  c = compared<std::int64_t>({INT64_MIN, -3}, {INT64_MAX, -3}, {.atol = 0, .rtol = 0});
  CHECK(c.mismatched == 1);
  CHECK(c.max_abs == doctest::Approx(18446744073709551615.0));
  CHECK(compared<std::int8_t>({-128, 127}, {127, 127}, {.atol = 0, .rtol = 0}).max_abs == 255);
  CHECK(compared<std::int32_t>({-5, 5}, {-5, 5}, {.atol = 0, .rtol = 0}).mismatched == 0);
  CHECK(compared<std::uint16_t>({65535, 1}, {65534, 1}, {.atol = 0, .rtol = 0}).mismatched == 1);
}

TEST_CASE("a NaN on one side is a mismatch whatever the tolerance, counted as such; NaN on both sides agrees") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  gexec::node_comparison c;
  gexec::detail::compare_tensors(tensor({4}, {nan, 1, nan, 2}), tensor({4}, {0, 1, nan, 2}), {.atol = 1e3, .rtol = 0.5}, c);
  CHECK(c.mismatched == 1);
  CHECK(c.nan_mismatched == 1);
  CHECK(c.first_mismatch == 0);
  CHECK(std::isnan(c.max_abs));
}
