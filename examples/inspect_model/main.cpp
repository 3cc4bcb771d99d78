// Loads a TVM graph and its parameter blob and prints what gexec read: inputs,
// parameters, kernels, outputs and the storage the graph asks for.
//
//   gexec_inspect --graph examples/mlp/graph.json --params examples/mlp/params.bin

#include <gexec/graph.hpp>
#include <gexec/params.hpp>

#include <CLI/CLI.hpp>

#include <iostream>
#include <map>

int main(int argc, char** argv) {
  CLI::App app{"Print what a TVM graph and its parameters contain"};
  std::string graph_path, params_path;
  bool mmap = false;
  app.add_option("-g,--graph", graph_path, "graph JSON file")->required()->check(CLI::ExistingFile);
  app.add_option("-p,--params", params_path, "parameter blob (tvm.runtime.save_param_dict)")->check(CLI::ExistingFile);
  app.add_flag("--mmap", mmap, "map the parameter file instead of copying it");
  CLI11_PARSE(app, argc, argv);

  try {
    gexec::graph g = gexec::load_graph_file(graph_path);
    gexec::param_dict params;
    if (!params_path.empty())
      params = gexec::load_param_dict_file(params_path, mmap ? gexec::load_mode::mmap : gexec::load_mode::copy);

    auto describe = [&](std::uint32_t eid) {
      return gexec::to_string(g.attrs.dltype[eid]) + gexec::detail::shape_to_string(g.attrs.shape[eid]);
    };
    std::cout << "graph: " << g.nodes.size() << " nodes, " << g.num_entries() << " entries\n";
    for (std::uint32_t nid : g.arg_nodes) {
      const auto& n = g.nodes[nid];
      const bool is_param = params.contains(n.name);
      std::cout << (is_param ? "  param  " : "  input  ") << n.name << ": " << describe(g.entry_id(nid, 0)) << '\n';
    }
    for (std::size_t nid = 0; nid < g.nodes.size(); ++nid) {
      const auto& n = g.nodes[nid];
      if (!n.is_op()) continue;
      std::cout << "  op     " << n.name << " = " << n.func_name << "(";
      for (std::size_t i = 0; i < n.inputs.size(); ++i) std::cout << (i ? ", " : "") << g.nodes[n.inputs[i].node_id].name;
      std::cout << ") -> " << describe(g.entry_id(static_cast<std::uint32_t>(nid), 0)) << '\n';
    }
    for (std::size_t i = 0; i < g.heads.size(); ++i)
      std::cout << "  output " << i << ": " << g.nodes[g.heads[i].node_id].name << " " << describe(g.entry_id(g.heads[i])) << '\n';

    // Storage as compiled: one buffer per storage id, as large as its largest entry.
    std::map<std::int32_t, std::uint64_t> storage;
    for (std::size_t e = 0; e < g.num_entries(); ++e) {
      auto bytes = *gexec::detail::checked_byte_size(g.attrs.shape[e], g.attrs.dltype[e]);
      auto& s = storage[g.attrs.storage_id[e]];
      s = std::max(s, bytes);
    }
    std::uint64_t total = 0;
    for (auto& [sid, bytes] : storage) total += bytes;
    std::cout << "storage: " << storage.size() << " buffers, " << total << " bytes\n";

    std::uint64_t param_bytes = 0;
    for (const auto& [name, a] : params) param_bytes += a.byte_size();
    std::cout << "params: " << params.size() << " tensors, " << param_bytes << " bytes\n";
  } catch (const gexec::error& e) {
    std::cerr << e.what() << '\n';
    return 1;
  }
}
