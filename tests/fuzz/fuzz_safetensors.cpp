// libFuzzer target: .safetensors bytes through load_param_dict. Malformed input must end
// in gexec::error and nothing else. For a file that loads:
//  - save_safetensors writes a file that loads to the same dictionary (names, order,
//    dtypes, shapes, bytes), and writing that one again gives the same bytes;
//  - the dictionary through TVM's blob and back writes the same .safetensors bytes;
//  - reading it with views into the bytes (how a mapped file is read) gives the same
//    dictionary as reading copies.
// And for the writer: the input split at NUL bytes gives tensor names (any bytes at all);
// save_safetensors either refuses them (errc::invalid_argument) or writes a file that
// loads back with those names, in that order.

#include <gexec/params.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace {

[[noreturn]] void property_failed(const char* what, const std::string& detail = {}) {
  std::fprintf(stderr, "fuzz_safetensors: %s\n%s\n", what, detail.c_str());
  std::abort();
}

bool same_tensor(const gexec::ndarray& a, const gexec::ndarray& b) {
  if (!a.defined() || !b.defined()) return false;
  if (!gexec::same_dtype(a.dtype(), b.dtype())) return false;
  if (!std::equal(a.shape().begin(), a.shape().end(), b.shape().begin(), b.shape().end())) return false;
  if (a.byte_size() != b.byte_size()) return false;
  return a.byte_size() == 0 || std::memcmp(a.data(), b.data(), static_cast<std::size_t>(a.byte_size())) == 0;
}

void require_same_dict(const gexec::param_dict& a, const gexec::param_dict& b, const char* what) {
  if (a.size() != b.size()) property_failed(what, "different sizes");
  auto ia = a.begin();
  for (auto ib = b.begin(); ib != b.end(); ++ia, ++ib) {
    if (ia->first != ib->first) property_failed(what, "names differ: \"" + ia->first + "\" vs \"" + ib->first + "\"");
    if (!same_tensor(ia->second, ib->second)) property_failed(what, "tensors differ at \"" + ia->first + "\"");
  }
}

gexec::param_dict load(std::span<const std::byte> bytes, const char* what) {
  try {
    return gexec::load_param_dict(bytes);
  } catch (const gexec::error& e) {
    property_failed(what, e.what());
  }
}

}  // namespace

// save_safetensors over names from the input: refused, or read back as they were.
void writer_round_trip(const std::uint8_t* data, std::size_t size) {
  std::vector<std::pair<std::string, gexec::ndarray>> tensors;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (std::size_t at = 0; at <= text.size() && tensors.size() < 64;) {
    const std::size_t end = std::min(text.find('\0', at), text.size());
    auto a = gexec::ndarray::empty({static_cast<std::int64_t>(tensors.size() % 3)}, gexec::dtypes::float32);
    for (std::uint64_t i = 0; i < a.numel(); ++i) static_cast<float*>(a.data())[i] = static_cast<float>(tensors.size() + i);
    tensors.emplace_back(std::string(text.substr(at, end - at)), std::move(a));
    at = end + 1;
  }
  std::vector<std::byte> file;
  try {
    file = gexec::save_safetensors(tensors);
  } catch (const gexec::error& e) {
    if (e.code() != gexec::errc::invalid_argument) property_failed("save_safetensors fails other than invalid_argument", e.what());
    return;
  }
  const gexec::param_dict back = load(file, "load_param_dict rejects what save_safetensors wrote from given names");
  if (back.size() != tensors.size()) property_failed("names written and read back differ in number");
  std::size_t i = 0;
  for (const auto& [name, value] : back) {
    if (name != tensors[i].first) property_failed("a name written and read back differs", name);
    if (!same_tensor(value, tensors[i].second)) property_failed("a tensor written and read back differs", name);
    ++i;
  }
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  writer_round_trip(data, size);
  // Every input is taken for a .safetensors file: byte 8 is where its header opens.
  std::vector<std::byte> file(reinterpret_cast<const std::byte*>(data), reinterpret_cast<const std::byte*>(data) + size);
  if (file.size() >= 9) file[8] = std::byte{'{'};
  gexec::param_dict dict;
  try {
    dict = gexec::load_param_dict(std::span<const std::byte>(file));
  } catch (const gexec::error&) {
    return 0;
  }
  if (file.size() < 9) {
    // Too short for .safetensors; another format's (the null source's "GEXECNUL") may load.
    if (std::string_view(reinterpret_cast<const char*>(file.data()), file.size()) == "GEXECNUL" && dict.size() == 0) return 0;
    property_failed("a file shorter than its header loads");
  }

  std::vector<std::byte> saved;
  try {
    saved = gexec::save_safetensors(dict);
  } catch (const gexec::error& e) {
    property_failed("save_safetensors fails on a loaded dictionary", e.what());
  }
  const gexec::param_dict reloaded = load(saved, "load_param_dict rejects what save_safetensors wrote");
  require_same_dict(dict, reloaded, "reloading the saved file changes the dictionary");
  if (gexec::save_safetensors(reloaded) != saved) property_failed("saving the reloaded dictionary gives other bytes");

  std::vector<std::byte> blob;
  try {
    blob = gexec::save_param_dict(dict);
  } catch (const gexec::error&) {
    // names TVM's blob reserves for padding: nothing to compare
  }
  if (!blob.empty() && gexec::save_safetensors(load(blob, "load_param_dict rejects TVM's blob of a loaded dictionary")) != saved)
    property_failed("the dictionary through TVM's blob writes other .safetensors bytes");

  // Views into the bytes, one byte off their alignment, so that views and copies both occur.
  auto owner = std::shared_ptr<std::byte[]>(new std::byte[file.size() + 1]);
  std::byte* start = owner.get() + 1;
  std::memcpy(start, file.data(), file.size());
  gexec::param_dict views;
  try {
    views = gexec::detail::to_param_dict(gexec::detail::read_safetensors(std::span<const std::byte>(start, file.size()), "views", owner));
  } catch (const gexec::error& e) {
    property_failed("reading views rejects a file that loads as copies", e.what());
  }
  owner.reset();  // the views keep the bytes alive on their own
  require_same_dict(dict, views, "reading views gives a different dictionary");
  return 0;
}
