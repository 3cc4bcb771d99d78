#pragma once
// What compiled code reaches through gexec's runtime hooks: the runtime, executor,
// device and stream of the run() in progress on this thread. run() sets it; the thread
// pool carries the launcher's context to the workers that run its tasks. The hooks
// TVM-compiled libraries call take no context argument, so a thread-local is the only
// way for them to find the runtime that is running them.

#include "../config.hpp"

#include <dlpack/dlpack.h>

#include <concepts>
#include <cstdint>
#include <type_traits>

#include "../backends/backend.hpp"
#include "../detail/workspace.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

class thread_pool;
class env_registry;

/// The device backends of the running executor, type-erased for the hooks: workspace
/// for TVMBackendAllocWorkspace and set-device, by device. `stream` is the executor's
/// stream_type object on that device, or null where it has none.
struct device_table {
  void* (*alloc_workspace)(void* backends, DLDevice d, std::uint64_t bytes, void* stream);  ///< throws; null if unserved
  int (*free_workspace)(void* backends, DLDevice d, void* p, void* stream) noexcept;         ///< -1: not served or not its
  bool (*set_device)(void* backends, DLDevice d);                                           ///< throws; false if unserved
  void* (*native_stream)(void* backends, DLDevice d, void* stream) noexcept;                ///< the driver's queue (a CUstream) or null
  const void* (*launch_services)(void* backends, DLDevice d) noexcept;                      ///< what device launchers need, or null
};

template <class Backends>
inline constexpr device_table device_table_for = {
    [](void* b, DLDevice d, std::uint64_t bytes, void* stream) -> void* {
      void* p = nullptr;
      static_cast<Backends*>(b)->visit(d.device_type, [&](auto& backend) {
        using S = typename std::decay_t<decltype(backend)>::stream_type;
        p = backend.alloc_workspace(d, bytes, static_cast<S*>(stream));
      });
      return p;
    },
    [](void* b, DLDevice d, void* p, void* stream) noexcept -> int {
      int rc = -1;
      try {
        static_cast<Backends*>(b)->visit(d.device_type, [&](auto& backend) {
          using S = typename std::decay_t<decltype(backend)>::stream_type;
          rc = backend.free_workspace(d, p, static_cast<S*>(stream));
        });
      } catch (...) {
      }
      return rc;
    },
    [](void* b, DLDevice d) { return static_cast<Backends*>(b)->visit(d.device_type, [&](auto& backend) { backend.set_device(d); }); },
    [](void* b, DLDevice d, void* stream) noexcept -> void* {
      void* native = nullptr;
      if (!stream) return nullptr;
      try {
        static_cast<Backends*>(b)->visit(d.device_type, [&](auto& backend) {
          using S = typename std::decay_t<decltype(backend)>::stream_type;
          native = native_handle_of(backend, *static_cast<S*>(stream));
        });
      } catch (...) {
      }
      return native;
    },
    [](void* b, DLDevice d) noexcept -> const void* {
      const void* services = nullptr;
      try {
        static_cast<Backends*>(b)->visit(d.device_type, [&](auto& backend) {
          if constexpr (requires { { backend.launch_services() } noexcept -> std::convertible_to<const void*>; })
            services = backend.launch_services();
        });
      } catch (...) {
      }
      return services;
    },
};

struct run_context;

/// What an executor whose steps one thread runs alone (a sequential run) lends that
/// thread's kernels as host workspace: `region` gives, for the step running (read from
/// detail::running_step()), the bytes of the executor's activation storage no value
/// holds then. Empty (region null) otherwise.
struct workspace_lender {
  lent_region (*region)(const void* state, const run_context& context) noexcept = nullptr;
  const void* state = nullptr;
  const void* thread = nullptr;  ///< the workspace_arena of the thread running alone
};

struct run_context {
  thread_pool* pool = nullptr;       ///< serves TVMBackendParallelLaunch
  const env_registry* env = nullptr; ///< serves TVMBackendGetFuncFromEnv and calls through its handles
  const void* executor = nullptr;
  void* backends = nullptr;          ///< the executor's backends<...>, through `devices`
  const device_table* devices = nullptr;
  DLDevice device{kDLCPU, 0};        ///< the device the running step is on
  void* stream = nullptr;            ///< the executor's stream_type object for `device`
  void* native_stream = nullptr;     ///< the driver's handle of that stream (a CUstream), or null
  const void* launch_services = nullptr;  ///< what launchers of device kernels need on `device` (the CUDA driver), or null
  std::uint64_t workspace_limit = UINT64_MAX;  ///< host workspace a thread may hold at once
  workspace_lender lender;           ///< set while one thread runs the executor's steps alone
};

/// The context of this thread, or nullptr outside run() (then the process default
/// runtime serves the hooks). A plain pointer: no initialisation guard on access.
inline run_context*& current_context() noexcept {
  thread_local run_context* context = nullptr;
  return context;
}

/// Sets this thread's context for a scope and restores the previous one.
class context_scope {
 public:
  explicit context_scope(run_context* c) noexcept : saved_(current_context()) { current_context() = c; }
  ~context_scope() { current_context() = saved_; }
  context_scope(const context_scope&) = delete;
  context_scope& operator=(const context_scope&) = delete;

 private:
  run_context* saved_;
};

}  // namespace detail
GEXEC_NAMESPACE_END
