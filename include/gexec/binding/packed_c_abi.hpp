#pragma once
// Binding over a TVM-compiled library: func_name is the exported symbol of a
// TVMBackendPackedCFunc.

#include "../config.hpp"

#include <string>
#include <string_view>
#include <utility>

#include "../module.hpp"
#include "binding.hpp"

GEXEC_NAMESPACE_BEGIN

class packed_c_abi {
 public:
  packed_c_abi() = default;
  /// Implicit: a kernel library is a binding.
  packed_c_abi(module m) : module_(std::move(m)) {}

  [[nodiscard]] packed_function resolve(std::string_view func_name) const { return module_.get_function(func_name); }
  [[nodiscard]] std::string describe() const { return "kernel library " + module_.path().string(); }
  [[nodiscard]] const gexec::module& get_module() const noexcept { return module_; }

 private:
  gexec::module module_;
};
static_assert(op_binding<packed_c_abi>);

GEXEC_NAMESPACE_END
