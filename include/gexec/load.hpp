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
//
// This header declares; load_impl.hpp defines what is not a template.

#include "config.hpp"

#include <dlpack/dlpack.h>

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "error.hpp"
#include "file_path.hpp"
#include "detail/byte_io.hpp"
#include "graph.hpp"
#include "model.hpp"
#include "library/binding.hpp"
#include "library/module.hpp"
#include "packed_c/module_blob.hpp"
#include "tvm_ffi/library_bin.hpp"
#include "params.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

/// What a library made by export_library carries in __tvm_dev_mblob, parsed: the
/// graph, its parameters (owned, aligned host tensors) and its device modules.
struct embedded_factory {
  validated_graph graph;
  graph_factory_blob blob;
  std::vector<module_payload> device_modules;
};

/// The library, loaded through the model's runtime when it has one (which then keeps
/// it loaded), else through the process.
GEXEC_DECL module load_library_for(const model_options& options, const file_path& library);

template <class Model>
struct library_model {
  static Model load(const file_path& library, model_options options) {
    module lib = load_library_for(options, library);
    auto embedded = read_embedded_factory(lib, &options.progress);
    Model m(embedded->graph, packed_c_abi(lib), embedded->blob.params, std::move(options));
    count_library_copies(m, lib, embedded->blob.params);
    m.keep_source(std::move(embedded));
    return m;
  }
  /// The tensors of a library's blob that were copied out of it (not aligned there).
  static void count_library_copies(Model& m, const module& lib, const param_dict& params) {
    const std::span<const std::byte> blob = lib.data_symbol("__tvm_dev_mblob");
    m.count_reader_copies(
        params, [&](const ndarray& t) { return in_range(blob, t.data()); },
        "its data is not " + std::to_string(kernel_alignment) + "-byte aligned in the library's __tvm_dev_mblob (TVM's export_library "
        "writes no padding): copied once for the library");
  }
  /// The tensors of a parameter file read with load_mode::copy: all copies.
  static void count_file_copies(Model& m, const param_dict& params, load_mode mode) {
    if (mode == load_mode::copy) m.count_reader_copies(params, [](const ndarray&) { return false; }, "read with load_mode::copy");
  }
  static bool in_range(std::span<const std::byte> range, const void* p) {
    return std::less_equal<>()(range.data(), static_cast<const std::byte*>(p)) && std::less<>()(static_cast<const std::byte*>(p), range.data() + range.size());
  }
  // The graph first: the file most often wrong fails before a library is loaded.
  static Model load(const file_path& graph_file, const file_path& library,
                    const file_path& params_file, model_options options) {
    const load_mode mode = options.params_mode;
    if (!options.progress) {
      validated_graph g = load_graph_file(graph_file);
      module lib = load_library_for(options, library);
      return with_params(std::move(g), std::move(lib), (mode == load_mode::mmap ? map_param_dict_file(params_file) : load_param_dict_file(params_file, mode)), mode, std::move(options));
    }
    // One count over both files: the graph's bytes, then the parameters' after them.
    const auto graph_bytes = detail::regular_file_size(graph_file), params_bytes = detail::regular_file_size(params_file);
    const std::uint64_t total = graph_bytes && params_bytes ? *graph_bytes + *params_bytes : 0;
    const load_progress& outer = options.progress;
    std::uint64_t base = 0;
    const load_progress part = [&](std::uint64_t done, std::uint64_t) { outer(std::min(base + done, total), total); };
    validated_graph g = load_graph_file(graph_file, part);
    base = graph_bytes.value_or(0);
    module lib = load_library_for(options, library);
    param_dict params = (mode == load_mode::mmap ? map_param_dict_file(params_file, part) : load_param_dict_file(params_file, mode, part));
    return with_params(std::move(g), std::move(lib), std::move(params), mode, std::move(options));
  }
  static Model with_params(validated_graph g, module lib, param_dict params, load_mode mode, model_options options) {
    Model m(std::move(g), packed_c_abi(std::move(lib)), params, std::move(options));
    count_file_copies(m, params, mode);
    return m;
  }
};

}  // namespace detail

// `gexec::basic_model m(graph, lib)` with a gexec::module is a gexec::model.
basic_model(validated_graph, module, model_options = {}) -> basic_model<>;
basic_model(validated_graph, module, const param_dict&, model_options = {}) -> basic_model<>;

/// An executor over a TVM-compiled library, with a model of its own (TVM's API:
/// graph_executor.create). To run many executors over one set of weights, build a
/// model once and instantiate it instead.
GEXEC_DECL graph_executor<> create(const validated_graph& g, const module& lib, std::vector<DLDevice> devices = {cpu()});
GEXEC_DECL graph_executor<> create(std::string_view graph_json, const module& lib, std::vector<DLDevice> devices = {cpu()});
GEXEC_DECL graph_executor<> create(graph g, const module& lib, std::vector<DLDevice> devices = {cpu()});
/// The graph read from a file (load_graph_file). Only a std::filesystem::path (a path
/// type, detail::filesystem_path_like) selects this overload: a string or string literal
/// is JSON text, so create(std::filesystem::path("graph.json"), lib) reads a file and create("{...}", lib)
/// parses text.
template <class Path>
  requires detail::filesystem_path_like<Path>
graph_executor<> create(const Path& graph_file, const module& lib, std::vector<DLDevice> devices = {cpu()}) {
  return create(load_graph_file(graph_file), lib, std::move(devices));
}

class factory {
 public:
  /// A factory over `lib`'s embedded graph and parameters (see load_factory).
  explicit factory(module lib, std::shared_ptr<runtime> rt = nullptr);

  /// The model for `devices`, built on first use and kept: the same model (and weights)
  /// for every later call with the same devices.
  [[nodiscard]] model get_model(const std::vector<DLDevice>& devices = {cpu()}) const;
  /// A new executor over the library's kernels, reading the embedded parameters.
  [[nodiscard]] graph_executor<> create(const std::vector<DLDevice>& devices = {cpu()}) const;

  [[nodiscard]] const std::string& graph_json() const noexcept { return s_->embedded->blob.graph_json; }  ///< get_graph_json
  [[nodiscard]] const param_dict& params() const noexcept { return s_->embedded->blob.params; }          ///< get_graph_params
  [[nodiscard]] const std::string& module_name() const noexcept { return s_->embedded->blob.module_name; }
  [[nodiscard]] const module& lib() const noexcept { return s_->lib; }
  [[nodiscard]] const gexec::graph& graph() const noexcept { return s_->embedded->graph; }
  /// The device modules the library carries, as their wings read them (binding/payloads.hpp).
  [[nodiscard]] const std::vector<module_payload>& device_modules() const noexcept { return s_->embedded->device_modules; }

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
GEXEC_DECL factory load_factory(const file_path& path, std::shared_ptr<runtime> rt = nullptr);

GEXEC_NAMESPACE_END

#if GEXEC_HEADER_ONLY()
#include "load_impl.hpp"
#endif
