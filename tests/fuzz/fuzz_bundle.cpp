// libFuzzer target: bundle.txt text through gexec-run's manifest reader. Anything but a
// well-formed manifest ends in gexec::error. A manifest it takes names files inside the
// bundle only, tolerances that can fail, and each output once.

#include "../../tools/gexec-run/bundle.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>

namespace {

[[noreturn]] void property_failed(const char* what, const std::string& detail = {}) {
  std::fprintf(stderr, "fuzz_bundle: %s\n%s\n", what, detail.c_str());
  std::abort();
}

void require_file_in_bundle(const std::string& name) {
  if (name.empty()) return;
  if (name.find('/') != std::string::npos || name == "." || name == ".." || gexec::detail::has_control_character(name))
    property_failed("a file outside the bundle, or a name that is not one, was taken", name);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  gexec_run::bundle_manifest m;
  try {
    m = gexec_run::parse_bundle_manifest(std::string_view(reinterpret_cast<const char*>(data), size), "bundle.txt");
  } catch (const gexec::error&) {
    return 0;
  }
  for (const std::string* f : {&m.model, &m.graph, &m.lib, &m.params, &m.inputs, &m.expected}) require_file_in_bundle(*f);
  if (m.expected.empty()) property_failed("a manifest without expected outputs was taken");
  if (m.model.empty() == (m.graph.empty() && m.lib.empty())) property_failed("a manifest naming no model, or two, was taken");
  if (m.atol && (!std::isfinite(*m.atol) || *m.atol < 0)) property_failed("an atol that cannot fail was taken");
  if (m.rtol && (!std::isfinite(*m.rtol) || *m.rtol < 0 || *m.rtol >= 1)) property_failed("an rtol that cannot fail was taken");
  std::set<std::string> outputs(m.outputs.begin(), m.outputs.end());
  if (outputs.size() != m.outputs.size() || outputs.count("")) property_failed("an output listed twice or unnamed was taken");
  return 0;
}
