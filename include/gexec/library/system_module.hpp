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
// Graphs calling TVM-FFI kernels linked this way bind to it too (it converts to
// packed_c_abi). Kernels of the packed C ABI's system library (TVM <= 0.19) are bound
// with gexec::system_lib (packed_c/system_lib.hpp) instead.

#include "../config.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>

#include "../error.hpp"
#include "../tvm_ffi/call.hpp"
#include "../tvm_ffi/system_lib.hpp"
#include "../tvm_ffi_abi.hpp"
#include "module.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

/// The registered symbols as a module's source. It keeps nothing of its own: the
/// table is read at each question, so symbols registered after main() began (a plugin
/// object's constructor) are found too.
struct system_module_source final : module_source {
  system_module_source() : module_source(table()) {
    path = "<system library>";
    tvm_ffi = true;
  }

  static packed_function function(std::string_view name) {
    if (name.empty()) return {};
    const std::string symbol = tvm_ffi_symbol_prefix + std::string(name == "__tvm_main__" ? std::string_view("main") : name);
    ffi_system_lib_table& t = ffi_system_lib_symbols();
    std::lock_guard g(t.mu);
    auto it = t.symbols.find(symbol);
    return it == t.symbols.end() ? packed_function{} : packed_function{&call_tvm_ffi, it->second};
  }

  static bool has_symbol(std::string_view name) {
    ffi_system_lib_table& t = ffi_system_lib_symbols();
    std::lock_guard g(t.mu);
    if (name == ffi_library_bin_symbol) return !t.library_bins.empty();
    if (name == ffi_library_ctx_symbol) return t.context_slots != 0;
    return t.symbols.find(name) != t.symbols.end();
  }

  /// The library binary (its u64 payload length says how many bytes it has: a
  /// registered address comes with no size); empty for a name nothing registered, and for
  /// the context slot, which is gexec's to fill, not data to read. Two library binaries
  /// are two models' devc.o: which one a caller meant is not known, so that is an error.
  static std::span<const std::byte> data_symbol(std::string_view name) {
    ffi_system_lib_table& t = ffi_system_lib_symbols();
    std::lock_guard g(t.mu);
    if (name == ffi_library_bin_symbol) {
      if (t.library_bins.empty()) return {};
      if (t.library_bins.size() > 1)
        throw error(errc::invalid_module, std::to_string(t.library_bins.size()) +
                                              " library binaries (__tvm_ffi__library_bin) are registered by the objects linked into the program, "
                                              "each the devc.o of one model's system library: link one model's objects into a program");
      const auto* p = static_cast<const std::byte*>(t.library_bins.front());
      std::uint64_t length = 0;
      std::memcpy(&length, p, sizeof length);
      if (length > (std::uint64_t{1} << 40))
        throw error(errc::invalid_module, "the registered __tvm_ffi__library_bin says it holds " + std::to_string(length) +
                                              " bytes: not a library binary TVM wrote");
      return {p, sizeof length + static_cast<std::size_t>(length)};
    }
    if (t.symbols.find(name) != t.symbols.end())
      throw error(errc::invalid_module, std::string(name) + " of the system library is a registered address of no known size (a kernel), "
                                                            "not a data object gexec can read");
    return {};
  }

  static const answers& table() noexcept {
    static constexpr answers a{
        [](const module_source&, std::string_view name, std::string*) { return function(name); },
        [](const module_source&, std::string_view name) { return has_symbol(name); },
        [](const module_source&, std::string_view name) { return data_symbol(name); },
    };
    return a;
  }
};

}  // namespace detail

/// The module of the TVM-FFI system library linked into the program (see the top of
/// this file). One per process, never destroyed: it reads the process-wide table, and
/// compiled code may hold what it handed out.
inline const module& system_module() {
  static const auto* m = new module(std::make_shared<detail::system_module_source>());
  return *m;
}

GEXEC_NAMESPACE_END
