#include <gexec/graph_builder.hpp>
#include <gexec/params.hpp>

#include <iostream>

int main() {
  gexec::graph_builder b;
  auto x = b.input("x", {2});
  b.output(b.op("add_one", "add_one", {x}, {{{2}}}));
  gexec::graph g = gexec::parse_graph(gexec::to_json(b.build()));
  gexec::param_dict d;
  d.set("x", gexec::ndarray::from_values<float>({2}, {1.0f, 2.0f}));
  auto back = gexec::load_param_dict(gexec::save_param_dict(d));
  std::cout << "consumer ok: " << g.nodes.size() << " nodes, x[1] = " << back.at("x").values<float>()[1] << '\n';
  return g.nodes.size() == 2 && back.at("x").values<float>()[1] == 2.0f ? 0 : 1;
}
