#pragma once
// gexec::load_factory: single-file models, as TVM's export_library writes them (the
// graph and parameters embedded in the kernel library's __tvm_dev_mblob). A factory
// creates executors like lib["default"](dev) does. Every executor a factory creates for
// one set of devices is an instance of one model, and every factory of one library
// reads the same parameters: the weights are held once.
//
//   gexec::factory f = gexec::load_factory("model.so");
//   auto ex = f.create({gexec::cpu()});

#include "../config.hpp"

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "../model.hpp"
#include "binding.hpp"
#include "model.hpp"
#include "module.hpp"
#include "module_blob.hpp"

GEXEC_NAMESPACE_BEGIN

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
