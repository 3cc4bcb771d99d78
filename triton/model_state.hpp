#pragma once
// A served model: made once per model version in TRITONBACKEND_ModelInitialize. It
// reads the model's files (model_files.hpp), completes and checks its configuration
// against the graph (model_config.hpp), places each new instance on the host or a CUDA
// device by its instance_group kind, and builds the model once per device, its weights
// there shared by every instance on that device, with the gauges that count them.

#include <gexec/all_backends.hpp>
#include <gexec/contrib/sort.hpp>
#include <gexec/executor.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "metrics.hpp"
#include "model_config.hpp"
#include "model_files.hpp"
#include "server.hpp"
#include "triton_api.hpp"

namespace gexec_triton {

using model_type = gexec::any_device_model;  ///< every device wing; a host-only graph touches no device driver
using executor = gexec::any_device_executor;

/// One version of a served model, shared by its instances (placing and building are locked).
class model_state {
 public:
  model_state(TRITONBACKEND_Model* model) {
    const char* name = nullptr;
    check(TRITONBACKEND_ModelName(model, &name), "TRITONBACKEND_ModelName");
    check(TRITONBACKEND_ModelVersion(model, &version_), "TRITONBACKEND_ModelVersion");
    name_ = name;
    TRITONBACKEND_ArtifactType artifact{};
    const char* location = nullptr;
    check(TRITONBACKEND_ModelRepository(model, &artifact, &location), "TRITONBACKEND_ModelRepository");
    if (artifact != TRITONBACKEND_ARTIFACT_FILESYSTEM) throw gexec::error(gexec::errc::unsupported, "the model is not on a file system");

    json::object config = read_config(model);
    settings_ = read_settings(config);
    const json::value* dmf = config.if_contains("default_model_filename");
    const model_files files = find_files(fs::path(location) / std::to_string(version_), dmf && dmf->is_string() ? json::value_to<std::string>(*dmf) : "");
    check_weights(files, settings_.weights_as_inputs);

    options_.runtime = settings_.num_threads > 0 ? gexec::runtime::create({.num_threads = settings_.num_threads})
                                                 : gexec::runtime::global().shared_from_this();
    if (settings_.num_threads > 0) gexec::contrib::register_sort_functions(*options_.runtime);
    options_.planner = gexec::planner_named(settings_.planner);
    sources_ = load_sources(files, options_.runtime, settings_.function);
    on_cuda_ = !sources_.interpreted && places_on_cuda(sources_.graph.compact());
    if (!on_cuda_ && !sources_.interpreted) (void)model_on(-1);  // a host model is built now, so that what is wrong with it fails the load

    std::vector<model_tensor> inputs, outputs;
    describe(inputs, outputs);
    bool auto_complete = false;
    check(TRITONBACKEND_ModelAutoCompleteConfig(model, &auto_complete), "TRITONBACKEND_ModelAutoCompleteConfig");
    completed_config c = complete_config(std::move(config), inputs, outputs, auto_complete);
    layout_ = std::move(c.layout);
    if (c.changed) set_config(model, c.config);

    const fs::path& shown = files.graph.empty() ? files.library : files.graph.parent_path();
    std::uint64_t param_bytes = 0;
    for (const auto& item : sources_.params) param_bytes += item.second.byte_size();
    log(TRITONSERVER_LOG_INFO, __FILE__, __LINE__,
        "gexec: model '" + name_ + "' version " + std::to_string(version_) + " loaded from " + shown.string() + ": " +
            std::to_string(inputs.size()) + " input(s), " + std::to_string(outputs.size()) + " output(s), " + megabytes(param_bytes) +
            " of parameters held once per device; " + (sources_.interpreted ? "Relax function \"" + sources_.interpreted->function + "\" interpreted, " : "") + (on_cuda_ ? "on CUDA devices (KIND_GPU or KIND_MODEL instances)" : "on the host") +
            "; max_batch_size " + std::to_string(layout_.max_batch_size) + " (" + std::to_string(layout_.rows_per_run) + " row(s) per run), planner " +
            settings_.planner + ", execution_policy " + settings_.execution_policy + (settings_.cuda_graph ? ", cuda_graph" : "") + ", num_threads " +
            (settings_.num_threads ? std::to_string(settings_.num_threads) : std::string("all cores")));
  }

  /// The device a new instance of `kind` runs on: -1 for the host, else a CUDA device id.
  int place(TRITONBACKEND_ModelInstance* instance, TRITONSERVER_InstanceGroupKind kind) {
    if (kind == TRITONSERVER_INSTANCEGROUPKIND_CPU) {
      if (on_cuda_)
        throw gexec::error(gexec::errc::device_mismatch, "instance_group kind KIND_CPU: the graph places tensors on CUDA devices; serve it with "
                                                         "KIND_GPU or KIND_MODEL instances");
      return -1;
    }
    if (kind == TRITONSERVER_INSTANCEGROUPKIND_GPU) {
      if (!on_cuda_)
        throw gexec::error(gexec::errc::device_mismatch, "instance_group kind KIND_GPU: the graph runs on the host only (it places nothing on "
                                                         "a CUDA device); serve it with KIND_CPU instances");
      std::int32_t device = 0;
      check(TRITONBACKEND_ModelInstanceDeviceId(instance, &device), "TRITONBACKEND_ModelInstanceDeviceId");
      return device;
    }
    if (kind != TRITONSERVER_INSTANCEGROUPKIND_MODEL) throw gexec::error(gexec::errc::unsupported, "unknown instance_group kind");
    if (!on_cuda_) return -1;
    std::lock_guard g(mu_);
    if (settings_.cuda_devices.empty()) {
      const int count = gexec::cuda_driver::process_default()->device_count();
      for (int d = 0; d < count; ++d) settings_.cuda_devices.push_back(d);
    }
    return settings_.cuda_devices[placed_++ % settings_.cuda_devices.size()];
  }

  /// The model on `device` (-1: the host), built by the first instance there: its
  /// weights are on that device once, for all the instances there.
  model_type& model_on(int device) {
    std::lock_guard g(mu_);
    if (auto it = models_.find(device); it != models_.end()) return it->second.model;
    gexec::model_options o = options_;
    o.devices = device < 0 ? std::vector<DLDevice>{gexec::cpu()} : std::vector<DLDevice>{gexec::cpu(), gexec::cuda(device)};
    model_type m(sources_.graph, gexec::packed_c_abi(sources_.lib), sources_.params, o);
    const double weights = static_cast<double>(m.param_bytes());
    auto& placed = models_.try_emplace(device, std::move(m), name_, version_, device).first->second;
    placed.weights.set(weights);
    return placed.model;
  }

  /// Counts an instance on `device` in the metrics (`activations` its storage), or takes
  /// one away (negative values).
  void count_instance(int device, int instances, double activations, int unusable = 0) {
    std::lock_guard g(mu_);
    auto it = models_.find(device);
    if (it == models_.end()) return;
    on_device& d = it->second;
    d.n_instances += instances;
    d.n_unusable += unusable;
    d.n_activations += activations;
    d.instances.set(d.n_instances);
    d.unusable.set(d.n_unusable);
    d.activations.set(d.n_activations);
  }

  void run(executor& ex) const {
    if (settings_.cuda_graph) return ex.run(gexec::cuda_graph{});
    gexec::with_policy(settings_.execution_policy, [&](auto policy) { ex.run(policy); });
  }

  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] const serving_layout& layout() const noexcept { return layout_; }
  [[nodiscard]] const settings& config() const noexcept { return settings_; }
  /// The Relax function the model's instances interpret, or null (a graph model).
  [[nodiscard]] const relax_interpreted* interpreted() const noexcept { return sources_.interpreted.get(); }

 private:
  /// Inputs (graph arguments that are not weights) and outputs (the heads, "node:i"), as
  /// an executor names them, read from the graph; an interpreted function's as its
  /// bytecode checks them and its load-time run returned them (interpreted.hpp).
  void describe(std::vector<model_tensor>& inputs, std::vector<model_tensor>& outputs) const {
    if (sources_.interpreted) {
      inputs = sources_.interpreted->inputs;
      outputs = sources_.interpreted->outputs;
      return;
    }
    const gexec::compact_graph& g = sources_.graph.compact();
    auto shape = [&](std::uint32_t e) { return std::vector<std::int64_t>(g.shape(e).begin(), g.shape(e).end()); };
    for (std::size_t i = 0; i < g.arg_nodes.size(); ++i) {
      const std::string name(g.name(g.arg_nodes[i]));
      if (sources_.params.contains(name)) continue;
      const std::uint32_t e = g.entry_id(g.arg_nodes[i], 0);
      inputs.push_back({name, static_cast<int>(i), g.dltype[e], shape(e)});
    }
    for (std::size_t i = 0; i < g.heads.size(); ++i) {
      const std::uint32_t e = g.entry_id(g.heads[i]);
      outputs.push_back({std::string(g.name(g.heads[i].node_id)) + ":" + std::to_string(i), static_cast<int>(i), g.dltype[e], shape(e)});
    }
  }

  static json::object read_config(TRITONBACKEND_Model* model) {
    TRITONSERVER_Message* message = nullptr;
    check(TRITONBACKEND_ModelConfig(model, 1, &message), "TRITONBACKEND_ModelConfig");
    const char* text = nullptr;
    std::size_t size = 0;
    TRITONSERVER_Error* e = TRITONSERVER_MessageSerializeToJson(message, &text, &size);
    json::value v;
    if (!e) v = json::parse(json::string_view(text, size));
    if (TRITONSERVER_Error* d = TRITONSERVER_MessageDelete(message)) TRITONSERVER_ErrorDelete(d);
    check(e, "TRITONSERVER_MessageSerializeToJson");
    if (!v.is_object()) throw gexec::error(gexec::errc::invalid_argument, "the model configuration is not a JSON object");
    return std::move(v.as_object());
  }

  static void set_config(TRITONBACKEND_Model* model, const json::object& config) {
    const std::string text = json::serialize(config);
    TRITONSERVER_Message* message = nullptr;
    check(TRITONSERVER_MessageNewFromSerializedJson(&message, text.data(), text.size()), "TRITONSERVER_MessageNewFromSerializedJson");
    TRITONSERVER_Error* e = TRITONBACKEND_ModelSetConfig(model, 1, message);
    if (TRITONSERVER_Error* d = TRITONSERVER_MessageDelete(message)) TRITONSERVER_ErrorDelete(d);
    check(e, "TRITONBACKEND_ModelSetConfig");
  }

  /// The model on one device, with its gauges.
  struct on_device {
    on_device(model_type m, const std::string& name, std::uint64_t version, int device)
        : model(std::move(m)),
          instances(families.instances, name, version, device),
          weights(families.weight_bytes, name, version, device),
          activations(families.activation_bytes, name, version, device),
          unusable(families.unusable, name, version, device) {}
    model_type model;
    gauge instances, weights, activations, unusable;
    double n_instances = 0, n_activations = 0, n_unusable = 0;
  };

  std::string name_;
  std::uint64_t version_ = 0;
  settings settings_;
  serving_layout layout_;
  gexec::model_options options_;
  model_sources sources_;
  bool on_cuda_ = false;
  std::mutex mu_;
  std::map<int, on_device> models_;  ///< by device, -1 the host
  std::size_t placed_ = 0;           ///< KIND_MODEL instances placed so far
};

}  // namespace gexec_triton
