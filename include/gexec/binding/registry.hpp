#pragma once
// Binding over kernels given as C++ callables by name, for examples and for other
// compilers' test harnesses: no library file. Each callable is called through one
// function pointer (a trampoline for its type), like a compiled kernel.
//
//   gexec::registry kernels;
//   kernels.add("add_one", [](gexec::packed_args a) { ... a.tensor(0) ... });
//   auto ex = gexec::create(graph_json, kernels, {gexec::cpu()});

#include "../config.hpp"

#include <algorithm>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../packed_function.hpp"
#include "binding.hpp"

GEXEC_NAMESPACE_BEGIN

class registry {
 public:
  /// Adds a C++ callable taking packed_args (returning void, or an int status).
  template <class F>
    requires std::is_invocable_v<std::decay_t<F>&, packed_args>
  registry& add(std::string name, F&& f) {
    return add_owned(std::move(name), std::make_unique<owned_packed_function>(std::forward<F>(f)));
  }
  /// Adds a packed C function.
  registry& add(std::string name, packed_function f) {
    return add_owned(std::move(name), std::make_unique<owned_packed_function>(f));
  }

  [[nodiscard]] packed_function resolve(std::string_view name) const {
    std::lock_guard g(state_->mu);
    auto it = state_->by_name.find(name);
    return it == state_->by_name.end() ? packed_function{} : it->second;
  }
  [[nodiscard]] std::string describe() const { return "kernel registry"; }

 private:
  // Shared by copies, and never forgetting a callable: executors that resolved a name
  // keep calling what they resolved even if the name is later re-added. Adding and
  // resolving may happen on different threads (models are built on any thread).
  struct state {
    std::mutex mu;
    // Names looked up by string_view, with no std::string made.
    struct name_hash {
      using is_transparent = void;
      std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
    };
    struct name_equal {
      using is_transparent = void;
      bool operator()(std::string_view a, std::string_view b) const noexcept { return a == b; }
    };
    std::unordered_map<std::string, packed_function, name_hash, name_equal> by_name;
    std::vector<std::unique_ptr<owned_packed_function>> owned;
  };
  registry& add_owned(std::string name, std::unique_ptr<owned_packed_function> f) {
    std::lock_guard g(state_->mu);
    state_->by_name[std::move(name)] = f->get();
    state_->owned.push_back(std::move(f));
    return *this;
  }
  std::shared_ptr<state> state_ = std::make_shared<state>();
};
static_assert(op_binding<registry>);

namespace detail {
template <std::size_t N>
struct fixed_string {
  char value[N];
  constexpr fixed_string(const char (&s)[N]) { std::copy_n(s, N, value); }  // NOLINT: implicit by design
  [[nodiscard]] constexpr std::string_view view() const { return {value, N - 1}; }
};
}  // namespace detail

/// A kernel known at compile time: its name and a function taking packed_args.
template <detail::fixed_string Name, auto Fn>
  requires std::is_invocable_v<decltype(Fn), packed_args>
struct kernel {
  static constexpr std::string_view name = Name.view();
  static constexpr packed_c_func fn = &detail::static_trampoline<Fn>;
};

/// Binding over a set of kernels fixed at compile time: each step calls a trampoline
/// that calls the function directly (no object, no resource handle, no map at run time).
///
///   using kernels = gexec::static_registry<gexec::kernel<"add_one", &add_one>, gexec::kernel<"relu", &relu>>;
///   auto ex = gexec::create(graph_json, kernels{});
template <class... Kernels>
class static_registry {
 public:
  [[nodiscard]] packed_function resolve(std::string_view name) const {
    packed_function f{};
    (void)((name == Kernels::name ? (f = {Kernels::fn, nullptr}, true) : false) || ...);
    return f;
  }
  [[nodiscard]] std::string describe() const { return "static kernel registry"; }
};

GEXEC_NAMESPACE_END
