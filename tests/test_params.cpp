#include <gexec/params.hpp>

#include <doctest/doctest.h>

#include "byte_builder.hpp"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace {

constexpr std::uint64_t list_magic = param_list_magic_bytes;
constexpr std::uint64_t array_magic = tensor_magic_bytes;

// Header of a tensor record up to and including the shape.
bytes& record_head(bytes& out, std::uint8_t code, std::uint8_t bits, std::vector<std::int64_t> shape) {
  out.u64(array_magic).u64(0).i32(kDLCPU).i32(0).i32(static_cast<std::int32_t>(shape.size()));
  out.u8(code).u8(bits).u16(1);
  for (auto d : shape) out.i64(d);
  return out;
}

// {"w": float32 [2,2] = 1,2,3,4 ; "b": int8 [3] = -1,0,1 ; "s": float32 0-d = 7.5}
bytes reference_blob() {
  bytes out;
  out.u64(list_magic).u64(0).u64(3).str("w").str("b").str("s").u64(3);
  const float w[] = {1, 2, 3, 4};
  record_head(out, kDLFloat, 32, {2, 2}).i64(16).raw(w, 16);
  const std::int8_t b[] = {-1, 0, 1};
  record_head(out, kDLInt, 8, {3}).i64(3).raw(b, 3);
  const float s = 7.5f;
  record_head(out, kDLFloat, 32, {}).i64(4).raw(&s, 4);
  return out;
}

std::filesystem::path temp_file(const std::string& name, std::span<const std::byte> content) {
  auto path = std::filesystem::temp_directory_path() / ("gexec_test_params_" + name);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(content.data()), static_cast<std::streamsize>(content.size()));
  return path;
}

void check_reference_dict(const gexec::param_dict& d) {
  REQUIRE(d.size() == 3);
  auto it = d.begin();
  CHECK(it->first == "w");
  CHECK((++it)->first == "b");
  CHECK((++it)->first == "s");
  auto w = d.at("w").values<float>();
  CHECK(std::vector<float>(w.begin(), w.end()) == std::vector<float>{1, 2, 3, 4});
  CHECK(d.at("w").shape().size() == 2);
  auto b = d.at("b").values<std::int8_t>();
  CHECK(std::vector<std::int8_t>(b.begin(), b.end()) == std::vector<std::int8_t>{-1, 0, 1});
  CHECK(d.at("s").ndim() == 0);
  CHECK(d.at("s").values<float>()[0] == 7.5f);
}

}  // namespace

TEST_CASE("a blob laid out as TVM writes it loads with names, order, shapes and values") {
  check_reference_dict(gexec::load_param_dict(reference_blob().b));
}

TEST_CASE("save_param_dict writes exactly TVM's bytes") {
  gexec::param_dict d;
  d.set("w", gexec::ndarray::from_values<float>({2, 2}, {1, 2, 3, 4}));
  d.set("b", gexec::ndarray::from_values<std::int8_t>({3}, {-1, 0, 1}));
  d.set("s", gexec::ndarray::from_values<float>({}, {7.5f}));
  CHECK(gexec::save_param_dict(d) == reference_blob().b);
}

TEST_CASE("round trip of every storable dtype, zero-size and 0-d tensors") {
  gexec::param_dict d;
  d.set("f16", gexec::ndarray::from_values<std::uint16_t>({2}, {0x3C00, 0xC000}));  // raw halves, as uint16
  {
    auto h = gexec::ndarray::empty({2}, gexec::dtypes::float16);
    std::memcpy(h.data(), d.at("f16").data(), 4);
    d.set("f16", h);
  }
  d.set("bf16", gexec::ndarray::empty({3}, gexec::dtypes::bfloat16));
  d.set("f64", gexec::ndarray::from_values<double>({1, 2}, {0.25, -8.0}));
  d.set("i64", gexec::ndarray::from_values<std::int64_t>({2}, {-(std::int64_t{1} << 40), 5}));
  d.set("u8", gexec::ndarray::from_values<std::uint8_t>({4}, {0, 1, 254, 255}));
  d.set("flag", gexec::ndarray::from_values<bool>({3}, {true, false, true}));
  auto nibbles = gexec::ndarray::empty({5}, gexec::dtypes::int4);
  for (int i = 0; i < 5; ++i) static_cast<std::uint8_t*>(nibbles.data())[i] = static_cast<std::uint8_t>(i);
  d.set("i4", nibbles);
  d.set("empty", gexec::ndarray::empty({0, 3}, gexec::dtypes::float32));
  d.set("scalar", gexec::ndarray::from_values<std::int32_t>({}, {-42}));

  auto blob = gexec::save_param_dict(d);
  // bool and int4 take one byte per element in TVM's format.
  auto back = gexec::load_param_dict(blob);
  REQUIRE(back.size() == d.size());
  for (const auto& item : d) {
    const std::string& name = item.first;
    const gexec::ndarray& a = item.second;
    CAPTURE(name);
    const auto& b = back.at(name);
    CHECK(gexec::same_dtype(a.dtype(), b.dtype()));
    CHECK(std::vector<std::int64_t>(a.shape().begin(), a.shape().end()) ==
          std::vector<std::int64_t>(b.shape().begin(), b.shape().end()));
    CHECK(a.byte_size() == b.byte_size());
    CHECK(std::memcmp(a.data(), b.data(), a.byte_size()) == 0);
    CHECK(b.is_aligned());
  }
  CHECK(back.at("flag").byte_size() == 3);
  CHECK(back.at("i4").byte_size() == 5);
  CHECK(gexec::save_param_dict(back) == blob);
}

TEST_CASE("files load by copy and by mmap; mapped views outlive the dictionary") {
  auto blob = reference_blob().b;
  auto path = temp_file("ok.params", blob);
  check_reference_dict(gexec::load_param_dict_file(path, gexec::load_mode::copy));
  gexec::ndarray kept;
  {
    auto mapped = gexec::load_param_dict_file(path, gexec::load_mode::mmap);
    check_reference_dict(mapped);
    kept = mapped.at("w");  // at an odd offset in the file, so a copy
    CHECK(kept.is_aligned(4));
  }
  std::filesystem::remove(path);
  auto w = kept.values<float>();
  CHECK(std::vector<float>(w.begin(), w.end()) == std::vector<float>{1, 2, 3, 4});
  // The mapping is private: writing through a view neither faults nor changes the file.
  w[0] = 100.0f;
  CHECK(kept.values<float>()[0] == 100.0f);
}

TEST_CASE("mmap hands out views into the mapping where the layout aligns the elements") {
  // Names of 4 + 4 bytes put both float32[2] tensors at 8-byte aligned file offsets.
  bytes blob;
  blob.u64(list_magic).u64(0).u64(2).str("wwww").str("bbbb").u64(2);
  const float a[] = {1, 2}, b[] = {3, 4};
  record_head(blob, kDLFloat, 32, {2}).i64(8).raw(a, 8);
  record_head(blob, kDLFloat, 32, {2}).i64(8).raw(b, 8);
  auto path = temp_file("aligned.params", blob.b);
  auto mapped = gexec::load_param_dict_file(path, gexec::load_mode::mmap);
  std::filesystem::remove(path);
  // Views: the second tensor's data is one record head (48 bytes) after the first's 8 data bytes.
  auto* first = static_cast<const std::byte*>(mapped.at("wwww").data());
  auto* second = static_cast<const std::byte*>(mapped.at("bbbb").data());
  CHECK(second - first == 8 + 48);
  CHECK(mapped.at("bbbb").values<float>()[1] == 4.0f);
}

TEST_CASE("save_param_dict_file writes what load_param_dict_file reads") {
  gexec::param_dict d;
  d.set("x", gexec::ndarray::from_values<float>({3}, {1, 2, 3}));
  auto path = std::filesystem::temp_directory_path() / "gexec_test_params_saved.params";
  gexec::save_param_dict_file(d, path);
  auto back = gexec::load_param_dict_file(path, gexec::load_mode::mmap);
  CHECK(back.at("x").values<float>()[2] == 3.0f);
  std::filesystem::remove(path);
}

TEST_CASE("a blob cut at any byte is rejected, never read past its end") {
  auto blob = reference_blob().b;
  for (std::size_t n = 0; n < blob.size(); ++n) {
    CAPTURE(n);
    try {
      (void)gexec::load_param_dict(std::span<const std::byte>(blob.data(), n));
      FAIL("accepted a truncated blob");
    } catch (const gexec::error& e) {
      CHECK(e.code() == gexec::errc::invalid_params);
      CHECK(std::string(e.what()).find("truncated") != std::string::npos);
    }
  }
}

namespace {

struct malformed {
  const char* what;
  std::function<bytes()> make;
  const char* message;
};

bytes one_tensor(std::uint8_t code, std::uint8_t bits, std::uint16_t lanes, std::vector<std::int64_t> shape,
                 std::int64_t byte_size, std::size_t data_bytes, std::int32_t device = kDLCPU) {
  bytes out;
  out.u64(list_magic).u64(0).u64(1).str("t").u64(1);
  out.u64(array_magic).u64(0).i32(device).i32(0).i32(static_cast<std::int32_t>(shape.size()));
  out.u8(code).u8(bits).u16(lanes);
  for (auto d : shape) out.i64(d);
  out.i64(byte_size);
  std::vector<std::byte> data(data_bytes);
  return out.raw(data.data(), data.size()), out;
}

}  // namespace

TEST_CASE("malformed parameter blobs are rejected with the tensor and the field at fault") {
  const malformed cases[] = {
      {"bad list magic", [] { bytes b; b.u64(0x1234).u64(0).u64(0).u64(0); return b; }, "header: not a parameter blob (bad magic)"},
      {"name count larger than the blob", [] { bytes b; b.u64(list_magic).u64(0).u64(1ull << 60); return b; }, "names count 1152921504606846976 exceeds"},
      {"name length larger than the blob", [] { bytes b; b.u64(list_magic).u64(0).u64(1).u64(1ull << 40); return b; }, "truncated: name needs 1099511627776 bytes"},
      {"tensor count differs from name count", [] { bytes b; b.u64(list_magic).u64(0).u64(1).str("a").u64(2); return b; }, "tensor count 2 differs from the name count 1"},
      {"bad tensor magic", [] { bytes b; b.u64(list_magic).u64(0).u64(1).str("a").u64(1).u64(0xBAD); return b; }, "tensor 0 (\"a\"): bad tensor magic 0x0000000000000bad"},
      {"tensor on a GPU", [] { return one_tensor(kDLFloat, 32, 1, {1}, 4, 4, kDLCUDA); }, "tensor 0 (\"t\"): device type 2"},
      {"negative ndim", [] { bytes b; b.u64(list_magic).u64(0).u64(1).str("t").u64(1).u64(array_magic).u64(0).i32(1).i32(0).i32(-1).u8(2).u8(32).u16(1); return b; }, "negative ndim -1"},
      {"huge ndim", [] { bytes b; b.u64(list_magic).u64(0).u64(1).str("t").u64(1).u64(array_magic).u64(0).i32(1).i32(0).i32(1 << 30).u8(2).u8(32).u16(1); return b; }, "truncated: ndim 1073741824"},
      {"lanes > 1", [] { return one_tensor(kDLFloat, 32, 4, {2}, 8, 8); }, "dtype float32x4 has 4 lanes"},
      {"unknown dtype code", [] { return one_tensor(9, 32, 1, {2}, 8, 8); }, "unsupported dtype (code 9, bits 32)"},
      {"impossible bit width", [] { return one_tensor(kDLFloat, 12, 1, {2}, 4, 4); }, "unsupported dtype (code 2, bits 12)"},
      {"negative dimension", [] { return one_tensor(kDLFloat, 32, 1, {2, -3}, 0, 0); }, "shape [2, -3] is negative or overflows"},
      {"overflowing shape", [] { return one_tensor(kDLFloat, 32, 1, {1ll << 40, 1ll << 40}, 0, 0); }, "shape [1099511627776, 1099511627776] is negative or overflows"},
      {"byte size too small", [] { return one_tensor(kDLFloat, 32, 1, {2, 3}, 20, 20); }, "byte size 20 disagrees with shape [2, 3] of float32 (24 bytes)"},
      {"byte size too large", [] { return one_tensor(kDLFloat, 32, 1, {2}, 16, 16); }, "byte size 16 disagrees"},
      {"negative byte size", [] { return one_tensor(kDLFloat, 32, 1, {2}, -8, 0); }, "byte size -8 disagrees"},
      {"data shorter than its size", [] { return one_tensor(kDLFloat, 32, 1, {1000}, 4000, 10); }, "truncated: tensor data needs 4000 bytes, 10 left"},
      {"trailing bytes", [] { auto b = one_tensor(kDLInt, 8, 1, {2}, 2, 2); b.u8(0); return b; }, "1 unexpected bytes after the last tensor"},
      {"duplicate names", [] {
         bytes b;
         b.u64(list_magic).u64(0).u64(2).str("a").str("a").u64(2);
         for (int i = 0; i < 2; ++i) record_head(b, kDLInt, 8, {1}).i64(1).u8(0);
         return b;
       }, "tensor 1 (\"a\"): duplicate parameter name"},
  };
  for (const malformed& c : cases) {
    const std::string what = c.what;
    CAPTURE(what);
    auto blob = c.make().b;
    try {
      (void)gexec::load_param_dict(blob);
      FAIL("accepted a malformed blob");
    } catch (const gexec::error& e) {
      CHECK(e.code() == gexec::errc::invalid_params);
      const std::string message = e.what();
      CHECK_MESSAGE(message.find(c.message) != std::string::npos, message);
    }
  }
}

TEST_CASE("file errors: missing file, empty file, malformed file name the path") {
  for (auto mode : {gexec::load_mode::copy, gexec::load_mode::mmap}) {
    try {
      (void)gexec::load_param_dict_file("/nonexistent/x.params", mode);
      FAIL("no error");
    } catch (const gexec::error& e) {
      CHECK(e.code() == gexec::errc::io);
      CHECK(std::string(e.what()).find("/nonexistent/x.params") != std::string::npos);
    }
    auto empty = temp_file("empty.params", {});
    try {
      (void)gexec::load_param_dict_file(empty, mode);
      FAIL("no error");
    } catch (const gexec::error& e) {
      CHECK(e.code() == gexec::errc::invalid_params);
      CHECK(std::string(e.what()).find(empty.string()) != std::string::npos);
      CHECK(std::string(e.what()).find("truncated") != std::string::npos);
    }
    std::filesystem::remove(empty);
  }
}

TEST_CASE("save_param_dict refuses what TVM's format cannot hold") {
  gexec::param_dict d;
  d.set("v", gexec::ndarray::empty({2}, gexec::parse_dtype("float32x4")));
  try {
    (void)gexec::save_param_dict(d);
    FAIL("no error");
  } catch (const gexec::error& e) {
    CHECK(e.code() == gexec::errc::invalid_argument);
    CHECK(std::string(e.what()).find("\"v\"") != std::string::npos);
  }
}
