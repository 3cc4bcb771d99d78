#pragma once
// What a Relax VM register holds: nothing, a scalar (int, float, bool), a dtype, a
// string, a shape, a tensor, a storage block (what vm.builtin.alloc_storage gives and
// alloc_tensor carves tensors from), a tuple, or a reference to one of the executable's
// functions. Values are cheap to copy: tensors, storages and tuples are shared.

#include "../config.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "../detail/aligned_memory.hpp"
#include "../dtype.hpp"
#include "../ndarray.hpp"
#include "executable.hpp"

GEXEC_NAMESPACE_BEGIN

namespace relax {

/// A block of host memory that tensors are carved from (TVM's Storage).
struct vm_storage {
  std::shared_ptr<void> data;
  std::uint64_t bytes = 0;
  DLDevice device = cpu();
};

/// A function of the executable, as a value (vm.builtin.make_closure's input).
struct function_ref {
  std::int64_t index = -1;
};

struct vm_value;
using vm_tuple = std::shared_ptr<const std::vector<vm_value>>;

struct vm_value {
  std::variant<std::monostate, std::int64_t, double, bool, DLDataType, std::string, vm_shape, ndarray, std::shared_ptr<vm_storage>,
               vm_tuple, function_ref>
      v;

  vm_value() = default;
  template <class T>
    requires(!std::is_same_v<std::decay_t<T>, vm_value>)
  vm_value(T&& x) : v(std::forward<T>(x)) {}  // NOLINT: a value converts implicitly, as TVM's Any does

  [[nodiscard]] bool is_none() const noexcept { return std::holds_alternative<std::monostate>(v); }
  template <class T>
  [[nodiscard]] const T* get_if() const noexcept {
    return std::get_if<T>(&v);
  }
};

/// An executable's dtype as gexec names it ("bool", "float32").
inline std::string vm_dtype_name(DLDataType t) { return to_string(from_vm_dtype(t)); }

/// The kind of value `x` holds, for messages.
inline const char* kind_name(const vm_value& x) noexcept {
  constexpr const char* names[] = {"None", "int", "float", "bool", "dtype", "string", "shape", "tensor", "storage", "tuple", "function"};
  return names[x.v.index()];
}

}  // namespace relax

GEXEC_NAMESPACE_END
