#include <gexec/graph.hpp>

#include <doctest/doctest.h>

TEST_CASE("the builder fills row pointers, storage ids, arg nodes and heads") {
  gexec::graph_builder b;
  auto x = b.input("x", {2, 3});
  auto w = b.input("w", {3, 3});
  auto y = b.op("dense", "fused_dense", {x, w}, {{{2, 3}}});
  auto r = b.nop("reshape", y, {6});
  auto parts = b.op("split", "fused_split", {r}, {{{3}}, {{3}, gexec::dtypes::int32}}, {.flatten_data = true, .attrs = {{"axis", "0"}}});
  b.output(parts[0]);
  b.output(parts[1]);
  gexec::graph g = b.build();

  REQUIRE(g.nodes.size() == 5);
  CHECK(g.arg_nodes == std::vector<std::uint32_t>{0, 1});
  CHECK(g.node_row_ptr == std::vector<std::uint32_t>{0, 1, 2, 3, 4, 6});
  CHECK(g.heads == std::vector<gexec::node_entry>{{4, 0, 0}, {4, 1, 0}});
  CHECK(g.nodes[2].inputs == std::vector<gexec::node_entry>{{0, 0, 0}, {1, 0, 0}});
  CHECK(g.nodes[3].func_name == "__nop");
  // The reshape aliases its input's storage; everything else has its own.
  CHECK(g.attrs.storage_id == std::vector<std::int32_t>{0, 1, 2, 2, 4, 5});
  CHECK(g.attrs.shape[3] == std::vector<std::int64_t>{6});
  CHECK(gexec::same_dtype(g.attrs.dltype[5], gexec::dtypes::int32));
  CHECK(g.nodes[4].flatten_data);
  CHECK(g.nodes[4].extra_attrs == std::vector<std::pair<std::string, std::string>>{{"axis", "0"}});
  CHECK(g.attrs.device_index.empty());

  // What the builder makes is what parse_graph reads back.
  gexec::graph back = gexec::parse_graph(gexec::to_json(g));
  CHECK(back.attrs.storage_id == g.attrs.storage_id);
  CHECK(back.node_row_ptr == g.node_row_ptr);
  CHECK(back.nodes[4].extra_attrs == g.nodes[4].extra_attrs);
}

TEST_CASE("device placement produces device_index, and __copy moves between devices") {
  gexec::graph_builder b;
  auto x = b.input("x", {4});
  auto on_gpu = b.copy("to_gpu", x, kDLCUDA);
  auto y = b.op("relu", "fused_relu", {on_gpu}, {{{4}, gexec::dtypes::float32, kDLCUDA}});
  b.output(b.copy("to_cpu", y, kDLCPU));
  gexec::graph g = b.build();
  CHECK(g.attrs.device_index == std::vector<std::int32_t>{kDLCPU, kDLCUDA, kDLCUDA, kDLCPU});
  CHECK(g.nodes[1].func_name == "__copy");
}

TEST_CASE("a graph with no nodes is valid and empty") {
  gexec::graph g = gexec::graph_builder().build();
  CHECK(g.nodes.empty());
  CHECK(g.num_entries() == 0);
  CHECK(gexec::parse_graph(gexec::to_json(g))->nodes.empty());
}

TEST_CASE("the builder rejects references to outputs that do not exist") {
  gexec::graph_builder b;
  auto x = b.input("x", {1});
  CHECK_THROWS_AS(b.nop("r", gexec::node_entry{x.node_id, 1, 0}, {1}), gexec::error);
  CHECK_THROWS_AS(b.copy("c", gexec::node_entry{5, 0, 0}, kDLCPU), gexec::error);
  // Invalid graphs fail in build() with the same checks as parse_graph.
  b.op("bad", "k", {gexec::node_entry{x.node_id, 3, 0}}, {{{1}}});
  try {
    (void)b.build();
    FAIL("no error");
  } catch (const gexec::error& e) {
    CHECK(e.code() == gexec::errc::invalid_graph);
    CHECK(std::string(e.what()).find("nodes[1].inputs[0]") != std::string::npos);
  }
}
