#pragma once
// TVM's graph-executor JSON: parse_graph() reads it into the graph of graph/data.hpp
// and validates it completely, so everything after load can trust every index in it;
// to_json() writes it back in the form TVM v0.19 reads. Graphs in the form TVM writes
// are scanned and checked in one pass into the compact form (graph/scanner.hpp);
// text the scanner gives up on is read again through a Boost.JSON document, by the
// reader that names what is wrong. This header declares; json_impl.hpp defines (and
// alone includes Boost.JSON).

#include "../config.hpp"

#include <string>
#include <string_view>

#include "../file_path.hpp"
#include "../load_progress.hpp"
#include "data.hpp"
#include "validated.hpp"

GEXEC_NAMESPACE_BEGIN

/// Reads and validates TVM graph JSON. Throws gexec::error with errc::invalid_json for
/// text that is not JSON, errc::invalid_graph, naming the JSON path, for the rest (a key
/// repeated in an object included), and errc::out_of_memory if the graph does not fit.
///
/// Two readers, one set of checks. The one-pass scanner (graph/scanner.hpp) reads
/// what TVM writes; whatever it gives up on, the document reader reads again and names
/// the error. Both keep the rules of detail::graph_rules (graph/checks.hpp), check_graph
/// for the document reader: what belongs to the graph alone (row pointers against
/// num_outputs, inputs and control_deps from earlier nodes, outputs, heads and arg_nodes
/// in range, arg_nodes distinct "null" nodes, one attribute per entry, ranks, dimensions,
/// dtypes, sizes that do not overflow, non-negative storage ids, DLDeviceType devices and
/// one device per storage id, printable names). What needs more than the graph is
/// checked at plan time: make_plan (plan.hpp) checks "null" nodes missing from
/// arg_nodes, __nop aliasing (outputs no more than inputs, no larger, on their device),
/// __copy sizes and devices, the devices of kernel arguments, unknown kernels and,
/// through the planner's checker (planners/planner.hpp), storage conflicts; the model
/// (model.hpp) checks that params match the graph's inputs.
GEXEC_DECL validated_graph parse_graph(std::string_view json_text);

/// Reads a graph JSON file with one sized read. errc::io, naming the path, if it cannot
/// be opened or read or is not a regular file (a FIFO, a directory, a device: refused
/// before anything is read); errc::out_of_memory if it is larger than memory can hold.
GEXEC_DECL validated_graph load_graph_file(const file_path& path);
/// The same, telling `progress` of the bytes read (see load_progress).
GEXEC_DECL validated_graph load_graph_file(const file_path& path, const load_progress& progress);

/// Writes the graph as JSON that TVM v0.19's graph executor reads.
GEXEC_DECL std::string to_json(const graph& g);

namespace detail {
/// What create() over a binding calls to read graph JSON (declared in model.hpp, so
/// that only programs reading JSON compile Boost.JSON).
template <class Binding>
struct graph_reader {
  static validated_graph text(std::string_view json_text) { return parse_graph(json_text); }
  static validated_graph file(const file_path& path) { return load_graph_file(path); }
};
}  // namespace detail

GEXEC_NAMESPACE_END

#if GEXEC_HEADER_ONLY()
#include "json_impl.hpp"
#endif
