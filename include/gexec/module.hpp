#pragma once
// gexec::module: a kernel library TVM compiled, opened with Boost.DLL. Loading fills
// the library's context slots with gexec's runtime hooks, so its kernels run
// without libtvm_runtime; get_function() resolves packed functions by name.
//
// dlopen gives one copy of a library's globals to a whole process, so a library file
// is one module per process: loading it again while a module holds it returns that
// module. The table of loaded libraries is therefore process-wide by nature; the
// runtime keeps the modules it loaded alive (runtime::load_module).

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

#include "detail/backend_api.hpp"
#include "error.hpp"
#include "tvm_abi.hpp"

GEXEC_NAMESPACE_BEGIN

class module;

namespace detail {

/// The symbol-table entry of `address`, or null.
inline const ElfW(Sym)* symbol_entry(const void* address) noexcept {
  Dl_info info{};
  void* entry = nullptr;
  if (dladdr1(address, &info, &entry, RTLD_DL_SYMENT) == 0) return nullptr;
  return static_cast<const ElfW(Sym)*>(entry);
}

struct embedded_factory;

struct module_state {
  boost::dll::shared_library library;
  std::filesystem::path path;
  module_context* context = nullptr;  // process-lifetime, one per file
  std::mutex embedded_mu;
  std::weak_ptr<const embedded_factory> embedded;  // parsed __tvm_dev_mblob, shared by its users

  module_state() = default;
  module_state(const module_state&) = delete;
  module_state& operator=(const module_state&) = delete;
  // Handles compiled code cached stay valid memory; calls through them fail cleanly
  // if the library outlives this module (another loader keeps it mapped).
  ~module_state() {
    if (!context) return;
    std::lock_guard g(process_mutex());
    if (context->owner != this) return;
    context->library = nullptr;
    context->owner = nullptr;
    for (auto& [name, handle] : context->functions) handle->fn.store(nullptr, std::memory_order_release);
  }

  [[nodiscard]] packed_function lookup(std::string_view name) const {
    std::lock_guard g(process_mutex());
    return {library_function(library.native(), name), nullptr};
  }
};

/// Loaded libraries by canonical path, and their process-lifetime contexts.
struct library_table {
  std::map<std::filesystem::path, std::weak_ptr<module_state>> live;
  std::map<std::filesystem::path, module_context*> contexts;

  static library_table& instance() {
    static auto* t = new library_table;  // never destroyed, like the contexts it hands out
    return *t;
  }
};

/// Writes gexec's hooks into the library's context slots. A slot must be a data symbol
/// of pointer size; one that already holds something other than gexec's own value
/// belongs to another runtime in this process (libtvm_runtime, or another copy of
/// gexec) and is left alone, with an error: sharing it would route that runtime's
/// kernels through this one's hooks, or the reverse.
inline void claim_context_slots(const boost::dll::shared_library& lib, const std::string& what, module_context* ctx) {
  struct planned {
    void** slot;
    void* value;
  };
  std::vector<planned> writes;
  auto plan_slot = [&](const char* symbol, void* value) {
    if (!lib.has(symbol)) return;
    void* address = &lib.get<void*>(symbol);
    const ElfW(Sym)* sym = symbol_entry(address);
    if (!sym || (sym->st_info & 0xf) != STT_OBJECT || sym->st_size != sizeof(void*))
      throw error(errc::invalid_module, what + ": " + symbol + " is not a pointer-sized data symbol, so gexec cannot fill it");
    auto** slot = static_cast<void**>(address);
    if (*slot != nullptr && *slot != value)
      throw error(errc::invalid_module, what + ": " + symbol +
                                            " is already set by another runtime in this process (libtvm_runtime or another "
                                            "copy of gexec); load a copy of the library file instead");
    writes.push_back({slot, value});
  };
  for (const auto& slot : context_slots()) plan_slot(slot.symbol, slot.value);
  plan_slot("__tvm_module_ctx", ctx);
  for (const planned& w : writes) *w.slot = w.value;
}

/// The library's embedded factory, parsed once per loaded library (model.hpp).
inline std::shared_ptr<const embedded_factory> read_embedded_factory(const module& lib);

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
    const ElfW(Sym)* sym = detail::symbol_entry(p);
    if (!sym) return {};
    return {p, static_cast<std::size_t>(sym->st_size)};
  }
  [[nodiscard]] const std::filesystem::path& path() const {
    static const std::filesystem::path none;
    return state_ ? state_->path : none;
  }
  [[nodiscard]] explicit operator bool() const noexcept { return state_ != nullptr; }
  friend bool operator==(const module& a, const module& b) noexcept { return a.state_ == b.state_; }

 private:
  friend module load_module(const std::filesystem::path& path);
  friend std::shared_ptr<const detail::embedded_factory> detail::read_embedded_factory(const module& lib);
  std::shared_ptr<detail::module_state> state_;
};

/// Opens a TVM-compiled kernel library (deploy_lib.so). Throws errc::io if the file
/// cannot be loaded, errc::invalid_module if its context slots cannot be claimed.
inline module load_module(const std::filesystem::path& path) {
  std::error_code ec;
  std::filesystem::path canonical = std::filesystem::canonical(path, ec);
  if (ec) throw error(errc::io, "cannot open kernel library " + path.string() + ": " + ec.message());

  auto state = std::make_shared<detail::module_state>();
  std::lock_guard g(detail::process_mutex());
  auto& table = detail::library_table::instance();
  module m;
  if (auto it = table.live.find(canonical); it != table.live.end() && (m.state_ = it->second.lock())) return m;

  try {
    // Lazy binding and local symbols, as TVM loads libraries.
    state->library.load(canonical, boost::dll::load_mode::rtld_lazy | boost::dll::load_mode::rtld_local);
  } catch (const std::exception& e) {
    throw error(errc::io, "cannot load kernel library " + path.string() + ": " + e.what());
  }
  detail::module_context*& ctx = table.contexts[canonical];
  if (!ctx) {
    ctx = new detail::module_context;  // never freed: the library may keep pointing at it
    ctx->name = "kernel library " + canonical.string();
  }
  detail::claim_context_slots(state->library, ctx->name, ctx);
  state->path = canonical;
  state->context = ctx;
  ctx->library = state->library.native();
  ctx->owner = state.get();
  // Handles compiled code looked up through an earlier load of this file point at the
  // functions of this load now (the same addresses when the file was never unmapped).
  for (auto& [name, handle] : ctx->functions) handle->fn.store(detail::library_function(ctx->library, name), std::memory_order_release);
  table.live[canonical] = state;
  m.state_ = std::move(state);
  return m;
}

GEXEC_NAMESPACE_END
