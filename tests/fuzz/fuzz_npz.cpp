// libFuzzer target: .npz bytes through load_npz. Malformed input must end in gexec::error
// and nothing else. For an archive that loads:
//  - what it decodes to is bounded by its size (members share no bytes);
//  - each array read alone (by name) is the array read with the others;
//  - save_npz of the arrays loads back to the same names, dtypes, shapes and bytes.

#include <gexec/npz.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace {

[[noreturn]] void property_failed(const char* what, const std::string& detail = {}) {
  std::fprintf(stderr, "fuzz_npz: %s\n%s\n", what, detail.c_str());
  std::abort();
}

bool same(const gexec::ndarray& a, const gexec::ndarray& b) {
  return gexec::same_dtype(a.dtype(), b.dtype()) && std::equal(a.shape().begin(), a.shape().end(), b.shape().begin(), b.shape().end()) &&
         a.byte_size() == b.byte_size() && (a.byte_size() == 0 || std::memcmp(a.data(), b.data(), static_cast<std::size_t>(a.byte_size())) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  std::vector<std::pair<std::string, gexec::ndarray>> arrays;
  try {
    arrays = gexec::load_npz(bytes);
  } catch (const gexec::error&) {
    return 0;
  }
  std::uint64_t decoded = 0;
  for (const auto& [name, a] : arrays) decoded += a.byte_size();
  if (decoded > size) property_failed("an archive decodes to more bytes than it holds", std::to_string(decoded) + " > " + std::to_string(size));
  const gexec::detail::npz_reader reader(bytes, "npz");
  for (const auto& [name, a] : arrays) {
    const auto alone = reader.read(std::vector<std::string>{name});
    if (alone.size() != 1 || !same(alone[0].second, a)) property_failed("an array read alone differs", name);
  }
  std::string saved;
  try {
    saved = gexec::save_npz(arrays);
  } catch (const gexec::error& e) {
    property_failed("save_npz refuses what load_npz read", e.what());
  }
  std::vector<std::pair<std::string, gexec::ndarray>> back;
  try {
    back = gexec::load_npz(gexec::detail::as_bytes(saved));
  } catch (const gexec::error& e) {
    property_failed("load_npz refuses what save_npz wrote", e.what());
  }
  if (back.size() != arrays.size()) property_failed("the saved archive holds another number of arrays");
  for (std::size_t i = 0; i < back.size(); ++i)
    if (back[i].first != arrays[i].first || !same(back[i].second, arrays[i].second)) property_failed("the saved archive differs", arrays[i].first);
  return 0;
}
