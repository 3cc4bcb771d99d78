#pragma once
// Packed functions written in C++: packed_args gives typed access to the arguments of
// a packed call, and make_packed() turns a C++ callable into a packed_function without
// std::function: one trampoline per callable type, called through a plain pointer.

#include "config.hpp"

#include <dlpack/dlpack.h>

#include <exception>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "detail/last_error.hpp"
#include "error.hpp"
#include "tvm_abi.hpp"

GEXEC_NAMESPACE_BEGIN

/// The arguments of one packed call.
struct packed_args {
  TVMValue* values;
  int* type_codes;
  int num_args;

  [[nodiscard]] int size() const noexcept { return num_args; }
  /// Argument i as a tensor; gexec::error if it is not one.
  [[nodiscard]] DLTensor& tensor(int i) const {
    check(i);
    int c = type_codes[i];
    if ((c != tc_dltensor && c != tc_handle && c != tc_ndarray) || values[i].v_handle == nullptr)
      throw error(errc::invalid_argument, "argument " + std::to_string(i) + " is not a tensor (type code " +
                                              std::to_string(c) + ")");
    return *static_cast<DLTensor*>(values[i].v_handle);
  }
  [[nodiscard]] double float_value(int i) const {
    check(i);
    if (type_codes[i] == tc_float) return values[i].v_float64;
    if (type_codes[i] == tc_int) return static_cast<double>(values[i].v_int64);
    throw error(errc::invalid_argument, "argument " + std::to_string(i) + " is not a number");
  }
  [[nodiscard]] std::int64_t int_value(int i) const {
    check(i);
    if (type_codes[i] == tc_int) return values[i].v_int64;
    throw error(errc::invalid_argument, "argument " + std::to_string(i) + " is not an integer");
  }

 private:
  void check(int i) const {
    if (i < 0 || i >= num_args)
      throw error(errc::invalid_argument, "argument " + std::to_string(i) + " of " + std::to_string(num_args));
  }
};

namespace detail {

/// Calls f(packed_args) under the packed ABI's rules: void means success, an int is
/// the status, and an exception becomes -1 with its message as the last error.
template <class F>
int call_packed(F& f, TVMValue* values, int* codes, int n, int* ret_code) noexcept {
  try {
    if (ret_code) *ret_code = tc_null;
    if constexpr (std::is_same_v<std::invoke_result_t<F&, packed_args>, void>) {
      f(packed_args{values, codes, n});
      return 0;
    } else {
      return static_cast<int>(f(packed_args{values, codes, n}));
    }
  } catch (const std::exception& e) {
    set_last_error(e.what());
  } catch (...) {
    set_last_error("unknown C++ exception");
  }
  return -1;
}

/// A callable object behind the resource handle.
template <class F>
int packed_trampoline(TVMValue* values, int* codes, int n, TVMValue*, int* ret_code, void* self) noexcept {
  return call_packed(*static_cast<F*>(self), values, codes, n, ret_code);
}

/// A function known at compile time: called directly, no resource handle.
template <auto Fn>
int static_trampoline(TVMValue* values, int* codes, int n, TVMValue*, int* ret_code, void*) noexcept {
  return call_packed(*Fn, values, codes, n, ret_code);
}

}  // namespace detail

/// A packed function that owns a C++ callable taking packed_args and returning void
/// or an int status. Exceptions become the packed ABI's -1 and last error.
class owned_packed_function {
 public:
  template <class F>
    requires std::is_invocable_v<std::decay_t<F>&, packed_args>
  explicit owned_packed_function(F&& f)
      : object_(new std::decay_t<F>(std::forward<F>(f)), [](void* p) { delete static_cast<std::decay_t<F>*>(p); }),
        fn_{&detail::packed_trampoline<std::decay_t<F>>, object_.get()} {}
  explicit owned_packed_function(packed_function f) : object_(nullptr, [](void*) {}), fn_(f) {}

  [[nodiscard]] packed_function get() const noexcept { return fn_; }

 private:
  std::unique_ptr<void, void (*)(void*)> object_;
  packed_function fn_;
};

GEXEC_NAMESPACE_END
