#pragma once
// The rules a graph must keep, written once as predicates over plain values, for both
// readers of graph JSON: check_graph() (graph/data.hpp) turns a rule that fails into an
// error naming the JSON path and the value; the one-pass scanner (graph/scanner.hpp)
// gives up on it and leaves the text to the document reader, which gives that error.
// What planning checks (see parse_graph in graph/json.hpp) is not here.

#include "../config.hpp"

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../detail/json_path.hpp"
#include "../detail/shape.hpp"
#include "../dtype.hpp"
#include "../ndarray.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

struct graph_rules {
  // ---- nodes and their rows ------------------------------------------------------

  /// node_row_ptr has one element per node and one more.
  static constexpr bool row_count(std::size_t rows, std::size_t nodes) noexcept { return rows == nodes + 1; }
  /// node_row_ptr starts at 0.
  static constexpr bool first_row(std::uint32_t row) noexcept { return row == 0; }
  /// A node's rows span its outputs: node_row_ptr[i + 1] == node_row_ptr[i] + num_outputs.
  static constexpr bool rows_span(std::uint32_t row, std::uint32_t next, std::uint32_t outputs) noexcept {
    return std::uint64_t{row} + outputs == next;
  }
  /// Node names and kernel names reach error messages, logs and C strings: no control
  /// character (a NUL would cut them short there).
  static bool printable_name(std::string_view s) noexcept { return !has_control_character(s); }

  /// A "null" node (an input or parameter) takes no inputs and has exactly one output.
  static constexpr bool null_inputs(std::size_t inputs) noexcept { return inputs == 0; }
  static constexpr bool null_outputs(std::uint32_t num_outputs) noexcept { return num_outputs == 1; }

  /// A "tvm_op" node names its kernel, counts its inputs in num_inputs, has an output,
  /// and a "__copy" takes one input to one output.
  static constexpr bool kernel_named(std::string_view func_name) noexcept { return !func_name.empty(); }
  static constexpr bool inputs_counted(std::uint32_t num_inputs, std::size_t inputs) noexcept { return num_inputs == inputs; }
  static constexpr bool has_output(std::uint32_t num_outputs) noexcept { return num_outputs != 0; }
  static constexpr bool copy_one_to_one(std::string_view func_name, std::size_t inputs, std::uint32_t num_outputs) noexcept {
    return func_name != "__copy" || (inputs == 1 && num_outputs == 1);
  }

  // ---- references between nodes --------------------------------------------------

  /// Node `i` takes inputs and control dependencies from earlier nodes only.
  static constexpr bool before(std::uint32_t node, std::size_t i) noexcept { return node < i; }
  /// arg_nodes and heads name nodes of the graph.
  static constexpr bool in_range(std::uint32_t node, std::size_t nodes) noexcept { return node < nodes; }
  /// An entry is an output the node has.
  static constexpr bool output_of(std::uint32_t index, std::uint32_t num_outputs) noexcept { return index < num_outputs; }

  // ---- entries -------------------------------------------------------------------

  /// One attribute per entry; an optional attribute (device_index, storage_scope) may be absent.
  static constexpr bool one_per_entry(std::size_t size, std::size_t entries, bool optional) noexcept {
    return size == entries || (optional && size == 0);
  }
  static constexpr bool ndim_ok(std::size_t ndim) noexcept { return ndim <= static_cast<std::size_t>(max_ndim); }
  static constexpr bool dim_ok(std::int64_t dim) noexcept { return dim >= 0; }
  static constexpr bool dtype_ok(DLDataType t) noexcept { return is_supported(t); }
  /// The entry's size in bytes does not overflow.
  static bool size_ok(std::span<const std::int64_t> shape, DLDataType t) noexcept { return checked_byte_size(shape, t).has_value(); }
  /// Any non-negative id is a storage id, as TVM takes them.
  static constexpr bool storage_id_ok(std::int32_t sid) noexcept { return sid >= 0; }
  /// device_index holds DLDeviceType values.
  static constexpr bool device_ok(std::int32_t dev) noexcept { return dev > 0 && dev <= 64; }
};

/// The first entry on each storage id, for the rule that a storage lies on one device.
/// Ids below the entry count are kept in a vector, others (other tools number storage as
/// they like) in a map.
class storage_first_entry {
 public:
  explicit storage_first_entry(std::size_t entries) : dense_(entries, none) {}
  /// The first entry given for `sid` (non-negative): `e` itself, recorded, if it is the first.
  std::uint32_t first(std::int32_t sid, std::uint32_t e) {
    const auto s = static_cast<std::size_t>(sid);
    std::uint32_t& f = s < dense_.size() ? dense_[s] : sparse_.try_emplace(sid, none).first->second;
    if (f == none) f = e;
    return f;
  }

 private:
  static constexpr std::uint32_t none = std::numeric_limits<std::uint32_t>::max();
  std::vector<std::uint32_t> dense_;
  std::unordered_map<std::int32_t, std::uint32_t> sparse_;
};

/// The first index given with each name, for the rule that arg_nodes name distinct nodes.
/// The names are views that must outlive it.
class first_by_name {
 public:
  explicit first_by_name(std::size_t count) {
    std::size_t size = 16;
    while (size < count * 2) size *= 2;
    slots_.resize(size);
  }
  /// The first index given with `name`: `k` itself, recorded, if the name is new.
  std::size_t first(std::string_view name, std::size_t k) {
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t h = std::hash<std::string_view>{}(name) & mask;; h = (h + 1) & mask) {
      slot& s = slots_[h];
      if (!s.used) {
        s = {name, k, true};
        return k;
      }
      if (s.name == name) return s.k;
    }
  }

 private:
  struct slot {
    std::string_view name;
    std::size_t k = 0;
    bool used = false;
  };
  std::vector<slot> slots_;
};

}  // namespace detail
GEXEC_NAMESPACE_END
