#pragma once
// Every node's outputs against a dump folder written by TVM's debug executor, in graph
// order, and the first node where they part: for proving that a model moved from TVM to
// gexec still computes what it computed there, and for finding the kernel that does not.
//
// TVM's debug executor writes, per device, DUMP_ROOT/_tvmdbg_device_<DEV>_<ID>/ holding
// _tvmdbg_graph_dump.json and output_tensors.params: every node's every output (inputs and
// parameters included) in save_param_dict format, keyed
// "<node name>____topo-index:<node id>____output-num:<output index>".
//
//   ex.set_input("data", image);                       // or gexec::set_inputs_from_dump
//   const gexec::dump_comparison c = gexec::compare_dump(ex, "tvmdbg/", {.atol = 1e-5});
//   std::cout << c.table();
//   if (const auto* n = c.first_divergence()) std::cout << c.describe(*n);

#include "../config.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <dlpack/dlpack.h>

#include "../dtype.hpp"
#include "../error.hpp"
#include "../graph.hpp"
#include "../ndarray.hpp"
#include "../params.hpp"
#include "node_outputs.hpp"

GEXEC_NAMESPACE_BEGIN

/// An element differs when |got - want| > atol + rtol * |want| (numpy.isclose); NaN
/// equals NaN. Integers and booleans compare by value, the same way.
/// Exact by default: the same kernels give bit-identical dumps, so any difference is one
/// to look at; a tolerance is something the caller asks for.
struct compare_tolerance {
  double atol = 0;
  double rtol = 0;
};

/// One node output against the dump.
struct node_comparison {
  std::uint32_t node_id = 0;
  std::uint32_t index = 0;     ///< which output of the node
  std::string name;            ///< the node's name
  std::string func_name;       ///< the kernel; empty for inputs and parameters
  std::string key;             ///< the dump's key
  DLDataType dtype{};
  std::vector<std::int64_t> shape;
  std::vector<std::string> inputs;  ///< the node's inputs: "name:index dtype[shape]"
  bool found = false;               ///< the dump holds the key
  std::string problem;              ///< dtype or shape differs from the dump's; empty when they agree
  std::uint64_t count = 0;          ///< elements compared
  std::uint64_t mismatched = 0;     ///< elements beyond the tolerance
  std::uint64_t nan_mismatched = 0; ///< of them, those NaN on one side only (max_abs is then NaN)
  std::uint64_t first_mismatch = 0; ///< the first of them (flat index)
  double max_abs = 0;               ///< largest |got - want|
  double max_rel = 0;               ///< largest |got - want| / |want| (infinity where want is 0)
  std::uint64_t max_ulps = 0;       ///< largest distance in units in the last place (floats)
  bool is_float = false;
  /// Within the tolerance: found, same dtype and shape, no element beyond it.
  bool within() const noexcept { return found && problem.empty() && mismatched == 0; }
};

struct dump_comparison {
  std::filesystem::path file;  ///< the output_tensors.params compared with
  compare_tolerance tolerance;
  std::vector<node_comparison> nodes;  ///< graph order: node id, then output index
  std::uint64_t missing = 0;           ///< node outputs the dump does not hold

  /// The first node output in graph order that the dump holds and that differs.
  const node_comparison* first_divergence() const noexcept {
    for (const node_comparison& n : nodes)
      if (n.found && !n.within()) return &n;
    return nullptr;
  }
  /// Every node output was compared: the dump lacks none (a dump of the inputs alone
  /// would agree with anything).
  bool complete() const noexcept { return missing == 0; }
  /// Complete, and no node output differs.
  bool equal() const noexcept { return complete() && first_divergence() == nullptr; }

  /// One line per node output: id, name, function, dtype and shape, the differences and
  /// a verdict ("ok", "DIFFERS", "missing"; the first divergence marked).
  std::string table() const {
    std::size_t name_width = 4, func_width = 8, type_width = 12;
    for (const node_comparison& n : nodes) {
      name_width = std::max(name_width, n.name.size());
      func_width = std::max(func_width, n.func_name.size());
      type_width = std::max(type_width, to_string(n.dtype).size() + detail::shape_to_string(n.shape).size());
    }
    auto pad = [](std::string s, std::size_t width) { return s.size() < width ? s + std::string(width - s.size(), ' ') : s; };
    std::string s = "node  " + pad("name", name_width) + "  " + pad("function", func_width) + "  " + pad("dtype[shape]", type_width) +
                    "       max abs       max rel    max ulps  verdict\n";
    const node_comparison* first = first_divergence();
    char numbers[64];
    for (const node_comparison& n : nodes) {
      const std::string id = std::to_string(n.node_id) + (n.index ? ":" + std::to_string(n.index) : "");
      std::string verdict = !n.found ? "missing" : n.within() ? "ok" : !n.problem.empty() ? "DIFFERS: " + n.problem : "DIFFERS";
      if (&n == first) verdict += "  <- first divergence";
      if (!n.found || !n.problem.empty()) {
        std::snprintf(numbers, sizeof numbers, "%14s%14s%12s", "-", "-", "-");
      } else {
        const std::string ulps = n.is_float ? std::to_string(n.max_ulps) : "-";
        std::snprintf(numbers, sizeof numbers, "%14.4g%14.4g%12s", n.max_abs, n.max_rel, ulps.c_str());
      }
      s += pad(id, 4) + "  " + pad(n.name, name_width) + "  " + pad(n.func_name.empty() ? "(input)" : n.func_name, func_width) + "  " +
           pad(to_string(n.dtype) + detail::shape_to_string(n.shape), type_width) + numbers + "  " + verdict + "\n";
    }
    return s;
  }

  /// Several lines on one node output: where it is, what it computes from, and how it
  /// differs.
  std::string describe(const node_comparison& n) const {
    std::string s = "node " + std::to_string(n.node_id) + " (" + n.name + "), output " + std::to_string(n.index) + ": " + to_string(n.dtype) +
                    detail::shape_to_string(n.shape) + "\n  function: " + (n.func_name.empty() ? "(an input or parameter)" : n.func_name) + "\n";
    for (const std::string& i : n.inputs) s += "  input: " + i + "\n";
    char line[256];
    if (!n.found) {
      s += "  the dump has no " + n.key + "\n";
    } else if (!n.problem.empty()) {
      s += "  " + n.problem + "\n";
    } else {
      std::snprintf(line, sizeof line, "  %llu of %llu elements beyond atol %g rtol %g, the first at flat index %llu; max abs diff %g, max rel diff %g",
                    static_cast<unsigned long long>(n.mismatched), static_cast<unsigned long long>(n.count), tolerance.atol, tolerance.rtol,
                    static_cast<unsigned long long>(n.first_mismatch), n.max_abs, n.max_rel);
      s += line;
      if (n.is_float) s += ", max ulps " + std::to_string(n.max_ulps);
      if (n.nan_mismatched) s += "; " + std::to_string(n.nan_mismatched) + " of them NaN on one side only";
      s += "\n";
    }
    return s;
  }
};

namespace detail {

/// Element `i` of a host tensor of float16, bfloat16, float32 or float64, as a double
/// (integers compare exactly: integer_element).
inline double dump_element(const ndarray& a, std::uint64_t i) {
  const DLDataType t = a.dtype();
  const auto* p = static_cast<const unsigned char*>(a.data()) + i * element_bytes(t);
  auto load = [p]<class T>(T) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
  };
  if (t.code == kDLFloat) {
    if (t.bits == 32) return load(float{});
    if (t.bits == 64) return load(double{});
    const std::uint16_t h = load(std::uint16_t{});  // float16
    const int exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
    const double sign = (h & 0x8000) ? -1.0 : 1.0;
    if (exponent == 0) return sign * std::ldexp(mantissa, -24);
    if (exponent == 31) return mantissa ? std::numeric_limits<double>::quiet_NaN() : sign * std::numeric_limits<double>::infinity();
    return sign * std::ldexp(mantissa + 1024, exponent - 25);
  }
  const std::uint32_t bits = std::uint32_t{load(std::uint16_t{})} << 16;  // bfloat16
  return std::bit_cast<float>(bits);
}

/// The element's bits as a number that grows with the value (negative floats mirrored),
/// so that two values' distance in ULPs is the difference of theirs.
inline std::int64_t ordered_bits(const ndarray& a, std::uint64_t i) {
  const unsigned bytes = a.dtype().bits / 8;
  std::uint64_t u = 0;
  std::memcpy(&u, static_cast<const unsigned char*>(a.data()) + i * bytes, bytes);  // little-endian hosts
  const std::uint64_t sign = std::uint64_t{1} << (bytes * 8 - 1);
  const auto magnitude = static_cast<std::int64_t>(u & (sign - 1));
  return (u & sign) ? -magnitude : magnitude;
}

inline bool comparable_dtype(DLDataType t) noexcept {
  if (t.lanes != 1) return false;
  if (t.code == kDLFloat) return t.bits == 16 || t.bits == 32 || t.bits == 64;
  if (t.code == kDLBfloat) return t.bits == 16;
  if (t.code == kDLUInt && t.bits == 1) return true;  // bool
  if (t.code == kDLInt || t.code == kDLUInt) return t.bits == 8 || t.bits == 16 || t.bits == 32 || t.bits == 64;
  return false;
}

/// An integer or bool element, exactly (a double holds integers up to 2^53 only).
struct exact_integer {
  bool negative = false;
  std::uint64_t magnitude = 0;
  bool operator==(const exact_integer&) const = default;
};

inline exact_integer integer_element(const ndarray& a, std::uint64_t i) {
  const DLDataType t = a.dtype();
  const auto* p = static_cast<const unsigned char*>(a.data()) + i * element_bytes(t);
  std::uint64_t u = 0;
  const unsigned bytes = t.bits == 1 ? 1 : t.bits / 8;
  std::memcpy(&u, p, bytes);  // little-endian hosts
  if (t.code == kDLInt && bytes < 8 && (u >> (bytes * 8 - 1)) & 1) u |= ~std::uint64_t{0} << (bytes * 8);  // sign-extended
  if (t.code == kDLInt && (u >> 63)) return {true, ~u + 1};
  return {false, u};
}

/// |a - b|, saturated at 2^64 - 1.
inline std::uint64_t integer_distance(exact_integer a, exact_integer b) noexcept {
  if (a.negative == b.negative) return a.magnitude > b.magnitude ? a.magnitude - b.magnitude : b.magnitude - a.magnitude;
  const std::uint64_t sum = a.magnitude + b.magnitude;
  return sum < a.magnitude ? ~std::uint64_t{0} : sum;
}

inline void compare_tensors(const ndarray& got, const ndarray& want, compare_tolerance tol, node_comparison& out) {
  const DLDataType t = got.dtype();
  out.count = got.numel() * t.lanes;
  if (!comparable_dtype(t)) {  // float8, int4, vectors: bit for bit, element by element
    const std::uint64_t bytes = element_bytes({t.code, t.bits, 1});
    for (std::uint64_t i = 0; i < out.count; ++i)
      if (std::memcmp(static_cast<const char*>(got.data()) + i * bytes, static_cast<const char*>(want.data()) + i * bytes, bytes) != 0 &&
          out.mismatched++ == 0)
        out.first_mismatch = i;
    return;
  }
  out.is_float = t.code == kDLFloat || t.code == kDLBfloat;
  for (std::uint64_t i = 0; i < out.count; ++i) {
    double diff = 0, want_abs = 0;  // diff is NaN when one side is
    if (out.is_float) {
      const double g = dump_element(got, i), w = dump_element(want, i);
      if (g == w || (std::isnan(g) && std::isnan(w))) continue;
      diff = std::fabs(g - w);
      want_abs = std::fabs(w);
    } else {  // integers and bools compare as integers: 2^53 + 1 is not 2^53
      const exact_integer g = integer_element(got, i), w = integer_element(want, i);
      if (g == w) continue;
      diff = static_cast<double>(integer_distance(g, w));
      want_abs = static_cast<double>(w.magnitude);
    }
    const double rel = want_abs == 0 ? std::numeric_limits<double>::infinity() : diff / want_abs;
    if (std::isnan(diff) || !(diff <= tol.atol + tol.rtol * want_abs)) {
      if (out.mismatched++ == 0) out.first_mismatch = i;
    }
    if (std::isnan(diff)) {
      ++out.nan_mismatched;
      out.max_abs = out.max_rel = std::numeric_limits<double>::quiet_NaN();
    } else if (!std::isnan(out.max_abs)) {
      out.max_abs = std::max(out.max_abs, diff);
      out.max_rel = std::max(out.max_rel, rel);
    }
    if (out.is_float) {
      const std::int64_t a = ordered_bits(got, i), b = ordered_bits(want, i);
      out.max_ulps = std::max(out.max_ulps, static_cast<std::uint64_t>(a > b ? a - b : b - a));
    }
  }
}

/// A tolerance that can fail: finite and >= 0, rtol below 1 (an rtol of 1 accepts zero
/// for any value); errc::invalid_argument naming `what` otherwise.
inline void check_tolerance(compare_tolerance t, const std::string& what) {
  if (!(t.atol >= 0) || !(t.rtol >= 0) || !std::isfinite(t.atol) || !(t.rtol < 1))
    throw error(errc::invalid_argument, what + ": atol and rtol must be finite and >= 0, rtol below 1 (atol " + std::to_string(t.atol) +
                                            ", rtol " + std::to_string(t.rtol) + ")");
}

}  // namespace detail

/// The output_tensors.params of a dump: `dir` is the file itself, the folder holding it,
/// or TVM's dump_root holding exactly one _tvmdbg_device_* folder.
inline std::filesystem::path find_dump_file(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_regular_file(dir, ec)) return dir;
  if (!fs::is_directory(dir, ec)) throw error(errc::io, "TVM dump " + dir.string() + ": no such file or directory");
  if (fs::is_regular_file(dir / "output_tensors.params", ec)) return dir / "output_tensors.params";
  std::vector<fs::path> found;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec))
    if (e.path().filename().string().starts_with("_tvmdbg_device_") && fs::is_regular_file(e.path() / "output_tensors.params", ec))
      found.push_back(e.path() / "output_tensors.params");
  if (found.size() == 1) return found.front();
  if (found.empty())
    throw error(errc::io, "TVM dump " + dir.string() + ": holds neither output_tensors.params nor a _tvmdbg_device_*/ folder with one "
                          "(the dump_root given to TVM's debug_executor.create, after a run)");
  std::string names;
  for (const fs::path& p : found) names += (names.empty() ? "" : ", ") + p.parent_path().filename().string();
  throw error(errc::io, "TVM dump " + dir.string() + ": holds the dumps of several devices (" + names + "); name one of them");
}

/// TVM's key for output `index` of node `node_id`.
inline std::string dump_key(std::string_view node_name, std::uint32_t node_id, std::uint32_t index) {
  return std::string(node_name) + "____topo-index:" + std::to_string(node_id) + "____output-num:" + std::to_string(index);
}

/// Sets every graph input (not parameters) not named in `skip` from the dump's values of
/// the input nodes; returns the names set. An input the dump lacks is left alone.
template <class Executor>
std::vector<std::string> set_inputs_from_dump(Executor& ex, const param_dict& dump, const std::vector<std::string>& skip = {}) {
  const graph& g = ex.get_graph();
  std::vector<std::string> set;
  for (const auto& info : ex.get_input_info()) {
    if (std::find(skip.begin(), skip.end(), info.name) != skip.end()) continue;
    for (std::uint32_t nid = 0; nid < g.nodes.size(); ++nid)
      if (g.nodes[nid].name == info.name && !g.nodes[nid].is_op()) {
        const ndarray* value = dump.find(dump_key(info.name, nid, 0));
        if (value == nullptr) break;
        ex.set_input(info.name, *value);
        set.push_back(info.name);
        break;
      }
  }
  return set;
}

/// Runs `ex` once, node by node, with the inputs it holds, and compares every node's every
/// output with the dump's (see find_dump_file for `dir`).
template <class Executor>
dump_comparison compare_dump(Executor& ex, const param_dict& dump, compare_tolerance tolerance = {}) {
  detail::check_tolerance(tolerance, "compare_dump");
  const graph& g = ex.get_graph();
  dump_comparison c;
  c.tolerance = tolerance;
  std::uint64_t matched_keys = 0;
  for (node_output& o : debug_get_outputs(ex)) {
    const node& n = g.nodes[o.node_id];
    node_comparison r;
    r.node_id = o.node_id;
    r.index = o.index;
    r.name = n.name;
    if (n.is_op()) r.func_name = n.func_name;
    r.key = dump_key(n.name, o.node_id, o.index);
    r.dtype = o.value.dtype();
    r.shape.assign(o.value.shape().begin(), o.value.shape().end());
    for (const auto& in : n.inputs) {
      const std::uint32_t eid = g.entry_id(in);
      r.inputs.push_back(g.nodes[in.node_id].name + ":" + std::to_string(in.index) + " " + to_string(g.attrs.dltype[eid]) +
                         detail::shape_to_string(g.attrs.shape[eid]));
    }
    const ndarray* found = dump.find(r.key);
    if (found == nullptr) {
      ++c.missing;
    } else {
      r.found = true;
      ++matched_keys;
      const ndarray& want = *found;
      if (!same_dtype(want.dtype(), r.dtype)) {
        r.problem = "the dump's dtype is " + to_string(want.dtype()) + ", gexec's " + to_string(r.dtype);
      } else if (!std::equal(want.shape().begin(), want.shape().end(), r.shape.begin(), r.shape.end())) {
        r.problem = "the dump's shape is " + detail::shape_to_string(want.shape()) + ", gexec's " + detail::shape_to_string(r.shape);
      } else {
        detail::compare_tensors(o.value, want, tolerance, r);
      }
    }
    c.nodes.push_back(std::move(r));
  }
  if (matched_keys == 0 && !c.nodes.empty())
    throw error(errc::invalid_argument, "TVM dump: none of its " + std::to_string(dump.size()) +
                                            " tensors is keyed as a node output of this graph (\"" + c.nodes.front().key +
                                            "\" was looked for): a dump of another model?");
  return c;
}

template <class Executor>
dump_comparison compare_dump(Executor& ex, const std::filesystem::path& dir, compare_tolerance tolerance = {}) {
  const std::filesystem::path file = find_dump_file(dir);
  dump_comparison c = compare_dump(ex, load_param_dict_file(file), tolerance);
  c.file = file;
  return c;
}

GEXEC_NAMESPACE_END
