#pragma once
// Functions compiled kernels look up by name at run time (for example
// "tvm.contrib.sort.argsort"), registered with the process default runtime, as
// tvm.register_func registers them with TVM's. A model with its own runtime looks in
// that runtime first (runtime::register_function), then here.

#include "config.hpp"

#include <string_view>
#include <type_traits>
#include <utility>

#include "packed_function.hpp"
#include "runtime.hpp"

GEXEC_NAMESPACE_BEGIN

/// Registers a packed C function under `name`; replaces an earlier registration.
inline void register_global_function(std::string_view name, packed_function f) { runtime::global().register_function(name, f); }

/// Registers a C++ callable taking gexec::packed_args (the registry keeps it alive).
template <class F>
  requires std::is_invocable_v<std::decay_t<F>&, packed_args>
void register_global_function(std::string_view name, F&& f) {
  runtime::global().register_function(name, std::forward<F>(f));
}

/// Makes `name` unknown again; kernels that cached a handle to it get an error when
/// they call it.
inline bool remove_global_function(std::string_view name) { return runtime::global().remove_function(name); }

/// The registered function, or nullptr; the pointer stays valid for the process.
inline const packed_function* find_global_function(std::string_view name) { return runtime::global().find_function(name); }

GEXEC_NAMESPACE_END
