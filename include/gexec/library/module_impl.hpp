#pragma once
// The definitions of library/module.hpp: loading a library with Boost.DLL, claiming its
// context slots, its symbols. Included by module.hpp in header-only mode and by
// src/gexec.cpp in compiled mode.

#include "module.hpp"

#include <boost/dll/shared_library.hpp>

#include <dlfcn.h>
#include <link.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "../binding/loader.hpp"
#include "../detail/byte_io.hpp"
#include "../error.hpp"
#include "../load_progress.hpp"
#include "../packed_c/hooks.hpp"
#include "../packed_c/module_blob.hpp"
#include "../runtime.hpp"
#include "../runtime/env_registry.hpp"
#include "../tvm_abi.hpp"
#include "../tvm_ffi/call.hpp"
#include "../tvm_ffi/hooks.hpp"
#include "../tvm_ffi/imports.hpp"
#include "../tvm_ffi/library_bin.hpp"
#include "elf_check.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

/// A library the dynamic loader opened (path is its canonical path).
struct module_state final : module_source {
  boost::dll::shared_library library;
  module_context* context = nullptr;  // process-lifetime, one per file

  module_state() : module_source(table()) {}
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

  /// library_function's answer for `name`, asked of the loader once per name: checking
  /// that a symbol is the library's own function walks its symbol table, and a graph
  /// names one function at many nodes.
  [[nodiscard]] packed_function lookup(std::string_view name, std::string* why) const {
    std::lock_guard g(process_mutex());
    auto it = resolved.find(name);
    if (it == resolved.end()) {
      resolved_function r;
      if (tvm_ffi) {
        if (void* kernel = library_ffi_function(library.native(), name, &r.why)) r.fn = {&call_tvm_ffi, kernel};
      } else {
        r.fn = {library_function(library.native(), name, &r.why), nullptr};
      }
      it = resolved.emplace(std::string(name), std::move(r)).first;
    }
    if (why && !it->second.why.empty()) *why = it->second.why;
    return it->second.fn;
  }

  [[nodiscard]] std::span<const std::byte> data_symbol(std::string_view name) const;

  static const answers& table() noexcept {
    static constexpr answers a{
        [](const module_source& s, std::string_view name, std::string* why) { return static_cast<const module_state&>(s).lookup(name, why); },
        [](const module_source& s, std::string_view name) { return static_cast<const module_state&>(s).library.has(std::string(name)); },
        [](const module_source& s, std::string_view name) { return static_cast<const module_state&>(s).data_symbol(name); },
    };
    return a;
  }

 private:
  struct resolved_function {
    packed_function fn;
    std::string why;  // why a symbol `name` is refused; empty if there is none
  };
  struct name_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  mutable std::unordered_map<std::string, resolved_function, name_hash, std::equal_to<>> resolved;  // guarded by process_mutex()
};

/// Loaded libraries by canonical path, and their process-lifetime contexts.
struct library_table {
  std::map<std::filesystem::path, std::weak_ptr<module_source>> live;
  std::map<std::filesystem::path, module_context*> contexts;

  static library_table& instance() {
    static auto* t = new library_table;  // never destroyed, like the contexts it hands out
    return *t;
  }
};

/// Writes gexec's hooks into the library's context slots. A slot must be a data object
/// of at least pointer size (AddressSanitizer counts its redzone in), aligned, in
/// writable memory of the library itself (not of a library it depends on): anything
/// else is refused before any slot is written. A slot that already holds something
/// other than gexec's own value belongs to another runtime in this process
/// (libtvm_runtime, or another copy of gexec) and is left alone, with an error: sharing
/// it would route that runtime's kernels through this one's hooks, or the reverse.
GEXEC_DECL void claim_context_slots(const boost::dll::shared_library& lib, const std::string& what, module_context* ctx) {
  struct planned {
    void** slot;
    void* value;
  };
  std::vector<planned> writes;
  const link_map* object = loaded_object(lib.native());
  if (!object) throw error(errc::invalid_module, what + ": the dynamic loader does not describe it (dlinfo failed)");
  auto plan_slot = [&](const char* symbol, void* value) {
    void* address = dlsym(lib.native(), symbol);
    if (!address) return;
    const address_origin o = origin_of(address);
    if (o.object != object)
      throw error(errc::invalid_module, what + ": its context slot " + symbol + " comes from " + o.object_name +
                                            ", not from the library itself, so gexec will not fill it");
    const unsigned type = o.symbol ? ELF64_ST_TYPE(o.symbol->st_info) : STT_NOTYPE;
    std::string is;
    if (!o.symbol) is = "no symbol the loader knows";
    else if (type == STT_FUNC || type == STT_GNU_IFUNC) is = "a function";
    else if (type != STT_OBJECT) is = "a symbol of ELF type " + std::to_string(type);
    else if (o.symbol->st_size < sizeof(void*)) is = "a " + std::to_string(o.symbol->st_size) + "-byte object";
    else if (reinterpret_cast<std::uintptr_t>(address) % alignof(void*) != 0) is = "a misaligned object";
    if (!is.empty())
      throw error(errc::invalid_module, what + ": " + symbol + " is " + is + ", not a pointer-sized data symbol, so gexec cannot fill it");
    if (!fit_in_segments(object, address, sizeof(void*)).writable)
      throw error(errc::invalid_module, what + ": " + symbol + " lies in read-only memory, so gexec cannot fill it");
    auto** slot = static_cast<void**>(address);
    if (*slot != nullptr && *slot != value)
      throw error(errc::invalid_module, what + ": " + symbol +
                                            " is already set by another runtime in this process (libtvm_runtime or another "
                                            "copy of gexec); load a copy of the library file instead");
    writes.push_back({slot, value});
  };
  // A library without the barrier's slot cannot call it: its parallel tasks are independent.
  const bool barrier = dlsym(lib.native(), "__TVMBackendParallelBarrier") != nullptr;
  for (const auto& slot : context_slots()) {
    const bool launch = slot.value == reinterpret_cast<void*>(&backend_parallel_launch);
    plan_slot(slot.symbol, launch && !barrier ? reinterpret_cast<void*>(&backend_parallel_launch_independent) : slot.value);
  }
  for (const auto& slot : ffi_context_slots()) plan_slot(slot.symbol, slot.value);
  plan_slot("__tvm_module_ctx", ctx);
  plan_slot("__tvm_ffi__library_ctx", ctx);
  for (const planned& w : writes) *w.slot = w.value;
}

GEXEC_DECL std::span<const std::byte> module_state::data_symbol(std::string_view name) const {
  const std::string symbol(name);
  const void* p = dlsym(library.native(), symbol.c_str());
  if (!p) return {};
  const std::string where = symbol + " of kernel library " + path.string();
  const link_map* object = loaded_object(library.native());
  const address_origin o = origin_of(p);
  if (!object || o.object != object)
    throw error(errc::invalid_module, where + " comes from " + o.object_name + ", not from the library itself");
  if (!o.symbol || ELF64_ST_TYPE(o.symbol->st_info) != STT_OBJECT) throw error(errc::invalid_module, where + " is not a data object");
  const auto size = static_cast<std::size_t>(o.symbol->st_size);
  if (!fit_in_segments(object, p, size).inside)
    throw error(errc::invalid_module, where + ": the symbol table gives it " + std::to_string(size) +
                                          " bytes, which run past the loaded segment holding it");
  return {static_cast<const std::byte*>(p), size};
}

}  // namespace detail

GEXEC_DECL packed_function module::get_function(std::string_view name, std::string* why) const {
  return state_ ? state_->answer->function(*state_, name, why) : packed_function{};
}

GEXEC_DECL bool module::tvm_ffi() const noexcept { return state_ && state_->tvm_ffi; }

GEXEC_DECL bool module::has_symbol(std::string_view name) const { return state_ && state_->answer->has_symbol(*state_, name); }

GEXEC_DECL std::span<const std::byte> module::data_symbol(std::string_view name) const {
  return state_ ? state_->answer->data_symbol(*state_, name) : std::span<const std::byte>{};
}

GEXEC_DECL const file_path& module::path() const {
  static const file_path none;
  return state_ ? state_->path : none;
}

GEXEC_DECL module load_module(const file_path& path) {
  std::error_code ec;
  const std::filesystem::path given(path.string());
  std::filesystem::path canonical = std::filesystem::canonical(given, ec);
  if (ec) {
    std::error_code link_ec;
    const std::filesystem::path target = std::filesystem::is_symlink(given, link_ec) ? std::filesystem::read_symlink(given, link_ec) : std::filesystem::path();
    if (!target.empty() && !link_ec)  // the link is there; what it points at is not
      throw error(errc::io, "cannot open kernel library " + path.string() + ": it is a symbolic link to " + target.string() +
                                ", which does not exist (" + ec.message() + ")");
    throw error(errc::io, "cannot open kernel library " + path.string() + ": " + ec.message());
  }
  // dlopen() of a FIFO waits for a writer, and of a directory says little: only regular
  // files are loaded, as only regular files are read as graphs and parameters.
  struct stat st {};
  if (::stat(canonical.c_str(), &st) != 0) {
    const int err = errno;
    throw error(errc::io, "cannot open kernel library " + path.string() + ": " + std::generic_category().message(err));
  }
  if (!S_ISREG(st.st_mode)) throw error(errc::io, "kernel library " + path.string() + " is " + detail::file_kind(st.st_mode) + ", not a regular file");
  detail::check_elf_file(canonical.c_str(), path.string());

  auto state = std::make_shared<detail::module_state>();
  std::lock_guard g(detail::process_mutex());
  auto& table = detail::library_table::instance();
  module m;
  if (auto it = table.live.find(canonical); it != table.live.end() && (m.state_ = it->second.lock())) return m;

  // Lazy binding and local symbols, as TVM loads libraries. Why a load failed is
  // dlerror()'s message ("file too short", "invalid ELF header", a missing dependency):
  // the error code Boost.DLL reports is bad_file_descriptor whatever the cause.
  ec.clear();
  state->library.load(canonical, boost::dll::load_mode::rtld_lazy | boost::dll::load_mode::rtld_local, ec);
  if (ec) {
    const char* why = dlerror();
    throw error(errc::io, "cannot load kernel library " + path.string() + ": " + (why ? std::string(why) : ec.message()));
  }
  detail::module_context*& ctx = table.contexts[canonical];
  if (!ctx) {
    ctx = new detail::module_context;  // never freed: the library may keep pointing at it
    ctx->name = "kernel library " + canonical.string();
  }
  detail::claim_context_slots(state->library, ctx->name, ctx);
  // A library TVM >= 0.21 compiled: its kernels import TVM-FFI's error function, or it
  // exports the TVM-FFI library symbols. Its imports are bound to gexec's before any
  // kernel runs; device modules packed into it are refused until gexec loads them.
  const detail::ffi_import_scan ffi = detail::bind_ffi_imports(state->library.native(), ctx->name, detail::ffi_imports());
  if (ffi.launch_slot && !ffi.imports_barrier) *ffi.launch_slot = reinterpret_cast<void*>(&detail::backend_parallel_launch_independent);
  state->tvm_ffi = ffi.imports_tvm_ffi || state->library.has("__tvm_ffi__library_ctx") || state->library.has("__tvm_ffi__library_bin") ||
                   state->library.has("__tvm_ffi_main");
  state->path = canonical.string();
  if (state->tvm_ffi) {
    // Before the module is live: refusing it here leaves nothing to undo.
    module probe;
    probe.state_ = state;
    if (const auto bin = probe.data_symbol("__tvm_ffi__library_bin"); !bin.empty()) {
      const library_bin parsed = parse_library_bin(bin, "__tvm_ffi__library_bin of " + ctx->name);
      for (const library_bin_module& mod : parsed.modules)
        if (mod.kind != "_lib" && !detail::is_program_module(mod.kind))
          throw error(errc::unsupported, ctx->name + " carries a \"" + mod.kind + "\" module in its __tvm_ffi__library_bin: " +
                                             (find_module_payload_reader(mod.kind) ? "gexec runs the host kernels of TVM-FFI libraries, not yet "
                                                                                     "their device modules"
                                                                                   : detail::payload_wing_hint(mod.kind)) +
                                             " (build the kernels for the CPU: target \"llvm\" or \"c\")");
    }
  }
  state->context = ctx;
  ctx->library = state->library.native();
  ctx->owner = state.get();
  // Handles compiled code looked up through an earlier load of this file point at the
  // functions of this load now (the same addresses when the file was never unmapped).
  for (auto& [name, handle] : ctx->functions) handle->fn.store(detail::library_function(ctx->library, name), std::memory_order_release);
  m.state_ = std::move(state);
  // Kernels of the device modules the library carries (the graph and parameters of an
  // embedded factory are read when a model is made from it). A blob that cannot be read
  // leaves the library's own functions usable; looking up a device kernel says why.
  ctx->device_error.clear();
  try {
    if (const auto blob = m.data_symbol("__tvm_dev_mblob"); !blob.empty()) {
      const module_blob parsed = parse_module_blob(blob, "__tvm_dev_mblob of " + ctx->name, blob_parts::device_modules);
      // Each type key's kernels are launched by the wing that registered its loader (the
      // wing that read its payloads registered one too, or parsing failed above).
      std::vector<std::string_view> keys;
      for (const module_payload& p : parsed.device_modules)
        if (std::find(keys.begin(), keys.end(), p.type_key) == keys.end()) keys.push_back(p.type_key);
      for (std::string_view key : keys) {
        const auto& loaders = detail::device_module_loaders();
        auto it = std::find_if(loaders.begin(), loaders.end(), [key](const auto& e) { return std::string_view(e.type_key) == key; });
        if (it == loaders.end())
          throw error(errc::unsupported, "the library carries " + std::string(key) + " modules, and no loader launches their kernels in this program");
        it->load(parsed, *ctx);
      }
    }
  } catch (const error& e) {
    ctx->device_error = std::string(e.message());
  }
  table.live[canonical] = m.state_;
  return m;
}

// Declared in runtime.hpp, so that the runtime needs neither Boost.DLL nor the loader
// unless a program loads libraries.
GEXEC_DECL module runtime::load_module(const file_path& path) {
  module m = gexec::load_module(path);
  std::lock_guard g(modules_mu_);
  for (const std::shared_ptr<const void>& kept : modules_)
    if (kept == m.state_) return m;
  modules_.push_back(m.state_);
  return m;
}

GEXEC_NAMESPACE_END
