#pragma once
// Storage planners and execution policies chosen by name at run time, for programs
// that take the choice from a command line or a configuration (gexec-run, the Triton
// backend): one place knows the names, and no program writes its own switch.
//
//   gexec::model_options o;
//   o.planner = gexec::planner_named(name);        // a value of the model, not its type
//   auto m = gexec::model::load("model.so", o);
//   gexec::with_policy(name, [&](auto policy) { ex.run(policy); });

#include "../config.hpp"

#include <array>
#include <string>
#include <string_view>
#include <utility>

#include "../error.hpp"
#include "../planners/any_planner.hpp"
#include "../planners/as_compiled.hpp"
#include "../planners/liveness.hpp"
#include "parallel_branches.hpp"
#include "sequential.hpp"

GEXEC_NAMESPACE_BEGIN

/// The names with_planner knows: TVM's storage ids as compiled (the default), or one
/// arena per device planned by liveness.
inline constexpr std::array<std::string_view, 2> planner_names{"as_compiled", "liveness"};
/// The names with_policy knows: the flat loop (the default), or independent branches at
/// once on the runtime's pool.
inline constexpr std::array<std::string_view, 2> policy_names{"sequential", "parallel"};

namespace detail {
template <std::size_t N>
[[noreturn]] void unknown_name(std::string_view what, std::string_view name, const std::array<std::string_view, N>& names) {
  std::string known;
  for (std::string_view n : names) known += (known.empty() ? "" : ", ") + std::string(n);
  throw error(errc::invalid_argument, std::string(what) + " \"" + std::string(name) + "\" is not one gexec knows (" + known + ")");
}
template <std::size_t N>
bool is_one_of(std::string_view name, const std::array<std::string_view, N>& names) {
  for (std::string_view n : names)
    if (n == name) return true;
  return false;
}
}  // namespace detail

[[nodiscard]] inline bool is_planner_name(std::string_view name) { return detail::is_one_of(name, planner_names); }
[[nodiscard]] inline bool is_policy_name(std::string_view name) { return detail::is_one_of(name, policy_names); }

/// f(planner) with the storage planner named `name` (a value of its type); errc::invalid_argument,
/// naming the choices, for a name not in planner_names.
template <class F>
decltype(auto) with_planner(std::string_view name, F&& f) {
  if (name == "as_compiled") return std::forward<F>(f)(as_compiled{});
  if (name == "liveness") return std::forward<F>(f)(liveness{});
  detail::unknown_name("planner", name, planner_names);
}

/// The storage planner named `name`, as a value for model_options::planner;
/// errc::invalid_argument, naming the choices, for a name not in planner_names.
[[nodiscard]] inline any_planner planner_named(std::string_view name) {
  return with_planner(name, [](auto planner) { return any_planner(planner); });
}

/// f(policy) with the execution policy named `name`; errc::invalid_argument, naming the
/// choices, for a name not in policy_names.
template <class F>
decltype(auto) with_policy(std::string_view name, F&& f) {
  if (name == "sequential") return std::forward<F>(f)(sequential{});
  if (name == "parallel") return std::forward<F>(f)(parallel_branches{});
  detail::unknown_name("execution policy", name, policy_names);
}

GEXEC_NAMESPACE_END
