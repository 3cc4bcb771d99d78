#pragma once
// The one sniff table: which weight source reads an input, decided by its first bytes
// (and, where no magic matches, by the file's extension). Every reader of weights opens
// its input here: load_param_dict, load_param_dict_file, graph_executor::load_params_file
// and share_params, model::load, gexec-run, the Triton backend and the Python package.
// A new format is one line in param_format_table (see params/null_source.hpp).

#include "../config.hpp"

#include <array>
#include <cstddef>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "npz_source.hpp"
#include "null_source.hpp"
#include "safetensors_source.hpp"
#include "source.hpp"
#include "tvm_blob.hpp"

GEXEC_NAMESPACE_BEGIN

/// Formats in sniffing order; the first is also the one an input no magic and no
/// extension names is read as (its messages then say what it expected).
template <param_source... Sources>
struct param_format_list {
  using any = std::variant<Sources...>;
  /// Bytes of an input the sniffers see.
  static constexpr std::size_t head_bytes = 16;

  /// What the table picks for an input, without reading more than its head.
  struct choice {
    std::string_view format;     ///< the source's `format` ("params", "safetensors", ...)
    std::string_view extension;  ///< its file extension (".params", ".safetensors", ...)
    std::size_t index = 0;       ///< its position in the list
  };

  /// The format `in` is read as: the first whose magic bytes match its head, else the
  /// first whose extension is the path's, else the first of the list.
  static choice sniff(const param_input& in) {
    const std::vector<std::byte> head = in.head(head_bytes);
    const std::string_view ext = in.extension();
    static constexpr std::array<choice, sizeof...(Sources)> all = [] {
      std::array<choice, sizeof...(Sources)> a{};
      std::size_t i = 0;
      ((a[i] = {Sources::format, Sources::extension, i}, ++i), ...);
      return a;
    }();
    std::optional<choice> out;
    std::size_t i = 0;
    ((!out && Sources::sniff(head) ? (void)(out = all[i]) : (void)0, ++i), ...);
    for (const choice& c : all)
      if (!out && !ext.empty() && ext == c.extension) out = c;
    return out.value_or(all[0]);
  }

  /// The source for `in`, as sniff() chooses.
  static any open(param_input in) {
    const choice c = sniff(in);
    return make(c.index, std::move(in), std::index_sequence_for<Sources...>{});
  }
  /// The format `in` would be read as ("params", "safetensors", ...).
  static std::string_view format_of(const param_input& in) { return sniff(in).format; }

 private:
  template <std::size_t... I>
  static any make(std::size_t index, param_input in, std::index_sequence<I...>) {
    std::optional<any> out;
    ((index == I ? (void)out.emplace(std::in_place_index<I>, std::move(in)) : (void)0), ...);
    return std::move(*out);
  }
};

/// The sniff table. One line per format: its source (magic bytes and extension live in it).
using param_format_table = param_format_list<tvm_blob_source,     // u64 0xF7E58D4F05049CB7 at byte 0; .params
                                             safetensors_source,  // '{' at byte 8; .safetensors
                                             npz_source,          // "PK\3\4" or "PK\5\6" at byte 0; .npz
                                             null_source>;        // "GEXECNUL"; .gexecnull

/// Calls `f` with the source the table opens `in` as (a const reference to it).
template <class F>
decltype(auto) with_param_source(param_input in, F&& f) {
  const param_format_table::any source = param_format_table::open(std::move(in));
  return std::visit(std::forward<F>(f), source);
}

namespace detail {
/// What the executor reaches through params/source.hpp without naming a format.
template <class Tag>
struct param_formats {
  template <class F>
  static decltype(auto) with(param_input in, F&& f) {
    return with_param_source(std::move(in), std::forward<F>(f));
  }
};
}  // namespace detail

GEXEC_NAMESPACE_END
