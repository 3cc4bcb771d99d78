#pragma once
// The runtime functions compiled code of either ABI calls for workspace and parallel
// tasks (TVMBackendAllocWorkspace, TVMBackendParallelLaunch, ...): a packed C library
// reaches them through its context slots (packed_c/hooks.hpp), a TVM-FFI library
// through the entries of its global offset table gexec binds (tvm_ffi/imports.hpp), and
// system-library kernels as the C functions packed_c/system_lib.hpp defines. Like the
// other hooks they take no context argument: they find the runtime of the run() in
// progress through the thread-local run_context, and the process default runtime's
// parts outside run().

#include "../config.hpp"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <string>

#include "../detail/last_error.hpp"
#include "../detail/workspace.hpp"
#include "../device.hpp"
#include "../runtime/run_context.hpp"
#include "../runtime/thread_pool.hpp"
#include "../tvm_abi.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

/// What gexec writes into a kernel library, by symbol name: a context slot (a
/// pointer-sized data symbol the library exports) or an imported function (an entry of
/// its global offset table).
struct provided_symbol {
  const char* symbol;
  void* value;
};

/// The pool serving TVMBackendParallelLaunch: the running executor's runtime's, else
/// the process default's.
inline thread_pool& current_pool() noexcept {
  const run_context* c = current_context();
  return c && c->pool ? *c->pool : default_pool();
}

/// TVMBackendAllocWorkspace: from the backend of the running executor serving that
/// device type; outside run(), host workspace only.
inline void* backend_alloc_workspace(int device_type, int device_id, std::uint64_t nbytes, int, int) noexcept {
  const DLDevice d{static_cast<DLDeviceType>(device_type), device_id};
  try {
    const run_context* c = current_context();
    if (c && device_type == kDLCPU) {
      // The limit holds whatever memory serves: what a kernel may have at once.
      workspace_arena& a = workspace_arena::this_thread();
      if (nbytes > c->workspace_limit - std::min(c->workspace_limit, a.in_use() + a.lent_in_use())) {
        set_last_error("TVMBackendAllocWorkspace: " + std::to_string(nbytes) + " bytes of host workspace would exceed the limit of " +
                       std::to_string(c->workspace_limit) + " bytes a thread may hold (model_options::max_workspace_bytes)");
        return nullptr;
      }
      if (c->lender.region && &a == c->lender.thread)  // memory the running executor lends this thread, first
        if (void* p = a.lend(nbytes, c->lender.region(c->lender.state, *c))) return p;
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
  if (device_type == kDLCPU && workspace_arena::this_thread().lent(ptr)) return workspace_arena::this_thread().free(ptr);
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

}  // namespace detail
GEXEC_NAMESPACE_END
