// The layers of include/gexec, enforced. Four checks:
//  - every header includes headers of its own layer or lower ones, never higher. The
//    table below is the one place the order is written down (docs/ARCHITECTURE.md
//    explains it);
//  - inside one layer, the folders (and the headers at the top, a header and its
//    _impl.hpp counted as one) do not include each other in a cycle: a cycle is named
//    with the include lines that make it;
//  - a wing's names stay in its wing: no header outside cuda/ and cuda.hpp names a
//    cuda_ identifier or includes the wing, but for the one registration point
//    (all_backends.hpp);
//  - nothing <gexec/executor.hpp> includes, directly or not, lies in cuda/ or includes
//    a CUDA header.
//
//   layering INCLUDE_DIR                          checks the tree
//   layering INCLUDE_DIR --plant FILE INCLUDE     the same, as if FILE also included INCLUDE
//                                                 (include/gexec/INCLUDE)
//   layering INCLUDE_DIR --plant-line FILE TEXT   the same, as if FILE also held the line TEXT
//
// The options may be repeated; tests/CMakeLists.txt plants violations of each kind and
// expects them named.

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace fs = std::filesystem;

namespace {

struct layer {
  const char* name;
  std::vector<const char*> members;  ///< files ("x.hpp") and folders ("x/")
};

// Lowest first.
const std::vector<layer> layers = {
    {"ground: facts and the error type", {"config.hpp", "error.hpp", "device.hpp", "dtype.hpp", "tvm_abi.hpp", "tvm_ffi_abi.hpp", "load_progress.hpp", "fwd.hpp", "file_path.hpp"}},
    {"ground-floor tools", {"detail/"}},
    {"tensors, their files, the packed calling convention", {"ndarray.hpp", "safetensors.hpp", "safetensors_impl.hpp", "params.hpp", "params/", "npy.hpp", "npz.hpp", "packed_function.hpp"}},
    {"graphs: the schema, its readers and its checks", {"graph/", "graph.hpp"}},
    {"devices and their memory", {"backends/", "allocators/"}},
    {"the runtime: what TVM kept in process globals", {"runtime/", "runtime.hpp", "function_registry.hpp"}},
    {"kernels: how a func_name becomes a callable", {"binding/", "packed_c/", "tvm_ffi/", "library/"}},
    {"the plan: storage and steps as indices", {"planners/", "plan.hpp"}},
    {"one executor's machinery", {"executor/"}},
    {"running: policies, observers, the model and the TVM API", {"execution/", "observers/", "model.hpp", "graph_executor.hpp", "benchmark.hpp", "benchmark_impl.hpp", "load.hpp", "load_impl.hpp", "relax/", "relax.hpp", "static_model.hpp"}},
    {"opt-in wings and umbrellas", {"debug/", "contrib/", "cuda/", "debug.hpp", "cuda.hpp", "executor.hpp", "instantiations.hpp", "all_backends.hpp"}},
};

/// A device wing: its folder and header, and the prefix of the names it declares.
struct wing {
  const char* name;
  const char* folder;
  const char* header;
  const char* prefix;
};
const std::vector<wing> wings = {{"CUDA", "cuda/", "cuda.hpp", "cuda_"}};
/// Where the wings are registered, so that every program gets every device.
const std::set<std::string> registration_points = {"all_backends.hpp"};

int layer_of(const std::string& rel) {
  for (std::size_t i = 0; i < layers.size(); ++i)
    for (const char* m : layers[i].members) {
      const std::string member = m;
      if (member.back() == '/' ? rel.rfind(member, 0) == 0 : rel == member) return static_cast<int>(i);
    }
  return -1;
}

/// What a cycle inside a layer is made of: a folder ("packed_c/"), or a header at the
/// top with its _impl.hpp ("load.hpp" for load.hpp and load_impl.hpp: the one seam of
/// compiled mode, where the header includes its definitions).
std::string unit_of(const std::string& rel) {
  if (const auto slash = rel.find('/'); slash != std::string::npos) return rel.substr(0, slash + 1);
  const std::string impl = "_impl.hpp";
  if (rel.size() > impl.size() && rel.compare(rel.size() - impl.size(), impl.size(), impl) == 0)
    return rel.substr(0, rel.size() - impl.size()) + ".hpp";
  return rel;
}

struct include_line {
  std::string target;  ///< relative to include/gexec
  int line;
  std::string text;
};

struct header {
  std::vector<std::string> lines;
  std::vector<include_line> includes;     ///< of gexec headers
  std::vector<std::string> system_includes;
};

/// `lines` with comments and the contents of string and character literals blanked,
/// so that only code is searched for names.
std::vector<std::string> code_only(const std::vector<std::string>& lines) {
  std::vector<std::string> out;
  bool block_comment = false;
  std::string raw_end;  // ")delim\"" while inside a raw string
  for (const std::string& line : lines) {
    std::string code(line.size(), ' ');
    for (std::size_t i = 0; i < line.size(); ++i) {
      if (block_comment) {
        if (line.compare(i, 2, "*/") == 0) block_comment = false, ++i;
        continue;
      }
      if (!raw_end.empty()) {
        if (line.compare(i, raw_end.size(), raw_end) == 0) i += raw_end.size() - 1, raw_end.clear();
        continue;
      }
      const char c = line[i];
      if (line.compare(i, 2, "//") == 0) break;
      if (line.compare(i, 2, "/*") == 0) {
        block_comment = true;
        ++i;
        continue;
      }
      if (c == 'R' && i + 1 < line.size() && line[i + 1] == '"' && (i == 0 || !(std::isalnum(static_cast<unsigned char>(line[i - 1])) || line[i - 1] == '_'))) {
        const auto open = line.find('(', i + 2);
        if (open != std::string::npos) {
          raw_end.assign(1, ')').append(line, i + 2, open - i - 2).push_back('"');
          i = open;
          continue;
        }
      }
      const bool digit_separator = c == '\'' && i > 0 && std::isxdigit(static_cast<unsigned char>(line[i - 1]));
      if ((c == '"' || c == '\'') && !digit_separator) {
        std::size_t j = i + 1;
        while (j < line.size() && line[j] != c) j += line[j] == '\\' ? 2 : 1;
        i = j;
        continue;
      }
      code[i] = c;
    }
    out.push_back(std::move(code));
  }
  return out;
}

/// Within each layer, the includes between units (unit -> unit -> the include lines).
using unit_graph = std::map<std::string, std::map<std::string, std::vector<std::string>>>;

/// The strongly connected sets of `g` with more than one unit (Tarjan's algorithm).
std::vector<std::vector<std::string>> cycles_of(const std::set<std::string>& units, const unit_graph& g) {
  std::map<std::string, int> index, low;
  std::set<std::string> on_stack;
  std::vector<std::string> stack;
  std::vector<std::vector<std::string>> found;
  int next = 0;
  std::function<void(const std::string&)> visit = [&](const std::string& u) {
    index[u] = low[u] = next++;
    stack.push_back(u);
    on_stack.insert(u);
    if (auto it = g.find(u); it != g.end())
      for (const auto& [v, lines] : it->second) {
        if (!index.contains(v)) {
          visit(v);
          low[u] = std::min(low[u], low[v]);
        } else if (on_stack.contains(v)) {
          low[u] = std::min(low[u], index[v]);
        }
      }
    if (low[u] != index[u]) return;
    std::vector<std::string> set;
    std::string v;
    do {
      v = stack.back();
      stack.pop_back();
      on_stack.erase(v);
      set.push_back(v);
    } while (v != u);
    if (set.size() > 1) {
      std::sort(set.begin(), set.end());
      found.push_back(std::move(set));
    }
  };
  for (const std::string& u : units)
    if (!index.contains(u)) visit(u);
  return found;
}

/// A shortest cycle through `from` inside `set`: from, ..., from.
std::vector<std::string> one_cycle(const std::string& from, const std::vector<std::string>& set, const unit_graph& g) {
  std::map<std::string, std::string> parent;
  std::vector<std::string> queue{from};
  for (std::size_t q = 0; q < queue.size(); ++q) {
    const std::string u = queue[q];
    auto it = g.find(u);
    if (it == g.end()) continue;
    for (const auto& [v, lines] : it->second) {
      if (std::find(set.begin(), set.end(), v) == set.end()) continue;
      if (v == from) {
        std::vector<std::string> path{from};
        for (std::string w = u; w != from; w = parent[w]) path.push_back(w);
        path.push_back(from);
        std::reverse(path.begin(), path.end());
        return path;
      }
      if (!parent.contains(v)) {
        parent[v] = u;
        queue.push_back(v);
      }
    }
  }
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::pair<std::string, std::string>> planted;  // file, line
  bool usage = argc < 2;
  for (int i = 2; i < argc && !usage; i += 3) {
    if (i + 2 >= argc) usage = true;
    else if (std::strcmp(argv[i], "--plant") == 0) planted.emplace_back(argv[i + 1], std::string("#include <gexec/") + argv[i + 2] + ">");
    else if (std::strcmp(argv[i], "--plant-line") == 0) planted.emplace_back(argv[i + 1], argv[i + 2]);
    else usage = true;
  }
  if (usage) {
    std::fprintf(stderr, "usage: layering INCLUDE_DIR [--plant FILE INCLUDE | --plant-line FILE TEXT]...\n");
    return 2;
  }
  const fs::path root = fs::path(argv[1]) / "gexec";
  std::map<std::string, header> headers;  // by path relative to root
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (!entry.is_regular_file() || entry.path().extension() != ".hpp") continue;
    std::ifstream in(entry.path());
    header& h = headers[entry.path().lexically_relative(root).generic_string()];
    for (std::string line; std::getline(in, line);) h.lines.push_back(line);
  }
  for (const auto& [file, line] : planted) headers[file].lines.push_back(line);

  const std::regex quoted(R"re(^\s*#\s*include\s*"([^"]+)")re"), angled(R"re(^\s*#\s*include\s*<([^>]+)>)re");
  for (auto& [rel, h] : headers) {
    const fs::path dir = (root / rel).parent_path();
    for (std::size_t i = 0; i < h.lines.size(); ++i) {
      std::smatch m;
      const std::string& line = h.lines[i];
      const int number = static_cast<int>(i) + 1;
      if (std::regex_search(line, m, quoted)) {
        const fs::path target = (dir / m[1].str()).lexically_normal();
        h.includes.push_back({target.lexically_relative(root).generic_string(), number, line});
      } else if (std::regex_search(line, m, angled)) {
        const std::string name = m[1].str();
        if (name.rfind("gexec/", 0) == 0) h.includes.push_back({name.substr(6), number, line});
        else h.system_includes.push_back(name);
      }
    }
  }

  int failures = 0;
  unit_graph units_within;                  // inside one layer
  std::map<int, std::set<std::string>> units_by_layer;
  for (const auto& [file, h] : headers) {
    const int from = layer_of(file);
    if (from < 0) {
      std::printf("FAIL %s: in no layer (add it to the table in tests/layering/layering.cpp)\n", file.c_str());
      ++failures;
      continue;
    }
    units_by_layer[from].insert(unit_of(file));
    for (const include_line& inc : h.includes) {
      const std::string& target = inc.target;
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
      } else if (to == from && unit_of(target) != unit_of(file)) {
        units_within[unit_of(file)][unit_of(target)].push_back(file + ":" + std::to_string(inc.line) + ": " + inc.text);
      }
    }
  }

  // No cycle between the folders of one layer: one of them must come first.
  for (const auto& [l, units] : units_by_layer)
    for (const std::vector<std::string>& set : cycles_of(units, units_within)) {
      const std::vector<std::string> cycle = one_cycle(set.front(), set, units_within);
      std::string path, members;
      for (std::size_t i = 0; i < cycle.size(); ++i) path += (i ? " -> " : "") + cycle[i];
      for (std::size_t i = 0; i < set.size(); ++i) members += (i ? ", " : "") + set[i];
      std::printf("FAIL include cycle in layer %d (%s): %s (the folders of one layer include each other one way only: what they "
                  "share goes to a folder they all include)%s\n",
                  l, layers[static_cast<std::size_t>(l)].name, path.c_str(),
                  set.size() + 1 > cycle.size() ? ("; the folders that reach each other: " + members).c_str() : "");
      for (std::size_t i = 0; i + 1 < cycle.size(); ++i)
        for (const std::string& where : units_within[cycle[i]][cycle[i + 1]])
          std::printf("  %s -> %s: %s\n", cycle[i].c_str(), cycle[i + 1].c_str(), where.c_str());
      ++failures;
    }

  // A wing's names stay in its wing (and the one place that registers it).
  const std::regex identifier(R"re([A-Za-z_][A-Za-z_0-9]*)re");
  for (const auto& [file, h] : headers) {
    if (registration_points.contains(file)) continue;
    for (const wing& w : wings) {
      if (file.rfind(w.folder, 0) == 0 || file == w.header) continue;
      for (const include_line& inc : h.includes)
        if (inc.target.rfind(w.folder, 0) == 0 || inc.target == w.header) {
          std::printf("FAIL %s:%d includes %s of the %s wing (%s, %s): only %s brings a wing in\n", file.c_str(), inc.line, inc.target.c_str(), w.name,
                      w.folder, w.header, registration_points.begin()->c_str());
          ++failures;
        }
      const std::vector<std::string> code = code_only(h.lines);
      for (std::size_t i = 0; i < code.size(); ++i)
        for (std::sregex_iterator it(code[i].begin(), code[i].end(), identifier), end; it != end; ++it)
          if (it->str().rfind(w.prefix, 0) == 0) {
            std::printf("FAIL %s:%zu names %s, a name of the %s wing (%s, %s): the core names no wing (only %s registers it)\n", file.c_str(), i + 1,
                        it->str().c_str(), w.name, w.folder, w.header, registration_points.begin()->c_str());
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
    auto it = headers.find(f);
    if (it == headers.end()) continue;
    for (const std::string& s : it->second.system_includes)
      if (s.rfind("cuda", 0) == 0) {
        std::printf("FAIL <gexec/executor.hpp> includes <%s> through %s: CUDA is opt-in (<gexec/cuda.hpp>)\n", s.c_str(), f.c_str());
        ++failures;
      }
    for (const include_line& t : it->second.includes) stack.push_back(t.target);
  }

  std::printf("layering: %zu headers in %zu layers, %zu reached from <gexec/executor.hpp>: %d violation%s\n", headers.size(), layers.size(),
              seen.size(), failures, failures == 1 ? "" : "s");
  return failures == 0 ? 0 : 1;
}
