// libFuzzer target: parse_graph on arbitrary text. Malformed input must end in
// gexec::error and nothing else. Text that parses must be JSON by Boost.JSON's own
// parser too (nothing after the graph object), and the graph must be written by
// to_json as JSON that parses again, and writing that back must give the same text.
// Whatever the one-pass scanner accepts, the document reader and validate() accept too,
// with the same compact graph, field for field. The Boost-free path (the scanner alone,
// metadata by detail/json_value.hpp: create() over system_lib) gives that graph too, or
// a gexec::error: invalid_json exactly where parse_graph's is, and "metadata" that Boost
// writes with a double the only text the scanner reads and it refuses; its metadata
// reader writes what read_metadata_value writes wherever it accepts.

#include <gexec/graph.hpp>
#include <gexec/graph/json_scanned.hpp>

#include "../compact_compare.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace {

[[noreturn]] void property_failed(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_graph: %s\n%s\n", what, detail.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  {
    std::string boost_out, plain_out;
    std::size_t boost_used = 0, plain_used = 0;
    const bool boost_ok = gexec::detail::read_metadata_value(text, boost_out, boost_used);
    if (gexec::detail::read_metadata_plain(text, plain_out, plain_used)) {
      if (!boost_ok) property_failed("the Boost-free metadata reader accepts what read_metadata_value refuses", std::string(text));
      if (plain_out != boost_out || plain_used != boost_used)
        property_failed("the metadata readers write different text", boost_out + "\n---\n" + plain_out);
    }
  }
  {
    gexec::compact_graph scanned;
    const bool scan_ok = gexec::detail::scan_graph(text, scanned, &gexec::detail::read_metadata_value);
    gexec::errc parse_code{};
    bool parse_ok = true;
    try {
      (void)gexec::parse_graph(text);
    } catch (const gexec::error& e) {
      parse_ok = false;
      parse_code = e.code();
    }
    try {
      const gexec::validated_graph plain = gexec::detail::parse_graph_scanned(text);
      if (!scan_ok) property_failed("the Boost-free path accepts what the scanner gives up on", std::string(text));
      const std::string differs = gexec_test::compact_difference(plain.compact(), scanned);
      if (!differs.empty()) property_failed("the Boost-free path and the scanner make different compact graphs", differs);
    } catch (const gexec::error& e) {
      if (scan_ok && scanned.metadata.find('E') == std::string::npos)
        property_failed("the Boost-free path refuses what the scanner reads", e.what());
      if ((!parse_ok && parse_code == gexec::errc::invalid_json) != (e.code() == gexec::errc::invalid_json))
        property_failed("the Boost-free path and parse_graph disagree on whether the text is JSON", e.what());
    }
  }
  {
    gexec::compact_graph scanned;
    if (gexec::detail::scan_graph(text, scanned, &gexec::detail::read_metadata_value)) {
      gexec::compact_graph read;
      try {
        read = gexec::validate(gexec::detail::read_graph_document(text)).compact();
      } catch (const gexec::error& e) {
        property_failed("the scanner accepts what the document reader or validate() refuses", e.what());
      }
      const std::string differs = gexec_test::compact_difference(scanned, read);
      if (!differs.empty()) property_failed("the scanner and the document reader make different compact graphs", differs);
    }
  }
  gexec::graph g;
  try {
    g = gexec::parse_graph(text);
  } catch (const gexec::error&) {
    return 0;
  }

  // Only JSON text is a graph: Boost.JSON's parser, with the same default limits,
  // must accept the whole input.
  {
    boost::system::error_code ec;
    (void)boost::json::parse(boost::json::string_view(text.data(), text.size()), ec);
    if (ec) property_failed("parse_graph accepts text that is not JSON", ec.message());
  }

  // A parsed graph is valid; validate() must agree.
  try {
    gexec::validate(g);
  } catch (const gexec::error& e) {
    property_failed("validate() rejects a graph that parse_graph() accepted", e.what());
  }

  // Round trip: to_json must not throw, and what it writes must parse again.
  const std::string json = gexec::to_json(g);
  gexec::graph again;
  try {
    again = gexec::parse_graph(json);
  } catch (const gexec::error& e) {
    property_failed("parse_graph(to_json(g)) fails", std::string(e.what()) + "\nto_json wrote:\n" + json);
  }
  // to_json normalizes (three-element entries, string attributes, a fixed key order),
  // so the first rewrite is a fixed point.
  const std::string json_again = gexec::to_json(again);
  if (json_again != json) property_failed("to_json(parse_graph(to_json(g))) differs from to_json(g)", json + "\n---\n" + json_again);
  return 0;
}
