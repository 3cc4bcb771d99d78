#pragma once
// What compiled code reaches through gexec's runtime hooks: the runtime, executor,
// device and stream of the run() in progress on this thread. run() sets it; the thread
// pool carries the launcher's context to the workers that run its tasks. The hooks
// TVM-compiled libraries call take no context argument, so a thread-local is the only
// way for them to find the runtime that is running them.

#include "../config.hpp"

#include <dlpack/dlpack.h>

GEXEC_NAMESPACE_BEGIN
namespace detail {

class thread_pool;
class env_registry;

struct run_context {
  thread_pool* pool = nullptr;       ///< serves TVMBackendParallelLaunch
  const env_registry* env = nullptr; ///< serves TVMBackendGetFuncFromEnv and calls through its handles
  const void* executor = nullptr;
  DLDevice device{kDLCPU, 0};
  void* stream = nullptr;
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
