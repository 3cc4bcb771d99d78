#pragma once
// gexec's implementations of the runtime hooks a TVM-compiled library calls through
// its context slots (__TVMFuncCall, __TVMBackendAllocWorkspace, ...), so that its
// kernels run without libtvm_runtime. The hooks take no context argument: they find the
// runtime of the run() in progress through the thread-local run_context, and the
// process default runtime's parts outside run().
//
// They are inline functions of gexec's ABI namespace, not extern "C" symbols: a
// library reaches them only through the slots module loading fills (context_slots()),
// so a program that loads no library emits none of them, and two copies of gexec of
// different versions never share one.

#include "../config.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "../detail/last_error.hpp"
#include "../detail/workspace.hpp"
#include "../device.hpp"
#include "../runtime/env_registry.hpp"
#include "../runtime/run_context.hpp"
#include "../runtime/thread_pool.hpp"
#include "../tvm_abi.hpp"
#include "loader.hpp"

GEXEC_NAMESPACE_BEGIN
struct module_blob;
namespace detail {

/// The pool serving TVMBackendParallelLaunch: the running executor's runtime's, else
/// the process default's.
inline thread_pool& current_pool() noexcept {
  const run_context* c = current_context();
  return c && c->pool ? *c->pool : default_pool();
}

/// What a library's __tvm_module_ctx points at: one per library file for the life of
/// the process, because the library may cache it (and handles found through it) in
/// globals that outlive gexec's module object. Guarded by process_mutex().
struct module_context {
  std::string name;              ///< "kernel library /path/lib.so", for messages
  void* library = nullptr;       ///< dlopen handle of the live module, null while none is
  const void* owner = nullptr;   ///< the module object that set `library`
  std::unordered_map<std::string, func_handle*> functions;  ///< handles given out, never freed
  /// Launchers of the kernels of the library's device modules (the "cuda" entries of its
  /// __tvm_dev_mblob), by kernel name; never freed. See cuda/kernels.hpp.
  std::unordered_map<std::string, func_handle*> device_functions;
  std::vector<std::shared_ptr<const void>> device_kernels;  ///< what device_functions launch, kept
  /// TVM's __tvm_set_device, for libraries with device modules; null for others.
  func_handle* set_device = nullptr;
  std::string device_error;  ///< why the device modules could not be read, if they could not
};

/// How the kernels of a library's device modules become launchers: the loader gives
/// it the modules of one type key ("cuda") and the library's context to fill
/// (device_functions, device_kernels, set_device). The packed C loader knows no device
/// API; a device wing registers its loader (<gexec/cuda.hpp> does for "cuda").
using device_module_loader = void (*)(const module_blob& blob, module_context& ctx);
struct device_module_loader_entry {
  const char* type_key;
  device_module_loader load;
};
inline std::vector<device_module_loader_entry>& device_module_loaders() {
  static std::vector<device_module_loader_entry> table;  // guarded by process_mutex()
  return table;
}
/// Registers `load` for modules of `type_key` (once per key; later ones are ignored).
inline bool register_device_module_loader(const char* type_key, device_module_loader load) {
  std::lock_guard g(process_mutex());
  auto& table = device_module_loaders();
  for (const auto& e : table)
    if (std::string_view(e.type_key) == type_key) return false;
  table.push_back({type_key, load});
  return true;
}

inline void api_set_last_error(const char* message) noexcept { set_last_error(message ? message : ""); }

/// TVMBackendAllocWorkspace: from the backend of the running executor serving that
/// device type; outside run(), host workspace only.
inline void* backend_alloc_workspace(int device_type, int device_id, std::uint64_t nbytes, int, int) noexcept {
  const DLDevice d{static_cast<DLDeviceType>(device_type), device_id};
  try {
    const run_context* c = current_context();
    if (c && device_type == kDLCPU && nbytes > c->workspace_limit - std::min(c->workspace_limit, workspace_arena::this_thread().in_use())) {
      set_last_error("TVMBackendAllocWorkspace: " + std::to_string(nbytes) + " bytes of host workspace would exceed the limit of " +
                     std::to_string(c->workspace_limit) + " bytes a thread may hold (model_options::max_workspace_bytes)");
      return nullptr;
    }
    if (c && c->devices) {
      void* stream = same_device(c->device, d) ? c->stream : nullptr;
      if (void* p = c->devices->alloc_workspace(c->backends, d, nbytes, stream)) return p;
      set_last_error("TVMBackendAllocWorkspace: no backend of the running executor serves " + to_string(d));
      return nullptr;
    }
    if (device_type == kDLCPU) return workspace_arena::this_thread().allocate(nbytes);
    set_last_error("TVMBackendAllocWorkspace: no workspace for " + to_string(d) + " outside an executor's run()");
  } catch (const std::exception& e) {
    set_last_error(std::string("TVMBackendAllocWorkspace: ") + e.what());
  } catch (...) {
    set_last_error("TVMBackendAllocWorkspace: unknown failure");
  }
  return nullptr;
}

inline int backend_free_workspace(int device_type, int device_id, void* ptr) noexcept {
  const DLDevice d{static_cast<DLDeviceType>(device_type), device_id};
  const run_context* c = current_context();
  const int rc = c && c->devices ? c->devices->free_workspace(c->backends, d, ptr, same_device(c->device, d) ? c->stream : nullptr)
                 : device_type == kDLCPU ? workspace_arena::this_thread().free(ptr)
                                         : -1;
  if (rc != 0) {
    try {
      set_last_error("TVMBackendFreeWorkspace: " + to_string(d) + " workspace was not allocated by this thread");
    } catch (...) {
    }
    return -1;
  }
  return 0;
}

/// TVMBackendParallelLaunch for a library that can call TVMBackendParallelBarrier: its
/// tasks run together.
inline int backend_parallel_launch(FTVMParallelLambda f, void* cdata, int num_task) noexcept {
  return current_pool().launch(f, cdata, num_task, {.tasks = task_kind::together, .learn = true});
}

/// TVMBackendParallelLaunch for a library that cannot (it has no barrier slot and imports
/// no barrier): its tasks are independent, more of them than threads.
inline int backend_parallel_launch_independent(FTVMParallelLambda f, void* cdata, int num_task) noexcept {
  return current_pool().launch(f, cdata, num_task, {.tasks = task_kind::independent, .learn = true});
}

inline int backend_parallel_barrier(int, TVMParallelGroupEnv* penv) noexcept { return thread_pool::barrier(penv); }

/// What a handle to a library's own function calls: the function the library file's
/// latest load resolved, or an error once that load is gone.
inline int call_library_function(const func_handle* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code) noexcept {
  packed_c_func fn = self->fn.load(std::memory_order_acquire);
  if (!fn) {
    set_last_error("TVMFuncCall: the kernel library this function came from was unloaded");
    return -1;
  }
  return fn(args, codes, n, ret, ret_code, nullptr) == 0 ? 0 : -1;
}

/// TVMBackendGetFuncFromEnv: the module's own function first, then a function
/// registered with the running runtime or the process default, as TVM looks them up.
inline int backend_get_func_from_env(void* mod_node, const char* func_name, void** out) noexcept {
  try {
    std::string_view name = func_name ? func_name : "";
    auto* ctx = static_cast<module_context*>(mod_node);
    std::lock_guard g(process_mutex());
    if (ctx) {
      if (packed_c_func fn = library_function(ctx->library, name)) {
        func_handle*& h = ctx->functions[std::string(name)];
        if (!h) {
          h = new func_handle;  // never freed: the library caches it
          h->call = &call_library_function;
        }
        h->fn.store(fn, std::memory_order_release);
        *out = h;
        return 0;
      }
      // A kernel of a device module the library imports.
      if (auto it = ctx->device_functions.find(std::string(name)); it != ctx->device_functions.end()) {
        *out = it->second;
        return 0;
      }
    }
    if (const env_name* e = env_names::instance().find(name); e && find_env_function(e->index)) {
      *out = const_cast<func_handle*>(&e->handle);
      return 0;
    }
    if (ctx && ctx->set_device && name == "__tvm_set_device") {
      *out = ctx->set_device;
      return 0;
    }
    set_last_error("function \"" + std::string(name) + "\" is neither in " + (ctx ? ctx->name : std::string("the module")) +
                   " nor registered with the runtime (gexec::register_global_function or runtime::register_function)" +
                   (ctx && !ctx->device_error.empty() ? "; the library's device modules could not be read: " + ctx->device_error : std::string()));
    return -1;
  } catch (const std::exception& e) {
    set_last_error(std::string("TVMBackendGetFuncFromEnv: ") + e.what());
    return -1;
  }
}

inline int api_func_call(void* handle, TVMValue* args, int* codes, int num_args, TVMValue* ret, int* ret_code) noexcept {
  const auto* h = static_cast<const func_handle*>(handle);
  if (!h || !h->call) {
    set_last_error("TVMFuncCall: not a function handle gexec gave out");
    return -1;
  }
  int dummy_code = tc_null;
  TVMValue dummy{};
  return h->call(h, args, codes, num_args, ret ? ret : &dummy, ret_code ? ret_code : &dummy_code);
}

/// The context slots a TVM library may export and what gexec puts in each.
struct context_slot {
  const char* symbol;
  void* value;
};

inline const context_slot (&context_slots())[7] {
  static const context_slot slots[7] = {
      {"__TVMFuncCall", reinterpret_cast<void*>(&api_func_call)},
      {"__TVMAPISetLastError", reinterpret_cast<void*>(&api_set_last_error)},
      {"__TVMBackendGetFuncFromEnv", reinterpret_cast<void*>(&backend_get_func_from_env)},
      {"__TVMBackendAllocWorkspace", reinterpret_cast<void*>(&backend_alloc_workspace)},
      {"__TVMBackendFreeWorkspace", reinterpret_cast<void*>(&backend_free_workspace)},
      {"__TVMBackendParallelLaunch", reinterpret_cast<void*>(&backend_parallel_launch)},
      {"__TVMBackendParallelBarrier", reinterpret_cast<void*>(&backend_parallel_barrier)},
  };
  return slots;
}

}  // namespace detail
GEXEC_NAMESPACE_END
