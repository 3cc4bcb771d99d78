#include "compact_compare.hpp"
#include "test_support.hpp"

#include <algorithm>
#include <gexec/graph.hpp>
#include <gexec/graph/json_scanned.hpp>

#include <boost/json.hpp>
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <string>

#include <cstdio>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace json = boost::json;

namespace {

// A graph in the form TVM v0.19 writes, using every schema element: "attrs" and the
// older "attr", two- and three-element entries, extra node attributes, control_deps,
// a multi-output node, device_index, storage_scope, skipped list_int/size_t attributes,
// and metadata (after which TVM stops reading).
constexpr const char* kGraph = R"({
  "nodes": [
    {"op": "null", "name": "x", "inputs": []},
    {"op": "null", "name": "w", "inputs": []},
    {"op": "tvm_op", "name": "dense", "inputs": [[0, 0, 0], [1, 0, 0]],
     "attrs": {"func_name": "fused_dense", "num_inputs": "2", "num_outputs": "1", "flatten_data": "0",
               "hash": "a1b2", "out_layout": ""}},
    {"op": "tvm_op", "name": "reshape", "inputs": [[2, 0]],
     "attr": {"func_name": "__nop", "num_inputs": "1", "num_outputs": "1", "flatten_data": "1"},
     "control_deps": [0]},
    {"op": "tvm_op", "name": "split", "inputs": [[3, 0, 0]],
     "attrs": {"func_name": "fused_split", "num_inputs": "1", "num_outputs": "2", "flatten_data": "0"}}
  ],
  "arg_nodes": [0, 1],
  "heads": [[4, 0, 0], [4, 1, 0]],
  "node_row_ptr": [0, 1, 2, 3, 4, 6],
  "attrs": {
    "dltype": ["list_str", ["float32", "float32", "float32", "float32", "float32", "float32"]],
    "storage_id": ["list_int", [0, 1, 2, 2, 3, 4]],
    "device_index": ["list_int", [1, 1, 1, 1, 1, 1]],
    "storage_scope": ["list_str", ["global", "global", "global", "global", "global", "global"]],
    "shape": ["list_shape", [[2, 4], [3, 4], [2, 3], [6], [3], [3]]],
    "func_hash": ["list_int", [7, 8]],
    "workspace_size": ["size_t", 0]
  },
  "metadata": {"signature": "anything"},
  "after_metadata": "ignored, as TVM stops at metadata"
})";

// The value under `v` at a path of keys and indices, to change in place: Boost.JSON's
// value::at() gives a value to change only from Boost 1.81 on, object::at() and
// array::at() do in every version.
json::value& at(json::value& v, json::string_view key) { return v.as_object().at(key); }
json::value& at(json::value& v, std::size_t index) { return v.as_array().at(index); }
template <class Step, class Next, class... Rest>
json::value& at(json::value& v, Step step, Next next, Rest... rest) {
  return at(at(v, step), next, rest...);
}

// Boost.JSON's erase moves the last key into the hole; key order matters here
// (TVM stops at "metadata"), so erase by rebuilding.
void erase_key(json::value& v, const char* key) {
  json::object kept;
  for (const auto& kv : v.as_object())
    if (kv.key() != key) kept[kv.key()] = kv.value();
  v = std::move(kept);
}

void check_graph_content(const gexec::graph& g) {
  REQUIRE(g.nodes.size() == 5);
  CHECK(g.nodes[0].op == "null");
  CHECK(g.nodes[0].name == "x");
  CHECK_FALSE(g.nodes[0].has_attrs);
  const gexec::node& dense = g.nodes[2];
  CHECK(dense.is_op());
  CHECK(dense.func_name == "fused_dense");
  CHECK(dense.num_inputs == 2);
  CHECK(dense.num_outputs == 1);
  CHECK_FALSE(dense.flatten_data);
  REQUIRE(dense.inputs.size() == 2);
  CHECK(dense.inputs[1] == gexec::node_entry{1, 0, 0});
  REQUIRE(dense.extra_attrs.size() == 2);
  CHECK(dense.extra_attrs[0] == std::pair<std::string, std::string>{"hash", "a1b2"});
  CHECK(dense.extra_attrs[1] == std::pair<std::string, std::string>{"out_layout", ""});
  const gexec::node& reshape = g.nodes[3];
  CHECK(reshape.func_name == "__nop");
  CHECK(reshape.flatten_data);
  CHECK(reshape.inputs[0] == gexec::node_entry{2, 0, 0});
  CHECK(reshape.control_deps == std::vector<std::uint32_t>{0});
  CHECK(g.nodes[4].num_outputs == 2);
  CHECK(g.arg_nodes == std::vector<std::uint32_t>{0, 1});
  CHECK(g.heads == std::vector<gexec::node_entry>{{4, 0, 0}, {4, 1, 0}});
  CHECK(g.node_row_ptr == std::vector<std::uint32_t>{0, 1, 2, 3, 4, 6});
  CHECK(g.num_entries() == 6);
  CHECK(g.entry_id(4, 1) == 5);
  CHECK(g.attrs.shape == std::vector<std::vector<std::int64_t>>{{2, 4}, {3, 4}, {2, 3}, {6}, {3}, {3}});
  REQUIRE(g.attrs.dltype.size() == 6);
  for (auto t : g.attrs.dltype) CHECK(gexec::same_dtype(t, gexec::dtypes::float32));
  CHECK(g.attrs.storage_id == std::vector<std::int32_t>{0, 1, 2, 2, 3, 4});
  CHECK(g.attrs.device_index == std::vector<std::int32_t>{1, 1, 1, 1, 1, 1});
  CHECK(g.attrs.storage_scope == std::vector<std::string>(6, "global"));
  CHECK(json::parse(g.metadata) == json::parse(R"({"signature": "anything"})"));
}

}  // namespace

TEST_CASE("parse_graph reads every element of TVM's schema") { check_graph_content(gexec::parse_graph(kGraph)); }

TEST_CASE("to_json writes a graph that parses back to the same content") {
  gexec::graph g = gexec::parse_graph(kGraph);
  std::string text = gexec::to_json(g);
  gexec::graph back = gexec::parse_graph(text);
  check_graph_content(back);
  CHECK(gexec::to_json(back) == text);
  // TVM's writer conventions: numeric node attributes are strings, graph attributes are typed pairs.
  json::value doc = json::parse(text);
  CHECK(doc.at("nodes").at(4).at("attrs").at("num_outputs") == "2");
  CHECK(doc.at("attrs").at("shape").at(0) == "list_shape");
  CHECK(doc.at("attrs").at("storage_id").at(0) == "list_int");
  CHECK(doc.at("nodes").at(0).as_object().if_contains("attrs") == nullptr);
}

TEST_CASE("a validated graph keeps the compact form and makes the node-per-struct graph once, on request") {
  const gexec::validated_graph vg = gexec::parse_graph(kGraph);
  const gexec::compact_graph& c = vg.compact();
  REQUIRE(c.num_nodes() == 5);
  CHECK(c.num_entries() == 6);
  CHECK(c.name(0) == "x");
  CHECK_FALSE(c.is_op(0));
  CHECK(c.func_name(2) == "fused_dense");
  CHECK(c.node_inputs(2).size() == 2);
  CHECK(c.num_outputs(4) == 2);
  CHECK(c.node_of(5) == 4);
  // Each kernel name is kept once; nodes refer to it by index.
  std::vector<std::string> funcs = c.funcs;
  std::sort(funcs.begin(), funcs.end());
  CHECK(std::adjacent_find(funcs.begin(), funcs.end()) == funcs.end());
  // What the compact form holds besides (control_deps, extra attributes) comes back whole.
  const gexec::graph& g = vg.get();
  check_graph_content(g);
  const gexec::validated_graph copy = vg;
  CHECK(&copy.get() == &g);  // made once, shared by copies
  CHECK(gexec::to_json(gexec::to_graph(gexec::to_compact(g))) == gexec::to_json(g));
}

TEST_CASE("optional graph attributes may be absent") {
  json::value doc = json::parse(kGraph);
  erase_key(at(doc, "attrs"), "device_index");
  erase_key(at(doc, "attrs"), "storage_scope");
  erase_key(doc, "metadata");
  erase_key(doc, "after_metadata");
  gexec::graph g = gexec::parse_graph(json::serialize(doc));
  CHECK(g.attrs.device_index.empty());
  CHECK(g.attrs.storage_scope.empty());
  CHECK(g.metadata.empty());
  CHECK(json::parse(gexec::to_json(g)).at("attrs").as_object().if_contains("device_index") == nullptr);
}

TEST_CASE("load_graph_file reports a missing file as an io error") {
  try {
    (void)gexec::load_graph_file("/nonexistent/graph.json");
    FAIL("no error");
  } catch (const gexec::error& e) {
    CHECK(e.code() == gexec::errc::io);
    CHECK(std::string(e.what()).find("/nonexistent/graph.json") != std::string::npos);
  }
}

namespace {

struct malformed {
  const char* what;
  std::function<void(json::value&)> mutate;
  gexec::errc code;
  const char* message;  // must appear in what()
};

json::value& node(json::value& doc, std::size_t i) { return at(doc, "nodes", i); }
json::value& attr_values(json::value& doc, const char* key) { return at(doc, "attrs", key, 1); }

}  // namespace

TEST_CASE("malformed graphs are rejected with the JSON path and the offending value") {
  using gexec::errc;
  const malformed cases[] = {
      {"top level is an array", [](json::value& d) { d = json::array{1}; }, errc::invalid_graph, "(root): expected an object"},
      {"missing nodes", [](json::value& d) { erase_key(d, "nodes"); }, errc::invalid_graph, "missing \"nodes\""},
      {"missing attrs", [](json::value& d) { erase_key(d, "attrs"); }, errc::invalid_graph, "missing \"attrs\""},
      {"missing heads", [](json::value& d) { erase_key(d, "heads"); }, errc::invalid_graph, "missing \"heads\""},
      {"unknown top-level key", [](json::value& d) {
         json::object o{{"bogus", 1}};
         for (const auto& kv : d.as_object()) o[kv.key()] = kv.value();
         d = std::move(o);
       }, errc::invalid_graph, "bogus: unknown graph key"},
      {"nodes not an array", [](json::value& d) { at(d, "nodes") = "x"; }, errc::invalid_graph, "nodes: expected an array, got \"x\""},
      {"node not an object", [](json::value& d) { node(d, 1) = 5; }, errc::invalid_graph, "nodes[1]: expected an object, got 5"},
      {"node without op", [](json::value& d) { erase_key(node(d, 2), "op"); }, errc::invalid_graph, "nodes[2]: missing \"op\""},
      {"node without name", [](json::value& d) { erase_key(node(d, 2), "name"); }, errc::invalid_graph, "nodes[2]: missing \"name\""},
      {"unknown node key", [](json::value& d) { node(d, 2).as_object()["extra"] = 1; }, errc::invalid_graph, "nodes[2].extra: unknown node key"},
      {"unknown op", [](json::value& d) { at(node(d, 2), "op") = "relu"; }, errc::invalid_graph, "nodes[2].op: unknown op \"relu\""},
      {"name not a string", [](json::value& d) { at(node(d, 0), "name") = 3; }, errc::invalid_graph, "nodes[0].name: expected a string, got 3"},
      {"entry of one element", [](json::value& d) { at(node(d, 2), "inputs", 1) = json::array{1}; }, errc::invalid_graph, "nodes[2].inputs[1]: expected [node, index] or [node, index, version], got [1]"},
      {"entry of four elements", [](json::value& d) { at(node(d, 2), "inputs", 1) = json::array{1, 0, 0, 0}; }, errc::invalid_graph, "nodes[2].inputs[1]: expected [node, index]"},
      {"input from a later node", [](json::value& d) { at(node(d, 2), "inputs", 0) = json::array{3, 0}; }, errc::invalid_graph, "nodes[2].inputs[0]: refers to node 3, which does not come before node 2"},
      {"input from itself", [](json::value& d) { at(node(d, 2), "inputs", 0) = json::array{2, 0}; }, errc::invalid_graph, "nodes[2].inputs[0]: refers to node 2"},
      {"input output index out of range", [](json::value& d) { at(node(d, 2), "inputs", 1) = json::array{1, 1}; }, errc::invalid_graph, "nodes[2].inputs[1]: output 1 of node 1, which has 1 outputs"},
      {"negative node id", [](json::value& d) { at(node(d, 2), "inputs", 0) = json::array{-1, 0}; }, errc::invalid_graph, "nodes[2].inputs[0][0]: value -1 is out of range"},
      {"fractional node id", [](json::value& d) { at(node(d, 2), "inputs", 0) = json::array{0.5, 0}; }, errc::invalid_graph, "nodes[2].inputs[0][0]: expected an integer, got 5E-1"},
      {"attrs without func_name", [](json::value& d) { erase_key(at(node(d, 2), "attrs"), "func_name"); }, errc::invalid_graph, "nodes[2].attrs: missing \"func_name\""},
      {"attrs without flatten_data", [](json::value& d) { erase_key(at(node(d, 4), "attrs"), "flatten_data"); }, errc::invalid_graph, "nodes[4].attrs: missing \"flatten_data\""},
      {"num_outputs not a number", [](json::value& d) { at(node(d, 2), "attrs", "num_outputs") = "two"; }, errc::invalid_graph, "nodes[2].attrs.num_outputs: expected an unsigned integer in a string, got \"two\""},
      {"num_outputs as a JSON number", [](json::value& d) { at(node(d, 2), "attrs", "num_outputs") = 1; }, errc::invalid_graph, "nodes[2].attrs.num_outputs: expected a string, got 1"},
      {"num_inputs disagrees with inputs", [](json::value& d) { at(node(d, 2), "attrs", "num_inputs") = "3"; }, errc::invalid_graph, "nodes[2].attrs.num_inputs: is 3 but the node has 2 inputs"},
      {"kernel node without attrs", [](json::value& d) { erase_key(node(d, 2), "attrs"); }, errc::invalid_graph, "nodes[2]: tvm_op node \"dense\" has no attrs"},
      {"empty func_name", [](json::value& d) { at(node(d, 2), "attrs", "func_name") = ""; }, errc::invalid_graph, "nodes[2].attrs.func_name: is empty"},
      {"null node with inputs", [](json::value& d) { at(node(d, 1), "inputs") = json::parse("[[0, 0]]"); }, errc::invalid_graph, "nodes[1].inputs: a \"null\" node takes no inputs"},
      {"control dependency out of range", [](json::value& d) { at(node(d, 3), "control_deps") = json::array{99}; }, errc::invalid_graph, "nodes[3].control_deps[0]: node 99 out of range (5 nodes)"},
      {"node_row_ptr too short", [](json::value& d) { at(d, "node_row_ptr").as_array().pop_back(); }, errc::invalid_graph, "node_row_ptr: has 5 elements, expected 6"},
      {"node_row_ptr disagrees with num_outputs", [](json::value& d) { at(node(d, 4), "attrs", "num_outputs") = "3"; }, errc::invalid_graph, "node_row_ptr[5]: is 6, expected 7 (node 4 has 3 outputs)"},
      {"node_row_ptr not starting at 0", [](json::value& d) { at(d, "node_row_ptr", 0) = 1; }, errc::invalid_graph, "node_row_ptr[0]: is 1, expected 0"},
      {"arg node out of range", [](json::value& d) { at(d, "arg_nodes", 1) = 9; }, errc::invalid_graph, "arg_nodes[1]: node 9 out of range (5 nodes)"},
      {"arg node is a kernel", [](json::value& d) { at(d, "arg_nodes", 1) = 2; }, errc::invalid_graph, "arg_nodes[1]: node 2 (\"dense\") is not a \"null\" node"},
      {"arg node listed twice", [](json::value& d) { at(d, "arg_nodes", 1) = 0; }, errc::invalid_graph, "arg_nodes[1]: name \"x\" is already used by arg_nodes[0]"},
      {"head node out of range", [](json::value& d) { at(d, "heads", 0) = json::array{7, 0, 0}; }, errc::invalid_graph, "heads[0]: node 7 out of range (5 nodes)"},
      {"head output out of range", [](json::value& d) { at(d, "heads", 1) = json::array{4, 2, 0}; }, errc::invalid_graph, "heads[1]: output 2 of node 4, which has 2 outputs"},
      {"unknown dtype", [](json::value& d) { at(attr_values(d, "dltype"), 3) = "float31"; }, errc::invalid_graph, "attrs.dltype[1][3]: unknown dtype \"float31\""},
      {"dltype with the wrong type tag", [](json::value& d) { at(d, "attrs", "dltype", 0) = "list_int"; }, errc::invalid_graph, "attrs.dltype[0]: expected \"list_str\", got \"list_int\""},
      {"dltype list too short", [](json::value& d) { attr_values(d, "dltype").as_array().pop_back(); }, errc::invalid_graph, "attrs.dltype[1]: has 5 elements, expected one per entry (6)"},
      {"shape list too long", [](json::value& d) { attr_values(d, "shape").as_array().push_back(json::array{1}); }, errc::invalid_graph, "attrs.shape[1]: has 7 elements, expected one per entry (6)"},
      {"negative dimension", [](json::value& d) { at(attr_values(d, "shape"), 2, 1) = -4; }, errc::invalid_graph, "attrs.shape[1][2][1]: dimension -4 is negative"},
      {"overflowing shape", [](json::value& d) { at(attr_values(d, "shape"), 2) = json::array{std::int64_t{1} << 62, 4}; }, errc::invalid_graph, "attrs.shape[1][2]: shape [4611686018427387904, 4] of float32 overflows"},
      {"shape element not a list", [](json::value& d) { at(attr_values(d, "shape"), 0) = 4; }, errc::invalid_graph, "attrs.shape[1][0]: expected an array, got 4"},
      {"negative storage id", [](json::value& d) { at(attr_values(d, "storage_id"), 0) = -1; }, errc::invalid_graph, "attrs.storage_id[1][0]: storage id -1 is negative"},
      {"device type 0", [](json::value& d) { at(attr_values(d, "device_index"), 0) = 0; }, errc::invalid_graph, "attrs.device_index[1][0]: device type 0 is not a DLDeviceType"},
      {"one storage on two devices", [](json::value& d) { at(attr_values(d, "device_index"), 3) = 2; }, errc::invalid_graph, "attrs.device_index[1][3]: entry 3 is on cuda but shares storage 2 with entry 2 on cpu"},
      {"storage_scope of the wrong length", [](json::value& d) { attr_values(d, "storage_scope").as_array().pop_back(); }, errc::invalid_graph, "attrs.storage_scope[1]: has 5 elements"},
      {"unknown graph attribute type", [](json::value& d) { at(d, "attrs").as_object()["layout"] = json::array{"list_str", json::array{"NCHW"}}; }, errc::invalid_graph, "attrs.layout: unknown graph attribute"},
      {"graph attribute not a pair", [](json::value& d) { at(d, "attrs", "storage_id") = json::array{"list_int"}; }, errc::invalid_graph, "attrs.storage_id: expected [\"list_int\", value]"},
      {"__copy with two inputs", [](json::value& d) { at(node(d, 2), "attrs", "func_name") = "__copy"; }, errc::invalid_graph, "nodes[2]: __copy node \"dense\" must have 1 input and 1 output"},
  };
  for (const malformed& c : cases) {
    const std::string what = c.what;
    CAPTURE(what);
    json::value doc = json::parse(kGraph);
    c.mutate(doc);
    std::string text = json::serialize(doc);
    // The scanner gives up on what the document reader or check_graph refuses (without
    // the keys after "metadata" and the skipped attributes, which it leaves to the
    // document reader whatever they hold).
    if (doc.is_object() && doc.as_object().contains("metadata") && doc.as_object().contains("attrs") &&
        doc.at("attrs").is_object()) {
      json::value scannable = doc;
      erase_key(scannable, "after_metadata");
      erase_key(scannable.as_object()["attrs"], "func_hash");
      erase_key(scannable.as_object()["attrs"], "workspace_size");
      gexec::compact_graph scanned;
      CHECK_FALSE(gexec::detail::scan_graph(json::serialize(scannable), scanned, &gexec::detail::read_metadata_value));
    }
    try {
      (void)gexec::parse_graph(text);
      FAIL("accepted a malformed graph");
    } catch (const gexec::error& e) {
      CHECK(e.code() == c.code);
      const std::string message = e.what();
      CHECK_MESSAGE(message.find(c.message) != std::string::npos, message);
    }
  }
}

TEST_CASE("text that is not JSON is an invalid_json error with its position") {
  for (const char* text : {"", "{", "{\"nodes\": [", "[1, 2,]", "{\"a\" 1}", "nul", "{} trailing", "{}{}", "[] ]"}) {
    CAPTURE(text);
    try {
      (void)gexec::parse_graph(text);
      FAIL("accepted invalid JSON");
    } catch (const gexec::error& e) {
      CHECK(e.code() == gexec::errc::invalid_json);
      CHECK(std::string(e.what()).find("at byte") != std::string::npos);
    }
  }
}

TEST_CASE("a syntax error on a later line reports that line") {
  try {
    (void)gexec::parse_graph("{\n\"nodes\": [\n  1,,\n]}");
    FAIL("accepted invalid JSON");
  } catch (const gexec::error& e) {
    CHECK(std::string(e.what()).find("(line 3)") != std::string::npos);
  }
}

namespace {

/// kGraph with `from` (which must occur in it) replaced by `to`.
std::string graph_with(const std::string& from, const std::string& to) {
  std::string text = kGraph;
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

gexec::error parse_error(const std::string& text) {
  try {
    (void)gexec::parse_graph(text);
  } catch (const gexec::error& e) {
    return e;
  }
  FAIL("accepted the graph");
  return gexec::error(gexec::errc::unsupported, "unreachable");
}

}  // namespace

TEST_CASE("a key repeated in any object of the graph is rejected with its JSON path") {
  struct dup {
    const char* what;
    std::string text;
    const char* message;
  };
  std::string many_attrs = R"("func_name": "fused_dense", )";
  for (int i = 0; i < 40; ++i) many_attrs += "\"extra" + std::to_string(i) + "\": \"" + std::to_string(i) + "\", ";
  const dup cases[] = {
      {"top level", graph_with(R"("arg_nodes": [0, 1],)", R"("arg_nodes": [0, 1], "arg_nodes": [1, 0],)"),
       "graph: arg_nodes: duplicate key \"arg_nodes\""},
      {"node", graph_with(R"("name": "dense",)", R"("name": "dense", "name": "other",)"), "graph: nodes[2].name: duplicate key \"name\""},
      {"node attrs", graph_with(R"("func_name": "fused_dense",)", R"("func_name": "fused_dense", "func_name": "evil",)"),
       "graph: nodes[2].attrs.func_name: duplicate key \"func_name\""},
      {"escaped spelling of the same key", graph_with(R"("func_name": "fused_dense",)", R"("func_name": "fused_dense", "func_n\u0061me": "evil",)"),
       "graph: nodes[2].attrs.func_name: duplicate key \"func_name\""},
      {"an object of many keys", graph_with(R"("func_name": "fused_dense",)", many_attrs + R"("extra7": "again",)"),
       "graph: nodes[2].attrs.extra7: duplicate key \"extra7\""},
      {"graph attrs", graph_with(R"("storage_id": ["list_int", [0, 1, 2, 2, 3, 4]],)", R"("storage_id": ["list_int", [0, 1, 2, 2, 3, 4]], "storage_id": ["list_int", [0, 0, 0, 0, 0, 0]],)"),
       "graph: attrs.storage_id: duplicate key \"storage_id\""},
      {"metadata", graph_with(R"({"signature": "anything"})", R"({"signature": "anything", "x": [{"a": 1, "a": 2}]})"),
       "graph: metadata.x[0].a: duplicate key \"a\""},
  };
  for (const dup& c : cases) {
    CAPTURE(std::string(c.what));
    auto e = parse_error(c.text);
    CHECK(e.code() == gexec::errc::invalid_graph);
    CHECK_MESSAGE(std::string(e.what()).find(c.message) != std::string::npos, std::string(e.what()));
  }
  // Equal keys in different objects are no duplicates, and many keys in one object are fine.
  check_graph_content(gexec::parse_graph(kGraph));
  auto wide = gexec::parse_graph(graph_with(R"("func_name": "fused_dense",)", many_attrs));
  CHECK(wide->nodes[2].extra_attrs.size() == 2 + 40);
}

TEST_CASE("names with control characters are refused; JSON paths in messages escape them") {
  struct bad {
    const char* what;
    std::string text;
    const char* message;
  };
  const bad cases[] = {
      {"NUL in a node name", graph_with(R"("name": "dense",)", R"("name": "de\u0000nse",)"),
       R"(graph: nodes[2].name: node name "de\x00nse" contains a control character)"},
      {"newline in an input's name", graph_with(R"("name": "x",)", R"("name": "x\ny",)"),
       R"(graph: nodes[0].name: node name "x\x0ay" contains a control character)"},
      {"NUL in func_name", graph_with(R"("func_name": "fused_dense",)", R"("func_name": "fused\u0000_dense",)"),
       R"(graph: nodes[2].attrs.func_name: "fused\x00_dense" contains a control character)"},
      {"NUL in an unknown key", graph_with(R"("name": "dense",)", R"("name": "dense", "ev\u0000il": 1,)"),
       R"(graph: nodes[2].ev\x00il: unknown node key)"},
      {"NUL in an unknown op", graph_with(R"("op": "tvm_op", "name": "dense")", R"("op": "tvm\u0000op", "name": "dense")"),
       R"(graph: nodes[2].op: unknown op "tvm\x00op")"},
  };
  for (const bad& c : cases) {
    CAPTURE(std::string(c.what));
    auto e = parse_error(c.text);
    CHECK(e.code() == gexec::errc::invalid_graph);
    const std::string message = e.what();
    CHECK_MESSAGE(message.find(c.message) != std::string::npos, message);
    CHECK(message.find('\0') == std::string::npos);  // what() read as a C string is the whole message
  }
  // The same check holds for graphs made in C++ (validate() is the one gate).
  gexec::graph g = gexec::parse_graph(kGraph).get();
  g.nodes[4].name = std::string("spl\0it", 6);
  try {
    (void)gexec::validate(g);
    FAIL("accepted a NUL in a node name");
  } catch (const gexec::error& e) {
    CHECK(e.code() == gexec::errc::invalid_graph);
    CHECK(std::string(e.what()).find(R"(nodes[4].name: node name "spl\x00it" contains a control character)") != std::string::npos);
  }
  // Names with other characters (UTF-8, punctuation) are fine.
  auto ok = gexec::parse_graph(graph_with(R"("name": "dense",)", R"("name": "d\u00e9nse/0:1 \"q\"",)"));
  CHECK(ok->nodes[2].name == "d\xc3\xa9nse/0:1 \"q\"");
}

TEST_CASE("shapes of more dimensions than gexec's limit are rejected at validation") {
  std::string dims = "[";
  for (int i = 0; i <= gexec::max_ndim; ++i) dims += i ? ", 1" : "1";
  dims += "]";
  auto e = parse_error(graph_with("[[2, 4], [3, 4]", "[" + dims + ", [3, 4]"));
  CHECK(e.code() == gexec::errc::invalid_graph);
  CHECK(std::string(e.what()).find("attrs.shape[1][0]: has 65 dimensions, more than gexec's limit of 64") != std::string::npos);
}

TEST_CASE("load_graph_file reads regular files only: a FIFO, a directory or a device is an io error naming the path") {
  const test::scratch_dir scratch("graph_files");
  const auto& dir = scratch.path;
  const auto fifo = dir / "graph.fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  struct special {
    std::filesystem::path path;
    const char* kind;
  };
  for (const special& s : {special{fifo, "a FIFO"}, special{dir, "a directory"}, special{"/dev/null", "a character device"}}) {
    CAPTURE(s.path);
    // Run apart, so that a call blocked on the FIFO (no writer) fails the test instead of hanging it.
    auto result = std::async(std::launch::async, [&]() -> std::string {
      try {
        (void)gexec::load_graph_file(s.path);
      } catch (const gexec::error& e) {
        return std::string(gexec::to_string(e.code())) + ": " + e.what();
      } catch (const std::exception& e) {
        return std::string("not a gexec::error: ") + e.what();
      }
      return "no error";
    });
    if (result.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);  // releases the blocked reader
      if (fd >= 0) ::close(fd);
      result.wait();
      FAIL("load_graph_file blocked on " << s.path);
    }
    const std::string r = result.get();
    CHECK_MESSAGE(r.rfind("io: ", 0) == 0, r);
    CHECK_MESSAGE(r.find("graph file " + s.path.string() + " is " + s.kind + ", not a regular file") != std::string::npos, r);
  }
  // A regular file still loads.
  const auto path = dir / "graph.json";
  std::ofstream(path) << kGraph;
  check_graph_content(gexec::load_graph_file(path));
}

TEST_CASE("a graph file larger than memory can hold is an out_of_memory error naming the path, not std::bad_alloc") {
#if defined(GEXEC_TEST_UNDER_ASAN)
  MESSAGE("AddressSanitizer aborts on failed allocations instead of failing them; skipped");
#else
  const auto path = std::filesystem::temp_directory_path() / ("gexec_test_graph_sparse_" + std::to_string(::getpid()) + ".json");
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  REQUIRE(fd >= 0);
  // 64 GiB, all a hole (ftruncate64: off_t may be 32 bits wide in a 32-bit process)
  const bool made = ::ftruncate64(fd, off64_t{64} << 30) == 0;
  ::close(fd);
  if (!made) {
    std::filesystem::remove(path);
    MESSAGE("the filesystem has no 64 GiB sparse files; skipped");
    return;
  }
  // In a child whose address space is limited to 4 GiB, whatever the machine's memory
  // (a 32-bit process has no more than that anyway).
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    constexpr rlim_t four_gib = sizeof(rlim_t) > 4 ? static_cast<rlim_t>(std::uint64_t{4} << 30) : RLIM_INFINITY;
    rlimit limit{four_gib, four_gib};
    int status = ::setrlimit(RLIMIT_AS, &limit) == 0 ? 3 : 4;
    try {
      (void)gexec::load_graph_file(path);
    } catch (const gexec::error& e) {
      const std::string m = e.what();
      // A 32-bit process built without 64-bit file offsets cannot even open it: also out_of_memory, also named.
      const bool named = m.find("to read graph file " + path.string()) != std::string::npos ||
                         (sizeof(void*) == 4 && m.find("graph file " + path.string() + ": it is larger than this 32-bit process") != std::string::npos);
      if (e.code() == gexec::errc::out_of_memory && named) status = 0;
      else std::fprintf(stderr, "child: %s\n", e.what());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: not a gexec::error: %s\n", e.what());
    }
    ::_exit(status);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  std::filesystem::remove(path);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
#endif
}

TEST_CASE("a graph file that cannot be read is an io error naming the path, never a std::ios_base::failure") {
  const test::scratch_dir scratch("graph_unreadable");
  const auto& dir = scratch.path;
  auto error_of = [](const std::filesystem::path& p) -> std::string {
    try {
      (void)gexec::load_graph_file(p);
    } catch (const gexec::error& e) {
      return std::string(gexec::to_string(e.code())) + ": " + e.what();
    } catch (const std::exception& e) {
      return std::string("not a gexec::error: ") + e.what();
    }
    return "no error";
  };
  const auto missing = dir / "missing.json";
  std::string r = error_of(missing);
  CHECK_MESSAGE(r.rfind("io: ", 0) == 0, r);
  CHECK_MESSAGE(r.find("cannot open graph file " + missing.string() + ": No such file or directory") != std::string::npos, r);
  r = error_of(dir / "missing" / "");
  CHECK_MESSAGE(r.rfind("io: ", 0) == 0, r);

  const auto locked = dir / "graph.json";
  std::ofstream(locked) << kGraph;
  std::filesystem::permissions(locked, std::filesystem::perms::none);
  if (::access(locked.c_str(), R_OK) == 0) {
    MESSAGE("this process reads files whatever their permissions (root); the unreadable-file case is skipped");
    return;
  }
  r = error_of(locked);
  CHECK_MESSAGE(r.rfind("io: ", 0) == 0, r);
  CHECK_MESSAGE(r.find("cannot open graph file " + locked.string() + ": Permission denied") != std::string::npos, r);
}

// ---- the one-pass scanner (graph/scanner.hpp) ------------------------------------

namespace {

// What the slower readers make of `text`: the compact graph, or the error message.
struct reference {
  bool ok = false;
  gexec::compact_graph graph;
  std::string error;
  gexec::errc code{};
};
reference read_reference(const std::string& text) {
  reference r;
  try {
    r.graph = gexec::validate(gexec::detail::read_graph_document(text)).compact();
    r.ok = true;
  } catch (const gexec::error& e) {
    r.error = e.what();
    r.code = e.code();
  }
  return r;
}

// The Boost-free path (create() over system_lib) against the scanner with the Boost
// metadata reader: the same compact graph where the scanner reads the text, else a
// gexec::error naming the byte, invalid_json exactly where the document reader's is.
// Only "metadata" with numbers that are not integers separates it from the scanner.
void check_scanned(const std::string& text, bool scan_ok, const gexec::compact_graph& scanned, const reference& ref) {
  gexec::compact_graph plain;
  const bool plain_ok = gexec::detail::scan_graph(text, plain, &gexec::detail::read_metadata_plain);
  if (plain_ok) {
    REQUIRE(scan_ok);
    CHECK(gexec_test::compact_difference(plain, scanned) == "");
  } else if (scan_ok) {
    CHECK(scanned.metadata.find('E') != std::string::npos);  // a number Boost.JSON keeps as a double ("1.5E0")
  }
  try {
    const gexec::validated_graph g = gexec::detail::parse_graph_scanned(text);
    CHECK(plain_ok);
    CHECK(gexec_test::compact_difference(g.compact(), scanned) == "");
  } catch (const gexec::error& e) {
    CAPTURE(e.what());
    CHECK_FALSE(plain_ok);
    CHECK(std::string(e.what()).find("byte ") != std::string::npos);
    if (!ref.ok && ref.code == gexec::errc::invalid_json) {
      CHECK(e.code() == gexec::errc::invalid_json);
    } else {
      CHECK(e.code() == gexec::errc::invalid_graph);
    }
  }
}

// The scanner accepts `text` exactly when `accepted`; what it accepts is what the
// document reader and validate() make; parse_graph gives their graph or their error.
void check_scan(const std::string& text, bool accepted) {
  CAPTURE(text);
  gexec::compact_graph scanned;
  const bool scan_ok = gexec::detail::scan_graph(text, scanned, &gexec::detail::read_metadata_value);
  CHECK(scan_ok == accepted);
  const reference ref = read_reference(text);
  if (scan_ok) {
    REQUIRE(ref.ok);
    CHECK(gexec_test::compact_difference(scanned, ref.graph) == "");
  }
  try {
    const gexec::validated_graph parsed = gexec::parse_graph(text);
    REQUIRE_MESSAGE(ref.ok, ref.error);
    CHECK(gexec_test::compact_difference(parsed.compact(), ref.graph) == "");
  } catch (const gexec::error& e) {
    CHECK_FALSE(ref.ok);
    CHECK(std::string(e.what()) == ref.error);
  }
  check_scanned(text, scan_ok, scanned, ref);
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A chain x -> n0 -> n1 -> ... as TVM writes it (the shape of the load benchmark's graph).
std::string chain_text(int n) {
  std::string s = "{\"nodes\": [\n{\"op\": \"null\", \"name\": \"x\", \"inputs\": []}";
  for (int i = 0; i < n; ++i)
    s += ",\n{\"op\": \"tvm_op\", \"name\": \"fused_add_" + std::to_string(i) +
         "\", \"attrs\": {\"num_outputs\": \"1\", \"num_inputs\": \"1\", \"flatten_data\": \"0\", \"func_name\": \"add_one\"}, "
         "\"inputs\": [[" + std::to_string(i) + ", 0, 0]]}";
  s += "],\n\"arg_nodes\": [0],\n\"heads\": [[" + std::to_string(n) + ", 0, 0]],\n\"attrs\": {\"dltype\": [\"list_str\", [";
  for (int i = 0; i <= n; ++i) s += i ? ", \"float32\"" : "\"float32\"";
  s += "]],\n\"storage_id\": [\"list_int\", [";
  for (int i = 0; i <= n; ++i) s += (i ? ", " : "") + std::to_string(i == 0 ? 0 : 1 + i % 2);
  s += "]],\n\"shape\": [\"list_shape\", [";
  for (int i = 0; i <= n; ++i) s += i ? ", [16]" : "[16]";
  s += "]]},\n\"node_row_ptr\": [";
  for (int i = 0; i <= n + 1; ++i) s += (i ? ", " : "") + std::to_string(i);
  return s + "]}\n";
}

// A graph the scanner reads: two-element entries, a two-output node, extra attributes,
// device_index, an empty shape, several dtypes.
constexpr const char* kScanGraph = R"({"nodes": [{"op": "null", "name": "x", "inputs": []},
  {"op": "null", "name": "w", "inputs": []},
  {"op": "tvm_op", "name": "f", "attrs": {"func_name": "fused_f", "num_inputs": "2", "num_outputs": "2", "flatten_data": "0", "hash": "ab", "out_layout": ""}, "inputs": [[0, 0, 0], [1, 0]]},
  {"op": "tvm_op", "name": "g", "attrs": {"func_name": "fused_g", "num_inputs": "1", "num_outputs": "1", "flatten_data": "1"}, "inputs": [[2, 1, 0]]},
  {"op": "tvm_op", "name": "h", "attr": {"func_name": "fused_f", "num_inputs": "1", "num_outputs": "1", "flatten_data": "0"}, "inputs": [[3, 0, 0]]}],
 "arg_nodes": [0, 1], "heads": [[4, 0, 0], [2, 0, 0]],
 "attrs": {"dltype": ["list_str", ["float32", "float32", "float16", "int8", "float32", "bool"]],
   "storage_id": ["list_int", [0, 1, 2, 3, 4, 5]], "device_index": ["list_int", [1, 1, 1, 1, 1, 1]],
   "shape": ["list_shape", [[2, 3], [3], [], [4, 5, 6], [2], [2]]]},
 "node_row_ptr": [0, 1, 2, 4, 5, 6]})";

std::string replaced(std::string text, std::string_view from, std::string_view to) {
  const auto at = text.find(from);
  REQUIRE_MESSAGE(at != std::string::npos, std::string(from));
  return text.replace(at, from.size(), to);
}

// Every object's keys in reverse order, recursively.
json::value reversed_keys(const json::value& v) {
  if (v.is_array()) {
    json::array a;
    for (const auto& x : v.as_array()) a.push_back(reversed_keys(x));
    return a;
  }
  if (!v.is_object()) return v;
  std::vector<std::pair<std::string, json::value>> kv;
  for (const auto& x : v.as_object()) kv.emplace_back(x.key(), reversed_keys(x.value()));
  json::object o;
  for (auto it = kv.rbegin(); it != kv.rend(); ++it) o[it->first] = it->second;
  return o;
}

// `text` with `ws` after every structural character outside strings (no escapes in them).
std::string spaced(std::string_view text, std::string_view ws) {
  std::string out;
  bool in_string = false;
  for (char c : text) {
    out += c;
    if (c == '"') in_string = !in_string;
    if (!in_string && (c == '{' || c == '}' || c == '[' || c == ']' || c == ',' || c == ':')) out += ws;
  }
  return std::string(ws) + out;
}

}  // namespace

TEST_CASE("the scanner reads escapes, non-ASCII, control_deps, storage_scope and metadata as the document reader does") {
  // kGraph without what the scanner leaves to the document reader (keys after
  // "metadata", skipped list_int and size_t attributes): every other element of the
  // schema is read in the one pass, "metadata" included.
  json::value doc = json::parse(kGraph);
  erase_key(doc, "after_metadata");
  erase_key(doc.as_object()["attrs"], "func_hash");
  erase_key(doc.as_object()["attrs"], "workspace_size");
  const std::string with_metadata = json::serialize(doc);
  json::value without = doc;
  erase_key(without, "metadata");
  const std::string plain = json::serialize(without);
  std::string escaped = with_metadata;  // strings and keys with every escape, decoded as Boost.JSON decodes them
  escaped = replaced(escaped, "\"dense\"", "\"d\\u0065nse\\/x\"");
  escaped = replaced(escaped, "\"hash\"", "\"h\\u0061sh\"");
  escaped = replaced(escaped, "\"a1b2\"", R"("q\"b\\s\/\b\f\n\r\t\u00e9\u20AC\ud83d\ude00\u0000")");
  escaped = replaced(escaped, "\"fused_dense\"", "\"fused_d\\u0065nse\"");
  escaped = replaced(escaped, "\"global\"", "\"gl\\u006fbal\"");
  escaped = replaced(escaped, "\"float32\"", "\"fl\\u006fat32\"");
  escaped = replaced(escaped, "\"anything\"", "\"any\\nthing\\ud83d\\ude00\"");
  std::string utf8 = plain;  // raw UTF-8 of two, three and four bytes, and DEL outside names
  utf8 = replaced(utf8, "\"dense\"", "\"d\xc3\xa9nse\xe2\x82\xac\xf0\x9f\x98\x80\"");
  utf8 = replaced(utf8, "\"a1b2\"", "\"a\x7f\xf4\x8f\xbf\xbf\xed\x9f\xbf\xe0\xa0\x80\"");
  for (const std::string& text : {with_metadata, plain, escaped, utf8}) check_scan(text, true);
  gexec::compact_graph scanned;
  REQUIRE(gexec::detail::scan_graph(with_metadata, scanned, &gexec::detail::read_metadata_value));
  check_graph_content(gexec::to_graph(scanned));
  REQUIRE(gexec::detail::scan_graph(escaped, scanned, &gexec::detail::read_metadata_value));
  const gexec::graph g = gexec::to_graph(scanned);
  CHECK(g.nodes[2].name == "dense/x");
  CHECK(g.nodes[2].func_name == "fused_dense");
  CHECK(g.nodes[2].extra_attrs[0] ==
        std::pair<std::string, std::string>{"hash", std::string("q\"b\\s/\b\f\n\r\t\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\0", 21)});
  CHECK(g.attrs.storage_scope[0] == "global");
  CHECK(json::parse(g.metadata) == json::parse("{\"signature\": \"any\\nthing\\ud83d\\ude00\"}"));
  REQUIRE(gexec::detail::scan_graph(utf8, scanned, &gexec::detail::read_metadata_value));
  CHECK(gexec::to_graph(scanned).nodes[2].name == "d\xc3\xa9nse\xe2\x82\xac\xf0\x9f\x98\x80");
}

TEST_CASE("the scanner gives the document reader what it refuses or does not read") {
  json::value doc = json::parse(kGraph);
  erase_key(doc, "after_metadata");
  erase_key(doc.as_object()["attrs"], "func_hash");
  erase_key(doc.as_object()["attrs"], "workspace_size");
  const std::string base = json::serialize(doc);
  gexec::compact_graph scanned;
  CHECK_FALSE(gexec::detail::scan_graph(base, scanned));  // "metadata" without a reader for it
  check_scan(kGraph, false);                             // keys after "metadata", skipped attributes
  const std::pair<std::string, std::string> given_up[] = {
      // escapes Boost.JSON refuses
      {"\"a1b2\"", R"("a\x")"},
      {"\"a1b2\"", R"("a\u00g0")"},
      {"\"a1b2\"", R"("a\u00")"},
      {"\"a1b2\"", R"("a\ud83d")"},           // a lone high surrogate
      {"\"a1b2\"", R"("a\ud83dx")"},
      {"\"a1b2\"", R"("a\ud83d\u0041")"},     // not followed by a low one
      {"\"a1b2\"", R"("a\ud83d\ud83d")"},
      {"\"a1b2\"", R"("a\ude00")"},           // a lone low surrogate
      {"\"a1b2\"", R"("a\")"},
      // UTF-8 that is not well formed: overlong, a surrogate, past U+10FFFF, cut short, a stray continuation
      {"\"a1b2\"", "\"a\xc0\xaf\""},
      {"\"a1b2\"", "\"a\xc1\xbf\""},
      {"\"a1b2\"", "\"a\xe0\x80\xaf\""},
      {"\"a1b2\"", "\"a\xed\xa0\x80\""},
      {"\"a1b2\"", "\"a\xf0\x80\x80\xaf\""},
      {"\"a1b2\"", "\"a\xf4\x90\x80\x80\""},
      {"\"a1b2\"", "\"a\xf5\x80\x80\x80\""},
      {"\"a1b2\"", "\"a\xe2\x82\""},
      {"\"a1b2\"", "\"a\x80\""},
      {"\"a1b2\"", "\"a\xff\""},
      {"\"dense\"", "\"d\xe2\x82\""},
      // control characters: raw (not JSON), or escaped in a name (check_graph)
      {"\"a1b2\"", "\"a\tb\""},
      {"\"dense\"", R"("d\u0001")"},
      {"\"dense\"", R"("d\n")"},
      {"\"dense\"", "\"d\x7f\""},
      {"\"fused_dense\"", R"("fused\u0000")"},
      {"\"fused_dense\"", R"("fused\u007f")"},
      // escapes in keys and type tags the scanner knows (read by the document reader)
      {"\"nodes\"", R"("n\u006fdes")"},
      {"\"op\"", R"("\u006fp")"},
      {"\"tvm_op\"", R"("tvm\u005fop")"},
      {"\"list_str\"", R"("list\u005fstr")"},
      {"\"func_name\"", R"("func\u005fname")"},
      {"\"flatten_data\":\"0\"", R"("flatten_data":"0","fl\u0061tten_data":"1")"},  // a repeated key, escaped
      {"\"flatten_data\":\"0\"", R"("flatten_data":"0","h\u0061sh":"1")"},
      // control_deps
      {"\"control_deps\":[0]", "\"control_deps\":[3]"},
      {"\"control_deps\":[0]", "\"control_deps\":[9]"},
      {"\"control_deps\":[0]", "\"control_deps\":[0],\"control_deps\":[0]"},
      {"\"control_deps\":[0]", "\"control_deps\":[-1]"},
      {"\"control_deps\":[0]", "\"control_deps\":0"},
      // storage_scope
      {"\"storage_scope\":[\"list_str\",[\"global\",", "\"storage_scope\":[\"list_str\",["},
      {"\"storage_scope\":[\"list_str\",[\"global\",", "\"storage_scope\":[\"list_int\",[\"global\","},
      {"\"storage_scope\":[\"list_str\",[\"global\",", "\"storage_scope\":[\"list_str\",[1,"},
      // metadata: not JSON, a repeated key, a key after it, first, repeated
      {R"({"signature":"anything"})", R"({"signature":"anything",})"},
      {R"({"signature":"anything"})", R"({"signature":"anything","signature":1})"},
      {R"({"signature":"anything"})", R"({"signature":"anything"},"more":1)"},
      {R"({"signature":"anything"})", R"({"signature":"anything"},"metadata":1)"},
      {R"({"nodes":)", R"({"metadata":1,"nodes":)"},
  };
  for (const auto& [from, to] : given_up) check_scan(replaced(base, from, to), false);
  // Accepted: an empty control_deps, an absent or empty storage_scope, metadata of any
  // kind (numbers the document reader rewrites, nesting to the parser's depth).
  const std::pair<std::string, std::string> accepted[] = {
      {"\"control_deps\":[0]", "\"control_deps\":[]"},
      {"\"control_deps\":[0]", "\"control_deps\":[0, 1,2]"},
      {"\"storage_scope\":[\"list_str\",[\"global\",\"global\",\"global\",\"global\",\"global\",\"global\"]],", ""},
      {R"({"signature":"anything"})", "null"},
      {R"({"signature":"anything"})", " [1.50, -0, 1e3, 18446744073709551616, true, \"\\u00e9\", {}] "},
      {R"({"signature":"anything"})", std::string(30, '[') + std::string(30, ']')},
      {"\"a1b2\"", R"("a\n\u0001")"},  // control characters outside names
  };
  for (const auto& [from, to] : accepted) check_scan(replaced(base, from, to), true);
  // The document reader's depth: 32 levels in all, the graph object one of them.
  check_scan(replaced(base, R"({"signature":"anything"})", std::string(31, '[') + std::string(31, ']')), true);
  check_scan(replaced(base, R"({"signature":"anything"})", std::string(32, '[') + std::string(32, ']')), false);
}

TEST_CASE("the scanner reads every graph JSON of the suite as the document reader does") {
  const std::filesystem::path src = GEXEC_SOURCE_DIR;
  std::vector<std::filesystem::path> files = {src / "examples/mlp/graph.json", src / "examples/digits/graph.json",
                                              src / "tests/cuda/factory_graph.json"};
  for (const char* seed : {"mlp.json", "dtypes.json", "single.json"}) files.push_back(src / "tests/fuzz/corpus/graph" / seed);
  const std::filesystem::path conformance = GEXEC_CONFORMANCE_DIR;
  std::error_code ec;
  if (std::filesystem::is_directory(conformance, ec))
    for (const auto& dir : std::filesystem::directory_iterator(conformance, ec))
      if (std::filesystem::is_regular_file(dir.path() / "graph.json")) files.push_back(dir.path() / "graph.json");
  for (const auto& path : files) {
    CAPTURE(path.string());
    check_scan(read_text(path), true);
  }
  // Seeds with what the scanner leaves to the document reader (a node attribute that is
  // not a string, trailing text).
  for (const char* seed : {"features.json", "f2-trailing-text.json"})
    check_scan(read_text(src / "tests/fuzz/corpus/graph" / seed), false);
  for (int n : {0, 2, 100, 3000}) check_scan(chain_text(n), true);
  check_scan(chain_text(1), true);  // storage ids 0 and 2 of two entries: any non-negative id is one
  check_scan(kScanGraph, true);
}

TEST_CASE("the scanner takes any whitespace and any key order") {
  const json::value doc = json::parse(kScanGraph);
  const std::string compact_text = json::serialize(doc);
  const std::string reversed = json::serialize(reversed_keys(doc));
  for (const std::string& base : {std::string(kScanGraph), compact_text, reversed, chain_text(5)}) {
    check_scan(base, true);
    for (const char* ws : {" ", "\n", "\r\n\t ", "\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t"}) check_scan(spaced(base, ws), true);
  }
  // node_row_ptr, heads and attributes before the nodes.
  check_scan(R"({"node_row_ptr": [0, 1, 2], "heads": [[1, 0]], "attrs": {"shape": ["list_shape", [[1], [1]]],
      "storage_id": ["list_int", [0, 1]], "dltype": ["list_str", ["int32", "int32"]]}, "arg_nodes": [0],
      "nodes": [{"inputs": [], "name": "a", "op": "null"},
                {"inputs": [[0, 0]], "name": "b", "op": "tvm_op", "attrs": {"flatten_data": "7", "num_outputs": "01", "num_inputs": "1", "func_name": "k"}}]})",
             true);
  // The empty graph, empty lists, an empty device_index, a "null" node with attributes.
  check_scan(R"({"nodes": [], "arg_nodes": [], "heads": [], "node_row_ptr": [0],
      "attrs": {"shape": ["list_shape", []], "dltype": ["list_str", []], "storage_id": ["list_int", []]}})", true);
  check_scan(replaced(kScanGraph, R"("device_index": ["list_int", [1, 1, 1, 1, 1, 1]])", R"("device_index": ["list_int", []])"), true);
  check_scan(replaced(kScanGraph, R"("name": "w", "inputs": [])",
                      R"("name": "w", "inputs": [], "attrs": {"func_name": "p", "num_inputs": "3", "num_outputs": "1", "flatten_data": "1", "k": "v"})"),
             true);
  check_scan(replaced(kScanGraph, R"("name": "w", "inputs": [])",
                      R"("name": "w", "inputs": [], "attrs": {"func_name": "", "num_inputs": "0", "num_outputs": "1", "flatten_data": "0"})"),
             true);
  // Large values at the limits the scanner reads itself.
  check_scan(replaced(kScanGraph, "[4, 5, 6]", "[0, 999999999999999999, 0]"), true);
  check_scan(replaced(kScanGraph, "[[2, 1, 0]]", "[[2, 1, 4294967295]]"), true);
  // A dozen kernels and more than 64 of them, interned in first-use order.
  std::string many = chain_text(200);
  for (int i = 199; i >= 0; i -= 3) many = replaced(many, "\"add_one\"}, \"inputs\": [[" + std::to_string(i) + ",",
                                                     "\"k" + std::to_string(i % 70) + "\"}, \"inputs\": [[" + std::to_string(i) + ",");
  check_scan(many, true);
}

TEST_CASE("the scanner leaves what it does not read to the other readers, which read it as before") {
  const std::string base = kScanGraph;
  // Escapes, non-ASCII, control_deps, "metadata" last, storage_scope: the scanner reads them.
  const std::pair<const char*, const char*> read_now[] = {
      {R"("name": "w")", R"("name": "w\u0041")"},                      // an escape
      {R"("name": "w")", "\"name\": \"w\xc3\xa9\""},                   // non-ASCII (UTF-8)
      {R"("hash": "ab")", R"("hash": "a\"b")"},
      {R"("inputs": [[3, 0, 0]]})", R"("inputs": [[3, 0, 0]], "control_deps": [0]})"},
      {R"("node_row_ptr": [0, 1, 2, 4, 5, 6])", R"("node_row_ptr": [0, 1, 2, 4, 5, 6], "metadata": {"a": 1})"},
      {R"("shape": ["list_shape")", R"("storage_scope": ["list_str", ["global", "global", "global", "global", "global", "global"]], "shape": ["list_shape")"},
  };
  for (const auto& [from, to] : read_now) check_scan(replaced(base, from, to), true);
  const std::pair<const char*, const char*> valid[] = {
      {R"("hash": "ab")", R"("hash": 5)"},                            // a node attribute that is not a string
      {R"("node_row_ptr": [0, 1, 2, 4, 5, 6])", R"("metadata": {"a": 1}, "node_row_ptr": [0, 1, 2, 4, 5, 6])"},  // keys after "metadata"
      {R"("shape": ["list_shape")", R"("workspace": ["size_t", 0], "shape": ["list_shape")"},
      {R"("shape": ["list_shape")", R"("func_hash": ["list_int", [1, 2]], "shape": ["list_shape")"},
      {R"("attr": {)", R"("attrs": {"func_name": "k", "num_inputs": "1", "num_outputs": "1", "flatten_data": "0"}, "attr": {)"},  // both
      {"[4, 5, 6]", "[4, 5, 1000000000000000000]"},                    // 19 digits
      {"[4, 5, 6]", "[4, 5, -0]"},
      {R"("num_outputs": "2")", R"("num_outputs": "0000000000000000000002")"},
  };
  for (const auto& [from, to] : valid) check_scan(replaced(base, from, to), false);
  std::string many_attrs = "\"hash\": \"ab\"";
  for (int i = 0; i < 20; ++i) many_attrs += ", \"a" + std::to_string(i) + "\": \"v\"";
  check_scan(replaced(base, R"("hash": "ab")", many_attrs), false);
}

TEST_CASE("the scanner refuses what the document reader or check_graph refuses") {
  const std::string base = kScanGraph;
  const std::pair<const char*, const char*> invalid[] = {
      // check_graph
      {"[[2, 1, 0]]", "[[3, 0, 0]]"},                                  // input from a later node
      {"[[2, 1, 0]]", "[[4, 0, 0]]"},
      {"[[2, 1, 0]]", "[[2, 2, 0]]"},                                  // output index out of range
      {"[[0, 0, 0], [1, 0]]", "[[0, 0, 0], [1, 1]]"},
      {"[0, 1, 2, 4, 5, 6]", "[0, 1, 2, 3, 5, 6]"},                    // node_row_ptr against num_outputs
      {"[0, 1, 2, 4, 5, 6]", "[0, 1, 2, 4, 5]"},
      {"[0, 1, 2, 4, 5, 6]", "[0, 1, 2, 4, 5, 6, 7]"},
      {"[0, 1, 2, 4, 5, 6]", "[1, 1, 2, 4, 5, 6]"},
      {"[0, 1, 2, 4, 5, 6]", "[]"},
      {R"("arg_nodes": [0, 1])", R"("arg_nodes": [0, 2])"},          // not a "null" node
      {R"("arg_nodes": [0, 1])", R"("arg_nodes": [0, 5])"},          // out of range
      {R"("arg_nodes": [0, 1])", R"("arg_nodes": [0, 0])"},          // a name twice
      {R"("name": "w")", R"("name": "x")"},
      {"[[4, 0, 0], [2, 0, 0]]", "[[5, 0, 0]]"},                       // heads
      {"[[4, 0, 0], [2, 0, 0]]", "[[4, 1, 0]]"},
      {R"("float32", "bool"])", R"("float32"])"},                     // attribute lengths
      {R"("float32", "bool"])", R"("float32", "bool", "bool"])"},
      {"[0, 1, 2, 3, 4, 5]", "[0, 1, 2, 3, 4]"},
      {"[1, 1, 1, 1, 1, 1]", "[1, 1, 1, 1, 1]"},
      {"[[2, 3], [3], [],", "[[2, 3], [],"},
      {"[3]", "[-3]"},                                                 // a negative dimension
      {"[3]", "[1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, "
                "1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"},  // 65 dimensions
      {"[4, 5, 6]", "[4611686018427387904, 4]"},                       // a size that overflows
      {R"("int8")", R"("float8")"},                                    // unsupported or unknown dtypes
      {R"("int8")", R"("int3")"},
      {R"("int8")", R"("")"},
      {"[0, 1, 2, 3, 4, 5]", "[0, 1, 2, 3, 4, -1]"},                   // storage ids
      {"[0, 1, 2, 3, 4, 5]", "[0, 1, 2, 3, 4, -1]"},
      {"[0, 1, 2, 3, 4, 5]", "[0, 1, 2, 3, 4, 2147483648]"},
      {"[1, 1, 1, 1, 1, 1]", "[1, 1, 1, 1, 1, 0]"},                    // device types
      {"[1, 1, 1, 1, 1, 1]", "[1, 1, 1, 1, 1, 65]"},
      {R"("name": "w", "inputs": [])", R"("name": "w", "inputs": [[0, 0]])"},  // a "null" node with inputs
      {R"("name": "w", "inputs": [])",
       R"("name": "w", "inputs": [], "attrs": {"func_name": "", "num_inputs": "0", "num_outputs": "2", "flatten_data": "0"})"},
      {R"("name": "g", "attrs": {"func_name": "fused_g", "num_inputs": "1", "num_outputs": "1", "flatten_data": "1"}, )", R"("name": "g", )"},
      {R"("fused_g")", R"("")"},                                       // empty func_name
      {R"("num_inputs": "1", "num_outputs": "1", "flatten_data": "1")", R"("num_inputs": "2", "num_outputs": "1", "flatten_data": "1")"},
      {R"("num_inputs": "1", "num_outputs": "1", "flatten_data": "1")", R"("num_inputs": "1", "num_outputs": "0", "flatten_data": "1")"},
      {R"("func_name": "fused_f", "num_inputs": "2")", R"("func_name": "__copy", "num_inputs": "2")"},
      {R"("op": "tvm_op")", R"("op": "tvm")"},
      {R"("name": "w")", "\"name\": \"w\x7f\""},                         // DEL in a name
      {R"("name": "w")", "\"name\": \"w\x01\""},                         // a raw control character: not JSON
      // the document reader
      {R"("name": "x", "inputs": [])", R"("name": "x", "name": "y", "inputs": [])"},  // repeated keys
      {R"("hash": "ab")", R"("hash": "ab", "hash": "cd")"},
      {R"("hash": "ab")", R"("hash": "ab", "func_name": "cd")"},
      {R"("arg_nodes": [0, 1])", R"("arg_nodes": [0, 1], "arg_nodes": [0, 1])"},
      {R"("storage_id": ["list_int")", R"("dltype": ["list_str", []], "storage_id": ["list_int")"},
      {R"("name": "x", "inputs": [])", R"("name": "x")"},              // missing keys
      {R"(, "flatten_data": "1"})", "}"},
      {R"("heads": [[4, 0, 0], [2, 0, 0]],)", ""},
      {R"("storage_id": ["list_int", [0, 1, 2, 3, 4, 5]],)", ""},
      {R"("op": "null", "name": "w")", R"("op": "nul", "name": "w")"},
      {R"("op": "null", "name": "w")", R"("op": null, "name": "w")"},
      {R"("name": "w")", R"("name": 5)"},
      {"[[2, 1, 0]]", "[[2, 1, 0, 0]]"},                               // entries of the wrong size
      {"[[2, 1, 0]]", "[[2]]"},
      {"[[2, 1, 0]]", "[[2, 1.0, 0]]"},                                // numbers that are not integers
      {"[[2, 1, 0]]", "[[2, 1e0, 0]]"},
      {"[[2, 1, 0]]", "[[2, 01, 0]]"},
      {"[[2, 1, 0]]", "[[2, -1, 0]]"},
      {"[[2, 1, 0]]", "[[2, 1, 4294967296]]"},
      {R"("num_outputs": "2")", R"("num_outputs": "+2")"},
      {R"("num_outputs": "2")", R"("num_outputs": "2 ")"},
      {R"("num_outputs": "2")", R"("num_outputs": "4294967298")"},
      {R"("num_outputs": "2")", R"("num_outputs": 2)"},
      {R"(["list_str")", R"(["list_int")"},                            // type tags
      {R"(["list_shape")", R"(["list_int")"},
      {R"(["list_int", [1, 1)", R"(["list_str", [1, 1)"},
      {R"("attrs": {"dltype")", R"("attrs": {"layout": ["list_str", []], "dltype")"},
      {"[[4, 0, 0], [2, 0, 0]]", "[[4, 0, 0], [2, 0, 0],]"},           // not JSON
      {"[0, 1, 2, 4, 5, 6]}", "[0, 1, 2, 4, 5, 6]} x"},
      {"[0, 1, 2, 4, 5, 6]}", "[0, 1, 2, 4, 5, 6]"},
      {"[0, 1, 2, 4, 5, 6]}", "[0, 1, 2, 4, 5, 6]}}"},
      {R"("x", "inputs")", R"("x" "inputs")"},
  };
  for (const auto& [from, to] : invalid) {
    check_scan(replaced(base, from, to), false);
    CHECK_FALSE(read_reference(replaced(base, from, to)).ok);
  }
  // Storage ids past the entry count are valid, as in TVM; one storage on one device.
  for (const char* ids : {"[0, 1, 2, 3, 4, 6]", "[0, 1, 2, 3, 4, 2000000000]", "[7, 1, 2, 3, 4, 7]"}) {
    check_scan(replaced(base, "[0, 1, 2, 3, 4, 5]", ids), true);
    check_scan(replaced(replaced(base, "[0, 1, 2, 3, 4, 5]", ids), "[1, 1, 1, 1, 1, 1]", "[2, 1, 1, 1, 1, 2]"), true);
  }
  check_scan(replaced(replaced(base, "[0, 1, 2, 3, 4, 5]", "[7, 1, 2, 3, 4, 7]"), "[1, 1, 1, 1, 1, 1]", "[2, 1, 1, 1, 1, 1]"), false);
  CHECK_FALSE(read_reference(replaced(replaced(base, "[0, 1, 2, 3, 4, 5]", "[7, 1, 2, 3, 4, 7]"), "[1, 1, 1, 1, 1, 1]", "[2, 1, 1, 1, 1, 1]")).ok);
  // One storage on two devices.
  const std::string shared = replaced(base, "[0, 1, 2, 3, 4, 5]", "[0, 1, 2, 2, 4, 5]");
  check_scan(shared, true);
  check_scan(replaced(shared, "[1, 1, 1, 1, 1, 1]", "[1, 1, 1, 2, 1, 1]"), false);
  CHECK_FALSE(read_reference(replaced(shared, "[1, 1, 1, 1, 1, 1]", "[1, 1, 1, 2, 1, 1]")).ok);
  // Cut short anywhere.
  for (std::size_t len = 0; len < base.size(); len += 7) check_scan(base.substr(0, len), false);
}

TEST_CASE("kernel names made to collide in the scanner's table go to the other readers, which read them as well") {
  // 40-byte names equal in the bytes the scanner hashes (the first, middle and last eight)
  // and different in between: every name lands in one probe sequence.
  constexpr int n = 3000;
  std::string text = chain_text(n);
  for (int i = 0; i < n; ++i) {
    char middle[9];
    std::snprintf(middle, sizeof middle, "%08d", i);
    const std::string name = std::string("kernel__") + middle + "__same__" + middle + "_suffix_";  // 40 bytes, [16, 24) fixed
    REQUIRE(name.size() == 40);
    const auto at = text.find("\"func_name\": \"add_one\"");
    REQUIRE(at != std::string::npos);
    text.replace(at, 22, "\"func_name\": \"" + name + "\"");
  }
  gexec::compact_graph scanned;
  CHECK_FALSE(gexec::detail::scan_graph(text, scanned));
  const gexec::validated_graph g = gexec::parse_graph(text);
  CHECK(g.compact().funcs.size() == n);
  CHECK(g.compact().func_name(n) == "kernel__00002999__same__00002999_suffix_");
}

TEST_CASE("num_outputs that the text cannot back reserve nothing: a small graph claiming 4,294,967,295 outputs is an invalid_graph error") {
  // Every reader gets this text (the scanner gives up on it): none may reserve memory for
  // the entries the node claims before the graph is checked.
  const std::string text = R"({"nodes": [{"op": "null", "name": "x", "inputs": []},
    {"op": "tvm_op", "name": "f", "attrs": {"func_name": "f", "num_inputs": "1", "num_outputs": "4294967295", "flatten_data": "0"},
     "inputs": [[0, 0, 0]]}],
    "arg_nodes": [0], "heads": [[1, 0, 0]], "node_row_ptr": [0, 1, 2],
    "attrs": {"shape": ["list_shape", [[1], [1]]], "dltype": ["list_str", ["float32", "float32"]], "storage_id": ["list_int", [0, 1]]}})";
  for (const std::string& t : {text, std::string(text).replace(text.find("\"storage_id\""), 0, "\"device_index\": [\"list_int\", [1, 1]], ")}) {
    auto e = test::error_of([&] { (void)gexec::parse_graph(t); });
    CHECK(e.code() == gexec::errc::invalid_graph);
    CHECK(test::contains(e, "node_row_ptr"));
    gexec::compact_graph c;  // the scanner alone (it gives up): it reserved no more than the text
    CHECK_FALSE(gexec::detail::scan_graph(t, c));
    CHECK(c.shape_ptr.capacity() <= t.size());
    CHECK(c.storage_id.capacity() <= t.size());
  }
}

TEST_CASE("the Boost-free metadata reader writes what the document reader writes, or refuses") {
  // {value, whether the Boost-free reader writes it alike}
  const std::pair<std::string, bool> values[] = {
      {R"({"signature": "anything"})", true},
      {R"( { "a" : [1, -2, 0, true, false, null, {}, []], "b": {"c": "d"} }  )", true},
      {R"(["q\"b\\s\/\b\f\n\r\t\u00e9\u20AC\ud83d\ude00\u0000\u001f\u007f", "\u0001"])", true},
      {"[\"d\xc3\xa9nse\xe2\x82\xac\xf0\x9f\x98\x80\x7f\"]", true},
      {R"({"\u0061": 1, "b\n": 2})", true},
      {"-0", true},
      {"[9223372036854775807, -9223372036854775808, 9223372036854775808, 18446744073709551615]", true},
      {"\"\"", true},
      {"\t\r\n 7 \t\r\n", true},
      {"1.5", false},  // Boost.JSON keeps doubles, which this reader does not write
      {"[1e3]", false},
      {"-0.0", false},
      {"18446744073709551616", false},
      {"-9223372036854775809", false},
      {std::string(31, '[') + std::string(31, ']'), true},  // 31 levels, the graph object the 32nd
      {std::string(32, '[') + std::string(32, ']'), false},
      {R"({"a": 1, "a": 2})", false},
      {R"({"a": 1, "\u0061": 2})", false},
      {R"([{"x": {"y": 1, "y": 1}}])", false},
      {R"({"a": 1, "b": {"a": 2}})", true},  // the same key in two objects
      {"[1, 2", false},
      {"[1, 2,]", false},
      {R"({"a" 1})", false},
      {R"({"a": })", false},
      {R"("a\x")", false},
      {R"("a\ud83d")", false},
      {"\"a\xc0\xaf\"", false},
      {"\"a\x01\"", false},
      {"\"abc", false},
      {"tru", false},
      {"nul", false},
      {"01", true},  // the value 0; the scanner refuses what follows it
      {"-", false},
      {"+1", false},
      {".5", false},
      {"1.", false},
      {"1e", false},
      {"", false},
      {"   ", false},
  };
  for (const auto& value : values) {
    const std::string& text = value.first;
    const bool alike = value.second;
    CAPTURE(text);
    std::string boost_out, plain_out;
    std::size_t boost_used = 0, plain_used = 0;
    const bool boost_ok = gexec::detail::read_metadata_value(text, boost_out, boost_used);
    const bool plain_ok = gexec::detail::read_metadata_plain(text, plain_out, plain_used);
    CHECK(plain_ok == alike);
    if (plain_ok) {
      REQUIRE(boost_ok);
      CHECK(plain_out == boost_out);
      CHECK(plain_used == boost_used);
    }
    if (!boost_ok) CHECK_FALSE(plain_ok);
  }
}

TEST_CASE("the Boost-free graph reader refuses malformed text with a gexec::error naming the byte") {
  const std::string base = kScanGraph;
  const auto refused = [](const std::string& text) {
    CAPTURE(text);
    gexec::error e = test::error_of([&] { (void)gexec::detail::parse_graph_scanned(text); });
    CHECK(test::contains(e, "byte "));
    CHECK(test::contains(e, "(line "));
    return e;
  };
  // Every truncation of a graph: not JSON.
  for (std::size_t n = 0; n < base.size(); ++n) {
    const gexec::error e = refused(base.substr(0, n));
    CHECK(e.code() == gexec::errc::invalid_json);
  }
  // Bad escapes and UTF-8 in strings: not JSON, at the string.
  for (const char* bad : {R"("a\x")", R"("a\u00g0")", R"("a\ud83d")", R"("a\ude00")", "\"a\xc0\xaf\"", "\"a\x01\""}) {
    const std::string text = replaced(base, "\"ab\"", bad);
    const gexec::error e = refused(text);
    CHECK(e.code() == gexec::errc::invalid_json);
    CHECK(test::contains(e, "byte " + std::to_string(text.find("\"hash\": ") + 8)));
  }
  // Nesting deeper than the document reader's parser takes, in metadata and elsewhere.
  for (const std::string& deep : {replaced(base, "\"ab\"", std::string(40, '[') + std::string(40, ']')),
                                  std::string(100000, '[') + std::string(100000, ']')}) {
    const gexec::error e = refused(deep);
    CHECK(e.code() == gexec::errc::invalid_json);
    CHECK(test::contains(e, "too deep"));
  }
  // A key repeated: invalid_graph, as parse_graph says, naming the key.
  for (const auto& [from, to] : std::initializer_list<std::pair<const char*, const char*>>{
           {R"("arg_nodes":)", R"("heads": [], "arg_nodes":)"},
           {R"("name": "w")", R"("name": "w", "name": "w")"},
           {R"("hash": "ab")", R"("hash": "ab", "h\u0061sh": "ab")"}}) {
    const gexec::error e = refused(replaced(base, from, to));
    CHECK(e.code() == gexec::errc::invalid_graph);
    CHECK(test::contains(e, "duplicate key"));
  }
  // JSON the scanner gives up on: invalid_graph, with where it stopped and what is there.
  {
    const std::string text = replaced(base, R"("hash": "ab")", R"("hash": 1.5)");
    const gexec::error e = refused(text);
    CHECK(e.code() == gexec::errc::invalid_graph);
    CHECK(test::contains(e, "1.5"));
    CHECK(gexec::parse_graph(text).compact().num_nodes() == 5);  // the document reader reads it
  }
  {
    const gexec::error e = refused(base + " x");
    CHECK(e.code() == gexec::errc::invalid_json);
    CHECK(test::contains(e, "text after the value"));
  }
  // What check_graph refuses, the scanner refuses too: invalid_graph at the byte.
  CHECK(refused(replaced(base, "[[4, 0, 0], [2, 0, 0]]", "[[5, 0, 0]]")).code() == gexec::errc::invalid_graph);
}
