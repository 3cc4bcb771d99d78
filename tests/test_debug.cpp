// The debug executor API: profile(), run_individual(), every node's outputs, Chrome
// traces and dot output, over gexec_test_kernels. Expected values are computed here.

#include <gexec/debug.hpp>
#include <gexec/executor.hpp>

#include "test_support.hpp"

#include <doctest/doctest.h>

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

using namespace test;

namespace {

// x -> add(x, y) -> relu -> reshape (__nop) -> add_one_16 ; y is also an output.
gexec::graph chain() {
  gexec::graph_builder b;
  auto x = b.input("x", {2, 8});
  auto y = b.input("y", {2, 8});
  auto s = b.op("add", "test_add", {x, y}, {{{2, 8}}});
  auto r = b.op("relu", "test_relu", {s}, {{{2, 8}}});
  auto flat = b.nop("reshape", r, {16});
  b.output(b.op("inc", "test_add_one_16", {flat}, {{{16}}}));
  b.output(y);
  return b.build();
}

}  // namespace

TEST_CASE("profile: every kernel node once, shares summing to 1, per-function totals, the table") {
  auto ex = gexec::create(chain(), kernels());
  ex.set_input("x", tensor({2, 8}, iota(16, -8.0f)));
  ex.set_input("y", tensor({2, 8}, iota(16, 0.5f, 0.0f)));
  const gexec::profile_report r = gexec::profile(ex, {.warmup = 1, .repeat = 4, .number = 2});
  REQUIRE(r.nodes.size() == 3);  // add, relu, inc: the reshape and the inputs have no steps
  double share = 0;
  for (const auto& n : r.nodes) {
    CHECK(n.times.size() == 4);
    CHECK(n.mean >= 0);
    share += n.share;
  }
  CHECK(share == doctest::Approx(1.0));
  for (std::size_t i = 1; i < r.nodes.size(); ++i) CHECK(r.nodes[i - 1].mean >= r.nodes[i].mean);  // slowest first
  const auto add = std::find_if(r.nodes.begin(), r.nodes.end(), [](const auto& n) { return n.name == "add"; });
  REQUIRE(add != r.nodes.end());
  CHECK(add->func_name == "test_add");
  CHECK(add->input_shapes == std::vector<std::vector<std::int64_t>>{{2, 8}, {2, 8}});
  CHECK(add->output_shapes == std::vector<std::vector<std::int64_t>>{{2, 8}});
  CHECK(gexec::same_dtype(add->output_dtypes.at(0), gexec::dtypes::float32));
  CHECK(r.functions.size() == 3);
  double total = 0;
  for (const auto& f : r.functions) total += f.total;
  CHECK(total == doctest::Approx(r.total));
  const std::string table = r.table();
  CHECK(table.find("Node Name") != std::string::npos);
  CHECK(table.find("float32[2, 8], float32[2, 8] -> float32[2, 8]") != std::string::npos);
  CHECK(table.find("Total_time") != std::string::npos);
  CHECK(table.find("test_add_one_16") != std::string::npos);
  // The run after profiling still gives the right answer.
  std::vector<float> want(16);
  for (int i = 0; i < 16; ++i) want[i] = std::max(-8.0f + static_cast<float>(i) + 0.5f, 0.0f) + 1.0f;
  CHECK(values_of(ex.get_output(0)) == want);
}

TEST_CASE("run_individual: one list per node, zeros for nodes without steps; bad arguments are errors") {
  auto ex = gexec::create(chain(), kernels());
  ex.set_input("x", tensor({2, 8}, iota(16)));
  ex.set_input("y", tensor({2, 8}, iota(16)));
  const auto times = gexec::run_individual(ex, {.repeat = 3, .number = 2});
  REQUIRE(times.size() == ex.get_graph().nodes.size());
  for (std::uint32_t nid = 0; nid < times.size(); ++nid) {
    CHECK(times[nid].size() == 3);
    const auto& n = ex.get_graph().nodes[nid];
    const bool has_steps = n.is_op() && n.func_name != "__nop";
    for (double t : times[nid]) CHECK((has_steps ? t >= 0 : t == 0));
  }
  // Running one node alone leaves the answer of the whole graph in place.
  ex.run();
  std::vector<float> want(16);
  for (int i = 0; i < 16; ++i) want[i] = 2.0f * static_cast<float>(i) + 1.0f;
  CHECK(values_of(ex.get_output(0)) == want);
  CHECK(contains(error_of([&] { (void)gexec::run_individual_node(ex, 99); }), "out of range"));
  CHECK(contains(error_of([&] { (void)gexec::run_individual_node(ex, 2, {.repeat = 0}); }), "at least 1"));
  CHECK(contains(error_of([&] { (void)gexec::profile(ex, {.repeat = 0}); }), "repeat"));
}

TEST_CASE("debug_get_outputs: every node's outputs as the node left them, storage reuse and __nop included") {
  auto ex = gexec::create(chain(), kernels());
  const auto xv = iota(16, -8.0f), yv = iota(16, 0.25f, 0.5f);
  ex.set_input("x", tensor({2, 8}, xv));
  ex.set_input("y", tensor({2, 8}, yv));
  const auto outs = gexec::debug_get_outputs(ex);
  REQUIRE(outs.size() == ex.get_graph().num_entries());
  std::vector<float> sum(16), relu(16), inc(16);
  for (int i = 0; i < 16; ++i) {
    sum[i] = xv[i] + yv[i];
    relu[i] = std::max(sum[i], 0.0f);
    inc[i] = relu[i] + 1.0f;
  }
  auto value_of = [&](const std::string& name) {
    for (const auto& o : outs)
      if (ex.get_graph().nodes[o.node_id].name == name) return o.value;
    FAIL("no output for " << name);
    return gexec::ndarray{};
  };
  CHECK(values_of(value_of("x")) == xv);
  CHECK(values_of(value_of("y")) == yv);
  CHECK(values_of(value_of("add")) == sum);
  CHECK(values_of(value_of("relu")) == relu);
  CHECK(values_of(value_of("reshape")) == relu);
  CHECK(value_of("reshape").shape().size() == 1);
  CHECK(values_of(value_of("inc")) == inc);
}

TEST_CASE("trace_recorder: one complete event per step and run, valid JSON Perfetto reads") {
  auto ex = gexec::create(chain(), kernels());
  ex.set_input("x", tensor({2, 8}, iota(16)));
  ex.set_input("y", tensor({2, 8}, iota(16)));
  gexec::trace_recorder trace(ex);
  for (int i = 0; i < 2; ++i) {
    ex.run(trace);
    trace.end_run();
  }
  ex.run(gexec::parallel_branches{}, trace);
  trace.end_run();
  CHECK(trace.runs() == 3);
  REQUIRE(trace.events().size() == 9);
  for (const auto& e : trace.events()) CHECK(e.end_ns >= e.start_ns);
  const boost::json::value doc = boost::json::parse(trace.chrome_trace());
  const auto& events = doc.at("traceEvents").as_array();
  int complete = 0;
  for (const auto& e : events)
    if (e.at("ph").as_string() == "X") {
      ++complete;
      CHECK(e.at("dur").is_number());
      CHECK(e.at("name").is_string());
    }
  CHECK(complete == 9);
  CHECK(doc.at("traceEvents").as_array().size() > 9);  // thread names too
}

TEST_CASE("to_dot: nodes, edges with shapes, parameters and outputs marked") {
  const gexec::graph g = chain();
  const std::string params[] = {"y"};
  const std::string dot = gexec::to_dot(g, params);
  CHECK(dot.rfind("digraph gexec {", 0) == 0);
  CHECK(dot.find("n0 -> n2 [label=\"float32[2, 8]\"]") != std::string::npos);
  CHECK(dot.find("label=\"inc\\ntest_add_one_16\", peripheries=2") != std::string::npos);
  CHECK(dot.find("fillcolor") != std::string::npos);
  CHECK(dot.find("output 1") != std::string::npos);
  CHECK(dot.substr(dot.size() - 2) == "}\n");
}
