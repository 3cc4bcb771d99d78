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

  /// The source for `in`: by magic bytes, else by the path's extension, else the first.
  static any open(param_input in) {
    const std::vector<std::byte> head = in.head(head_bytes);
    std::optional<any> out;
    ((!out && Sources::sniff(head) ? (out.emplace(std::in_place_type<Sources>, in), 0) : 0), ...);
    const auto ext = in.path().extension().string();
    ((!out && !ext.empty() && ext == Sources::extension ? (out.emplace(std::in_place_type<Sources>, in), 0) : 0), ...);
    if (!out) out.emplace(std::in_place_index<0>, std::move(in));
    return std::move(*out);
  }
  /// The format `in` would be read as ("params", "safetensors", ...).
  static std::string_view format_of(const param_input& in) {
    return std::visit([](const auto& s) { return std::remove_cvref_t<decltype(s)>::format; }, open(in));
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
