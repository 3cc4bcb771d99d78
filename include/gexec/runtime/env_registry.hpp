#pragma once
// Functions compiled code reaches through TVMBackendGetFuncFromEnv and TVMFuncCall.
//
// Compiled libraries cache the handles they look up in their own globals, so a handle
// must stay valid for the life of the process, whatever happens to the runtime or the
// module it came from. Handles are therefore process-wide and never freed:
//  - a function of a kernel library is one handle per (library file, name), refreshed
//    when the file is loaded again;
//  - a registered function is one handle per name, which looks the name up at call time
//    in the registry of the runtime running the caller (then the process default's), so
//    one library serves executors of different runtimes correctly.
// A runtime's registry is read without locks: entries are immutable once published,
// replaced by publishing another, and kept until the registry is destroyed.

#include "../config.hpp"

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <pthread.h>

#include "../detail/last_error.hpp"
#include "../error.hpp"
#include "../packed_function.hpp"
#include "../tvm_abi.hpp"
#include "run_context.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

/// The one lock behind every process-wide table of gexec (interned names, loaded
/// libraries, registrations). Held across fork() by an atfork handler, so a child never
/// inherits it locked by a thread that does not exist there.
inline std::mutex& process_mutex() {
  static auto* mu = new std::mutex;  // never destroyed: used by handles at exit
  static std::once_flag once;
  std::call_once(once, [] {
    pthread_atfork([] { process_mutex().lock(); }, [] { process_mutex().unlock(); }, [] { process_mutex().unlock(); });
  });
  return *mu;
}

/// What TVMFuncCall calls through: every handle gexec gives to compiled code.
struct func_handle {
  int (*call)(const func_handle* self, TVMValue* args, int* codes, int num_args, TVMValue* ret, int* ret_code) noexcept;
  std::atomic<packed_c_func> fn{nullptr};  ///< a library function (null once its library is gone)
  const void* target = nullptr;           ///< what `call` needs besides (an env_name)
};

/// A name of the environment: a process-wide handle and a dense index into registries.
struct env_name {
  func_handle handle;
  std::string name;
  std::uint32_t index = 0;
};

/// Interned names, never freed. Look-ups take the process mutex: they happen when
/// functions are registered or looked up, never per call.
class env_names {
 public:
  static env_names& instance() {
    static auto* names = new env_names;  // never destroyed: handles outlive static destruction
    return *names;
  }
  /// The name's entry, made on first use; the caller holds process_mutex().
  env_name& intern(std::string_view name, int (*call)(const func_handle*, TVMValue*, int*, int, TVMValue*, int*) noexcept) {
    auto it = by_name_.find(std::string(name));
    if (it != by_name_.end()) return *it->second;
    auto* e = new env_name;
    e->handle.call = call;
    e->handle.target = e;
    e->name = std::string(name);
    e->index = static_cast<std::uint32_t>(by_name_.size());
    by_name_.emplace(e->name, e);
    return *e;
  }
  /// The name's entry or nullptr; the caller holds process_mutex().
  [[nodiscard]] const env_name* find(std::string_view name) const {
    auto it = by_name_.find(std::string(name));
    return it == by_name_.end() ? nullptr : it->second;
  }

 private:
  std::unordered_map<std::string, env_name*> by_name_;
};

int call_env_function(const func_handle* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code) noexcept;

/// One runtime's registered functions, indexed by interned name.
class env_registry {
 public:
  env_registry() = default;
  env_registry(const env_registry&) = delete;
  env_registry& operator=(const env_registry&) = delete;
  ~env_registry() {
    for (auto& b : blocks_) delete b.load(std::memory_order_relaxed);
  }

  /// Publishes `f` under `name`, replacing an earlier registration. `keep` owns what
  /// `f` calls (a C++ callable), for as long as the registry lives.
  void set(std::string_view name, packed_function f, std::unique_ptr<owned_packed_function> keep = nullptr) {
    std::lock_guard g(process_mutex());
    env_name& e = env_names::instance().intern(name, &call_env_function);
    if (e.index >= kMaxNames) throw error(errc::out_of_memory, "more than " + std::to_string(kMaxNames) + " environment function names");
    published_.push_back(std::make_unique<const packed_function>(f));
    if (keep) owned_.push_back(std::move(keep));
    slot(e.index, true)->store(published_.back().get(), std::memory_order_release);
  }
  /// Makes `name` unknown here; true if it was registered.
  bool remove(std::string_view name) {
    std::lock_guard g(process_mutex());
    const env_name* e = env_names::instance().find(name);
    if (!e) return false;
    std::atomic<const packed_function*>* s = slot(e->index, false);
    return s && s->exchange(nullptr, std::memory_order_acq_rel) != nullptr;
  }
  /// The function registered under `name`, or nullptr; valid while the registry lives.
  [[nodiscard]] const packed_function* find(std::string_view name) const {
    std::lock_guard g(process_mutex());
    const env_name* e = env_names::instance().find(name);
    return e ? find(e->index) : nullptr;
  }
  /// Lock-free look-up by interned index, as calls through handles do.
  [[nodiscard]] const packed_function* find(std::uint32_t index) const noexcept {
    const block* b = index < kMaxNames ? blocks_[index / kBlock].load(std::memory_order_acquire) : nullptr;
    return b ? (*b)[index % kBlock].load(std::memory_order_acquire) : nullptr;
  }

  /// The registry of the process default runtime, which every other one falls back to.
  static env_registry& process_default() {
    static auto* r = new env_registry;  // never destroyed: compiled code may call at exit
    return *r;
  }

 private:
  static constexpr std::uint32_t kBlock = 256;
  // A page of block pointers per registry (every runtime has one): 131,072 names.
  static constexpr std::uint32_t kMaxNames = kBlock * 512;
  using block = std::array<std::atomic<const packed_function*>, kBlock>;

  std::atomic<const packed_function*>* slot(std::uint32_t index, bool create) {
    std::atomic<block*>& b = blocks_[index / kBlock];
    block* p = b.load(std::memory_order_acquire);
    if (!p && create) {
      p = new block{};
      b.store(p, std::memory_order_release);
    }
    return p ? &(*p)[index % kBlock] : nullptr;
  }

  std::array<std::atomic<block*>, kMaxNames / kBlock> blocks_{};
  std::vector<std::unique_ptr<const packed_function>> published_;
  std::vector<std::unique_ptr<owned_packed_function>> owned_;
};

/// The registry that serves this thread: the running executor's runtime's, else the
/// process default's.
inline const env_registry& current_env() noexcept {
  const run_context* c = current_context();
  return c && c->env ? *c->env : env_registry::process_default();
}

/// A registered function found where the caller runs: its runtime, then the process default.
inline const packed_function* find_env_function(std::uint32_t index) noexcept {
  const env_registry& r = current_env();
  const packed_function* f = r.find(index);
  if (!f && &r != &env_registry::process_default()) f = env_registry::process_default().find(index);
  return f;
}

inline int call_env_function(const func_handle* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code) noexcept {
  const auto* e = static_cast<const env_name*>(self->target);
  const packed_function* f = find_env_function(e->index);
  if (!f || !f->fn) {
    set_last_error("function \"" + e->name + "\" is not registered (any more) in the runtime running this kernel");
    return -1;
  }
  return f->fn(args, codes, n, ret, ret_code, f->resource_handle) == 0 ? 0 : -1;
}

}  // namespace detail
GEXEC_NAMESPACE_END
