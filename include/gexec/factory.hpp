#pragma once
// gexec::load_factory: single-file models, as TVM's export_library writes them (the
// graph and parameters embedded in the kernel library's __tvm_dev_mblob). A factory
// creates executors like lib["default"](dev) does, with the embedded parameters loaded.
//
//   gexec::factory f = gexec::load_factory("model.so");
//   auto ex = f.create({gexec::cpu()});

#include "config.hpp"

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "binding/packed_c_abi.hpp"
#include "graph_executor.hpp"
#include "module_blob.hpp"

GEXEC_NAMESPACE_BEGIN

class factory {
 public:
  factory(module lib, graph_factory_blob blob, std::vector<cuda_module_blob> cuda_modules)
      : lib_(std::move(lib)), graph_(parse_graph(blob.graph_json)), blob_(std::move(blob)), cuda_(std::move(cuda_modules)) {}

  /// A new executor over the library's kernels with the embedded parameters loaded.
  [[nodiscard]] graph_executor<> create(std::vector<DLDevice> devices = {cpu()}) const {
    graph_executor<> ex(graph_, packed_c_abi(lib_), std::move(devices));
    ex.load_params(blob_.params);
    return ex;
  }

  [[nodiscard]] const std::string& graph_json() const noexcept { return blob_.graph_json; }  ///< get_graph_json
  [[nodiscard]] const param_dict& params() const noexcept { return blob_.params; }          ///< get_graph_params
  [[nodiscard]] const std::string& module_name() const noexcept { return blob_.module_name; }
  [[nodiscard]] const module& lib() const noexcept { return lib_; }
  [[nodiscard]] const gexec::graph& graph() const noexcept { return graph_; }
  /// CUDA modules the library carries, for the CUDA backend.
  [[nodiscard]] const std::vector<cuda_module_blob>& cuda_modules() const noexcept { return cuda_; }

 private:
  module lib_;
  gexec::graph graph_;
  graph_factory_blob blob_;
  std::vector<cuda_module_blob> cuda_;
};

/// Opens a library exported with export_library and reads its embedded factory.
/// Errors: errc::io (cannot load), errc::invalid_module (no or malformed blob),
/// errc::invalid_graph / invalid_params for what the blob holds.
inline factory load_factory(const std::filesystem::path& path) {
  module lib = load_module(path);
  auto symbol = lib.data_symbol("__tvm_dev_mblob");
  if (symbol.empty())
    throw error(errc::invalid_module, path.string() + " has no __tvm_dev_mblob: it is a kernel library without an embedded "
                                                      "graph (load it with load_module and pass the graph JSON to create)");
  module_blob blob = parse_module_blob(symbol, "__tvm_dev_mblob of " + path.string());
  if (!blob.factory) throw error(errc::invalid_module, "__tvm_dev_mblob of " + path.string() + " holds no GraphExecutorFactory");
  return factory(std::move(lib), std::move(*blob.factory), std::move(blob.cuda_modules));
}

GEXEC_NAMESPACE_END
