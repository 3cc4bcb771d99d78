// libtriton_gexec.so: Triton Inference Server's backend for TVM graph-executor models.
//
// Lifecycle (Triton's backend API): a model is loaded once in ModelInitialize (weights
// read once, the configuration completed and checked); each instance of its instance
// group is a gexec executor of that model (its own activations, the weights shared),
// made in ModelInstanceInitialize; Triton calls ModelInstanceExecute for an instance on
// that instance's own thread, so instances run concurrently and each executor is used by
// one thread at a time. No exception leaves an entry point: errors become Triton errors
// (the model fails to load, or the request gets an error response).

#include <gexec/contrib/sort.hpp>
#include <gexec/executor.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
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
using executor = gexec::graph_executor<>;

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

/// A parameter file's tensors in one anonymous mapping of their own (each 64-byte
/// aligned, so the model holds them in place), unmapped when the model lets the last go.
/// Heap copies would be freed into the glibc arenas of the thread that loaded the model,
/// which malloc_trim does not empty: load/unload cycles grew the server by the weights.
gexec::param_dict load_params_unmapped_on_unload(const fs::path& file) {
  const gexec::param_dict read = gexec::load_param_dict_file(file, gexec::load_mode::mmap);  // no copy where aligned
  constexpr std::size_t align = 64;
  auto padded = [](std::uint64_t n) { return static_cast<std::size_t>((n + align - 1) / align * align); };
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

gexec::model load_model(const model_files& f, const gexec::model_options& o) {
  if (f.graph.empty()) return gexec::model::load(f.library, o);
  if (!f.params.empty())
    return gexec::model(gexec::load_graph_file(f.graph), gexec::packed_c_abi(o.runtime->load_module(f.library)), load_params_unmapped_on_unload(f.params), o);
  return gexec::model(gexec::load_graph_file(f.graph), gexec::packed_c_abi(o.runtime->load_module(f.library)), gexec::param_dict{}, o);
}

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

    gexec::model_options options;
    options.runtime = settings_.num_threads > 0 ? gexec::runtime::create({.num_threads = settings_.num_threads})
                                                : gexec::runtime::global().shared_from_this();
    if (settings_.num_threads > 0) gexec::contrib::register_sort_functions(*options.runtime);
    options.planner = gexec::planner_named(settings_.planner);
    model_.emplace(load_model(files, options));
    param_bytes_ = model_->param_bytes();
    activation_bytes_ = model_->storage().planned;
    spare_.emplace(model_->instantiate());  // describes the model, then serves the first instance

    std::vector<model_tensor> inputs, outputs;
    for (const gexec::tensor_info& t : spare_->get_input_info()) inputs.push_back({t.name, spare_->get_input_index(t.name), t.dtype, t.shape});
    int k = 0;
    for (const gexec::tensor_info& t : spare_->get_output_info()) outputs.push_back({t.name, k++, t.dtype, t.shape});
    bool auto_complete = false;
    check(TRITONBACKEND_ModelAutoCompleteConfig(model, &auto_complete), "TRITONBACKEND_ModelAutoCompleteConfig");
    completed_config c = complete_config(std::move(config), inputs, outputs, auto_complete);
    layout_ = std::move(c.layout);
    if (c.changed) set_config(model, c.config);

    const fs::path& shown = files.graph.empty() ? files.library : files.graph.parent_path();
    log(TRITONSERVER_LOG_INFO, __LINE__,
        "gexec: model '" + name_ + "' version " + std::to_string(version_) + " loaded from " + shown.string() + ": " +
            std::to_string(inputs.size()) + " input(s), " + std::to_string(outputs.size()) + " output(s), " + megabytes(param_bytes_) +
            " of parameters held once, " + megabytes(activation_bytes_) + " of activations per instance; max_batch_size " +
            std::to_string(layout_.max_batch_size) + " (" + std::to_string(layout_.rows_per_run) + " row(s) per run), planner " +
            settings_.planner + ", execution_policy " + settings_.execution_policy + ", num_threads " +
            (settings_.num_threads ? std::to_string(settings_.num_threads) : std::string("all cores")));
  }

  /// A new executor of the model, its inputs allocated (every run writes them all).
  executor make_executor() {
    executor ex = [&] {
      std::lock_guard g(mu_);
      if (spare_) {
        executor e = std::move(*spare_);
        spare_.reset();
        return e;
      }
      return model_->instantiate();
    }();
    for (const served_tensor& t : layout_.inputs) {
      gexec::ndarray zeros = gexec::ndarray::empty(t.shape, t.dtype);
      if (zeros.byte_size()) std::memset(zeros.data(), 0, static_cast<std::size_t>(zeros.byte_size()));
      ex.set_input(t.index, zeros);
    }
    return ex;
  }

  void run(executor& ex) const {
    gexec::with_policy(settings_.execution_policy, [&](auto policy) { ex.run(policy); });
  }

  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] const serving_layout& layout() const noexcept { return layout_; }

 private:
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

  std::string name_;
  std::uint64_t version_ = 0;
  settings settings_;
  serving_layout layout_;
  std::optional<gexec::model> model_;
  std::uint64_t param_bytes_ = 0, activation_bytes_ = 0;
  std::mutex mu_;
  std::optional<executor> spare_;
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

class instance_state {
 public:
  instance_state(TRITONBACKEND_ModelInstance* instance, model_state& model) : instance_(instance), model_(model), ex_(model.make_executor()) {
    const serving_layout& L = model_.layout();
    layout_.rows_per_run = L.rows_per_run;
    for (const served_tensor& t : L.inputs) layout_.input_row_bytes.push_back(t.row_bytes);
    for (const served_tensor& t : L.outputs) layout_.output_row_bytes.push_back(t.row_bytes);
  }

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
      try {
        prepare(work[i]);
      } catch (const std::exception& e) {
        work[i].rows.error = e.what();
      } catch (...) {
        work[i].rows.error = "unknown error";
      }
    }
    std::size_t cancelled = 0;
    for (pending& p : work) {
      cancelled += p.cancelled;
      rows.push_back(std::move(p.rows));
    }
    if (cancelled)
      log(TRITONSERVER_LOG_VERBOSE, __LINE__,
          "gexec: model '" + model_.name() + "': " + std::to_string(cancelled) + " of " + std::to_string(count) + " request(s) cancelled, answered without running");

    const serving_layout& L = model_.layout();
    std::uint64_t compute_start = now_ns(), compute_end = compute_start;
    run_batched(
        rows, layout_,
        [&] {
          std::vector<std::byte*> in;
          for (const served_tensor& t : L.inputs) in.push_back(static_cast<std::byte*>(ex_.get_input(t.index).data()));
          return in;
        },
        [&](std::int64_t filled) {
          const std::uint64_t start = now_ns();
          model_.run(ex_);
          const std::uint64_t end = now_ns();
          compute_end = end;
          if (TRITONSERVER_Error* e =
                  TRITONBACKEND_ModelInstanceReportBatchStatistics(instance_, static_cast<std::uint64_t>(filled), start, start, end, end))
            TRITONSERVER_ErrorDelete(e);
        },
        [&] {
          std::vector<const std::byte*> out;
          for (const served_tensor& t : L.outputs) out.push_back(static_cast<const std::byte*>(ex_.get_output(t.index).data()));
          return out;
        });
    const std::uint64_t exec_end = now_ns();

    for (std::uint32_t i = 0; i < count; ++i) {
      pending& p = work[i];
      const std::string& error = rows[i].error;
      TRITONSERVER_Error* e =
          error.empty() ? nullptr : TRITONSERVER_ErrorNew(p.cancelled ? TRITONSERVER_ERROR_CANCELLED : TRITONSERVER_ERROR_INVALID_ARG, error.c_str());
      if (!p.response) {
        if (TRITONSERVER_Error* r = TRITONBACKEND_ResponseNew(&p.response, p.request)) {
          log(TRITONSERVER_LOG_ERROR, __LINE__, "gexec: model '" + model_.name() + "': cannot create a response: " + TRITONSERVER_ErrorMessage(r));
          TRITONSERVER_ErrorDelete(r);
          p.response = nullptr;
        }
      }
      if (p.response) {
        if (TRITONSERVER_Error* s = TRITONBACKEND_ResponseSend(p.response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, e)) {
          log(TRITONSERVER_LOG_ERROR, __LINE__, "gexec: model '" + model_.name() + "': cannot send a response: " + TRITONSERVER_ErrorMessage(s));
          TRITONSERVER_ErrorDelete(s);
        }
      }
      if (e) TRITONSERVER_ErrorDelete(e);
      if (TRITONSERVER_Error* s =
              TRITONBACKEND_ModelInstanceReportStatistics(instance_, p.request, error.empty(), exec_start, compute_start, compute_end, exec_end))
        TRITONSERVER_ErrorDelete(s);
      if (TRITONSERVER_Error* r = TRITONBACKEND_RequestRelease(p.request, TRITONSERVER_REQUEST_RELEASE_ALL)) TRITONSERVER_ErrorDelete(r);
    }
  }

 private:
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
        if (memory == TRITONSERVER_MEMORY_GPU) throw gexec::error(gexec::errc::device_mismatch, what + ": data in GPU memory; the gexec backend serves CPU instances");
        in.buffers.emplace_back(static_cast<const std::byte*>(data), static_cast<std::size_t>(size));
      }
      if (in.size() != bytes)
        throw gexec::error(gexec::errc::shape_mismatch, what + ": its buffers hold " + std::to_string(in.size()) + " bytes, not " + std::to_string(bytes));
      r.inputs.push_back(std::move(in));
    }
    if (r.rows < 0) r.rows = 1;  // a model without inputs

    check(TRITONBACKEND_ResponseNew(&p.response, p.request), "TRITONBACKEND_ResponseNew");
    r.outputs.assign(L.outputs.size(), nullptr);
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
      if (memory == TRITONSERVER_MEMORY_GPU) throw gexec::error(gexec::errc::device_mismatch, "output \"" + t.name + "\": the server gave GPU memory");
      r.outputs[j] = static_cast<std::byte*>(buffer);
    }
  }

  TRITONBACKEND_ModelInstance* instance_;
  model_state& model_;
  executor ex_;
  batch_layout layout_;
};

/// Hands what an unloaded model freed on the heap back to the system (a single-file
/// model's weights are copied out of its library onto the heap). Triton loads and unloads
/// models on threads of its own, whose glibc arenas otherwise keep the freed pages: each
/// load/unload cycle of a 47 MB model grew the server by about as much.
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
    log(TRITONSERVER_LOG_INFO, __LINE__,
        "gexec backend " + std::string(GEXEC_VERSION_STRING) + " (backend API " + std::to_string(major) + "." + std::to_string(minor) + ")");
  });
}

TRITONSERVER_Error* TRITONBACKEND_GetBackendAttribute(TRITONBACKEND_Backend*, TRITONBACKEND_BackendAttribute* attributes) {
  // Instances run on the CPU: an instance group that names no kind gets KIND_CPU.
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
    if (kind == TRITONSERVER_INSTANCEGROUPKIND_GPU)
      throw gexec::error(gexec::errc::unsupported, "instance_group kind KIND_GPU: the gexec backend serves CPU instances (use KIND_CPU)");
    void* m = nullptr;
    check(TRITONBACKEND_ModelState(model, &m), "TRITONBACKEND_ModelState");
    auto state = std::make_unique<instance_state>(instance, *static_cast<model_state*>(m));
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
