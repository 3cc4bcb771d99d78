#pragma once
// One executor's zero-copy bindings: per alias group (named by its root entry), what
// its memory is (the executor's own, a parameter, a caller's tensor), what keeps
// memory the executor does not own alive, which output a group is bound to, and the
// outputs run() copies into the caller's tensors at the end. With them, the rules:
// an input and an output may not share memory, an output bound again first gives its
// group back, and where an output cannot be written in place it is copied instead.
//
// It works on the model's plan and the executor's instance_plan, never on the executor,
// so that it can be tested alone. Nothing of it is read by the steps of a run.

#include "../config.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../error.hpp"
#include "../graph/compact.hpp"
#include "../ndarray.hpp"
#include "../plan.hpp"
#include "instance_plan.hpp"

GEXEC_NAMESPACE_BEGIN

class zero_copy_bindings {
 public:
  enum class bound_to : std::uint8_t {
    internal,  ///< the executor's own storage (allocated on first use for input storage)
    model,     ///< the model's parameter
    shared,    ///< another executor's parameter (share_params)
    input,     ///< the caller's tensor (set_input_zero_copy)
    output,    ///< the caller's tensor (set_output_zero_copy)
  };
  /// An output run() copies into the caller's tensor after the last step.
  struct output_copy {
    int index;
    std::uint32_t eid;
    ndarray value;
  };

  /// Every group on the executor's own memory, none holding an input yet. `p` and `g`
  /// are the model's, `tensors` the executor's: all three must outlive the bindings.
  zero_copy_bindings(const plan& p, const compact_graph& g, instance_plan& tensors)
      : plan_(&p), graph_(&g), tensors_(&tensors), binding_(p.num_entries(), bound_to::internal), input_group_(p.num_entries(), false) {}
  zero_copy_bindings(const zero_copy_bindings&) = delete;
  zero_copy_bindings& operator=(const zero_copy_bindings&) = delete;

  // ---- what is bound ------------------------------------------------------------------

  /// What alias root `root`'s group is bound to.
  [[nodiscard]] bound_to of(std::uint32_t root) const { return binding_[root]; }
  /// Whether `root`'s group holds a graph input.
  [[nodiscard]] bool holds_input(std::uint32_t root) const { return input_group_[root]; }
  /// What keeps the memory of `root`'s group alive where the executor does not own it;
  /// null for the executor's own memory.
  [[nodiscard]] std::shared_ptr<const void> owner(std::uint32_t root) const {
    auto it = borrowed_.find(root);
    return it == borrowed_.end() ? nullptr : it->second.owner;
  }
  /// The output `root`'s group is bound to, or -1.
  [[nodiscard]] int bound_output(std::uint32_t root) const {
    auto it = borrowed_.find(root);
    return it == borrowed_.end() ? -1 : it->second.output;
  }
  /// The outputs run() copies into the caller's tensors, in the order they were set.
  [[nodiscard]] const std::vector<output_copy>& output_copies() const noexcept { return output_copies_; }
  /// The caller's tensor output `index` is copied into, or null.
  [[nodiscard]] const ndarray* copied_output(int index) const noexcept {
    for (const output_copy& c : output_copies_)
      if (c.index == index) return &c.value;
    return nullptr;
  }

  // ---- the rules ----------------------------------------------------------------------

  /// Marks `root`'s group as holding a graph input: an output there is copied, not bound.
  void mark_input(std::uint32_t root) { input_group_[root] = true; }

  /// Points `eid`'s alias group at `data` and records what it is bound to.
  void bind(std::uint32_t eid, void* data, const std::shared_ptr<const void>& owner, bound_to to) {
    const std::uint32_t root = plan_->alias_root[eid];
    tensors_->bind_alias_group(*plan_, root, data);
    borrowed_[root] = {owner, -1};
    binding_[root] = to;
  }

  /// Returns `eid`'s alias group to the executor's own memory, at `own`.
  void give_back(std::uint32_t eid, void* own) {
    const std::uint32_t root = plan_->alias_root[eid];
    tensors_->bind_alias_group(*plan_, root, own);
    borrowed_.erase(root);
    binding_[root] = bound_to::internal;
  }

  /// Refuses a zero-copy tensor whose bytes overlap a tensor bound zero-copy the other
  /// way (an input the graph writes into, or an output it reads as it writes). `what`
  /// begins the message ("set_input_zero_copy \"x\"").
  void refuse_overlap(const std::string& what, const ndarray& value, bound_to other) const {
    const auto lo = reinterpret_cast<std::uintptr_t>(value.data());
    const auto hi = lo + static_cast<std::uintptr_t>(value.byte_size());
    for (std::uint32_t root = 0; root < binding_.size(); ++root) {
      if (binding_[root] != other) continue;
      const auto b = reinterpret_cast<std::uintptr_t>(tensors_->entries[root].data);
      const auto e = b + static_cast<std::uintptr_t>(plan_->alias_group_bytes(*graph_, root));
      if (lo < e && b < hi)
        throw error(errc::invalid_argument, what + ": the tensor overlaps the one bound zero-copy to " +
                                                (other == bound_to::input ? "an input" : "an output") + " (entry " + std::to_string(root) +
                                                "); an input and an output may not share memory");
    }
    if (other != bound_to::output) return;
    for (const output_copy& c : output_copies_) {  // outputs that run() copies into the caller's tensor
      const auto b = reinterpret_cast<std::uintptr_t>(c.value.data());
      const auto e = b + static_cast<std::uintptr_t>(c.value.byte_size());
      if (lo < e && b < hi)
        throw error(errc::invalid_argument, what + ": the tensor overlaps the one bound zero-copy to output " + std::to_string(c.index) +
                                                "; an input and an output may not share memory");
    }
  }

  /// Makes output `index` (entry `eid`) be written into `value`: its group is bound to
  /// `value` where the group is the executor's own memory and no larger than `value`;
  /// otherwise run() copies into `value` at the end. An earlier binding of this output
  /// is undone first: its group is given back to `own(eid)`, the executor's own memory
  /// for it (a callable returning void*, which may allocate). Overlap is the caller's
  /// check (refuse_overlap), made before.
  template <class OwnMemory>
  void bind_output(int index, std::uint32_t eid, const ndarray& value, OwnMemory&& own) {
    const std::uint32_t root = plan_->alias_root[eid];
    std::erase_if(output_copies_, [&](const output_copy& c) { return c.index == index; });
    if (binding_[root] == bound_to::output && bound_output(root) == index) give_back(eid, own(eid));  // rebinding this output
    if (input_group_[root] || binding_[root] != bound_to::internal || plan_->alias_group_bytes(*graph_, eid) > value.byte_size()) {
      output_copies_.push_back({index, eid, value});
    } else {
      bind(eid, value.data(), value.storage_owner(), bound_to::output);
      borrowed_[root].output = index;
    }
  }

 private:
  const plan* plan_;
  const compact_graph* graph_;
  instance_plan* tensors_;
  std::vector<bound_to> binding_;  ///< per alias root
  std::vector<bool> input_group_;  ///< per alias root: holds a graph input
  /// A group bound to memory the executor does not own: what keeps that memory alive, and
  /// the output bound there (-1: an input's).
  struct borrowed {
    std::shared_ptr<const void> owner;
    int output = -1;
  };
  std::unordered_map<std::uint32_t, borrowed> borrowed_;  ///< per alias root so bound
  std::vector<output_copy> output_copies_;
};

GEXEC_NAMESPACE_END
