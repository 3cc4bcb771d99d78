#pragma once
// What one version of a model is made of, read from its folder once when the model
// loads: which files the folder holds (a single-file library, TVM's graph.json + lib.so +
// params, or a Relax VM executable with its weights beside it), the graph, the kernel
// library and the weights on the host. The models built per device (model_state.hpp)
// are made from these.

#include <gexec/executor.hpp>
#include <gexec/relax.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include <sys/mman.h>

#include "interpreted.hpp"
#include "server.hpp"

namespace gexec_triton {

namespace fs = std::filesystem;

/// The files of one model version: a single-file library, or TVM's three files.
struct model_files {
  fs::path library, graph, params;  // graph empty: library is a single-file export
};

inline model_files find_files(const fs::path& dir, const std::string& default_filename) {
  if (!fs::is_directory(dir)) throw gexec::error(gexec::errc::io, "no version directory " + dir.string());
  if (!default_filename.empty()) {
    if (!fs::exists(dir / default_filename)) throw gexec::error(gexec::errc::io, "default_model_filename " + (dir / default_filename).string() + " does not exist");
    return {dir / default_filename, {}, {}};
  }
  if (fs::exists(dir / "model.so")) return {dir / "model.so", {}, {}};
  if (fs::exists(dir / "graph.json")) {
    if (!fs::exists(dir / "lib.so")) throw gexec::error(gexec::errc::io, (dir / "graph.json").string() + " has no lib.so beside it");
    fs::path params;
    for (const char* name : {"params", "params.bin"})
      if (fs::exists(dir / name)) params = dir / name;
    return {dir / "lib.so", dir / "graph.json", params};
  }
  std::string found;
  for (const auto& e : fs::directory_iterator(dir)) found += (found.empty() ? "" : ", ") + e.path().filename().string();
  throw gexec::error(gexec::errc::io, dir.string() + " holds neither model.so nor graph.json + lib.so + params (it holds: " +
                                          (found.empty() ? "nothing" : found) + ")");
}

/// A parameter file's tensors. A file whose tensors all sit 64-byte aligned (written by
/// `gexec-run --convert-params`) is read where it lies, in its mapping: no copy, pages
/// shared with every process that maps it. Any other file is copied whole into one
/// anonymous mapping of its own (each tensor 64-byte aligned, so the model holds them in
/// place) and unmapped: a mapping kept for a few aligned tensors would keep the pages the
/// others were copied from resident too. Both are unmapped when the model lets the last
/// tensor go. Heap copies would be freed into the glibc arenas of the thread that loaded
/// the model, which malloc_trim does not empty: load/unload cycles grew the server by the
/// weights.
inline gexec::param_dict load_params_unmapped_on_unload(const fs::path& file) {
  // Views of the mapping wherever the elements are aligned: nothing is read into the heap.
  const gexec::param_dict read = gexec::load_param_dict_file(file, gexec::load_mode::mmap);
  constexpr std::size_t align = 64;
  auto padded = [](std::uint64_t n) { return static_cast<std::size_t>((n + align - 1) / align * align); };
  if (std::all_of(read.begin(), read.end(), [&](const auto& item) { return read.is_mapped(item.second) && item.second.is_aligned(align); }))
    return read;
  std::size_t total = 0;
  for (const auto& item : read) total += padded(item.second.byte_size());
  if (total == 0) return read;
  void* base = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) throw gexec::error(gexec::errc::out_of_memory, file.string() + ": cannot map " + megabytes(total) + " for the parameters");
  const std::shared_ptr<const void> pages(base, [total](const void* p) { ::munmap(const_cast<void*>(p), total); });
  gexec::param_dict params;
  auto* at = static_cast<std::byte*>(base);
  for (const auto& [name, a] : read) {
    const auto bytes = static_cast<std::size_t>(a.byte_size());
    if (bytes) std::memcpy(at, a.data(), bytes);
    DLTensor t = a.dltensor();
    t.data = at;
    t.byte_offset = 0;
    t.strides = nullptr;
    params.set(name, gexec::ndarray::view(t, pages));
    at += padded(bytes);
  }
  return params;
}

/// A split folder without its parameter file loads only when the configuration asks for
/// the weights as inputs: otherwise clients would be asked for tensors they do not have.
inline void check_weights(const model_files& f, bool weights_as_inputs) {
  if (weights_as_inputs) {
    if (f.graph.empty() || !f.params.empty())
      throw gexec::error(gexec::errc::invalid_argument, "parameter weights_as_inputs \"true\" serves a graph.json + lib.so folder that has no parameter file, but " +
                                                            (f.graph.empty() ? f.library.string() + " is a single-file model (its weights inside)"
                                                                             : f.params.string() + " is there"));
    return;
  }
  if (!f.graph.empty() && f.params.empty())
    throw gexec::error(gexec::errc::io, f.graph.parent_path().string() +
                                            " has graph.json and lib.so but no parameter file (params or params.bin): add it, or set the "
                                            "parameter weights_as_inputs to \"true\" to serve the weights as inputs every request sends");
}

/// What a model is made of, read once: the graph, the kernel library, the weights on the host.
struct model_sources {
  gexec::validated_graph graph;
  gexec::module lib;
  gexec::param_dict params;
  /// A single-file library's parsed blob, kept while the model is: the library shares it
  /// with whatever reads it again (the models built per device), instead of parsing a
  /// second copy of the weights.
  std::optional<gexec::factory> embedded;
  /// A Relax function gexec interprets: no graph; each instance runs it in a virtual machine.
  std::shared_ptr<const relax_interpreted> interpreted;
};

/// A Relax VM executable's function as a graph model's sources: the graph gexec made of
/// it, the library, and its constants and bound weights as parameters. The weights that
/// nn.Module leaves as arguments come from a parameter file beside model.so
/// (params.safetensors, params or params.bin), bound by name. A function that is
/// interpreted (control flow, shapes known only at run time) comes back without a graph,
/// as what its instances' virtual machines run (interpreted.hpp).
inline model_sources load_relax_sources(const model_files& f, const std::shared_ptr<gexec::runtime>& rt, const std::string& wanted) {
  gexec::relax::executable_options o;
  o.model.runtime = rt;
  fs::path weights;
  for (const char* name : {"params.safetensors", "params", "params.bin"})
    if (weights.empty() && fs::exists(f.library.parent_path() / name)) weights = f.library.parent_path() / name;
  const gexec::relax::executable exe =
      weights.empty() ? gexec::relax::load_executable(f.library, std::move(o)) : gexec::relax::load_executable(f.library, weights, std::move(o));
  std::string function = wanted;
  if (function.empty()) {
    const auto names = exe.function_names();
    function = names.size() == 1 ? names.front() : "main";
  }
  const gexec::relax::graph_program* g = exe.graph_of(function);  // errc::not_found naming the functions there are
  if (!g) {
    auto r = std::make_shared<relax_interpreted>();
    r->exe = exe;
    r->function = function;
    r->inputs = interpreted_inputs(exe, function);
    r->outputs = interpreted_outputs(exe, function, r->inputs);
    return {gexec::validated_graph{}, exe.library(), gexec::param_dict{}, std::nullopt, std::move(r)};
  }
  return {g->function.graph, exe.library(), g->function.params, std::nullopt, nullptr};
}

inline model_sources load_sources(const model_files& f, const std::shared_ptr<gexec::runtime>& rt, const std::string& relax_function) {
  if (f.graph.empty() && gexec::relax::carries_executable(rt->load_module(f.library))) return load_relax_sources(f, rt, relax_function);
  if (!relax_function.empty()) throw gexec::error(gexec::errc::invalid_argument, "parameter function names a function of a Relax VM executable; " +
                                                                                       f.library.string() + " carries none");
  if (f.graph.empty()) {
    gexec::factory embedded = gexec::load_factory(f.library, rt);
    model_sources s{gexec::parse_graph(embedded.graph_json()), embedded.lib(), embedded.params(), std::nullopt, nullptr};
    s.embedded.emplace(std::move(embedded));
    return s;
  }
  return {gexec::load_graph_file(f.graph), rt->load_module(f.library), f.params.empty() ? gexec::param_dict{} : load_params_unmapped_on_unload(f.params),
          std::nullopt, nullptr};
}

/// Whether the graph places any tensor on a CUDA device.
inline bool places_on_cuda(const gexec::compact_graph& g) {
  return std::find(g.device_index.begin(), g.device_index.end(), static_cast<std::int32_t>(kDLCUDA)) != g.device_index.end();
}

}  // namespace gexec_triton
