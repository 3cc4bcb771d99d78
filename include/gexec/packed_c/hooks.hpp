#pragma once
// gexec's implementations of the runtime hooks a TVM-compiled library calls through
// its context slots (__TVMFuncCall, __TVMBackendAllocWorkspace, ...), so that its
// kernels run without libtvm_runtime. The hooks take no context argument: they find the
// runtime of the run() in progress through the thread-local run_context, and the
// process default runtime's parts outside run(). The workspace and parallel-task hooks
// serve TVM-FFI libraries too, and live beside both ABIs (binding/backend_hooks.hpp).
//
// They are inline functions of gexec's ABI namespace, not extern "C" symbols: a
// library reaches them only through the slots module loading fills (context_slots()),
// so a program that loads no library emits none of them, and two copies of gexec of
// different versions never share one.

#include "../config.hpp"

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "../binding/backend_hooks.hpp"
#include "../binding/loader.hpp"
#include "../detail/last_error.hpp"
#include "../runtime/env_registry.hpp"
#include "../tvm_abi.hpp"

GEXEC_NAMESPACE_BEGIN
struct module_blob;
namespace detail {

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

/// The context slots a packed C library may export and what gexec puts in each.
inline const provided_symbol (&context_slots())[7] {
  static const provided_symbol slots[7] = {
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
