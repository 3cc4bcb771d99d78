#pragma once
// A reference bundle's manifest, bundle.txt: "key value" lines after "gexec-bundle 1".
//
//   gexec-bundle 1
//   model model.so            (or: graph graph.json / lib lib.so / params params.bin)
//   inputs inputs.npz
//   expected expected.npz
//   output softmax            one line per output expected.npz holds: every output of the
//   output argmax             model, in order (bundles written before these lines have none)
//   atol 1e-05
//   rtol 0
//   sha256 model.so 3b1f...   one line per file it holds: the file's SHA-256, checked
//                             before anything is read (bundles written before these lines
//                             have none)
//
// Read here alone (no file is opened), so that it can be fuzzed. Every key but "output" and "sha256" is given once;
// files are plain names inside the bundle; tolerances are finite and >= 0 (rtol below 1); lines may end
// in CRLF. Anything else is refused with the line's number.

#include <gexec/detail/json_path.hpp>
#include <gexec/error.hpp>

#include <cmath>
#include <cstdlib>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace gexec_run {

struct bundle_manifest {
  std::string model, graph, lib, params, inputs, expected;  ///< file names inside the bundle; empty when absent
  std::vector<std::string> outputs;                         ///< the output names expected.npz holds, in order ("output" lines)
  std::optional<double> atol, rtol;
  std::vector<std::pair<std::string, std::string>> sha256;  ///< (file name, 64 hex digits), in order
};

/// The manifest in `text`; `where` names the file in messages ("BUNDLE/bundle.txt").
inline bundle_manifest parse_bundle_manifest(std::string_view text, const std::string& where) {
  auto fail = [&](std::size_t line, const std::string& message) -> void {
    throw gexec::error(gexec::errc::invalid_argument, "--verify " + where + ":" + std::to_string(line) + ": " + message);
  };
  bundle_manifest m;
  std::set<std::string> seen, output_names, checksummed;
  bool header = false;
  std::size_t number = 0;
  while (!text.empty()) {
    const std::size_t eol = text.find('\n');
    std::string line(text.substr(0, eol));
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const std::string shown = gexec::detail::printable(line);
    if (!header) {
      if (line != "gexec-bundle 1") fail(number, "expected \"gexec-bundle 1\", got \"" + shown + "\"");
      header = true;
      continue;
    }
    const auto sp = line.find(' ');
    const std::string key = line.substr(0, sp), value = sp == std::string::npos ? "" : line.substr(sp + 1);
    if (key != "output" && key != "sha256" && !seen.insert(key).second) fail(number, "\"" + gexec::detail::printable(key) + "\" is given twice (each key once)");
    auto file = [&](std::string& into) {
      if (value.empty() || value.find('/') != std::string::npos || value == "." || value == ".." || gexec::detail::has_control_character(value))
        fail(number, "\"" + shown + "\": expected " + key + " FILE (a file in the bundle)");
      into = value;
    };
    auto tolerance = [&](std::optional<double>& into) {
      char* end = nullptr;
      const double x = std::strtod(value.c_str(), &end);
      // rtol 1 or more accepts zero for anything: a tolerance that cannot fail
      const bool relative = key == "rtol";
      if (value.empty() || end != value.c_str() + value.size() || !(x >= 0) || !std::isfinite(x) || (relative && x >= 1))
        fail(number, key + " " + gexec::detail::printable(value) + ": not a finite tolerance >= 0" + (relative ? " and below 1" : ""));
      into = x;
    };
    if (key == "model") file(m.model);
    else if (key == "graph") file(m.graph);
    else if (key == "lib") file(m.lib);
    else if (key == "params") file(m.params);
    else if (key == "inputs") file(m.inputs);
    else if (key == "expected") file(m.expected);
    else if (key == "atol") tolerance(m.atol);
    else if (key == "rtol") tolerance(m.rtol);
    else if (key == "output") {
      if (value.empty() || !output_names.insert(value).second)
        fail(number, "output \"" + gexec::detail::printable(value) + "\": expected an output's name, each once");
      m.outputs.push_back(value);
    } else if (key == "sha256") {
      const auto gap = value.find(' ');
      const std::string name = value.substr(0, gap), digest = gap == std::string::npos ? "" : value.substr(gap + 1);
      const bool hex = digest.size() == 64 && digest.find_first_not_of("0123456789abcdef") == std::string::npos;
      if (name.empty() || name.find('/') != std::string::npos || name == "." || name == ".." || gexec::detail::has_control_character(name) || !hex)
        fail(number, "\"" + shown + "\": expected sha256 FILE DIGEST (a file in the bundle, 64 lowercase hex digits)");
      if (!checksummed.insert(name).second) fail(number, "sha256 " + gexec::detail::printable(name) + " is given twice");
      m.sha256.emplace_back(name, digest);
    } else {
      fail(number, "unknown key \"" + gexec::detail::printable(key) + "\"");
    }
  }
  if (!header) fail(number, "bundle.txt is empty");
  if (m.expected.empty()) fail(number, "bundle.txt names no expected outputs");
  if (m.model.empty() == (m.graph.empty() && m.lib.empty())) fail(number, "bundle.txt names either a model, or a graph and a lib");
  if (!m.sha256.empty())  // then every file it names has its checksum
    for (const std::string* f : {&m.model, &m.graph, &m.lib, &m.params, &m.inputs, &m.expected})
      if (!f->empty() && !checksummed.count(*f)) fail(number, "bundle.txt gives no sha256 of " + gexec::detail::printable(*f) + ", a file it names");
  return m;
}

}  // namespace gexec_run
