#pragma once
// gexec::executor_view: any graph_executor, whatever its backends, allocator and
// binding, seen through what another executor or an observer reads of it (its inputs
// by name, its graph and plan). Functions that take "any executor" take this, so none
// of them is a template over another executor type.

#include "../config.hpp"

#include <concepts>
#include <string_view>
#include <type_traits>

#include "../fwd.hpp"
#include "../ndarray.hpp"

GEXEC_NAMESPACE_BEGIN

class executor_view {
 public:
  /// A view of `ex`, which must outlive it.
  template <class Executor>
    requires(!std::same_as<std::remove_cvref_t<Executor>, executor_view>) && requires(const Executor& e, std::string_view name) {
      { e.get_input_index(name) } -> std::same_as<int>;
      { e.get_input(0) } -> std::same_as<ndarray>;
      e.get_graph();
      e.get_plan();
    }
  executor_view(const Executor& ex) noexcept : ex_(&ex), ops_(&ops_of<Executor>) {}  // NOLINT: any executor converts

  /// Index of an input (parameters included, as in TVM); -1 when absent.
  [[nodiscard]] int get_input_index(std::string_view name) const { return ops_->input_index(ex_, name); }
  /// A view of input `index` in the memory it is read from.
  [[nodiscard]] ndarray get_input(int index) const { return ops_->input(ex_, index); }
  [[nodiscard]] const graph& get_graph() const { return ops_->graph(ex_); }
  [[nodiscard]] const plan& get_plan() const { return ops_->plan(ex_); }

 private:
  struct ops {
    int (*input_index)(const void*, std::string_view);
    ndarray (*input)(const void*, int);
    const gexec::graph& (*graph)(const void*);
    const gexec::plan& (*plan)(const void*);
  };
  template <class E>
  static constexpr ops ops_of = {
      [](const void* e, std::string_view name) { return static_cast<const E*>(e)->get_input_index(name); },
      [](const void* e, int index) { return static_cast<const E*>(e)->get_input(index); },
      [](const void* e) -> const gexec::graph& { return static_cast<const E*>(e)->get_graph(); },
      [](const void* e) -> const gexec::plan& { return static_cast<const E*>(e)->get_plan(); },
  };

  const void* ex_;
  const ops* ops_;
};

GEXEC_NAMESPACE_END
