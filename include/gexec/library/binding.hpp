#pragma once
// The op-binding policy over a TVM-compiled library: func_name is the exported symbol
// of a TVMBackendPackedCFunc, or, in a library TVM >= 0.21 compiled, of the TVM-FFI
// kernel __tvm_ffi_<func_name> (the module tells them apart when it loads).

#include "../config.hpp"

#include <string>
#include <string_view>
#include <utility>

#include "../binding/binding.hpp"
#include "../error.hpp"
#include "module.hpp"

GEXEC_NAMESPACE_BEGIN

class packed_c_abi {
 public:
  packed_c_abi() = default;
  /// Implicit: a kernel library is a binding.
  packed_c_abi(module m) : module_(std::move(m)) {}

  /// The library's own function `func_name`; empty if it has no such symbol. Throws
  /// errc::symbol_not_found naming the function and the reason when the symbol is not
  /// a function the library itself defines (data, or libc's abort found through it).
  [[nodiscard]] packed_function resolve(std::string_view func_name) const {
    std::string why;
    packed_function f = module_.get_function(func_name, &why);
    if (!f && !why.empty()) throw error(errc::symbol_not_found, why);
    return f;
  }
  [[nodiscard]] std::string describe() const {
    return module_.tvm_ffi() ? "TVM-FFI kernel library " + module_.path().string() + " (as __tvm_ffi_<func_name>)"
                             : "kernel library " + module_.path().string();
  }
  [[nodiscard]] const gexec::module& get_module() const noexcept { return module_; }

 private:
  gexec::module module_;
};
static_assert(op_binding<packed_c_abi>);

GEXEC_NAMESPACE_END
