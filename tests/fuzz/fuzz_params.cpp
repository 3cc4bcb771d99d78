// libFuzzer target: load_param_dict on arbitrary bytes. Malformed input must end in
// gexec::error and nothing else. Bytes that load_param_dict takes for a .safetensors file
// ('{' at byte 8) are fuzz_safetensors' inputs, and only checked for that. For a blob
// that loads:
//  - save_param_dict writes it back byte for byte, except the fields the format
//    reserves and gexec does not keep (the header's and each tensor's reserved u64,
//    and each tensor's device id), which it writes as zero;
//  - read_param_names lists the same names in the same order;
//  - reading it with views into the blob (how a mapped file is read) gives the same
//    dictionary as reading copies.

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
#include <vector>

namespace {

[[noreturn]] void property_failed(const char* what, const std::string& detail = {}) {
  std::fprintf(stderr, "fuzz_params: %s\n%s\n", what, detail.c_str());
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

/// The input with the fields save_param_dict writes as zero set to zero. Offsets come
/// from the dictionary that was loaded, laid out as the format lays it out; if the
/// loader misread the input, the comparison that follows fails.
std::vector<std::byte> without_unkept_fields(std::span<const std::byte> blob, const gexec::param_dict& dict) {
  std::vector<std::byte> out(blob.begin(), blob.end());
  auto zero = [&](std::size_t at, std::size_t n) {
    if (at + n > out.size()) property_failed("loaded dictionary does not fit the blob it came from");
    std::memset(out.data() + at, 0, n);
  };
  zero(8, 8);  // header: magic, reserved u64
  std::size_t at = 24;
  for (const auto& [name, a] : dict) at += 8 + name.size();
  at += 8;  // tensor count
  for (const auto& [name, a] : dict) {
    zero(at + 8, 8);   // magic, reserved u64
    zero(at + 20, 4);  // device type, device id
    at += 8 + 8 + 4 + 4 + 4 + 4 + 8 * static_cast<std::size_t>(a.ndim()) + 8 + static_cast<std::size_t>(a.byte_size());
  }
  if (at != out.size()) property_failed("loaded dictionary does not account for every byte of the blob");
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> blob(reinterpret_cast<const std::byte*>(data), size);
  if (gexec::detail::looks_like_safetensors(blob.first(std::min<std::size_t>(size, 9)))) {
    try {
      (void)gexec::load_param_dict(blob);
    } catch (const gexec::error&) {
    }
    return 0;
  }
  gexec::param_dict dict;
  try {
    dict = gexec::load_param_dict(blob);
  } catch (const gexec::error&) {
    // The names alone may still read; whatever happens must be gexec::error.
    try {
      (void)gexec::detail::read_param_names(blob);
    } catch (const gexec::error&) {
    }
    return 0;
  }

  // Write back: identical bytes but for the fields the format does not keep.
  std::vector<std::byte> saved;
  try {
    saved = gexec::save_param_dict(dict);
  } catch (const gexec::error& e) {
    property_failed("save_param_dict fails on a loaded dictionary", e.what());
  }
  const std::vector<std::byte> expected = without_unkept_fields(blob, dict);
  if (saved != expected) {
    std::size_t i = 0;
    while (i < saved.size() && i < expected.size() && saved[i] == expected[i]) ++i;
    property_failed("save_param_dict(load_param_dict(blob)) differs from the blob",
                    "first difference at byte " + std::to_string(i) + " (saved " + std::to_string(saved.size()) +
                        " bytes, blob " + std::to_string(expected.size()) + ")");
  }
  gexec::param_dict reloaded;
  try {
    reloaded = gexec::load_param_dict(std::span<const std::byte>(saved));
  } catch (const gexec::error& e) {
    property_failed("load_param_dict rejects what save_param_dict wrote", e.what());
  }
  require_same_dict(dict, reloaded, "reloading the saved blob changes the dictionary");

  // The names, read on their own.
  std::vector<std::string> names;
  try {
    names = gexec::detail::read_param_names(blob);
  } catch (const gexec::error& e) {
    property_failed("read_param_names rejects a blob that loads", e.what());
  }
  if (names.size() != dict.size()) property_failed("read_param_names gives a different count");
  std::size_t k = 0;
  for (const auto& [name, a] : dict)
    if (names[k++] != name) property_failed("read_param_names gives a different name", name);

  // Views into the bytes, as from a mapped file: a copy of the input owned by a
  // shared_ptr, with the input's alignment shifted by one byte so that both the
  // view and the copy fallback are taken.
  {
    auto owner = std::shared_ptr<std::byte[]>(new std::byte[size + 1]);
    std::byte* start = owner.get() + 1;
    if (size) std::memcpy(start, data, size);
    gexec::detail::byte_reader in(std::span<const std::byte>(start, size), "params (views)");
    gexec::param_dict views;
    try {
      views = gexec::detail::read_param_list(in, gexec::detail::view_or_copy(owner));
    } catch (const gexec::error& e) {
      property_failed("reading views rejects a blob that loads as copies", e.what());
    }
    if (in.remaining() != 0) property_failed("reading views leaves bytes that reading copies consumed");
    owner.reset();  // the views must keep the bytes alive on their own
    require_same_dict(dict, views, "reading views gives a different dictionary");
  }
  return 0;
}
