// The layers of include/gexec, enforced: every header may include headers of its own
// layer or lower ones, never higher. The table below is the one place the order is
// written down (docs/ARCHITECTURE.md explains it). A second check keeps the CUDA wing
// out of the umbrella header: nothing <gexec/executor.hpp> includes, directly or not,
// lies in cuda/ or includes a CUDA header.
//
//   layering INCLUDE_DIR                          checks the tree
//   layering INCLUDE_DIR --plant FILE INCLUDE     the same, as if FILE also included INCLUDE
//                                                 (shows that an upward include fails)

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

struct layer {
  const char* name;
  std::vector<const char*> members;  ///< files ("x.hpp") and folders ("x/")
};

// Lowest first.
const std::vector<layer> layers = {
    {"ground: facts and the error type", {"config.hpp", "error.hpp", "device.hpp", "dtype.hpp", "tvm_abi.hpp", "tvm_ffi_abi.hpp", "load_progress.hpp", "fwd.hpp"}},
    {"ground-floor tools", {"detail/"}},
    {"tensors, their files, the packed calling convention", {"ndarray.hpp", "safetensors.hpp", "safetensors_impl.hpp", "params.hpp", "params/", "npy.hpp", "npz.hpp", "packed_function.hpp"}},
    {"graphs: the schema, its readers and its checks", {"graph/", "graph.hpp"}},
    {"devices and their memory", {"backends/", "allocators/"}},
    {"the runtime: what TVM kept in process globals", {"runtime/", "runtime.hpp", "function_registry.hpp"}},
    {"kernels: how a func_name becomes a callable", {"binding/", "packed_c/", "tvm_ffi/"}},
    {"the plan: storage and steps as indices", {"planners/", "plan.hpp"}},
    {"one executor's machinery", {"executor/"}},
    {"running: policies, observers, the model and the TVM API", {"execution/", "observers/", "model.hpp", "graph_executor.hpp", "benchmark.hpp", "benchmark_impl.hpp", "load.hpp", "load_impl.hpp"}},
    {"opt-in wings and umbrellas", {"debug/", "contrib/", "cuda/", "debug.hpp", "cuda.hpp", "executor.hpp", "instantiations.hpp", "all_backends.hpp"}},
};

int layer_of(const std::string& rel) {
  for (std::size_t i = 0; i < layers.size(); ++i)
    for (const char* m : layers[i].members) {
      const std::string member = m;
      if (member.back() == '/' ? rel.rfind(member, 0) == 0 : rel == member) return static_cast<int>(i);
    }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && argc != 5) {
    std::fprintf(stderr, "usage: layering INCLUDE_DIR [--plant FILE INCLUDE]\n");
    return 2;
  }
  const fs::path root = fs::path(argv[1]) / "gexec";
  std::map<std::string, std::vector<std::string>> includes;  // file -> its includes, relative to root
  const std::regex quoted(R"re(^\s*#\s*include\s*"([^"]+)")re"), angled(R"re(^\s*#\s*include\s*<([^>]+)>)re");
  std::map<std::string, std::vector<std::string>> system_includes;
  int failures = 0;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (!entry.is_regular_file() || entry.path().extension() != ".hpp") continue;
    const std::string rel = entry.path().lexically_relative(root).generic_string();
    auto& list = includes[rel];
    std::ifstream in(entry.path());
    std::string line;
    std::smatch m;
    while (std::getline(in, line)) {
      if (std::regex_search(line, m, quoted)) {
        const fs::path target = (entry.path().parent_path() / m[1].str()).lexically_normal();
        list.push_back(target.lexically_relative(root).generic_string());
      } else if (std::regex_search(line, m, angled)) {
        const std::string header = m[1].str();
        if (header.rfind("gexec/", 0) == 0) list.push_back(header.substr(6));
        else system_includes[rel].push_back(header);
      }
    }
  }
  if (argc == 5) includes[argv[3]].push_back(argv[4]);

  for (const auto& [file, list] : includes) {
    const int from = layer_of(file);
    if (from < 0) {
      std::printf("FAIL %s: in no layer (add it to the table in tests/layering/layering.cpp)\n", file.c_str());
      ++failures;
      continue;
    }
    for (const std::string& target : list) {
      if (target.rfind("..", 0) == 0) {
        std::printf("FAIL %s includes \"%s\", outside include/gexec\n", file.c_str(), target.c_str());
        ++failures;
        continue;
      }
      const int to = layer_of(target);
      if (to > from) {
        std::printf("FAIL %s (layer %d, %s) includes %s (layer %d, %s): a lower layer may not include a higher one\n", file.c_str(), from,
                    layers[static_cast<std::size_t>(from)].name, target.c_str(), to, to < 0 ? "none" : layers[static_cast<std::size_t>(to)].name);
        ++failures;
      }
    }
  }

  // The umbrella header stays free of CUDA.
  std::set<std::string> seen;
  std::vector<std::string> stack{"executor.hpp"};
  while (!stack.empty()) {
    const std::string f = stack.back();
    stack.pop_back();
    if (!seen.insert(f).second) continue;
    if (f.rfind("cuda/", 0) == 0 || f == "cuda.hpp") {
      std::printf("FAIL <gexec/executor.hpp> includes %s: CUDA is opt-in (<gexec/cuda.hpp>)\n", f.c_str());
      ++failures;
    }
    for (const std::string& s : system_includes[f])
      if (s.rfind("cuda", 0) == 0) {
        std::printf("FAIL <gexec/executor.hpp> includes <%s> through %s: CUDA is opt-in (<gexec/cuda.hpp>)\n", s.c_str(), f.c_str());
        ++failures;
      }
    for (const std::string& t : includes[f]) stack.push_back(t);
  }

  std::printf("layering: %zu headers in %zu layers, %zu reached from <gexec/executor.hpp>: %d violation%s\n", includes.size(), layers.size(),
              seen.size(), failures, failures == 1 ? "" : "s");
  return failures == 0 ? 0 : 1;
}
