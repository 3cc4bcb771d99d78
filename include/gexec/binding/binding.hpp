#pragma once
// The op-binding policy: how a node's func_name becomes a packed function.

#include "../config.hpp"

#include <concepts>
#include <string>
#include <string_view>

#include "../tvm_abi.hpp"

GEXEC_NAMESPACE_BEGIN

/// A binding resolves names to packed functions (empty when it has none) and
/// describes itself for error messages ("kernel library /path/lib.so").
template <class B>
concept op_binding = requires(const B& b, std::string_view name) {
  { b.resolve(name) } -> std::same_as<packed_function>;
  { b.describe() } -> std::convertible_to<std::string>;
};

GEXEC_NAMESPACE_END
