#pragma once
// The definitions of safetensors.hpp that read JSON, over Boost.JSON. Included by
// safetensors.hpp in header-only mode and by src/gexec.cpp in compiled mode.

#include "safetensors.hpp"

#include <boost/json.hpp>

#include "detail/json_reader.hpp"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

GEXEC_NAMESPACE_BEGIN

namespace detail {

inline std::optional<std::uint64_t> safetensors_size(const boost::json::value& v) noexcept {
  if (v.is_uint64()) return v.get_uint64();
  if (v.is_int64() && v.get_int64() >= 0) return static_cast<std::uint64_t>(v.get_int64());
  return std::nullopt;
}

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
  // strict_json_handler refuses an object naming a key twice (also when spelt with \u
  // escapes), where a plain DOM would keep the last and drop the first silently.
  boost::json::monotonic_resource arena;  // the document's memory, freed at once
  boost::json::basic_parser<strict_json_handler> p(boost::json::parse_options{});
  p.handler().st.reset(&arena);
  boost::system::error_code ec;
  const std::size_t used = p.write_some(false, header.data(), header.size(), ec);
  if (!p.handler().duplicate_at.empty())
    safetensors_fail(what, 8 + used, "\"" + p.handler().duplicate_at + "\" is given twice (the header names each tensor and field once)");
  if (!ec && used != header.size()) ec = boost::json::error::extra_data;
  if (ec) safetensors_fail(what, 8 + used, "malformed JSON header (" + ec.message() + ")");
  const boost::json::value doc = p.handler().st.release();
  if (!doc.is_object()) safetensors_fail(what, 8, "the header is not a JSON object");
  std::vector<safetensors_entry> out;
  for (const auto& kv : doc.as_object()) {
    const std::string name(kv.key());
    // Where a message about this key points (found in the text only then).
    const auto fail = [&](const std::string& message) { safetensors_fail(what, key_offset(name), message); };
    if (name == "__metadata__") {
      if (!kv.value().is_object()) fail("__metadata__ is not an object");
      for (const auto& m : kv.value().as_object())
        if (!m.value().is_string()) fail("__metadata__ \"" + printable(m.key()) + "\" is not a string");
      continue;
    }
    // What a message about it says first (made only for a message).
    const auto label = [&name] { return "tensor \"" + printable(name) + "\""; };
    if (!kv.value().is_object()) fail(label() + " is not an object of dtype, shape and data_offsets");
    const auto& t = kv.value().as_object();
    for (const auto& f : t)
      if (f.key() != "dtype" && f.key() != "shape" && f.key() != "data_offsets")
        fail(label() + ": unknown field \"" + std::string(f.key()) + "\"");
    const auto* dtype = t.if_contains("dtype");
    const auto* shape = t.if_contains("shape");
    const auto* offsets = t.if_contains("data_offsets");
    if (!dtype || !shape || !offsets) fail(label() + " lacks " + (!dtype ? "dtype" : !shape ? "shape" : "data_offsets"));
    safetensors_entry e;
    e.name = name;
    if (!dtype->is_string()) fail(label() + ": dtype is not a string");
    const auto d = safetensors_dtype_of(std::string_view(dtype->as_string()));
    if (!d)
      fail(label() + ": dtype \"" + std::string(dtype->as_string()) +
                   "\" is not one gexec stores (F64, F32, F16, BF16, I64-I8, U64-U8, BOOL, F8_E4M3, F8_E5M2)");
    e.dtype = *d;
    if (!shape->is_array()) fail(label() + ": shape is not an array");
    if (shape->as_array().size() > static_cast<std::size_t>(max_ndim))
      fail(label() + ": " + std::to_string(shape->as_array().size()) + " dimensions exceed gexec's limit of " + std::to_string(max_ndim));
    for (const auto& v : shape->as_array()) {
      const auto dim = safetensors_size(v);
      if (!dim || *dim > static_cast<std::uint64_t>(INT64_MAX)) fail(label() + ": shape " + boost::json::serialize(*shape) + " is not a list of sizes");
      e.shape.push_back(static_cast<std::int64_t>(*dim));
    }
    const auto size = checked_byte_size(e.shape, e.dtype);
    if (!size) fail(label() + ": shape " + shape_to_string(e.shape) + " overflows");
    if (!offsets->is_array() || offsets->as_array().size() != 2) fail(label() + ": data_offsets is not [begin, end]");
    const auto begin = safetensors_size(offsets->as_array()[0]), end = safetensors_size(offsets->as_array()[1]);
    if (!begin || !end || *begin > *end) fail(label() + ": data_offsets " + boost::json::serialize(*offsets) + " is not [begin, end] with begin <= end");
    if (*end > data_size)
      safetensors_fail(what, data_start + std::min(*begin, data_size), label() + ": data_offsets [" + std::to_string(*begin) + ", " + std::to_string(*end) +
                                                         "] run past the end of the data (" + std::to_string(data_size) + " bytes)");
    if (*end - *begin != *size)
      safetensors_fail(what, data_start + *begin, label() + ": data_offsets [" + std::to_string(*begin) + ", " + std::to_string(*end) + "] hold " +
                                    std::to_string(*end - *begin) + " bytes, its shape " + shape_to_string(e.shape) + " of " +
                                    to_string(e.dtype) + " needs " + std::to_string(*size));
    e.offset = data_start + *begin;
    e.bytes = *size;
    out.push_back(std::move(e));
  }
  check_safetensors_coverage(out, data_start, data_size, what);
  return out;
}

}  // namespace detail

GEXEC_NAMESPACE_END
