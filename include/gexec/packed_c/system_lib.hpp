#pragma once
// Kernels linked into the program: TVM's "system library" (relay.build with
// Runtime("cpp", {"system-lib": True}), exported to a .tar of object files). Each
// object carries a static constructor that registers its kernels and its module
// context slot by name through TVMBackendRegisterSystemLibSymbol, and its kernels call
// TVMBackendAllocWorkspace, TVMBackendParallelLaunch, ... as plain C functions. This
// header defines those functions, so a program links such objects with no TVM runtime,
// no dynamic loader and no library file; `system_lib` binds a graph's func_names to
// the kernels registered that way:
//
//   #include <gexec/executor.hpp>
//   #include <gexec/packed_c/system_lib.hpp>
//   auto ex = gexec::create(graph_json, gexec::system_lib{}, {gexec::cpu()});
//   const auto m = gexec::static_model(graph_json, params);  // <gexec/static_model.hpp>: weights in place
//
// create() from JSON text or a file over `system_lib` reads the graph with the
// one-pass scanner alone (graph/json_scanned.hpp), so that a static program links no
// Boost.JSON: graphs as TVM writes them read the same, and what the scanner gives up on
// is refused naming the byte where parse_graph() would read it again; a program that
// wants that reader passes create() gexec::parse_graph(json) instead.
//
// The C functions are the ABI's, so they are process-wide by necessity, and so is the
// table of registered symbols: the constructors run before main(), with no object to
// register with. Everything else is what the hooks of loaded libraries use: workspace,
// parallel launches and environment functions follow the running executor's runtime.
// The definitions are weak: every source file that includes this header may emit them,
// and the program keeps one. Include it only in programs that link kernels this way
// (a program that also links TVM's own runtime gets TVM's definitions).

#include "../config.hpp"

#include <cstdint>
#include <exception>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../binding/backend_functions.hpp"
#include "../binding/binding.hpp"
#include "../detail/last_error.hpp"
#include "../error.hpp"
#include "../graph/json_scanned.hpp"
#include "../runtime/env_registry.hpp"
#include "../tvm_abi.hpp"
#include "hooks.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

/// The symbols linked-in kernels registered: functions by name, and the context slots
/// ("__tvm_module_ctx", one per object) that gexec points at the table itself.
struct system_lib_table {
  std::mutex mu;
  std::map<std::string, packed_c_func, std::less<>> functions;
  std::unordered_map<std::string, func_handle*> handles;  ///< given to TVMBackendGetFuncFromEnv callers, never freed
  std::size_t context_slots = 0;
};

inline system_lib_table& system_lib_symbols() {
  static auto* table = new system_lib_table;  // never destroyed: kernels may run during static destruction
  return *table;
}

/// Registers one symbol; a name ending in "__tvm_module_ctx" is a context slot (a
/// void* the kernels pass to TVMBackendGetFuncFromEnv), anything else a kernel.
inline int register_system_lib_symbol(const char* name, void* address) noexcept {
  if (!name || !address) return -1;
  try {
    system_lib_table& t = system_lib_symbols();
    std::lock_guard g(t.mu);
    const std::string_view n = name;
    constexpr std::string_view ctx = "__tvm_module_ctx";
    if (n.size() >= ctx.size() && n.substr(n.size() - ctx.size()) == ctx) {
      *static_cast<void**>(address) = &t;
      ++t.context_slots;
    } else {
      t.functions.insert_or_assign(std::string(n), reinterpret_cast<packed_c_func>(address));
    }
    return 0;
  } catch (...) {
    return -1;
  }
}

inline int call_system_lib_function(const func_handle* self, TVMValue* args, int* codes, int n, TVMValue* ret, int* ret_code) noexcept {
  packed_c_func fn = self->fn.load(std::memory_order_acquire);
  return fn(args, codes, n, ret, ret_code, nullptr) == 0 ? 0 : -1;
}

/// TVMBackendGetFuncFromEnv for linked-in kernels: a registered kernel first, then a
/// function registered with the running runtime or the process default.
inline int system_lib_get_func_from_env(void*, const char* func_name, void** out) noexcept {
  try {
    const std::string_view name = func_name ? func_name : "";
    system_lib_table& t = system_lib_symbols();
    {
      std::lock_guard g(t.mu);
      if (auto it = t.functions.find(name); it != t.functions.end()) {
        func_handle*& h = t.handles[std::string(name)];
        if (!h) {
          h = new func_handle;  // never freed: compiled code caches it
          h->call = &call_system_lib_function;
          h->fn.store(it->second, std::memory_order_release);
        }
        *out = h;
        return 0;
      }
    }
    std::lock_guard g(process_mutex());
    if (const env_name* e = env_names::instance().find(name); e && find_env_function(e->index)) {
      *out = const_cast<func_handle*>(&e->handle);
      return 0;
    }
    set_last_error("function \"" + std::string(name) +
                   "\" is neither a kernel linked into the program nor registered with the runtime "
                   "(gexec::register_global_function or runtime::register_function)");
  } catch (const std::exception& e) {
    set_last_error(std::string("TVMBackendGetFuncFromEnv: ") + e.what());
  } catch (...) {
    set_last_error("TVMBackendGetFuncFromEnv: unknown failure");
  }
  return -1;
}

}  // namespace detail

/// The op binding over kernels linked into the program (see the top of this file).
/// Stateless: a copy is as good as the original, and every copy sees the kernels the
/// program's objects registered before main().
class system_lib {
 public:
  /// The kernel registered as `func_name`; empty when none is.
  [[nodiscard]] packed_function resolve(std::string_view func_name) const {
    detail::system_lib_table& t = detail::system_lib_symbols();
    std::lock_guard g(t.mu);
    auto it = t.functions.find(func_name);
    return it == t.functions.end() ? packed_function{} : packed_function{it->second, nullptr};
  }
  [[nodiscard]] std::string describe() const {
    detail::system_lib_table& t = detail::system_lib_symbols();
    std::lock_guard g(t.mu);
    return "the kernels linked into the program (" + std::to_string(t.functions.size()) + " registered by " +
           std::to_string(t.context_slots) + " system-library objects)";
  }
  /// The names of every registered kernel, sorted.
  [[nodiscard]] std::vector<std::string> function_names() const {
    detail::system_lib_table& t = detail::system_lib_symbols();
    std::lock_guard g(t.mu);
    std::vector<std::string> names;
    for (const auto& [name, fn] : t.functions) names.push_back(name);
    return names;
  }
};
static_assert(op_binding<system_lib>);

namespace detail {
template <class Binding>
struct graph_reader;  // create()'s graph JSON reader (model.hpp)

/// A program with its kernels linked in reads graphs without Boost.JSON.
template <>
struct graph_reader<system_lib> {
  static validated_graph text(std::string_view json_text) { return parse_graph_scanned(json_text); }
  static validated_graph file(const file_path& path) { return load_graph_file_scanned(path); }
};
}  // namespace detail

GEXEC_NAMESPACE_END

// The C functions system-library objects call (the backend's workspace and parallel
// launches too: binding/backend_functions.hpp). Weak, so that including this header in
// several source files, or linking TVM's runtime too, leaves one definition.
extern "C" {
__attribute__((weak)) int TVMBackendRegisterSystemLibSymbol(const char* name, void* ptr) {
  return ::gexec::detail::register_system_lib_symbol(name, ptr);
}
__attribute__((weak)) int TVMBackendGetFuncFromEnv(void* mod_node, const char* func_name, void** out) {
  return ::gexec::detail::system_lib_get_func_from_env(mod_node, func_name, out);
}
__attribute__((weak)) void TVMAPISetLastError(const char* msg) { ::gexec::detail::api_set_last_error(msg); }
__attribute__((weak)) int TVMFuncCall(void* func, TVMValue* arg_values, int* type_codes, int num_args,
                                      TVMValue* ret_val, int* ret_type_code) {
  return ::gexec::detail::api_func_call(func, arg_values, type_codes, num_args, ret_val, ret_type_code);
}
}
