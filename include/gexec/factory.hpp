#pragma once
// gexec::load_factory: single-file models, as TVM's export_library writes them (the
// graph and parameters embedded in the kernel library's __tvm_dev_mblob). A factory
// creates executors like lib["default"](dev) does. Every executor a factory creates for
// one set of devices is an instance of one model: the weights are held once.
//
//   gexec::factory f = gexec::load_factory("model.so");
//   auto ex = f.create({gexec::cpu()});

#include "config.hpp"

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "binding/packed_c_abi.hpp"
#include "model.hpp"
#include "module_blob.hpp"

GEXEC_NAMESPACE_BEGIN

class factory {
 public:
  factory(module lib, graph_factory_blob blob, std::vector<cuda_module_blob> cuda_modules, std::shared_ptr<runtime> rt = nullptr)
      : s_(std::make_shared<state>()) {
    s_->graph = parse_graph(blob.graph_json);
    s_->lib = std::move(lib);
    s_->blob = std::move(blob);
    s_->cuda = std::move(cuda_modules);
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
    model m(s_->graph, packed_c_abi(s_->lib), s_->blob.params, std::move(options));
    s_->models.emplace_back(devices, m);
    return m;
  }
  /// A new executor over the library's kernels, reading the embedded parameters.
  [[nodiscard]] graph_executor<> create(const std::vector<DLDevice>& devices = {cpu()}) const { return get_model(devices).instantiate(); }

  [[nodiscard]] const std::string& graph_json() const noexcept { return s_->blob.graph_json; }  ///< get_graph_json
  [[nodiscard]] const param_dict& params() const noexcept { return s_->blob.params; }          ///< get_graph_params
  [[nodiscard]] const std::string& module_name() const noexcept { return s_->blob.module_name; }
  [[nodiscard]] const module& lib() const noexcept { return s_->lib; }
  [[nodiscard]] const gexec::graph& graph() const noexcept { return s_->graph; }
  /// CUDA modules the library carries, for the CUDA backend.
  [[nodiscard]] const std::vector<cuda_module_blob>& cuda_modules() const noexcept { return s_->cuda; }

 private:
  struct state {
    module lib;
    validated_graph graph;
    graph_factory_blob blob;
    std::vector<cuda_module_blob> cuda;
    std::shared_ptr<runtime> rt;
    std::mutex mu;
    std::vector<std::pair<std::vector<DLDevice>, model>> models;
  };
  std::shared_ptr<state> s_;
};

/// Opens a library exported with export_library and reads its embedded factory.
/// Errors: errc::io (cannot load), errc::invalid_module (no or malformed blob),
/// errc::invalid_graph / invalid_params for what the blob holds.
inline factory load_factory(const std::filesystem::path& path, std::shared_ptr<runtime> rt = nullptr) {
  module lib = rt ? rt->load_module(path) : load_module(path);
  module_blob blob = detail::read_embedded_blob(lib);
  return factory(std::move(lib), std::move(*blob.factory), std::move(blob.cuda_modules), std::move(rt));
}

GEXEC_NAMESPACE_END
