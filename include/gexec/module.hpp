#pragma once
// gexec::module: a kernel library TVM compiled, opened with Boost.DLL. Loading fills
// the library's context slots with gexec's runtime hooks, so its kernels run
// without libtvm_runtime; get_function() resolves packed functions by name.

#include "config.hpp"

#include <boost/dll/shared_library.hpp>

#include <dlfcn.h>
#include <link.h>

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>

#include "detail/backend_api.hpp"
#include "error.hpp"
#include "tvm_abi.hpp"

GEXEC_NAMESPACE_BEGIN

namespace detail {

struct module_state : module_context {
  boost::dll::shared_library library;
  std::filesystem::path path;
  std::mutex mu;
  std::unordered_map<std::string, std::unique_ptr<packed_function>> env_functions;  // handles kernels cache

  packed_function lookup(std::string_view name) const {
    std::string symbol(name);
    if (symbol == "__tvm_main__") {
      if (!library.has("__tvm_main__")) return {};
      symbol = &library.get<const char>("__tvm_main__");
    }
    if (symbol.empty() || !library.has(symbol)) return {};
    return {&library.get<std::remove_pointer_t<packed_c_func>>(symbol), nullptr};
  }

  static const packed_function* find_for_env(const module_context* self, std::string_view name) {
    auto* m = const_cast<module_state*>(static_cast<const module_state*>(self));
    std::lock_guard g(m->mu);
    std::string key(name);
    if (auto it = m->env_functions.find(key); it != m->env_functions.end()) return it->second.get();
    packed_function f = m->lookup(name);
    if (!f) return nullptr;
    return m->env_functions.emplace(key, std::make_unique<packed_function>(f)).first->second.get();
  }
};

// One module per library file: dlopen shares a library's globals (its context slots)
// between all openers, so two gexec modules over one file must be one module.
inline std::mutex& loaded_modules_mutex() {
  static std::mutex mu;
  return mu;
}
inline std::map<std::filesystem::path, std::weak_ptr<module_state>>& loaded_modules() {
  static std::map<std::filesystem::path, std::weak_ptr<module_state>> m;
  return m;
}

}  // namespace detail

class module {
 public:
  module() = default;

  /// The packed function `name` exports ("__tvm_main__" names the library's entry
  /// function); empty if there is none.
  [[nodiscard]] packed_function get_function(std::string_view name) const {
    return state_ ? state_->lookup(name) : packed_function{};
  }
  [[nodiscard]] bool has_symbol(std::string_view name) const {
    return state_ && state_->library.has(std::string(name));
  }
  /// The bytes of the data symbol `name`, bounded by its size in the library's symbol
  /// table; empty if the library does not export it.
  [[nodiscard]] std::span<const std::byte> data_symbol(std::string_view name) const {
    if (!has_symbol(name)) return {};
    const auto* p = &state_->library.get<const std::byte>(std::string(name));
    Dl_info info{};
    void* entry = nullptr;
    if (dladdr1(p, &info, &entry, RTLD_DL_SYMENT) == 0 || entry == nullptr) return {};
    const auto* sym = static_cast<const ElfW(Sym)*>(entry);
    return {p, static_cast<std::size_t>(sym->st_size)};
  }
  [[nodiscard]] const std::filesystem::path& path() const {
    static const std::filesystem::path none;
    return state_ ? state_->path : none;
  }
  [[nodiscard]] explicit operator bool() const noexcept { return state_ != nullptr; }

 private:
  friend module load_module(const std::filesystem::path& path);
  std::shared_ptr<detail::module_state> state_;
};

/// Opens a TVM-compiled kernel library (deploy_lib.so). Throws errc::io if the file
/// cannot be loaded.
inline module load_module(const std::filesystem::path& path) {
  std::error_code ec;
  std::filesystem::path canonical = std::filesystem::canonical(path, ec);
  if (ec) throw error(errc::io, "cannot open kernel library " + path.string() + ": " + ec.message());

  std::lock_guard g(detail::loaded_modules_mutex());
  auto& loaded = detail::loaded_modules();
  module m;
  if (auto it = loaded.find(canonical); it != loaded.end() && (m.state_ = it->second.lock())) return m;

  auto state = std::make_shared<detail::module_state>();
  try {
    // Lazy binding and local symbols, as TVM loads libraries.
    state->library.load(canonical, boost::dll::load_mode::rtld_lazy | boost::dll::load_mode::rtld_local);
  } catch (const std::exception& e) {
    throw error(errc::io, "cannot load kernel library " + path.string() + ": " + e.what());
  }
  state->path = canonical;
  state->name = "kernel library " + canonical.string();
  state->find = &detail::module_state::find_for_env;
  for (const auto& slot : detail::context_slots())
    if (state->library.has(slot.symbol)) state->library.get<void*>(slot.symbol) = slot.value;
  if (state->library.has("__tvm_module_ctx"))
    state->library.get<void*>("__tvm_module_ctx") = static_cast<detail::module_context*>(state.get());
  loaded[canonical] = state;
  m.state_ = std::move(state);
  return m;
}

GEXEC_NAMESPACE_END
