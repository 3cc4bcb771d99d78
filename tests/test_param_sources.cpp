// The weight-source conformance suite: every param_source (params/source.hpp) registers
// here with an encoder written by hand from its format's description (never gexec's own
// writer) and the cases it does not support, listed. Each source is checked for names,
// dtypes, shapes and the bytes read into a destination against the expectations below;
// for refusing truncated and corrupt input with gexec::error; for handing out views in
// place only where the bytes are aligned; and for being picked by the sniff table.

#include <gexec/params.hpp>

#include <doctest/doctest.h>

#include "byte_builder.hpp"

#include <array>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace {

/// One tensor as the sources must report it.
struct expected_tensor {
  std::string name;
  DLDataType dtype;
  std::vector<std::int64_t> shape;
  std::vector<std::byte> data;
};

/// Whether `n` bytes at `got` are `want`'s (nothing is compared, and no pointer passed to
/// memcmp, for an empty tensor: its data may be null).
bool same_bytes(const void* got, const std::vector<std::byte>& want) {
  return want.empty() || std::memcmp(got, want.data(), want.size()) == 0;
}

template <class T>
std::vector<std::byte> le_bytes(std::initializer_list<T> values) {
  std::vector<std::byte> out(values.size() * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), values.begin(), out.size());
  return out;
}

/// The tensors every source is asked to hold (less its unsupported cases).
std::vector<expected_tensor> all_cases() {
  return {
      {"w", {kDLFloat, 32, 1}, {2, 3}, le_bytes<float>({1, 2, 3, 4, 5, 6})},
      {"b", {kDLInt, 8, 1}, {3}, le_bytes<std::int8_t>({-1, 0, 1})},
      {"h", {kDLUInt, 16, 1}, {2}, le_bytes<std::uint16_t>({7, 65535})},
      {"s", {kDLFloat, 32, 1}, {}, le_bytes<float>({7.5f})},
      {"empty", {kDLFloat, 32, 1}, {0}, {}},
      {"bf", {kDLBfloat, 16, 1}, {2}, le_bytes<std::uint16_t>({0x3F80, 0xC000})},
  };
}

/// What a format lacks, by case: each source lists its own.
struct unsupported {
  bool tensors = false;           ///< holds no tensors at all (the null source)
  bool raw_element_dtypes = false;  ///< bfloat16 (and float8) cannot be told from raw bytes
  bool refusing_trailing_bytes = false;  ///< bytes after the end are accepted (a zip's comment)
};

// ---- encoders, written from the formats' descriptions ----------------------------------

std::vector<std::byte> encode_tvm_blob(const std::vector<expected_tensor>& ts) {
  bytes out;
  out.u64(param_list_magic_bytes).u64(0).u64(ts.size());
  for (const auto& t : ts) out.str(t.name);
  out.u64(ts.size());
  for (const auto& t : ts) {
    out.u64(tensor_magic_bytes).u64(0).i32(kDLCPU).i32(0).i32(static_cast<std::int32_t>(t.shape.size()));
    out.u8(t.dtype.code).u8(t.dtype.bits).u16(t.dtype.lanes);
    for (auto d : t.shape) out.i64(d);
    out.i64(static_cast<std::int64_t>(t.data.size())).raw(t.data.data(), t.data.size());
  }
  return out.b;
}

std::string safetensors_dtype(DLDataType t) {
  if (t.code == kDLFloat) return "F" + std::to_string(t.bits);
  if (t.code == kDLInt) return "I" + std::to_string(t.bits);
  if (t.code == kDLUInt) return "U" + std::to_string(t.bits);
  return "BF16";
}

std::vector<std::byte> encode_safetensors(const std::vector<expected_tensor>& ts) {
  std::string header = "{\"__metadata__\":{\"by\":\"hand\"}";
  std::vector<std::byte> data;
  for (const auto& t : ts) {
    header += ",\"" + t.name + "\":{\"dtype\":\"" + safetensors_dtype(t.dtype) + "\",\"shape\":[";
    for (std::size_t i = 0; i < t.shape.size(); ++i) header += (i ? "," : "") + std::to_string(t.shape[i]);
    header += "],\"data_offsets\":[" + std::to_string(data.size()) + "," + std::to_string(data.size() + t.data.size()) + "]}";
    data.insert(data.end(), t.data.begin(), t.data.end());
  }
  header += "}";
  while (header.size() % 8) header += ' ';
  bytes out;
  out.u64(header.size()).raw(header.data(), header.size()).raw(data.data(), data.size());
  return out.b;
}

std::uint32_t crc32_by_hand(const std::vector<std::byte>& b) {
  std::uint32_t c = 0xFFFFFFFFu;
  for (std::byte x : b) {
    c ^= static_cast<std::uint8_t>(x);
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

std::vector<std::byte> encode_npy(const expected_tensor& t) {
  const std::string descr = t.dtype.code == kDLFloat ? "<f4" : t.dtype.code == kDLInt ? "|i1" : "<u2";
  std::string shape = "(";
  for (auto d : t.shape) shape += std::to_string(d) + ",";
  shape += ")";
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + dict.size() + 1) % 64) dict += ' ';
  dict += '\n';
  bytes out;
  out.raw("\x93NUMPY\x01\x00", 8).u16(static_cast<std::uint16_t>(dict.size())).raw(dict.data(), dict.size()).raw(t.data.data(), t.data.size());
  return out.b;
}

void u32_to(bytes& out, std::uint32_t v) { out.raw(&v, 4); }

std::vector<std::byte> encode_npz(const std::vector<expected_tensor>& ts) {
  bytes out, directory;
  for (const auto& t : ts) {
    const std::vector<std::byte> npy = encode_npy(t);
    const std::string file = t.name + ".npy";
    const auto offset = static_cast<std::uint32_t>(out.b.size());
    const std::uint32_t crc = crc32_by_hand(npy), size = static_cast<std::uint32_t>(npy.size());
    u32_to(out, 0x04034b50u);
    out.u16(20).u16(0).u16(0).u16(0).u16(33);
    u32_to(out, crc);
    u32_to(out, size);
    u32_to(out, size);
    out.u16(static_cast<std::uint16_t>(file.size())).u16(0).raw(file.data(), file.size()).raw(npy.data(), npy.size());
    u32_to(directory, 0x02014b50u);
    directory.u16(20).u16(20).u16(0).u16(0).u16(0).u16(33);
    u32_to(directory, crc);
    u32_to(directory, size);
    u32_to(directory, size);
    directory.u16(static_cast<std::uint16_t>(file.size())).u16(0).u16(0).u16(0).u16(0);
    u32_to(directory, 0);
    u32_to(directory, offset);
    directory.raw(file.data(), file.size());
  }
  const auto cd_offset = static_cast<std::uint32_t>(out.b.size());
  out.raw(directory.b.data(), directory.b.size());
  u32_to(out, 0x06054b50u);
  out.u16(0).u16(0).u16(static_cast<std::uint16_t>(ts.size())).u16(static_cast<std::uint16_t>(ts.size()));
  u32_to(out, static_cast<std::uint32_t>(directory.b.size()));
  u32_to(out, cd_offset);
  out.u16(0);
  return out.b;
}

std::vector<std::byte> encode_null(const std::vector<expected_tensor>&) {
  bytes out;
  out.raw("GEXECNUL", 8);
  return out.b;
}

// ---- the registered sources: one struct each ------------------------------------------

struct tvm_blob_format {
  using source = gexec::tvm_blob_source;
  static constexpr unsupported lacks{};
  static constexpr bool views_input = true;  ///< its views are of the input's own bytes
  static std::vector<std::byte> encode(const std::vector<expected_tensor>& t) { return encode_tvm_blob(t); }
  static std::vector<std::size_t> corrupt_at() {  // the blob's magic; the first record's magic, after the names and the count
    std::size_t record = 24 + 8;
    for (const auto& t : all_cases()) record += 8 + t.name.size();
    return {0, record};
  }
};
struct safetensors_format {
  using source = gexec::safetensors_source;
  static constexpr unsupported lacks{};
  static constexpr bool views_input = true;
  static std::vector<std::byte> encode(const std::vector<expected_tensor>& t) { return encode_safetensors(t); }
  static std::vector<std::size_t> corrupt_at() { return {8, 9}; }  // the header's '{'; its first key's quote
};
struct npz_format {
  using source = gexec::npz_source;
  // '<V2' members carry no dtype: bfloat16 cannot be named without the caller's hint.
  static constexpr unsupported lacks{.raw_element_dtypes = true, .refusing_trailing_bytes = true};
  static constexpr bool views_input = false;  ///< its views are the decoded members (CRC, byte order checked)
  static std::vector<std::byte> encode(const std::vector<expected_tensor>& t) { return encode_npz(t); }
  static std::vector<std::size_t> corrupt_at() { return {0, 30 + 5 + 20}; }  // the local header's signature; the first member's .npy header (its CRC-32)
};
struct null_format {
  using source = gexec::null_source;
  static constexpr unsupported lacks{.tensors = true, .raw_element_dtypes = true};
  static constexpr bool views_input = false;
  static std::vector<std::byte> encode(const std::vector<expected_tensor>& t) { return encode_null(t); }
  static std::vector<std::size_t> corrupt_at() { return {0, 7}; }  // the magic
};

#define GEXEC_PARAM_FORMATS tvm_blob_format, safetensors_format, npz_format, null_format

template <class F>
std::vector<expected_tensor> cases_for() {
  std::vector<expected_tensor> out;
  if (F::lacks.tensors) return out;
  for (auto& t : all_cases())
    if (!(F::lacks.raw_element_dtypes && t.dtype.code == kDLBfloat)) out.push_back(std::move(t));
  return out;
}

/// Bytes kept alive by a shared owner, starting `shift` bytes past a 64-byte boundary.
struct held_bytes {
  std::shared_ptr<std::byte[]> storage;
  std::span<const std::byte> bytes;
  held_bytes(const std::vector<std::byte>& b, std::size_t shift) : storage(new std::byte[b.size() + 128]) {
    auto* base = storage.get();
    const auto misalign = reinterpret_cast<std::uintptr_t>(base) % 64;
    std::byte* at = base + (misalign ? 64 - misalign : 0) + shift;
    if (!b.empty()) std::memcpy(at, b.data(), b.size());
    bytes = {at, b.size()};
  }
};

/// A source over `bytes`, checked to the end (finish(), where the source has one).
template <class F>
typename F::source open_checked(const std::vector<std::byte>& b) {
  typename F::source s(gexec::param_input::memory(b));
  gexec::detail::finish_source(s);
  return s;
}

template <class Source>
void check_entries(const Source& s, const std::vector<expected_tensor>& want) {
  const auto entries = s.entries();
  REQUIRE(entries.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    CAPTURE(want[i].name);
    CHECK(entries[i].name == want[i].name);
    CHECK(entries[i].dtype.code == want[i].dtype.code);
    CHECK(entries[i].dtype.bits == want[i].dtype.bits);
    CHECK(entries[i].dtype.lanes == want[i].dtype.lanes);
    CHECK(entries[i].shape == want[i].shape);
    REQUIRE(entries[i].bytes == want[i].data.size());
    std::vector<std::byte> dst(want[i].data.size() + 1, std::byte{0x5A});
    s.read(i, dst.data(), nullptr);
    CHECK(same_bytes(dst.data(), want[i].data));
    CHECK(dst.back() == std::byte{0x5A});  // not a byte more
  }
}

void check_dict(const gexec::param_dict& d, const std::vector<expected_tensor>& want) {
  REQUIRE(d.size() == want.size());
  std::size_t i = 0;
  for (const auto& item : d) {
    const std::string& name = item.first;
    const gexec::ndarray& a = item.second;
    CAPTURE(name);
    CHECK(name == want[i].name);
    CHECK(std::vector<std::int64_t>(a.shape().begin(), a.shape().end()) == want[i].shape);
    REQUIRE(a.byte_size() == want[i].data.size());
    CHECK(same_bytes(a.data(), want[i].data));
    ++i;
  }
}

}  // namespace

TEST_CASE_TEMPLATE("a source reports the names, dtypes and shapes it holds and reads their bytes", F, GEXEC_PARAM_FORMATS) {
  const auto want = cases_for<F>();
  const auto encoded = F::encode(want);
  const typename F::source s(gexec::param_input::memory(encoded));
  check_entries(s, want);
  CHECK(s.input_bytes() == encoded.size());
  if (F::views_input)
    for (std::size_t i = 0; i < want.size(); ++i) CHECK_FALSE(s.view(i).defined());  // bytes without an owner: never viewed
}

TEST_CASE_TEMPLATE("the sniff table picks the source, from bytes and from files by copy and by mmap", F, GEXEC_PARAM_FORMATS) {
  const auto want = cases_for<F>();
  const auto encoded = F::encode(want);
  CHECK(gexec::param_format_table::format_of(gexec::param_input::memory(encoded)) == F::source::format);
  check_dict(gexec::load_param_dict(std::span<const std::byte>(encoded)), want);
  const auto path = std::filesystem::temp_directory_path() / ("gexec_test_param_sources" + std::string(F::source::extension));
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(encoded.data()), static_cast<std::streamsize>(encoded.size()));
  for (auto mode : {gexec::load_mode::copy, gexec::load_mode::mmap}) {
    CAPTURE(static_cast<int>(mode));
    check_dict(gexec::load_param_dict_file(path, mode), want);
  }
  std::filesystem::remove(path);
}

TEST_CASE_TEMPLATE("truncated input is refused with gexec::error, at every length", F, GEXEC_PARAM_FORMATS) {
  const auto encoded = F::encode(cases_for<F>());
  for (std::size_t n = 0; n < encoded.size(); ++n) {
    CAPTURE(n);
    const std::vector<std::byte> cut(encoded.begin(), encoded.begin() + static_cast<std::ptrdiff_t>(n));
    CHECK_THROWS_AS(open_checked<F>(cut), gexec::error);
  }
}

TEST_CASE_TEMPLATE("corrupt input is refused with gexec::error", F, GEXEC_PARAM_FORMATS) {
  const auto encoded = F::encode(cases_for<F>());
  for (std::size_t at : F::corrupt_at()) {
    CAPTURE(at);
    auto bad = encoded;
    bad[at] = ~bad[at];
    CHECK_THROWS_AS(open_checked<F>(bad), gexec::error);
  }
  // Bytes added at the end.
  auto longer = encoded;
  longer.push_back(std::byte{0});
  if (!F::lacks.refusing_trailing_bytes) CHECK_THROWS_AS(open_checked<F>(longer), gexec::error);
}

TEST_CASE_TEMPLATE("views in place only where the bytes are aligned for the elements", F, GEXEC_PARAM_FORMATS) {
  const auto want = cases_for<F>();
  const auto encoded = F::encode(want);
  std::size_t viewed = 0;
  for (std::size_t shift : {0, 1, 2, 3}) {
    CAPTURE(shift);
    const held_bytes held(encoded, shift);
    const typename F::source s(gexec::param_input::memory(held.bytes, held.storage));
    check_entries(s, want);
    for (std::size_t i = 0; i < want.size(); ++i) {
      CAPTURE(want[i].name);
      const gexec::ndarray v = s.view(i);
      if (!v.defined()) continue;
      ++viewed;
      const auto natural = std::min<std::uint64_t>((want[i].dtype.bits + 7) / 8, 8);
      CHECK(reinterpret_cast<std::uintptr_t>(v.data()) % natural == 0);
      CHECK(v.byte_size() == want[i].data.size());
      CHECK(same_bytes(v.data(), want[i].data));
      const auto* p = static_cast<const std::byte*>(v.data());
      const bool inside = p >= held.bytes.data() && p < held.bytes.data() + held.bytes.size();
      if (want[i].data.size()) CHECK(inside == F::views_input);
    }
  }
  // Where a format views its input, some tensors are viewed: the check above is not empty.
  if (F::views_input && !want.empty()) CHECK(viewed > 0);
}

TEST_CASE("tvm_blob_memory_source reads TVM's blob in memory as tvm_blob_source does") {
  const auto want = cases_for<tvm_blob_format>();
  const auto encoded = tvm_blob_format::encode(want);
  std::size_t viewed = 0;
  for (std::size_t shift : {0, 1, 2, 3}) {
    CAPTURE(shift);
    const held_bytes held(encoded, shift);
    const gexec::tvm_blob_memory_source m(held.bytes, held.storage);
    check_entries(m, want);  // read(): the bytes, not one more
    const gexec::tvm_blob_source s(gexec::param_input::memory(held.bytes, held.storage));
    REQUIRE(m.entries().size() == s.entries().size());
    for (std::size_t i = 0; i < want.size(); ++i) {
      CAPTURE(want[i].name);
      CHECK(m.entries()[i].offset == s.entries()[i].offset);
      const gexec::ndarray v = m.view(i), w = s.view(i);
      CHECK(v.defined() == w.defined());
      if (!v.defined()) continue;
      ++viewed;
      CHECK(v.data() == w.data());  // the input's own bytes
    }
    CHECK(m.input_bytes() == encoded.size());
  }
  CHECK(viewed > 0);
  // Without an owner nothing is viewed; the copy is the blob's bytes.
  const gexec::param_dict d = gexec::read_param_dict(gexec::tvm_blob_memory_source(encoded));
  check_dict(d, want);
  // Truncated, corrupt and longer input: refused as by tvm_blob_source.
  for (std::size_t n : {std::size_t{0}, std::size_t{7}, encoded.size() / 2, encoded.size() - 1}) {
    CAPTURE(n);
    CHECK_THROWS_AS(gexec::tvm_blob_memory_source(std::span(encoded).first(n)), gexec::error);
  }
  for (std::size_t at : tvm_blob_format::corrupt_at()) {
    CAPTURE(at);
    auto bad = encoded;
    bad[at] = ~bad[at];
    CHECK_THROWS_AS(gexec::tvm_blob_memory_source{bad}, gexec::error);
  }
  auto longer = encoded;
  longer.push_back(std::byte{0});
  const gexec::tvm_blob_memory_source trailing(longer);
  try {
    trailing.finish();
    FAIL("a byte after the last tensor was accepted");
  } catch (const gexec::error& e) {
    CHECK(e.code() == gexec::errc::invalid_params);
    CHECK(std::string(e.what()).find("1 unexpected bytes after the last tensor") != std::string::npos);
  }
}

TEST_CASE("an input's extension is std::filesystem::path's, found without making a path") {
  for (const char* p : {"w.params", "dir/w.safetensors", "a.b/c", "a.b/c.npz", ".params", "dir/.params", "dir/", ".", "..", "dir/..", "w.",
                        "w..x", "/", "", "noext", "a/b.c.d", "dir.x/.hidden.y"}) {
    CAPTURE(p);
    CHECK(gexec::detail::path_extension(p) == std::filesystem::path(p).extension().string());
  }
}
