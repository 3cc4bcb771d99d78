#pragma once
// The process-wide registry of packed functions that kernels reach through
// TVMBackendGetFuncFromEnv (for example "tvm.contrib.sort.argsort"): users register
// their implementations here. Entries are never freed, because compiled libraries
// cache the handles they looked up; re-registering updates an entry in place.

#include "config.hpp"

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "packed_function.hpp"

GEXEC_NAMESPACE_BEGIN

namespace detail {

struct global_registry {
  std::mutex mu;
  std::map<std::string, std::unique_ptr<packed_function>, std::less<>> entries;
  std::vector<std::unique_ptr<owned_packed_function>> owned;

  static global_registry& instance() {
    static auto* r = new global_registry;  // never destroyed: handles may be used at exit
    return *r;
  }
};

}  // namespace detail

/// Registers a packed C function under `name`; replaces an earlier registration.
inline void register_global_function(std::string name, packed_function f) {
  auto& r = detail::global_registry::instance();
  std::lock_guard g(r.mu);
  auto& slot = r.entries[std::move(name)];
  if (!slot) slot = std::make_unique<packed_function>();
  *slot = f;
}

/// Registers a C++ callable taking gexec::packed_args (the registry keeps it alive).
template <class F>
  requires std::is_invocable_v<std::decay_t<F>&, packed_args>
void register_global_function(std::string name, F&& f) {
  auto owned = std::make_unique<owned_packed_function>(std::forward<F>(f));
  packed_function pf = owned->get();
  {
    auto& r = detail::global_registry::instance();
    std::lock_guard g(r.mu);
    r.owned.push_back(std::move(owned));
  }
  register_global_function(std::move(name), pf);
}

/// Makes `name` unknown again; handles already looked up fail when called.
inline bool remove_global_function(std::string_view name) {
  auto& r = detail::global_registry::instance();
  std::lock_guard g(r.mu);
  auto it = r.entries.find(name);
  if (it == r.entries.end() || !*it->second) return false;
  *it->second = packed_function{};
  return true;
}

/// The registered function, or nullptr; the pointer stays valid for the process.
inline const packed_function* find_global_function(std::string_view name) {
  auto& r = detail::global_registry::instance();
  std::lock_guard g(r.mu);
  auto it = r.entries.find(name);
  return it == r.entries.end() || !*it->second ? nullptr : it->second.get();
}

GEXEC_NAMESPACE_END
