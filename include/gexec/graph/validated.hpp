#pragma once
// validated_graph: a graph that passed validation, immutable from then on, and the only
// form of graph that plans, models and executors accept. It holds the compact form
// (graph/compact.hpp), which is what planning reads and what a model keeps; the
// node-per-struct gexec::graph is made from it on first use of get(), ->, * or the
// conversion, once per validated_graph, and shared by its copies.

#include "../config.hpp"

#include <memory>
#include <mutex>
#include <utility>

#include "compact.hpp"
#include "data.hpp"

GEXEC_NAMESPACE_BEGIN

class validated_graph;
namespace detail {
validated_graph seal_checked(compact_graph c);
}  // namespace detail

class validated_graph {
 public:
  /// The empty graph (no nodes, no inputs, no outputs).
  validated_graph() : s_(empty()) {}
  /// The graph as plans and models read it.
  [[nodiscard]] const compact_graph& compact() const noexcept { return s_->compact; }
  /// The graph as gexec::graph, made on first use (thread-safe).
  [[nodiscard]] const graph& get() const { return s_->full(); }
  const graph* operator->() const { return &get(); }
  const graph& operator*() const { return get(); }
  operator const graph&() const { return get(); }  // NOLINT: a validated graph is a graph

 private:
  struct state {
    compact_graph compact;
    mutable std::once_flag once;
    mutable std::unique_ptr<const graph> made;
    const graph& full() const {
      std::call_once(once, [&] { made = std::make_unique<const graph>(to_graph(compact)); });
      return *made;
    }
  };
  friend validated_graph validate(graph g);
  friend validated_graph detail::seal_checked(compact_graph c);
  explicit validated_graph(std::shared_ptr<const state> s) noexcept : s_(std::move(s)) {}
  static std::shared_ptr<const state> empty() {
    static const auto s = [] {
      auto e = std::make_shared<state>();
      e->compact.node_row_ptr = {0};
      e->compact.name_ptr = {0};
      e->compact.input_ptr = {0};
      e->compact.shape_ptr = {0};
      return std::shared_ptr<const state>(std::move(e));
    }();
    return s;
  }
  std::shared_ptr<const state> s_;
};

/// Checks `g` (see check_graph) and seals it as a validated_graph.
inline validated_graph validate(graph g) {
  check_graph(g);
  auto s = std::make_shared<validated_graph::state>();
  s->compact = to_compact(g);
  return validated_graph(std::move(s));
}

namespace detail {
/// Seals a compact graph that a reader has checked as check_graph would (scanner.hpp).
inline validated_graph seal_checked(compact_graph c) {
  auto s = std::make_shared<validated_graph::state>();
  s->compact = std::move(c);
  return validated_graph(std::move(s));
}
}  // namespace detail

GEXEC_NAMESPACE_END
