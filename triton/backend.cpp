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
//
// The parts, one job each, included here into one translation unit (so gexec's headers are
// parsed, and its templates instantiated, once): server.hpp (logging, errors across the
// server's API), model_files.hpp (a version folder's files, the graph, library and
// weights read once), model_config.hpp (the configuration completed and checked),
// metrics.hpp (the gauges), model_state.hpp (a model: loading, placing instances, the
// model built once per device), requests.hpp (a request's inputs checked, its response
// made), batcher.hpp (rows batched into runs), device_io.hpp (a GPU instance's copies),
// instance_state.hpp (an instance executing a batch of requests), interpreted.hpp and
// interpreted_instance.hpp (a Relax function gexec interprets: described, and run per
// request). This file holds the
// entry points the server calls.

#include <gexec/contrib/sort.hpp>
#include <gexec/runtime.hpp>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "instance_state.hpp"
#include "interpreted_instance.hpp"
#include "metrics.hpp"
#include "model_state.hpp"
#include "server.hpp"
#include "triton_api.hpp"

namespace gexec_triton {
namespace {

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

/// An instance: a graph model's executor, or a virtual machine of an interpreted Relax
/// function (interpreted_instance.hpp).
struct any_instance {
  std::unique_ptr<instance_state> graph;
  std::unique_ptr<interpreted_instance> interpreted;
  void execute(TRITONBACKEND_Request** requests, std::uint32_t count) {
    if (interpreted)
      interpreted->execute(requests, count);
    else
      graph->execute(requests, count);
  }
};

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
    log(TRITONSERVER_LOG_INFO, __FILE__, __LINE__,
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
    auto state = std::make_unique<any_instance>();
    const int device = owner.place(instance, kind);
    if (owner.interpreted())
      state->interpreted = std::make_unique<interpreted_instance>(instance, owner);
    else
      state->graph = std::make_unique<instance_state>(instance, owner, device);
    check(TRITONBACKEND_ModelInstanceSetState(instance, state.get()), "TRITONBACKEND_ModelInstanceSetState");
    state.release();
  });
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance* instance) {
  void* state = nullptr;
  TRITONSERVER_Error* e = TRITONBACKEND_ModelInstanceState(instance, &state);
  delete static_cast<any_instance*>(state);
  return e;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests,
                                                       const uint32_t request_count) {
  // Every request gets a response and is released here, so this never returns an error
  // (which would hand the requests back to Triton).
  void* state = nullptr;
  if (TRITONSERVER_Error* e = TRITONBACKEND_ModelInstanceState(instance, &state)) return e;
  try {
    static_cast<any_instance*>(state)->execute(requests, request_count);
  } catch (const std::exception& e) {  // allocation failure before any request was answered
    log(TRITONSERVER_LOG_ERROR, __FILE__, __LINE__, std::string("gexec: execute failed: ") + e.what());
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, e.what());
  } catch (...) {  // nothing may unwind into the server
    log(TRITONSERVER_LOG_ERROR, __FILE__, __LINE__, "gexec: execute failed: unknown error");
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "gexec: execute failed: unknown error");
  }
  return nullptr;
}

}  // extern "C"
