#pragma once
// gexec::system_module(): the module over what TVM-FFI system-library objects linked
// into the program registered (tvm_ffi/system_lib.hpp, which this header includes and
// which defines the C functions those objects call), as TVM's tvm.runtime.system_lib().
// It answers as a loaded library does: get_function(name) is the kernel __tvm_ffi_<name>,
// data_symbol("__tvm_ffi__library_bin") the executable devc.o carries. So a Relax model
// linked into a static program runs with the classes of a loaded one, and calls no
// dynamic-loader function:
//
//   #include <gexec/relax.hpp>
//   #include <gexec/library/system_module.hpp>
//   auto exe = gexec::relax::load_executable(gexec::system_module());  // lib0.o and devc.o linked in
//
// A program with several models, each linked by gexec_add_relax_model (which renames
// each model's registration call and makes its kernels' symbols local to its objects),
// asks for each by name:
//
//   auto detector = gexec::relax::load_executable(gexec::system_module("detector"));
//   auto tracker = gexec::relax::load_executable(gexec::system_module("tracker"));
//
// Graphs calling TVM-FFI kernels linked this way bind to it too (it converts to
// packed_c_abi). Kernels of the packed C ABI's system library (TVM <= 0.19) are bound
// with gexec::system_lib (packed_c/system_lib.hpp) instead.

#include "../config.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "../error.hpp"
#include "../tvm_ffi/call.hpp"
#include "../tvm_ffi/system_lib.hpp"
#include "../tvm_ffi_abi.hpp"
#include "module.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

/// The registered symbols as a module's source: those of one model (`model`, linked by
/// gexec_add_relax_model) or, unnamed, the program's one set. It keeps nothing of its
/// own: the table is read at each question, so symbols registered after main() began (a
/// plugin object's constructor) are found too.
struct system_module_source final : module_source {
  explicit system_module_source(std::string model_name = {}) : module_source(table()), model(std::move(model_name)) {
    path = model.empty() ? "<system library>" : "<system library: model " + model + ">";
    tvm_ffi = true;
  }

  std::string model;  ///< empty: the program's one set of registrations

  /// What this module reads (the lock held): its model's registrations; unnamed, the
  /// program's one set (the unnamed registrations, or the one model linked by
  /// gexec_add_relax_model). Null where nothing is registered yet; an error where the
  /// unnamed module would have to choose between models.
  const ffi_system_lib_registrations* registrations(const ffi_system_lib_table& t) const {
    if (!model.empty()) {
      auto it = t.models.find(model);
      return it == t.models.end() ? nullptr : &it->second;
    }
    if (t.models.empty()) return &t.unnamed;
    if (t.models.size() == 1 && t.unnamed.empty()) return &t.models.begin()->second;
    std::string names;
    for (const auto& [name, r] : t.models) names += (names.empty() ? "" : ", ") + name;
    throw error(errc::invalid_module, std::to_string(t.models.size() + !t.unnamed.empty()) + " models' system-library objects are linked into the program (" +
                                          names + (t.unnamed.empty() ? "" : ", and objects registered through TVMFFIEnvModRegisterSystemLibSymbol") +
                                          "): name the one meant, gexec::system_module(\"" + t.models.begin()->first + "\")");
  }

  packed_function function(std::string_view name) const {
    if (name.empty()) return {};
    const std::string symbol = tvm_ffi_symbol_prefix + std::string(name == "__tvm_main__" ? std::string_view("main") : name);
    ffi_system_lib_table& t = ffi_system_lib_symbols();
    std::lock_guard g(t.mu);
    const ffi_system_lib_registrations* r = registrations(t);
    if (!r) return {};
    auto it = r->symbols.find(symbol);
    return it == r->symbols.end() ? packed_function{} : packed_function{&call_tvm_ffi, it->second};
  }

  bool has_symbol(std::string_view name) const {
    ffi_system_lib_table& t = ffi_system_lib_symbols();
    std::lock_guard g(t.mu);
    const ffi_system_lib_registrations* r = registrations(t);
    if (!r) return false;
    if (name == ffi_library_bin_symbol) return !r->library_bins.empty();
    if (name == ffi_library_ctx_symbol) return r->context_slots != 0;
    return r->symbols.find(name) != r->symbols.end();
  }

  /// The library binary (its u64 payload length says how many bytes it has: a
  /// registered address comes with no size); empty for a name nothing registered, and for
  /// the context slot, which is gexec's to fill, not data to read. Two library binaries
  /// in one set are two models' devc.o linked as TVM wrote them: which one a caller meant
  /// is not known, so that is an error.
  std::span<const std::byte> data_symbol(std::string_view name) const {
    ffi_system_lib_table& t = ffi_system_lib_symbols();
    std::lock_guard g(t.mu);
    const ffi_system_lib_registrations* r = registrations(t);
    if (!r) return {};
    if (name == ffi_library_bin_symbol) {
      if (r->library_bins.empty()) return {};
      if (r->library_bins.size() > 1)
        throw error(errc::invalid_module, std::to_string(r->library_bins.size()) + " library binaries (__tvm_ffi__library_bin) are registered by the objects linked into the program" +
                                              (model.empty() ? "" : " for model " + model) +
                                              ", each the devc.o of one model's system library: link each model with gexec_add_relax_model, "
                                              "which keeps them apart (gexec::system_module(name))");
      const auto* p = static_cast<const std::byte*>(r->library_bins.front());
      std::uint64_t length = 0;
      std::memcpy(&length, p, sizeof length);
      if (length > (std::uint64_t{1} << 40))
        throw error(errc::invalid_module, "the registered __tvm_ffi__library_bin says it holds " + std::to_string(length) +
                                              " bytes: not a library binary TVM wrote");
      return {p, sizeof length + static_cast<std::size_t>(length)};
    }
    if (r->symbols.find(name) != r->symbols.end())
      throw error(errc::invalid_module, std::string(name) + " of the system library is a registered address of no known size (a kernel), "
                                                            "not a data object gexec can read");
    return {};
  }

  static const answers& table() noexcept {
    static constexpr answers a{
        [](const module_source& s, std::string_view name, std::string*) { return static_cast<const system_module_source&>(s).function(name); },
        [](const module_source& s, std::string_view name) { return static_cast<const system_module_source&>(s).has_symbol(name); },
        [](const module_source& s, std::string_view name) { return static_cast<const system_module_source&>(s).data_symbol(name); },
    };
    return a;
  }
};

}  // namespace detail

/// The module of the TVM-FFI system library linked into the program (see the top of
/// this file): the one model's objects it links (as TVM wrote them, or one model by
/// gexec_add_relax_model); where it links several, an error names them. One per
/// process, never destroyed: it reads the process-wide table, and compiled code may hold
/// what it handed out.
inline const module& system_module() {
  static const auto* m = new module(std::make_shared<detail::system_module_source>());
  return *m;
}

/// The module of model `name`'s objects, linked by gexec_add_relax_model(target name
/// model.tar): each model's kernels and executable apart from the others', so that one
/// program runs several. A name no object registered under is a module with nothing in
/// it (load_executable says what to link). One per name and process, never destroyed.
inline const module& system_module(std::string_view name) {
  if (name.empty()) return system_module();
  static std::mutex mu;
  static auto* modules = new std::map<std::string, const module*, std::less<>>;
  std::lock_guard g(mu);
  auto it = modules->find(name);
  if (it == modules->end()) it = modules->emplace(std::string(name), new module(std::make_shared<detail::system_module_source>(std::string(name)))).first;
  return *it->second;
}

GEXEC_NAMESPACE_END
