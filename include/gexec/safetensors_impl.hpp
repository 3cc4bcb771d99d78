#pragma once
// The definitions of safetensors.hpp that read JSON, over gexec's own JSON reader
// (detail/json_value.hpp: strict as Boost.JSON's, with no Boost to link, so that a static
// program that loads parameters links none). Included by safetensors.hpp in header-only
// mode and by src/gexec.cpp in compiled mode.

#include "safetensors.hpp"

#include "detail/json_value.hpp"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

GEXEC_NAMESPACE_BEGIN

namespace detail {

GEXEC_DECL std::vector<safetensors_entry> parse_safetensors_header(std::string_view header, std::uint64_t file_size, const std::string& what) {
  // The file offset of a key's first appearance (of the header, where it is escaped
  // otherwise): looked for only when a message needs it, so that a header of many
  // tensors is read in one pass.
  auto key_offset = [&header](const std::string& name) -> std::uint64_t {
    const auto at = header.find(json_quoted(name));
    return 8 + (at == std::string_view::npos ? 0 : at);
  };
  const std::uint64_t data_start = 8 + header.size();
  const std::uint64_t data_size = file_size - data_start;
  // The reader refuses an object naming a key twice (also when spelt with \u escapes),
  // where a plain DOM would keep the last and drop the first silently.
  json_tree doc;
  json_value_reader reader(header, nullptr, json_max_depth, &doc);
  if (!reader.document()) {
    if (reader.what() == json_value_reader::fault::duplicate_key)
      safetensors_fail(what, 8 + reader.offset(), "\"" + reader.key_path() + "\" is given twice (the header names each tensor and field once)");
    safetensors_fail(what, 8 + reader.offset(), "malformed JSON header (" + reader.describe() + ")");
  }
  if (reader.offset() != header.size()) safetensors_fail(what, 8 + reader.offset(), "malformed JSON header (extra data)");
  using kind = json_tree::kind;
  const auto& nodes = doc.nodes;
  if (nodes[0].type != kind::object) safetensors_fail(what, 8, "the header is not a JSON object");
  std::vector<safetensors_entry> out;
  for (std::size_t k = json_tree::first(0); k != nodes[0].end; k = doc.next(k)) {
    const std::string& name = nodes[k].key;
    // Where a message about this key points (found in the text only then).
    const auto fail = [&](const std::string& message) { safetensors_fail(what, key_offset(name), message); };
    if (name == "__metadata__") {
      if (nodes[k].type != kind::object) fail("__metadata__ is not an object");
      for (std::size_t m = json_tree::first(k); m != nodes[k].end; m = doc.next(m))
        if (nodes[m].type != kind::string) fail("__metadata__ \"" + printable(nodes[m].key) + "\" is not a string");
      continue;
    }
    // What a message about it says first (made only for a message).
    const auto label = [&name] { return "tensor \"" + printable(name) + "\""; };
    if (nodes[k].type != kind::object) fail(label() + " is not an object of dtype, shape and data_offsets");
    for (std::size_t f = json_tree::first(k); f != nodes[k].end; f = doc.next(f))
      if (nodes[f].key != "dtype" && nodes[f].key != "shape" && nodes[f].key != "data_offsets")
        fail(label() + ": unknown field \"" + nodes[f].key + "\"");
    const std::size_t dtype = doc.member(k, "dtype"), shape = doc.member(k, "shape"), offsets = doc.member(k, "data_offsets");
    if (!dtype || !shape || !offsets) fail(label() + " lacks " + (!dtype ? "dtype" : !shape ? "shape" : "data_offsets"));
    safetensors_entry e;
    e.name = name;
    if (nodes[dtype].type != kind::string) fail(label() + ": dtype is not a string");
    const auto d = safetensors_dtype_of(nodes[dtype].text);
    if (!d)
      fail(label() + ": dtype \"" + nodes[dtype].text +
           "\" is not one gexec stores (F64, F32, F16, BF16, I64-I8, U64-U8, BOOL, F8_E4M3, F8_E5M2)");
    e.dtype = *d;
    if (nodes[shape].type != kind::array) fail(label() + ": shape is not an array");
    if (nodes[shape].size > static_cast<std::size_t>(max_ndim))
      fail(label() + ": " + std::to_string(nodes[shape].size) + " dimensions exceed gexec's limit of " + std::to_string(max_ndim));
    for (std::size_t v = json_tree::first(shape); v != nodes[shape].end; v = doc.next(v)) {
      std::uint64_t dim = 0;
      if (!doc.size_value(v, dim) || dim > static_cast<std::uint64_t>(INT64_MAX)) fail(label() + ": shape " + doc.serialize(shape) + " is not a list of sizes");
      e.shape.push_back(static_cast<std::int64_t>(dim));
    }
    const auto size = checked_byte_size(e.shape, e.dtype);
    if (!size) fail(label() + ": shape " + shape_to_string(e.shape) + " overflows");
    if (nodes[offsets].type != kind::array || nodes[offsets].size != 2) fail(label() + ": data_offsets is not [begin, end]");
    std::uint64_t begin = 0, end = 0;
    const std::size_t first = json_tree::first(offsets);
    if (!doc.size_value(first, begin) || !doc.size_value(doc.next(first), end) || begin > end)
      fail(label() + ": data_offsets " + doc.serialize(offsets) + " is not [begin, end] with begin <= end");
    if (end > data_size)
      safetensors_fail(what, data_start + std::min(begin, data_size), label() + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                                                         "] run past the end of the data (" + std::to_string(data_size) + " bytes)");
    if (end - begin != *size)
      safetensors_fail(what, data_start + begin, label() + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "] hold " +
                                    std::to_string(end - begin) + " bytes, its shape " + shape_to_string(e.shape) + " of " +
                                    to_string(e.dtype) + " needs " + std::to_string(*size));
    e.offset = data_start + begin;
    e.bytes = *size;
    out.push_back(std::move(e));
  }
  check_safetensors_coverage(out, data_start, data_size, what);
  return out;
}

}  // namespace detail

GEXEC_NAMESPACE_END
