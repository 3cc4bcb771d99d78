#pragma once
// A storage planner chosen at run time: any gexec::storage_planner held by value, so that
// the planner is a value of the model (model_options::planner) and not part of its type.
//
//   gexec::model_options o;
//   o.planner = gexec::liveness{};                 // or gexec::planner_named("liveness")
//   auto m = gexec::model::load("model.so", o);

#include "../config.hpp"

#include <functional>
#include <type_traits>
#include <utility>

#include "as_compiled.hpp"
#include "planner.hpp"

GEXEC_NAMESPACE_BEGIN

class any_planner {
 public:
  /// No planner: the model's own (its Planner template argument, as_compiled by default).
  any_planner() = default;
  template <storage_planner P>
    requires(!std::is_same_v<std::remove_cvref_t<P>, any_planner>)
  any_planner(P planner)  // NOLINT(google-explicit-constructor): a planner is its own choice
      : plan_([p = std::move(planner)](const storage_problem& problem) { return p.plan(problem); }),
        keeps_storage_ids_(std::is_same_v<P, as_compiled>) {}

  [[nodiscard]] storage_assignment plan(const storage_problem& problem) const { return plan_(problem); }
  /// Whether a planner was given.
  [[nodiscard]] explicit operator bool() const noexcept { return static_cast<bool>(plan_); }
  /// Whether the planner keeps the graph's own storage ids (as_compiled): errors in its
  /// answer are then the graph's.
  [[nodiscard]] bool keeps_storage_ids() const noexcept { return keeps_storage_ids_; }

 private:
  std::function<storage_assignment(const storage_problem&)> plan_;
  bool keeps_storage_ids_ = false;
};

namespace detail {
/// Whether `planner` keeps the graph's storage ids: known from its type, or from the
/// value for a planner chosen at run time.
template <class P>
bool keeps_storage_ids(const P& planner) noexcept {
  if constexpr (std::is_same_v<P, any_planner>) return planner.keeps_storage_ids();
  else return std::is_same_v<P, as_compiled>;
}
}  // namespace detail

GEXEC_NAMESPACE_END
