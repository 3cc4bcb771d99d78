#pragma once
// Graph JSON read by the one-pass scanner alone (graph/scanner.hpp), "metadata" by the
// Boost-free value reader (detail/json_value.hpp): what a program that links no Boost.JSON
// reads graphs with (create() over packed_c/system_lib.hpp, a static program's binding).
// It accepts the graphs parse_graph() reads in the form TVM writes them, with the same
// compact graph; what the scanner gives up on it refuses, naming the byte, where
// parse_graph() would read the text again with its document reader (graph/json.hpp):
// escapes in the keys gexec reads, numbers that are not plain integers, keys after
// "metadata", graph attributes other than the five gexec reads, node attributes that are
// not strings, and "metadata" whose numbers are not integers of int64 or uint64.

#include "../config.hpp"

#include <algorithm>
#include <cstddef>
#include <new>
#include <string>
#include <string_view>

#include "../detail/byte_io.hpp"
#include "../error.hpp"
#include "../file_path.hpp"
#include "compact.hpp"
#include "../detail/json_value.hpp"
#include "scanner.hpp"
#include "validated.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

/// Reads and checks graph JSON with the scanner alone. Throws gexec::error:
/// errc::invalid_json, naming the byte, line and fault, for text that is not JSON as
/// the document reader's parser reads it; errc::invalid_graph for a repeated key and for
/// JSON the scanner gives up on (the byte it stopped at and what follows);
/// errc::out_of_memory if the graph does not fit.
inline validated_graph parse_graph_scanned(std::string_view text) try {
  std::size_t stopped = 0;
  {
    compact_graph c;
    if (scan_graph(text, c, &read_metadata_plain, &stopped)) return seal_checked(std::move(c));
  }
  // The scanner gave up. Say where the text stops being JSON if it does; else where the
  // scanner stopped, which is at or just past what it refused.
  json_value_reader json(text, nullptr, json_max_depth);
  if (!json.document()) {
    const auto f = json.what();
    throw error(f == json_value_reader::fault::duplicate_key ? errc::invalid_graph : errc::invalid_json,
                "graph JSON: " + json.describe() + " at " + json_position(text, json.offset()));
  }
  if (json.offset() != text.size())
    throw error(errc::invalid_json, "graph JSON: text after the value at " + json_position(text, json.offset()));
  throw error(errc::invalid_graph, "graph: the scanner stopped at " + json_position(text, stopped) + ", near " + json_near(text, stopped) +
                                       ": not a graph, or not in the form TVM writes (this reader, which links no Boost.JSON, reads graphs "
                                       "as TVM writes them; gexec::parse_graph() of <gexec/graph.hpp> reads the rest and names the JSON "
                                       "path of what is wrong)");
} catch (const std::bad_alloc&) {
  throw error(errc::out_of_memory, "graph: out of memory for the " + std::to_string(text.size()) + " bytes of JSON");
}

/// parse_graph_scanned() of a graph file, read with one sized read (errors as
/// load_graph_file's).
inline validated_graph load_graph_file_scanned(const file_path& path) {
  return parse_graph_scanned(regular_file(path, "graph file").read_buffer().view());
}

}  // namespace detail
GEXEC_NAMESPACE_END
