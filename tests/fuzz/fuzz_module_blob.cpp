// libFuzzer target: parse_module_blob on arbitrary bytes. Malformed input must end in
// gexec::error and nothing else. For a blob that parses, what write_module_blob
// makes of its factory and CUDA modules must parse again to the same content, and
// the factory's graph JSON goes through parse_graph as load_factory would send it.

#include <gexec/graph.hpp>
#include <gexec/cuda/module_payload.hpp>
#include <gexec/packed_c/module_blob.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

namespace {

[[noreturn]] void property_failed(const char* what, const std::string& detail = {}) {
  std::fprintf(stderr, "fuzz_module_blob: %s\n%s\n", what, detail.c_str());
  std::abort();
}

bool same_tensor(const gexec::ndarray& a, const gexec::ndarray& b) {
  if (!gexec::same_dtype(a.dtype(), b.dtype())) return false;
  if (!std::equal(a.shape().begin(), a.shape().end(), b.shape().begin(), b.shape().end())) return false;
  return a.byte_size() == b.byte_size() &&
         (a.byte_size() == 0 || std::memcmp(a.data(), b.data(), static_cast<std::size_t>(a.byte_size())) == 0);
}

bool same_factory(const gexec::graph_factory_blob& a, const gexec::graph_factory_blob& b) {
  if (a.graph_json != b.graph_json || a.module_name != b.module_name || a.params.size() != b.params.size()) return false;
  auto ib = b.params.begin();
  for (const auto& [name, t] : a.params) {
    if (name != ib->first || !same_tensor(t, ib->second)) return false;
    ++ib;
  }
  return true;
}

bool same_cuda(const gexec::cuda_module_blob& a, const gexec::cuda_module_blob& b) {
  if (a.format != b.format || a.binary != b.binary || a.functions.size() != b.functions.size()) return false;
  for (std::size_t i = 0; i < a.functions.size(); ++i) {
    const auto& fa = a.functions[i];
    const auto& fb = b.functions[i];
    if (fa.name != fb.name || fa.launch_param_tags != fb.launch_param_tags || fa.arg_types.size() != fb.arg_types.size())
      return false;
    for (std::size_t k = 0; k < fa.arg_types.size(); ++k)
      if (std::memcmp(&fa.arg_types[k], &fb.arg_types[k], sizeof(DLDataType)) != 0) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> symbol(reinterpret_cast<const std::byte*>(data), size);
  gexec::module_blob blob;
  try {
    blob = gexec::parse_module_blob(symbol);
  } catch (const gexec::error&) {
    return 0;
  }

  const std::vector<const gexec::cuda_module_blob*> cuda = gexec::cuda_modules_of(blob);
  if (blob.type_keys.size() < blob.device_modules.size() + (blob.factory ? 1 : 0) + (blob.has_host_library ? 1 : 0))
    property_failed("fewer type keys than modules read");

  if (!blob.factory) return 0;
  const gexec::graph_factory_blob& factory = *blob.factory;

  // Written again and parsed again: the same factory and CUDA modules.
  std::vector<std::byte> written;
  try {
    std::vector<gexec::module_blob_entry> entries;
    for (const gexec::cuda_module_blob* m : cuda) entries.push_back(gexec::cuda_module_entry(*m));
    written = gexec::write_module_blob(factory, entries);
  } catch (const gexec::error& e) {
    property_failed("write_module_blob fails on a parsed blob", e.what());
  }
  gexec::module_blob again;
  try {
    again = gexec::parse_module_blob(std::span<const std::byte>(written));
  } catch (const gexec::error& e) {
    property_failed("parse_module_blob rejects what write_module_blob wrote", e.what());
  }
  if (!again.factory || !same_factory(factory, *again.factory)) property_failed("rewritten factory differs");
  if (!again.has_host_library) property_failed("rewritten blob lost \"_lib\"");
  const std::vector<const gexec::cuda_module_blob*> cuda_again = gexec::cuda_modules_of(again);
  if (cuda_again.size() != cuda.size()) property_failed("rewritten blob has a different number of CUDA modules");
  for (std::size_t i = 0; i < cuda.size(); ++i)
    if (!same_cuda(*cuda[i], *cuda_again[i])) property_failed("rewritten CUDA module differs");

  // The embedded graph, as a factory library would hand it on.
  try {
    (void)gexec::parse_graph(factory.graph_json);
  } catch (const gexec::error&) {
  }
  return 0;
}
