#pragma once
// Models from what TVM writes: model::load over export_library's single file (graph and
// parameters embedded in the library's __tvm_dev_mblob) and over TVM's three files,
// create(graph, lib) as TVM's graph_executor.create, and load_factory, whose factory
// creates executors as lib["default"](dev) does. Every executor made from one library
// file for one set of devices reads one copy of the weights.
//
//   gexec::module lib = gexec::load_module("deploy_lib.so");
//   auto ex = gexec::create(graph_json, lib, {gexec::cpu()});
//   auto m = gexec::model::load("model.so");
//   gexec::factory f = gexec::load_factory("model.so");
//   auto ex2 = f.create({gexec::cpu()});

#include "config.hpp"

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

#include "error.hpp"
#include "graph.hpp"
#include "model.hpp"
#include "packed_c/binding.hpp"
#include "packed_c/module.hpp"
#include "packed_c/module_blob.hpp"
#include "params.hpp"

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

class factory {
 public:
  /// A factory over `lib`'s embedded graph and parameters (see load_factory).
  explicit factory(module lib, std::shared_ptr<runtime> rt = nullptr) : s_(std::make_shared<state>()) {
    s_->embedded = detail::read_embedded_factory(lib);
    s_->lib = std::move(lib);
    s_->rt = std::move(rt);
  }

  /// The model for `devices`, built on first use and kept: the same model (and weights)
  /// for every later call with the same devices.
  [[nodiscard]] model get_model(const std::vector<DLDevice>& devices = {cpu()}) const {
    std::lock_guard g(s_->mu);
    for (const auto& [d, m] : s_->models)
      if (std::equal(d.begin(), d.end(), devices.begin(), devices.end(), same_device)) return m;
    model_options options = detail::on_devices(devices);
    options.runtime = s_->rt;
    model m(s_->embedded->graph, packed_c_abi(s_->lib), s_->embedded->blob.params, std::move(options));
    m.keep_source(s_->embedded);
    s_->models.emplace_back(devices, m);
    return m;
  }
  /// A new executor over the library's kernels, reading the embedded parameters.
  [[nodiscard]] graph_executor<> create(const std::vector<DLDevice>& devices = {cpu()}) const { return get_model(devices).instantiate(); }

  [[nodiscard]] const std::string& graph_json() const noexcept { return s_->embedded->blob.graph_json; }  ///< get_graph_json
  [[nodiscard]] const param_dict& params() const noexcept { return s_->embedded->blob.params; }          ///< get_graph_params
  [[nodiscard]] const std::string& module_name() const noexcept { return s_->embedded->blob.module_name; }
  [[nodiscard]] const module& lib() const noexcept { return s_->lib; }
  [[nodiscard]] const gexec::graph& graph() const noexcept { return s_->embedded->graph; }
  /// CUDA modules the library carries, for the CUDA backend.
  [[nodiscard]] const std::vector<cuda_module_blob>& cuda_modules() const noexcept { return s_->embedded->cuda_modules; }

 private:
  struct state {
    module lib;
    std::shared_ptr<const detail::embedded_factory> embedded;  // shared by every factory of the library
    std::shared_ptr<runtime> rt;
    std::mutex mu;
    std::vector<std::pair<std::vector<DLDevice>, model>> models;
  };
  std::shared_ptr<state> s_;
};

/// Opens a library exported with export_library and reads its embedded factory. The
/// parsed graph and parameters belong to the loaded library: every factory and model
/// made from one file while it is loaded reads one copy of the weights.
/// Errors: errc::io (cannot load), errc::invalid_module (no or malformed blob),
/// errc::invalid_graph / invalid_params for what the blob holds.
inline factory load_factory(const std::filesystem::path& path, std::shared_ptr<runtime> rt = nullptr) {
  module lib = rt ? rt->load_module(path) : load_module(path);
  return factory(std::move(lib), std::move(rt));
}

GEXEC_NAMESPACE_END
