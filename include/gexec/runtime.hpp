#pragma once
// gexec::runtime: what TVM kept in process globals, as an object. It owns the thread
// pool that serves parallel loops (TVMBackendParallelLaunch), the registry of
// functions compiled code looks up by name (TVMBackendGetFuncFromEnv), and the kernel
// libraries loaded through it. A process default exists (runtime::global()); a model
// may be given its own, for example to give one model its own threads:
//
//   auto rt = gexec::runtime::create({.num_threads = 2});
//   rt->register_function("tvm.contrib.sort.argsort", my_argsort);
//   auto m = gexec::model::load("model.so", {.runtime = rt});
//
// Kernels reach the runtime of the executor running them through a thread-local
// context that run() sets; a registry look-up that misses there falls back to the
// process default's registry. A runtime is thread-safe; it must outlive the models and
// executors made with it (they hold it by shared_ptr, so it does).
//
// Nothing here loads libraries: load_module is defined with the packed C ABI
// (<gexec/library/module.hpp>), so a program of C++ kernels needs no dynamic loader.

#include "config.hpp"

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "file_path.hpp"
#include "fwd.hpp"
#include "packed_function.hpp"
#include "runtime/env_registry.hpp"
#include "runtime/run_context.hpp"
#include "runtime/thread_pool.hpp"

GEXEC_NAMESPACE_BEGIN

struct runtime_options {
  /// Threads of the pool, the caller's included; 0: GEXEC_NUM_THREADS, else
  /// TVM_NUM_THREADS, else the cores this process may use (affinity mask, cgroup quota).
  int num_threads = 0;
};

class runtime : public std::enable_shared_from_this<runtime> {
  struct process_default_tag {};

 public:
  /// A runtime with its own thread pool and registry.
  explicit runtime(runtime_options options = {})
      : own_pool_([&options] {
          const int cores = detail::available_cores();  // one look at the machine, for the size and the cap
          return std::make_unique<detail::thread_pool>(options.num_threads > 0 ? options.num_threads : detail::default_num_threads(cores), cores);
        }()),
        own_env_(std::make_unique<detail::env_registry>()),
        pool_(own_pool_.get()),
        env_(own_env_.get()) {}
  explicit runtime(process_default_tag)
      : pool_(&detail::default_pool()), env_(&detail::env_registry::process_default()) {}
  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;

  static std::shared_ptr<runtime> create(runtime_options options = {}) { return std::make_shared<runtime>(options); }

  /// The process default: the pool and registry compiled code uses outside any run(),
  /// and those of every model not given a runtime. Never destroyed.
  static runtime& global() {
    static auto* rt = new std::shared_ptr<runtime>(std::make_shared<runtime>(process_default_tag{}));
    return **rt;
  }

  [[nodiscard]] int num_threads() const noexcept { return pool_->num_threads(); }
  [[nodiscard]] detail::thread_pool& pool() noexcept { return *pool_; }

  /// Runs f(task_id, num_tasks) on up to `num_tasks` of the pool's threads at once (0:
  /// as many as can run); the first failure is rethrown as gexec::error.
  template <class F>
  void parallel_for(int num_tasks, F&& f) {
    pool_->parallel_for(num_tasks, std::forward<F>(f));
  }

  /// Registers a packed C function under `name`; replaces an earlier registration.
  void register_function(std::string_view name, packed_function f) { env_->set(name, f); }
  /// Registers a C++ callable taking gexec::packed_args (kept alive by the runtime).
  template <class F>
    requires std::is_invocable_v<std::decay_t<F>&, packed_args>
  void register_function(std::string_view name, F&& f) {
    auto owned = std::make_unique<owned_packed_function>(std::forward<F>(f));
    packed_function pf = owned->get();
    env_->set(name, pf, std::move(owned));
  }
  /// Makes `name` unknown to this runtime; true if it was registered here.
  bool remove_function(std::string_view name) { return env_->remove(name); }
  /// The function kernels running on this runtime find under `name` (this runtime's,
  /// else the process default's), or nullptr. Valid while this runtime lives.
  [[nodiscard]] const packed_function* find_function(std::string_view name) const {
    const packed_function* f = env_->find(name);
    if (!f && env_ != &detail::env_registry::process_default()) f = detail::env_registry::process_default().find(name);
    return f;
  }

  /// Loads a kernel library and keeps it loaded for as long as this runtime lives.
  /// Defined in <gexec/library/module.hpp>.
  GEXEC_DECL module load_module(const file_path& path);

  /// The context run() installs for compiled code on this runtime.
  [[nodiscard]] detail::run_context context() noexcept {
    detail::run_context c;
    c.pool = pool_;
    c.env = env_;
    return c;
  }

 private:
  std::unique_ptr<detail::thread_pool> own_pool_;
  std::unique_ptr<detail::env_registry> own_env_;
  detail::thread_pool* pool_;
  detail::env_registry* env_;
  std::mutex modules_mu_;
  std::vector<std::shared_ptr<const void>> modules_;  // what the modules loaded here share
};

GEXEC_NAMESPACE_END
