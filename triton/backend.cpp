// libtriton_gexec.so: Triton Inference Server's backend for TVM graph-executor models.
//
// Lifecycle (Triton's backend API): a model is loaded once in ModelInitialize (graph,
// kernel library and weights read once, the configuration completed and checked); each
// instance of its instance group is a gexec executor of that model on one device (its own
// activations and stream, the weights shared by the instances on that device), made in
// ModelInstanceInitialize; Triton calls ModelInstanceExecute for an instance on that
// instance's own thread, so instances run concurrently and each executor is used by one
// thread at a time. No exception leaves an entry point: errors become Triton errors (the
// model fails to load, or the request gets an error response).
//
// Devices: a graph that places nothing on CUDA runs on KIND_CPU instances; one with CUDA
// parts (TVM's heterogeneous graphs included) on KIND_GPU instances (the device Triton
// names) or KIND_MODEL ones (placed by the backend on the devices of parameter
// cuda_devices, in turn). A GPU instance moves request data on its own stream: inputs on
// its device are bound in place where a request fills a whole run, other inputs copied
// asynchronously, outputs copied to wherever Triton's buffers are, one wait per batch.

#include <gexec/contrib/sort.hpp>
#include <gexec/all_backends.hpp>
#include <gexec/executor.hpp>
#include <gexec/relax.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <sys/mman.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "batcher.hpp"
#include "model_config.hpp"
#include "triton_api.hpp"

namespace gexec_triton {
namespace {

namespace fs = std::filesystem;
using model_type = gexec::any_device_model;  ///< every device wing; a host-only graph touches no device driver
using executor = gexec::any_device_executor;

void log(TRITONSERVER_LogLevel level, int line, const std::string& message) {
  if (TRITONSERVER_LogIsEnabled(level)) {
    if (TRITONSERVER_Error* e = TRITONSERVER_LogMessage(level, __FILE__, line, message.c_str())) TRITONSERVER_ErrorDelete(e);
  }
}

/// A failed server call, its message taken and the error object freed.
struct server_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check(TRITONSERVER_Error* e, const char* call) {
  if (!e) return;
  std::string message = std::string(call) + ": " + TRITONSERVER_ErrorMessage(e);
  TRITONSERVER_ErrorDelete(e);
  throw server_error(message);
}

/// Runs `f`, turning any exception into a Triton error of `code` prefixed with `where`.
template <class F>
TRITONSERVER_Error* guarded(TRITONSERVER_Error_Code code, const std::string& where, F&& f) noexcept {
  try {
    f();
    return nullptr;
  } catch (const std::exception& e) {
    return TRITONSERVER_ErrorNew(code, (where + e.what()).c_str());
  } catch (...) {
    return TRITONSERVER_ErrorNew(code, (where + "unknown error").c_str());
  }
}

std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

std::string megabytes(std::uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f MB", static_cast<double>(bytes) / 1e6);
  return buf;
}

// ---- the model ---------------------------------------------------------------------------

/// The files of one model version: a single-file library, or TVM's three files.
struct model_files {
  fs::path library, graph, params;  // graph empty: library is a single-file export
};

model_files find_files(const fs::path& dir, const std::string& default_filename) {
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
gexec::param_dict load_params_unmapped_on_unload(const fs::path& file) {
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
void check_weights(const model_files& f, bool weights_as_inputs) {
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
};

/// A Relax VM executable's function as a graph model's sources: the graph gexec made of
/// it, the library, and its constants and bound weights as parameters. The weights that
/// nn.Module leaves as arguments come from a parameter file beside model.so
/// (params.safetensors, params or params.bin), bound by name. A function that is
/// interpreted (control flow, shapes known only at run time) is refused with the reason.
model_sources load_relax_sources(const model_files& f, const std::shared_ptr<gexec::runtime>& rt, const std::string& wanted) {
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
  if (!g)
    throw gexec::error(gexec::errc::unsupported, "Relax function \"" + function + "\" is interpreted (" + exe.interpreted_because(function) +
                                                     "); Triton serves the functions gexec runs as graphs (static shapes, no control flow)");
  return {g->function.graph, exe.library(), g->function.params, std::nullopt};
}

model_sources load_sources(const model_files& f, const std::shared_ptr<gexec::runtime>& rt, const std::string& relax_function) {
  if (f.graph.empty() && gexec::relax::carries_executable(rt->load_module(f.library))) return load_relax_sources(f, rt, relax_function);
  if (!relax_function.empty()) throw gexec::error(gexec::errc::invalid_argument, "parameter function names a function of a Relax VM executable; " +
                                                                                       f.library.string() + " carries none");
  if (f.graph.empty()) {
    gexec::factory embedded = gexec::load_factory(f.library, rt);
    model_sources s{gexec::parse_graph(embedded.graph_json()), embedded.lib(), embedded.params(), std::nullopt};
    s.embedded.emplace(std::move(embedded));
    return s;
  }
  return {gexec::load_graph_file(f.graph), rt->load_module(f.library), f.params.empty() ? gexec::param_dict{} : load_params_unmapped_on_unload(f.params),
          std::nullopt};
}

/// Whether the graph places any tensor on a CUDA device.
bool places_on_cuda(const gexec::compact_graph& g) {
  return std::find(g.device_index.begin(), g.device_index.end(), static_cast<std::int32_t>(kDLCUDA)) != g.device_index.end();
}

std::string device_label(int device) { return device < 0 ? "cpu" : "cuda:" + std::to_string(device); }

// ---- metrics -----------------------------------------------------------------------------

/// The backend's gauge families (Triton's custom metrics API), made once when the backend
/// is initialized; all null when the server has metrics turned off.
struct metric_families {
  TRITONSERVER_MetricFamily* instances = nullptr;
  TRITONSERVER_MetricFamily* weight_bytes = nullptr;
  TRITONSERVER_MetricFamily* activation_bytes = nullptr;
  TRITONSERVER_MetricFamily* unusable = nullptr;

  void create() {
    const struct {
      TRITONSERVER_MetricFamily** family;
      const char *name, *description;
    } all[] = {
        {&instances, "gexec_instances", "Instances of the model (gexec executors) on the device"},
        {&weight_bytes, "gexec_weight_bytes", "Bytes of the model's weights held on the device, once for all its instances there"},
        {&activation_bytes, "gexec_activation_bytes", "Bytes of activations the model's instances on the device hold together"},
        {&unusable, "gexec_unusable_instances", "Instances on the device that a sticky device error left unusable"},
    };
    for (const auto& f : all) {
      if (TRITONSERVER_Error* e = TRITONSERVER_MetricFamilyNew(f.family, TRITONSERVER_METRIC_KIND_GAUGE, f.name, f.description)) {
        log(TRITONSERVER_LOG_VERBOSE, __LINE__, std::string("gexec: no custom metrics (") + TRITONSERVER_ErrorMessage(e) + ")");
        TRITONSERVER_ErrorDelete(e);
        destroy();
        return;
      }
    }
  }
  void destroy() noexcept {
    for (TRITONSERVER_MetricFamily** f : {&instances, &weight_bytes, &activation_bytes, &unusable}) {
      if (*f)
        if (TRITONSERVER_Error* e = TRITONSERVER_MetricFamilyDelete(*f)) TRITONSERVER_ErrorDelete(e);
      *f = nullptr;
    }
  }
};
metric_families families;

/// One gauge of a model on a device, labelled model, version and device.
class gauge {
 public:
  gauge(TRITONSERVER_MetricFamily* family, const std::string& model, std::uint64_t version, int device) {
    if (!family) return;
    const std::string v = std::to_string(version), d = device_label(device);
    const TRITONSERVER_Parameter* labels[] = {TRITONSERVER_ParameterNew("model", TRITONSERVER_PARAMETER_STRING, model.c_str()),
                                              TRITONSERVER_ParameterNew("version", TRITONSERVER_PARAMETER_STRING, v.c_str()),
                                              TRITONSERVER_ParameterNew("device", TRITONSERVER_PARAMETER_STRING, d.c_str())};
    if (TRITONSERVER_Error* e = TRITONSERVER_MetricNew(&metric_, family, labels, 3)) {
      TRITONSERVER_ErrorDelete(e);
      metric_ = nullptr;
    }
    for (const TRITONSERVER_Parameter* l : labels) TRITONSERVER_ParameterDelete(const_cast<TRITONSERVER_Parameter*>(l));
  }
  gauge(const gauge&) = delete;
  gauge& operator=(const gauge&) = delete;
  ~gauge() {
    if (metric_)
      if (TRITONSERVER_Error* e = TRITONSERVER_MetricDelete(metric_)) TRITONSERVER_ErrorDelete(e);
  }
  void set(double value) noexcept {
    if (metric_)
      if (TRITONSERVER_Error* e = TRITONSERVER_MetricSet(metric_, value)) TRITONSERVER_ErrorDelete(e);
  }

 private:
  TRITONSERVER_Metric* metric_ = nullptr;
};

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
    const model_files files = find_files(fs::path(location) / std::to_string(version_), dmf && dmf->is_string() ? std::string(dmf->as_string()) : "");
    check_weights(files, settings_.weights_as_inputs);

    options_.runtime = settings_.num_threads > 0 ? gexec::runtime::create({.num_threads = settings_.num_threads})
                                                 : gexec::runtime::global().shared_from_this();
    if (settings_.num_threads > 0) gexec::contrib::register_sort_functions(*options_.runtime);
    options_.planner = gexec::planner_named(settings_.planner);
    sources_ = load_sources(files, options_.runtime, settings_.function);
    on_cuda_ = places_on_cuda(sources_.graph.compact());
    if (!on_cuda_) (void)model_on(-1);  // a host model is built now, so that what is wrong with it fails the load

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
    log(TRITONSERVER_LOG_INFO, __LINE__,
        "gexec: model '" + name_ + "' version " + std::to_string(version_) + " loaded from " + shown.string() + ": " +
            std::to_string(inputs.size()) + " input(s), " + std::to_string(outputs.size()) + " output(s), " + megabytes(param_bytes) +
            " of parameters held once per device; " + (on_cuda_ ? "on CUDA devices (KIND_GPU or KIND_MODEL instances)" : "on the host") +
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

 private:
  /// Inputs (graph arguments that are not weights) and outputs (the heads, "node:i"), as
  /// an executor names them, read from the graph.
  void describe(std::vector<model_tensor>& inputs, std::vector<model_tensor>& outputs) const {
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
    if (!e) v = json::parse(std::string_view(text, size));
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

// ---- an instance and its requests ---------------------------------------------------------

/// One request being served: its response and what the batcher needs.
struct pending {
  TRITONBACKEND_Request* request = nullptr;
  TRITONBACKEND_Response* response = nullptr;
  batch_request rows;
  bool cancelled = false;  ///< answered CANCELLED without running
};

/// Whether the client gave up on the request (a gRPC call cancelled, a stream whose
/// client is gone). The default scheduler hands such requests on; running them would
/// keep the model busy, and its unload waiting, for answers nobody reads.
bool is_cancelled(TRITONBACKEND_Request* request) {
  bool cancelled = false;
  if (TRITONSERVER_Error* e = TRITONBACKEND_RequestIsCancelled(request, &cancelled)) {
    TRITONSERVER_ErrorDelete(e);
    return false;
  }
  return cancelled;
}

DLDevice memory_at(memory_device d) { return d == host_memory ? gexec::cpu() : gexec::cuda(static_cast<int>(d)); }

/// One input or output of an instance on a CUDA device: where the executor reads (writes)
/// it and the instance's own memory for one run of it.
struct io_slot {
  const served_tensor* tensor = nullptr;
  std::uint64_t run_bytes = 0;  ///< rows_per_run rows
  DLDevice device{kDLCPU, 0};   ///< where the graph places it
  gexec::ndarray own;           ///< the instance's memory for it, bound zero-copy
  const void* bound = nullptr;  ///< what the executor reads now (inputs)
  const void* next = nullptr;   ///< what the next run reads (inputs)
};

class instance_state {
 public:
  instance_state(TRITONBACKEND_ModelInstance* instance, model_state& model, int device)
      : instance_(instance), model_(model), device_(device), m_(model.model_on(device)), ex_(m_.instantiate()) {
    const serving_layout& L = model_.layout();
    layout_.rows_per_run = L.rows_per_run;
    for (const served_tensor& t : L.inputs) layout_.input_row_bytes.push_back(t.row_bytes);
    for (const served_tensor& t : L.outputs) layout_.output_row_bytes.push_back(t.row_bytes);
    if (device_ < 0) {
      for (const served_tensor& t : L.inputs) {  // the executor's own inputs, which every run writes whole
        gexec::ndarray zeros = gexec::ndarray::empty(t.shape, t.dtype);
        if (zeros.byte_size()) std::memset(zeros.data(), 0, static_cast<std::size_t>(zeros.byte_size()));
        ex_.set_input(t.index, zeros);
      }
    } else {
      bind_device_memory();
    }
    activation_bytes_ = ex_.storage_bytes() + own_bytes_;
    model_.count_instance(device_, 1, static_cast<double>(activation_bytes_));
    log(TRITONSERVER_LOG_INFO, __LINE__,
        "gexec: model '" + model_.name() + "': an instance on " + device_label(device_) + " (" + megabytes(activation_bytes_) + " of activations)");
  }
  instance_state(const instance_state&) = delete;
  instance_state& operator=(const instance_state&) = delete;
  ~instance_state() { model_.count_instance(device_, -1, -static_cast<double>(activation_bytes_), unusable_.empty() ? 0 : -1); }

  void execute(TRITONBACKEND_Request** requests, std::uint32_t count) {
    const std::uint64_t exec_start = now_ns();
    std::vector<pending> work(count);
    std::vector<batch_request> rows;
    rows.reserve(count);
    for (std::uint32_t i = 0; i < count; ++i) {
      work[i].request = requests[i];
      if (is_cancelled(requests[i])) {  // not prepared, so it takes no rows of any run
        work[i].cancelled = true;
        work[i].rows.error = "the request was cancelled";
        continue;
      }
      if (!unusable_.empty()) {
        work[i].rows.error = unusable_;
        continue;
      }
      try {
        prepare(work[i]);
      } catch (const std::exception& e) {
        work[i].rows.error = e.what();
      } catch (...) {
        work[i].rows.error = "unknown error";
      }
    }
    std::size_t cancelled = 0;
    std::vector<bool> refused(count);  // before running: the request's own fault, or the instance's
    for (std::uint32_t i = 0; i < count; ++i) {
      cancelled += work[i].cancelled;
      refused[i] = !work[i].rows.error.empty();
      rows.push_back(std::move(work[i].rows));
    }
    if (cancelled)
      log(TRITONSERVER_LOG_VERBOSE, __LINE__,
          "gexec: model '" + model_.name() + "': " + std::to_string(cancelled) + " of " + std::to_string(count) + " request(s) cancelled, answered without running");

    std::uint64_t compute_start = now_ns(), compute_end = compute_start;
    auto run_model = [&](std::int64_t filled) {
      const std::uint64_t start = now_ns();
      model_.run(ex_);
      const std::uint64_t end = now_ns();
      compute_end = end;
      if (TRITONSERVER_Error* e = TRITONBACKEND_ModelInstanceReportBatchStatistics(instance_, static_cast<std::uint64_t>(filled), start, start, end, end))
        TRITONSERVER_ErrorDelete(e);
    };
    if (device_ < 0)
      run_host(rows, run_model);
    else
      run_device(rows, run_model);
    compute_end = std::max(compute_end, device_ < 0 ? compute_end : now_ns());
    const std::uint64_t exec_end = now_ns();

    for (std::uint32_t i = 0; i < count; ++i) {
      pending& p = work[i];
      const std::string& error = rows[i].error;
      const TRITONSERVER_Error_Code code = p.cancelled           ? TRITONSERVER_ERROR_CANCELLED
                                           : !refused[i]         ? TRITONSERVER_ERROR_INTERNAL  // the run failed
                                           : error == unusable_  ? TRITONSERVER_ERROR_UNAVAILABLE
                                                                 : TRITONSERVER_ERROR_INVALID_ARG;
      TRITONSERVER_Error* e = error.empty() ? nullptr : TRITONSERVER_ErrorNew(code, error.c_str());
      if (!p.response) {
        if (TRITONSERVER_Error* r = TRITONBACKEND_ResponseNew(&p.response, p.request)) {
          log(TRITONSERVER_LOG_ERROR, __LINE__, "gexec: model '" + model_.name() + "': cannot create a response: " + TRITONSERVER_ErrorMessage(r));
          TRITONSERVER_ErrorDelete(r);
          p.response = nullptr;
        }
      }
      // The statistics first: a client that reads them after its answer finds its request counted.
      if (TRITONSERVER_Error* s =
              TRITONBACKEND_ModelInstanceReportStatistics(instance_, p.request, error.empty(), exec_start, compute_start, compute_end, exec_end))
        TRITONSERVER_ErrorDelete(s);
      if (p.response) {
        if (TRITONSERVER_Error* s = TRITONBACKEND_ResponseSend(p.response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, e)) {
          log(TRITONSERVER_LOG_ERROR, __LINE__, "gexec: model '" + model_.name() + "': cannot send a response: " + TRITONSERVER_ErrorMessage(s));
          TRITONSERVER_ErrorDelete(s);
        }
      }
      if (e) TRITONSERVER_ErrorDelete(e);
      if (TRITONSERVER_Error* r = TRITONBACKEND_RequestRelease(p.request, TRITONSERVER_REQUEST_RELEASE_ALL)) TRITONSERVER_ErrorDelete(r);
    }
  }

 private:
  /// A host instance: rows copied into the executor's own inputs and out of its outputs.
  template <class Run>
  void run_host(std::vector<batch_request>& rows, Run& run_model) {
    const serving_layout& L = model_.layout();
    run_batched(
        rows, layout_,
        [&] {
          std::vector<std::byte*> in;
          for (const served_tensor& t : L.inputs) in.push_back(static_cast<std::byte*>(ex_.get_input(t.index).data()));
          return in;
        },
        run_model,
        [&] {
          std::vector<const std::byte*> out;
          for (const served_tensor& t : L.outputs) out.push_back(static_cast<const std::byte*>(ex_.get_output(t.index).data()));
          return out;
        });
  }

  /// An instance on a CUDA device: every copy on the executor's stream, one wait at the
  /// end of the batch. A failure found by that wait fails every request that ran.
  template <class Run>
  void run_device(std::vector<batch_request>& rows, Run& run_model) {
    struct mover {
      instance_state& s;
      Run& run_model;
      void put(std::size_t k, std::int64_t row, const input_bytes& src, std::uint64_t offset, std::uint64_t n) { s.put(k, row, src, offset, n); }
      void pad(std::size_t k, std::int64_t row) { s.pad(k, row); }
      void run(std::int64_t filled) {
        s.bind_inputs();
        run_model(filled);
        if (s.host_outputs_) s.ex_.synchronize();  // host outputs that a device wrote are read next
      }
      void take(std::size_t j, std::int64_t row, std::byte* dst, memory_device where, std::uint64_t n) { s.take(j, row, dst, where, n); }
    } m{*this, run_model};
    std::vector<bool> failed_before(rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i) failed_before[i] = !rows[i].error.empty();
    run_batched(rows, layout_, m);
    std::string failure;
    try {
      ex_.synchronize();
    } catch (const std::exception& e) {
      failure = e.what();
      for (std::size_t i = 0; i < rows.size(); ++i)
        if (!failed_before[i] && rows[i].error.empty()) rows[i].error = failure;
    }
    for (std::size_t i = 0; i < rows.size() && failure.empty(); ++i)
      if (!failed_before[i] && !rows[i].error.empty()) failure = rows[i].error;
    if (!failure.empty()) check_device(failure);
    if (model_.config().cuda_graph && !graph_reported_) {
      graph_reported_ = true;
      const std::string why = gexec::cuda_graph::stats(ex_).eager_reason;
      if (!why.empty()) log(TRITONSERVER_LOG_WARN, __LINE__, "gexec: model '" + model_.name() + "': cuda_graph: runs are eager: " + why);
    }
  }

  /// After a failure: a sticky device error leaves the device's context unusable, so the
  /// instance answers every later request with the error (the model's other instances,
  /// on other devices, go on).
  void check_device(const std::string& failure) {
    gexec::cuda_driver& driver = m_.get_backends().get<gexec::cuda_backend>().driver();
    const int code = driver.sticky_error(device_);
    if (code == 0 || !unusable_.empty()) return;
    unusable_ = "gexec: model '" + model_.name() + "': its instance on " + device_label(device_) + " is unusable after " +
                driver.describe(static_cast<gexec::cuda_api::CUresult>(code)) + " (" + failure + ")";
    log(TRITONSERVER_LOG_ERROR, __LINE__, unusable_);
    model_.count_instance(device_, 0, 0, 1);
  }

  /// The device instance's own memory for each input and output (on the device, or on
  /// the host where a heterogeneous graph keeps the tensor there), outputs bound once.
  void bind_device_memory() {
    const serving_layout& L = model_.layout();
    const gexec::compact_graph& g = m_.compact();
    auto placed = [&](std::uint32_t e) { return !g.device_index.empty() && g.device_index[e] == kDLCUDA ? gexec::cuda(device_) : gexec::cpu(); };
    gexec::cuda_backend& cuda = m_.get_backends().get<gexec::cuda_backend>();
    auto own = [&](const served_tensor& t, DLDevice d) {
      own_bytes_ += t.row_bytes * static_cast<std::uint64_t>(layout_.rows_per_run);
      return d.device_type == kDLCPU ? gexec::ndarray::empty(t.shape, t.dtype) : cuda.empty(t.shape, t.dtype, d);
    };
    std::uint64_t largest = 0;
    for (const served_tensor& t : L.inputs) {
      io_slot s;
      s.tensor = &t;
      s.run_bytes = t.row_bytes * static_cast<std::uint64_t>(layout_.rows_per_run);
      s.device = placed(g.entry_id(g.arg_nodes[static_cast<std::size_t>(t.index)], 0));
      if (s.device.device_type == kDLCPU) {
        gexec::ndarray zeros = gexec::ndarray::empty(t.shape, t.dtype);
        if (zeros.byte_size()) std::memset(zeros.data(), 0, static_cast<std::size_t>(zeros.byte_size()));
        ex_.set_input(t.index, zeros);
        s.own = ex_.get_input(t.index);
      } else {
        s.own = own(t, s.device);
        s.next = s.own.data();
      }
      largest = std::max(largest, s.run_bytes);
      inputs_.push_back(std::move(s));
    }
    for (const served_tensor& t : L.outputs) {
      io_slot s;
      s.tensor = &t;
      s.run_bytes = t.row_bytes * static_cast<std::uint64_t>(layout_.rows_per_run);
      s.device = placed(g.entry_id(g.heads[static_cast<std::size_t>(t.index)]));
      s.own = own(t, s.device);
      host_outputs_ = host_outputs_ || s.device.device_type == kDLCPU;
      ex_.set_output_zero_copy(t.index, s.own);
      outputs_.push_back(std::move(s));
    }
    zeros_.assign(static_cast<std::size_t>(largest), std::byte{0});
  }

  static DLTensor bytes_at(const void* p, DLDevice d, std::int64_t& n) { return DLTensor{const_cast<void*>(p), d, 1, {kDLUInt, 8, 1}, &n, nullptr, 0}; }

  /// Enqueues a copy of `n` bytes on the executor's stream.
  void enqueue(const void* from, DLDevice from_device, void* to, DLDevice to_device, std::uint64_t n) {
    std::int64_t size = static_cast<std::int64_t>(n);
    if (size == 0) return;
    DLTensor src = bytes_at(from, from_device, size), dst = bytes_at(to, to_device, size);
    ex_.copy_async(src, dst);
  }

  void put(std::size_t k, std::int64_t row, const input_bytes& src, std::uint64_t offset, std::uint64_t n) {
    io_slot& in = inputs_[k];
    auto* dst = static_cast<std::byte*>(in.own.data()) + static_cast<std::uint64_t>(row) * in.tensor->row_bytes;
    if (in.device.device_type == kDLCPU) {  // a host input of a heterogeneous graph, read by host kernels: written now
      src.pieces(offset, n, [&](std::span<const std::byte> piece, memory_device where, std::uint64_t at) {
        if (where == host_memory)
          std::memcpy(dst + at, piece.data(), piece.size());
        else
          copy_now(piece.data(), memory_at(where), dst + at, piece.size());
      });
      return;
    }
    if (row == 0 && offset == 0 && n == in.run_bytes && src.buffers.size() == 1 && src.device_of(0) == device_ &&
        reinterpret_cast<std::uintptr_t>(src.buffers[0].data()) % 64 == 0) {
      in.next = src.buffers[0].data();  // the request's own memory on this device, read in place
      return;
    }
    in.next = in.own.data();
    src.pieces(offset, n, [&](std::span<const std::byte> piece, memory_device where, std::uint64_t at) {
      enqueue(piece.data(), memory_at(where), dst + at, in.device, piece.size());
    });
  }
  void pad(std::size_t k, std::int64_t row) {
    io_slot& in = inputs_[k];
    const std::uint64_t at = static_cast<std::uint64_t>(row) * in.tensor->row_bytes, n = in.run_bytes - at;
    auto* dst = static_cast<std::byte*>(in.own.data()) + at;
    if (in.device.device_type == kDLCPU) {
      std::memset(dst, 0, static_cast<std::size_t>(n));
      return;
    }
    in.next = in.own.data();
    enqueue(zeros_.data(), gexec::cpu(), dst, in.device, n);
  }
  /// Points each device input at what the coming run reads (a no-op when unchanged, so a
  /// captured CUDA Graph is replayed as it is).
  void bind_inputs() {
    for (io_slot& in : inputs_) {
      if (in.device.device_type == kDLCPU || in.next == in.bound) continue;
      const served_tensor& t = *in.tensor;
      std::vector<std::int64_t> shape = t.shape;
      DLTensor view{const_cast<void*>(in.next), in.device, static_cast<int>(shape.size()), t.dtype, shape.data(), nullptr, 0};
      ex_.set_input_zero_copy(t.index, gexec::ndarray::view(view, in.next == in.own.data() ? in.own.storage_owner() : nullptr));
      in.bound = in.next;
    }
  }
  void take(std::size_t j, std::int64_t row, std::byte* dst, memory_device where, std::uint64_t n) {
    const io_slot& out = outputs_[j];
    const auto* src = static_cast<const std::byte*>(out.own.data()) + static_cast<std::uint64_t>(row) * out.tensor->row_bytes;
    if (out.device.device_type == kDLCPU && where == host_memory)
      std::memcpy(dst, src, static_cast<std::size_t>(n));
    else
      enqueue(src, out.device, dst, memory_at(where), n);
  }
  /// A copy complete on return (into host memory that host kernels read).
  void copy_now(const void* from, DLDevice from_device, void* to, std::uint64_t n) {
    std::int64_t size = static_cast<std::int64_t>(n);
    DLTensor src = bytes_at(from, from_device, size), dst = bytes_at(to, gexec::cpu(), size);
    m_.get_backends().copy(src, dst);
  }

  /// Checks a request's inputs, points the batcher at their bytes and makes its response
  /// with the output buffers its rows are copied into. Throws what is wrong with it.
  void prepare(pending& p) {
    const serving_layout& L = model_.layout();
    batch_request& r = p.rows;
    std::uint32_t given = 0;
    check(TRITONBACKEND_RequestInputCount(p.request, &given), "TRITONBACKEND_RequestInputCount");
    for (std::uint32_t k = 0; k < given; ++k) {
      const char* name = nullptr;
      check(TRITONBACKEND_RequestInputName(p.request, k, &name), "TRITONBACKEND_RequestInputName");
      bool known = false;
      for (const served_tensor& t : L.inputs) known = known || t.name == name;
      if (!known) throw gexec::error(gexec::errc::not_found, "model '" + model_.name() + "' has no input \"" + name + "\"");
    }
    r.rows = -1;
    for (const served_tensor& t : L.inputs) {
      TRITONBACKEND_Input* input = nullptr;
      if (TRITONSERVER_Error* e = TRITONBACKEND_RequestInput(p.request, t.name.c_str(), &input)) {
        TRITONSERVER_ErrorDelete(e);
        throw gexec::error(gexec::errc::not_found, "the request has no input \"" + t.name + "\"");
      }
      const char* name = nullptr;
      TRITONSERVER_DataType type{};
      const std::int64_t* shape = nullptr;
      std::uint32_t ndim = 0, buffers = 0;
      std::uint64_t bytes = 0;
      check(TRITONBACKEND_InputProperties(input, &name, &type, &shape, &ndim, &bytes, &buffers), "TRITONBACKEND_InputProperties");
      const std::string what = "input \"" + t.name + "\"";
      if (type != t.type)
        throw gexec::error(gexec::errc::dtype_mismatch, what + ": data type " + std::string(config_type_name(type)) + ", the model's is " +
                                                            std::string(config_type_name(t.type)));
      const std::vector<std::int64_t> got(shape, shape + ndim), want = t.dims(L.batched());
      const bool shape_ok = L.batched() ? ndim == want.size() + 1 && got[0] >= 1 && got[0] <= L.max_batch_size && std::equal(want.begin(), want.end(), got.begin() + 1)
                                        : got == want;
      if (!shape_ok)
        throw gexec::error(gexec::errc::shape_mismatch, what + ": shape " + shape_text(got) + ", the model's is " +
                                                            (L.batched() ? "[1.." + std::to_string(L.max_batch_size) + "]+" : "") + shape_text(want));
      const std::int64_t rows = L.batched() ? got[0] : 1;
      if (r.rows != -1 && rows != r.rows)
        throw gexec::error(gexec::errc::shape_mismatch, what + ": batch of " + std::to_string(rows) + ", other inputs have " + std::to_string(r.rows));
      r.rows = rows;
      if (bytes != static_cast<std::uint64_t>(rows) * t.row_bytes)
        throw gexec::error(gexec::errc::shape_mismatch, what + ": " + std::to_string(bytes) + " bytes of data, its shape needs " +
                                                            std::to_string(static_cast<std::uint64_t>(rows) * t.row_bytes));
      input_bytes in;
      for (std::uint32_t b = 0; b < buffers; ++b) {
        const void* data = nullptr;
        std::uint64_t size = 0;
        TRITONSERVER_MemoryType memory = TRITONSERVER_MEMORY_CPU;
        std::int64_t memory_id = 0;
        check(TRITONBACKEND_InputBuffer(input, b, &data, &size, &memory, &memory_id), "TRITONBACKEND_InputBuffer");
        if (memory == TRITONSERVER_MEMORY_GPU && device_ < 0)
          throw gexec::error(gexec::errc::device_mismatch, what + ": data in GPU memory, and this instance runs on the host");
        in.buffers.emplace_back(static_cast<const std::byte*>(data), static_cast<std::size_t>(size));
        in.devices.push_back(memory == TRITONSERVER_MEMORY_GPU ? memory_id : host_memory);
      }
      if (in.size() != bytes)
        throw gexec::error(gexec::errc::shape_mismatch, what + ": its buffers hold " + std::to_string(in.size()) + " bytes, not " + std::to_string(bytes));
      r.inputs.push_back(std::move(in));
    }
    if (r.rows < 0) r.rows = 1;  // a model without inputs

    check(TRITONBACKEND_ResponseNew(&p.response, p.request), "TRITONBACKEND_ResponseNew");
    r.outputs.assign(L.outputs.size(), nullptr);
    r.output_devices.assign(L.outputs.size(), host_memory);
    std::uint32_t asked = 0;
    check(TRITONBACKEND_RequestOutputCount(p.request, &asked), "TRITONBACKEND_RequestOutputCount");
    for (std::uint32_t k = 0; k < asked; ++k) {
      const char* name = nullptr;
      check(TRITONBACKEND_RequestOutputName(p.request, k, &name), "TRITONBACKEND_RequestOutputName");
      std::size_t j = 0;
      while (j < L.outputs.size() && L.outputs[j].name != name) ++j;
      if (j == L.outputs.size()) throw gexec::error(gexec::errc::not_found, "model '" + model_.name() + "' has no output \"" + name + "\"");
      const served_tensor& t = L.outputs[j];
      std::vector<std::int64_t> shape = t.dims(L.batched());
      if (L.batched()) shape.insert(shape.begin(), r.rows);
      TRITONBACKEND_Output* output = nullptr;
      check(TRITONBACKEND_ResponseOutput(p.response, &output, t.name.c_str(), t.type, shape.data(), static_cast<std::uint32_t>(shape.size())),
            "TRITONBACKEND_ResponseOutput");
      void* buffer = nullptr;
      TRITONSERVER_MemoryType memory = TRITONSERVER_MEMORY_CPU;
      std::int64_t memory_id = 0;
      check(TRITONBACKEND_OutputBuffer(output, &buffer, static_cast<std::uint64_t>(r.rows) * t.row_bytes, &memory, &memory_id), "TRITONBACKEND_OutputBuffer");
      if (memory == TRITONSERVER_MEMORY_GPU && device_ < 0)
        throw gexec::error(gexec::errc::device_mismatch, "output \"" + t.name + "\": the server gave GPU memory to an instance on the host");
      r.outputs[j] = static_cast<std::byte*>(buffer);
      if (memory == TRITONSERVER_MEMORY_GPU) r.output_devices[j] = memory_id;
    }
  }

  TRITONBACKEND_ModelInstance* instance_;
  model_state& model_;
  int device_;  ///< -1: the host
  model_type& m_;
  executor ex_;
  batch_layout layout_;
  std::uint64_t activation_bytes_ = 0, own_bytes_ = 0;
  // On a CUDA device:
  std::vector<io_slot> inputs_, outputs_;
  std::vector<std::byte> zeros_;  ///< what pads short runs
  bool host_outputs_ = false;     ///< some outputs are on the host (a heterogeneous graph)
  bool graph_reported_ = false;
  std::string unusable_;          ///< set by a sticky device error: every later request gets it
};

/// Hands what an unloaded model freed on the heap back to the system. Its large buffers
/// (weights, activations) are mappings of their own, unmapped as they are freed
/// (gexec::detail::allocate_long_lived); what is left on the heap is small things (the
/// graph, names, plans), freed into the glibc arenas of the threads Triton loads and
/// unloads models on, whose free blocks this returns (all but an arena's top).
void release_freed_memory() noexcept {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

std::string model_where(TRITONBACKEND_Model* model) {
  const char* name = nullptr;
  std::uint64_t version = 0;
  if (TRITONSERVER_Error* e = TRITONBACKEND_ModelName(model, &name)) {
    TRITONSERVER_ErrorDelete(e);
    name = "?";
  }
  if (TRITONSERVER_Error* e = TRITONBACKEND_ModelVersion(model, &version)) TRITONSERVER_ErrorDelete(e);
  return "model '" + std::string(name) + "' version " + std::to_string(version) + ": ";
}

}  // namespace
}  // namespace gexec_triton

using namespace gexec_triton;

extern "C" {

TRITONSERVER_Error* TRITONBACKEND_Initialize(TRITONBACKEND_Backend*) {
  return guarded(TRITONSERVER_ERROR_UNSUPPORTED, "gexec backend: ", [] {
    std::uint32_t major = 0, minor = 0;
    check(TRITONBACKEND_ApiVersion(&major, &minor), "TRITONBACKEND_ApiVersion");
    if (major != GEXEC_TRITON_API_VERSION_MAJOR || minor < GEXEC_TRITON_API_VERSION_MINOR)
      throw std::runtime_error("the server's backend API is " + std::to_string(major) + "." + std::to_string(minor) + ", this backend needs " +
                               std::to_string(GEXEC_TRITON_API_VERSION_MAJOR) + ".x with x >= " + std::to_string(GEXEC_TRITON_API_VERSION_MINOR));
    gexec::contrib::register_sort_functions(gexec::runtime::global());
    families.create();
    log(TRITONSERVER_LOG_INFO, __LINE__,
        "gexec backend " + std::string(GEXEC_VERSION_STRING) + " (backend API " + std::to_string(major) + "." + std::to_string(minor) + ")");
  });
}

TRITONSERVER_Error* TRITONBACKEND_Finalize(TRITONBACKEND_Backend*) {
  families.destroy();  // every model, and its gauges, is gone by now
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_GetBackendAttribute(TRITONBACKEND_Backend*, TRITONBACKEND_BackendAttribute* attributes) {
  // An instance group that names no kind gets KIND_CPU; models with CUDA parts name
  // KIND_GPU or KIND_MODEL.
  return TRITONBACKEND_BackendAttributeAddPreferredInstanceGroup(attributes, TRITONSERVER_INSTANCEGROUPKIND_CPU, 0, nullptr, 0);
}

TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model) {
  return guarded(TRITONSERVER_ERROR_INVALID_ARG, model_where(model), [&] {
    auto state = std::make_unique<model_state>(model);
    check(TRITONBACKEND_ModelSetState(model, state.get()), "TRITONBACKEND_ModelSetState");
    state.release();
  });
}

TRITONSERVER_Error* TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model) {
  void* state = nullptr;
  TRITONSERVER_Error* e = TRITONBACKEND_ModelState(model, &state);
  delete static_cast<model_state*>(state);
  release_freed_memory();
  return e;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance* instance) {
  TRITONBACKEND_Model* model = nullptr;
  if (TRITONSERVER_Error* e = TRITONBACKEND_ModelInstanceModel(instance, &model)) return e;
  return guarded(TRITONSERVER_ERROR_INVALID_ARG, model_where(model), [&] {
    TRITONSERVER_InstanceGroupKind kind{};
    check(TRITONBACKEND_ModelInstanceKind(instance, &kind), "TRITONBACKEND_ModelInstanceKind");
    void* m = nullptr;
    check(TRITONBACKEND_ModelState(model, &m), "TRITONBACKEND_ModelState");
    auto& owner = *static_cast<model_state*>(m);
    auto state = std::make_unique<instance_state>(instance, owner, owner.place(instance, kind));
    check(TRITONBACKEND_ModelInstanceSetState(instance, state.get()), "TRITONBACKEND_ModelInstanceSetState");
    state.release();
  });
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance* instance) {
  void* state = nullptr;
  TRITONSERVER_Error* e = TRITONBACKEND_ModelInstanceState(instance, &state);
  delete static_cast<instance_state*>(state);
  return e;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests,
                                                       const uint32_t request_count) {
  // Every request gets a response and is released here, so this never returns an error
  // (which would hand the requests back to Triton).
  void* state = nullptr;
  if (TRITONSERVER_Error* e = TRITONBACKEND_ModelInstanceState(instance, &state)) return e;
  try {
    static_cast<instance_state*>(state)->execute(requests, request_count);
  } catch (const std::exception& e) {  // allocation failure before any request was answered
    log(TRITONSERVER_LOG_ERROR, __LINE__, std::string("gexec: execute failed: ") + e.what());
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, e.what());
  } catch (...) {  // nothing may unwind into the server
    log(TRITONSERVER_LOG_ERROR, __LINE__, "gexec: execute failed: unknown error");
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "gexec: execute failed: unknown error");
  }
  return nullptr;
}

}  // extern "C"
