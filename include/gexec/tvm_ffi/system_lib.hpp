#pragma once
// Kernels and a Relax VM executable linked into the program: TVM >= 0.21's "system
// library" (relax.build(mod, target, system_lib=True), then export_library("model.tar"):
// lib0.o holds the kernels, devc.o the __tvm_ffi__library_bin). Each object carries a
// static constructor that registers its symbols by name through
// TVMFFIEnvModRegisterSystemLibSymbol (tvm-ffi include/tvm/ffi/extra/c_env_api.h):
// every kernel __tvm_ffi_<name>, the library context slot __tvm_ffi__library_ctx (a
// pointer-sized datum) and the library binary. The kernels call
// TVMFFIErrorSetRaisedFromCStrParts and the backend functions (TVMBackendAllocWorkspace,
// TVMBackendParallelLaunch, ...) as plain C functions. This header defines them all, so
// that a program links such objects with no TVM runtime and no dynamic loader;
// gexec::system_module() (library/system_module.hpp, which includes this header) is the
// module over what they registered. gexec_add_relax_model renames each model's
// registration call to one that names the model (and makes its kernels' symbols local
// to its objects), so that a program links several models: gexec::system_module(name).
//
// As for the packed C ABI's system library (packed_c/system_lib.hpp), the C functions
// are the ABI's, so they are process-wide by necessity, and so is the table of
// registered symbols: the constructors run before main(), with no object to register
// with. The definitions are weak: every source file that includes this header may emit
// them, and the program keeps one. Include it only in programs that link kernels this
// way (a program that also links libtvm_ffi gets tvm-ffi's definitions).

#include "../config.hpp"

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../binding/backend_functions.hpp"
#include "../tvm_ffi_abi.hpp"
#include "hooks.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

/// The symbol names of a TVM-FFI library that are data, not kernels.
inline constexpr std::string_view ffi_library_bin_symbol = "__tvm_ffi__library_bin";
inline constexpr std::string_view ffi_library_ctx_symbol = "__tvm_ffi__library_ctx";

/// What one model's system-library objects registered: kernels and other symbols by
/// name, every library binary in the order registered (two devc.o registering into one
/// of these are refused when read, never one silently dropped), and how many times a
/// library context slot was registered (one per lib0.o; gexec points the slot at the
/// process table, a process-lifetime object the kernels hand back to
/// TVMFFIEnvModLookupFromImports, which fails cleanly).
struct ffi_system_lib_registrations {
  std::map<std::string, void*, std::less<>> symbols;
  std::vector<const void*> library_bins;
  std::size_t context_slots = 0;

  [[nodiscard]] bool empty() const noexcept { return symbols.empty() && library_bins.empty() && context_slots == 0; }
};

/// Every registration of the process: those made through
/// TVMFFIEnvModRegisterSystemLibSymbol (objects linked as TVM wrote them), and by model
/// name those made through gexec_register_system_lib_symbol_of (the objects
/// gexec_add_relax_model links, their registration call and kernel symbols renamed, so
/// that several models' objects link into one program without clashing).
struct ffi_system_lib_table {
  std::mutex mu;
  ffi_system_lib_registrations unnamed;
  std::map<std::string, ffi_system_lib_registrations, std::less<>> models;
};

inline ffi_system_lib_table& ffi_system_lib_symbols() {
  static auto* table = new ffi_system_lib_table;  // never destroyed: kernels may run during static destruction
  return *table;
}

/// Registers `name` at `address` for `model` (null: unnamed). Runs in the objects'
/// constructors, before main(), so it allocates only through the never-destroyed table
/// and fails with -1, not an exception.
inline int register_ffi_system_lib_symbol(const char* name, void* address, const char* model = nullptr) noexcept {
  if (!name || !address) return -1;
  try {
    ffi_system_lib_table& t = ffi_system_lib_symbols();
    std::lock_guard g(t.mu);
    ffi_system_lib_registrations& r = model ? t.models[model] : t.unnamed;
    const std::string_view n = name;
    if (n == ffi_library_ctx_symbol) {
      *static_cast<void**>(address) = &t;
      ++r.context_slots;
    } else if (n == ffi_library_bin_symbol) {
      bool known = false;
      for (const void* b : r.library_bins) known = known || b == address;
      if (!known) r.library_bins.push_back(address);
    } else {
      r.symbols.insert_or_assign(std::string(n), address);
    }
    return 0;
  } catch (...) {
    return -1;
  }
}

}  // namespace detail
GEXEC_NAMESPACE_END

// The C functions TVM-FFI system-library objects call (the backend's too:
// binding/backend_functions.hpp). Weak, so that including this header in several source
// files, or linking tvm-ffi's runtime too, leaves one definition. Calls from a kernel to
// other functions (an extern library, a device kernel) fail cleanly, as in a loaded
// TVM-FFI library (tvm_ffi/hooks.hpp).
extern "C" {
__attribute__((weak)) int TVMFFIEnvModRegisterSystemLibSymbol(const char* name, void* symbol) {
  return ::gexec::detail::register_ffi_system_lib_symbol(name, symbol);
}
/// What the objects gexec_add_relax_model links call in its place (through the function
/// it generates for the model, gexec_relax_register_<model>): the same, for `model`.
__attribute__((weak)) int gexec_register_system_lib_symbol_of(const char* model, const char* name, void* symbol) {
  if (!model) return -1;
  return ::gexec::detail::register_ffi_system_lib_symbol(name, symbol, model);
}
__attribute__((weak)) void TVMFFIErrorSetRaisedFromCStrParts(const char* kind, const char** message_parts, std::int32_t num_parts) {
  ::gexec::detail::ffi_error_set_raised_from_parts(kind, message_parts, num_parts);
}
__attribute__((weak)) void TVMFFIErrorSetRaisedFromCStr(const char* kind, const char* message) {
  ::gexec::detail::ffi_error_set_raised_from_cstr(kind, message);
}
__attribute__((weak)) int TVMFFIEnvModLookupFromImports(void* library_ctx, const char* func_name, void** out) {
  return ::gexec::detail::ffi_lookup_from_imports(library_ctx, func_name, out);
}
__attribute__((weak)) int TVMFFIFunctionCall(void* func, TVMFFIAny* args, std::int32_t num_args, TVMFFIAny* result) {
  return ::gexec::detail::ffi_function_call(func, args, num_args, result);
}
}
