#pragma once
// gexec's implementations of the runtime hooks a TVM-compiled library calls through
// its context slots, so that its kernels run without libtvm_runtime.

#include "../config.hpp"

#include <cstdint>
#include <exception>
#include <string>
#include <string_view>

#include "../device.hpp"
#include "../function_registry.hpp"
#include "../tvm_abi.hpp"
#include "last_error.hpp"
#include "thread_pool.hpp"
#include "workspace.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

/// What a library's __tvm_module_ctx points at: the module, for function look-ups.
struct module_context {
  const packed_function* (*find)(const module_context* self, std::string_view name) = nullptr;
  std::string name;  ///< for error messages
};

inline void api_set_last_error(const char* message) noexcept {
  try {
    set_last_error(message ? message : "");
  } catch (...) {  // no memory for the message: keep the previous one
  }
}

inline void* backend_alloc_workspace(int device_type, int device_id, std::uint64_t nbytes, int, int) noexcept {
  if (device_type != kDLCPU) {
    set_last_error("TVMBackendAllocWorkspace: no workspace allocator for " + to_string(DLDevice{static_cast<DLDeviceType>(device_type), device_id}));
    return nullptr;
  }
  try {
    return workspace_arena::this_thread().allocate(nbytes);
  } catch (const std::exception& e) {
    set_last_error(std::string("TVMBackendAllocWorkspace: ") + e.what());
    return nullptr;
  }
}

inline int backend_free_workspace(int device_type, int device_id, void* ptr) noexcept {
  if (device_type != kDLCPU || workspace_arena::this_thread().free(ptr) != 0) {
    set_last_error("TVMBackendFreeWorkspace: " + to_string(DLDevice{static_cast<DLDeviceType>(device_type), device_id}) +
                   " workspace was not allocated by this thread");
    return -1;
  }
  return 0;
}

inline int backend_parallel_launch(FTVMParallelLambda f, void* cdata, int num_task) {
  return thread_pool::instance().launch(f, cdata, num_task);
}

inline int backend_parallel_barrier(int, TVMParallelGroupEnv* penv) { return thread_pool::barrier(penv); }

inline int backend_get_func_from_env(void* mod_node, const char* func_name, void** out) noexcept {
  try {
    std::string_view name = func_name ? func_name : "";
    const auto* ctx = static_cast<const module_context*>(mod_node);
    const packed_function* f = ctx && ctx->find ? ctx->find(ctx, name) : nullptr;
    if (!f) f = find_global_function(name);
    if (!f) {
      set_last_error("function \"" + std::string(name) + "\" is neither in " + (ctx ? ctx->name : std::string("the module")) +
                     " nor registered with gexec::register_global_function");
      return -1;
    }
    *out = const_cast<packed_function*>(f);
    return 0;
  } catch (const std::exception& e) {
    set_last_error(std::string("TVMBackendGetFuncFromEnv: ") + e.what());
    return -1;
  }
}

inline int api_func_call(void* handle, TVMValue* args, int* codes, int num_args, TVMValue* ret, int* ret_code) {
  const auto* f = static_cast<const packed_function*>(handle);
  if (!f || !f->fn) {
    set_last_error("TVMFuncCall: the function handle no longer refers to a function");
    return -1;
  }
  int dummy_code = tc_null;
  TVMValue dummy{};
  return f->fn(args, codes, num_args, ret ? ret : &dummy, ret_code ? ret_code : &dummy_code, f->resource_handle) == 0 ? 0 : -1;
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
