#pragma once
// Models over TVM-compiled libraries: create(graph, lib) as TVM's graph_executor.create,
// model::load for export_library's single file (graph and parameters embedded in the
// library's __tvm_dev_mblob) and for TVM's three files, and the deduction of a model's
// binding from a gexec::module.
//
//   gexec::module lib = gexec::load_module("deploy_lib.so");
//   auto ex = gexec::create(graph_json, lib, {gexec::cpu()});
//   auto m = gexec::model::load("model.so");

#include "../config.hpp"

#include <dlpack/dlpack.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../error.hpp"
#include "../graph.hpp"
#include "../model.hpp"
#include "../params.hpp"
#include "binding.hpp"
#include "module.hpp"
#include "module_blob.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

/// What a library made by export_library carries in __tvm_dev_mblob, parsed: the
/// graph, its parameters (owned, aligned host tensors) and any CUDA modules.
struct embedded_factory {
  validated_graph graph;
  graph_factory_blob blob;
  std::vector<cuda_module_blob> cuda_modules;
};

/// Parsed once per loaded library and shared by every model and factory made from it,
/// so N loads of one model.so hold one copy of its weights. `progress` hears of the
/// bytes of the embedded blob read (all at once when it was parsed before).
inline std::shared_ptr<const embedded_factory> read_embedded_factory(const module& lib, const load_progress* progress) {
  if (!lib) throw error(errc::invalid_argument, "read_embedded_factory: no module");
  module_state& state = *lib.state_;
  std::lock_guard g(state.embedded_mu);
  const std::string where = lib.path().string();
  auto symbol = lib.data_symbol("__tvm_dev_mblob");
  if (auto cached = state.embedded.lock()) {
    if (progress && *progress) {  // read before: all of the payload at once
      std::uint64_t length = 0;
      std::memcpy(&length, symbol.data(), sizeof length);  // the blob was parsed, so its length is there
      (*progress)(length, length);
    }
    return cached;
  }
  if (symbol.empty())
    throw error(errc::invalid_module, where + " has no __tvm_dev_mblob: it is a kernel library without an embedded "
                                              "graph (load it with load_module and pass the graph JSON to create)");
  // The parameters are copied out of the library's pages, which are released as they
  // are read: the copies, which the models keep in place, are the only ones resident.
  module_blob blob = parse_module_blob(symbol, "__tvm_dev_mblob of " + where, blob_parts::all, true, progress);
  if (!blob.factory) throw error(errc::invalid_module, "__tvm_dev_mblob of " + where + " holds no GraphExecutorFactory");
  auto parsed = std::make_shared<embedded_factory>();
  parsed->graph = parse_graph(blob.factory->graph_json);
  parsed->blob = std::move(*blob.factory);
  parsed->cuda_modules = std::move(blob.cuda_modules);
  release_pages(symbol);
  state.embedded = parsed;
  return parsed;
}

/// The library, loaded through the model's runtime when it has one (which then keeps
/// it loaded), else through the process.
inline module load_library_for(const model_options& options, const std::filesystem::path& library) {
  return options.runtime ? options.runtime->load_module(library) : load_module(library);
}

template <class Model>
struct library_model {
  static Model load(const std::filesystem::path& library, model_options options) {
    module lib = load_library_for(options, library);
    auto embedded = read_embedded_factory(lib, &options.progress);
    Model m(embedded->graph, packed_c_abi(lib), embedded->blob.params, std::move(options));
    m.keep_source(std::move(embedded));
    return m;
  }
  // The graph first: the file most often wrong fails before a library is loaded.
  static Model load(const std::filesystem::path& graph_file, const std::filesystem::path& library,
                    const std::filesystem::path& params_file, model_options options) {
    if (!options.progress) {
      validated_graph g = load_graph_file(graph_file);
      module lib = load_library_for(options, library);
      return Model(std::move(g), packed_c_abi(std::move(lib)), load_param_dict_file(params_file), std::move(options));
    }
    // One count over both files: the graph's bytes, then the parameters' after them.
    std::error_code ec;
    const std::uint64_t graph_bytes = std::filesystem::file_size(graph_file, ec), params_bytes = std::filesystem::file_size(params_file, ec);
    const std::uint64_t total = ec ? 0 : graph_bytes + params_bytes;
    const load_progress& outer = options.progress;
    std::uint64_t base = 0;
    const load_progress part = [&](std::uint64_t done, std::uint64_t) { outer(std::min(base + done, total), total); };
    validated_graph g = load_graph_file(graph_file, part);
    base = graph_bytes;
    module lib = load_library_for(options, library);
    param_dict params = load_param_dict_file(params_file, load_mode::copy, part);
    return Model(std::move(g), packed_c_abi(std::move(lib)), params, std::move(options));
  }
};

}  // namespace detail

// `gexec::basic_model m(graph, lib)` with a gexec::module is a gexec::model.
basic_model(validated_graph, module, model_options = {}) -> basic_model<>;
basic_model(validated_graph, module, const param_dict&, model_options = {}) -> basic_model<>;

/// An executor over a TVM-compiled library, with a model of its own (TVM's API:
/// graph_executor.create). To run many executors over one set of weights, build a
/// model once and instantiate it instead.
inline graph_executor<> create(const validated_graph& g, const module& lib, std::vector<DLDevice> devices = {cpu()}) {
  return model(g, packed_c_abi(lib), detail::on_devices(std::move(devices))).instantiate();
}
inline graph_executor<> create(std::string_view graph_json, const module& lib, std::vector<DLDevice> devices = {cpu()}) {
  return create(parse_graph(graph_json), lib, std::move(devices));
}
inline graph_executor<> create(graph g, const module& lib, std::vector<DLDevice> devices = {cpu()}) {
  return create(validate(std::move(g)), lib, std::move(devices));
}
/// The graph read from a file (load_graph_file). Only a std::filesystem::path selects
/// this overload: a string or string literal is JSON text, so
/// create(std::filesystem::path("graph.json"), lib) reads a file and create("{...}", lib)
/// parses text.
template <class Path>
  requires std::same_as<Path, std::filesystem::path>
graph_executor<> create(const Path& graph_file, const module& lib, std::vector<DLDevice> devices = {cpu()}) {
  return create(load_graph_file(graph_file), lib, std::move(devices));
}

GEXEC_NAMESPACE_END
