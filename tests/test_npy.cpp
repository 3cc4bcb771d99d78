#include <gexec/npy.hpp>

#include "test_support.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

const std::filesystem::path data_dir = std::filesystem::path(GEXEC_SOURCE_DIR) / "tests" / "data" / "npy";

std::string file_bytes(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  REQUIRE(f);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

/// A .npy file written by hand: magic, version, header length (2 bytes for 1.0, else 4),
/// the header text as given (no padding added), then the data.
std::string npy(const std::string& header, const std::string& data = {}, int major = 1) {
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  const int length_bytes = major == 1 ? 2 : 4;
  for (int i = 0; i < length_bytes; ++i) out += static_cast<char>((header.size() >> (8 * i)) & 0xFF);
  return out + header + data;
}

std::string dict(const std::string& descr, const std::string& shape, const std::string& fortran = "False") {
  return "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape + ", }\n";
}

template <class T>
std::string raw(std::initializer_list<T> values) {
  std::string s(values.size() * sizeof(T), '\0');
  std::memcpy(s.data(), values.begin(), s.size());
  return s;
}

using test::error_of;

/// load_npy(bytes[, as]) fails with `code` and a message containing `part`.
void check_refused(const std::string& bytes, gexec::errc code, const std::string& part,
                   std::optional<DLDataType> as = std::nullopt) {
  const gexec::error e = error_of([&] { as ? gexec::load_npy(bytes, *as) : gexec::load_npy(bytes); });
  const std::string what = e.what();
  CAPTURE(what);
  CHECK(e.code() == code);
  CHECK(std::string(e.what()).find(part) != std::string::npos);
}

template <class T>
std::vector<T> values_of(const gexec::ndarray& a) {
  auto v = a.values<T>();
  return {v.begin(), v.end()};
}

std::vector<std::int64_t> shape_of(const gexec::ndarray& a) { return {a.shape().begin(), a.shape().end()}; }

std::vector<std::uint16_t> bits16_of(const gexec::ndarray& a) {
  REQUIRE(gexec::element_bytes(a.dtype()) == 2);
  std::vector<std::uint16_t> v(static_cast<std::size_t>(a.numel()));
  std::memcpy(v.data(), a.data(), v.size() * 2);
  return v;
}

using temp_dir = test::scratch_dir;

}  // namespace

// The values below are those tests/data/npy/make_npy.py gave numpy.
TEST_CASE("files numpy wrote load with their shapes, dtypes and values") {
  SUBCASE("0-d float64") {
    auto a = gexec::load_npy_file(data_dir / "scalar_f64.npy");
    CHECK(a.ndim() == 0);
    CHECK(values_of<double>(a) == std::vector<double>{-2.5});
  }
  SUBCASE("zero-size float32 (0, 3)") {
    auto a = gexec::load_npy_file(data_dir / "empty_f32.npy");
    CHECK(shape_of(a) == std::vector<std::int64_t>{0, 3});
    CHECK(gexec::same_dtype(a.dtype(), gexec::dtypes::float32));
    CHECK(a.byte_size() == 0);
  }
  SUBCASE("3-D int8") {
    auto a = gexec::load_npy_file(data_dir / "cube_i8.npy");
    CHECK(shape_of(a) == std::vector<std::int64_t>{2, 3, 4});
    std::vector<std::int8_t> expected;
    for (int i = -12; i < 12; ++i) expected.push_back(static_cast<std::int8_t>(i));
    CHECK(values_of<std::int8_t>(a) == expected);
  }
  SUBCASE("bool") {
    auto a = gexec::load_npy_file(data_dir / "bool.npy");
    CHECK(gexec::same_dtype(a.dtype(), gexec::dtypes::boolean));
    CHECK(values_of<bool>(a) == std::vector<bool>{true, false, true, true});
  }
  SUBCASE("uint16 (2, 2)") {
    auto a = gexec::load_npy_file(data_dir / "u16.npy");
    CHECK(shape_of(a) == std::vector<std::int64_t>{2, 2});
    CHECK(values_of<std::uint16_t>(a) == std::vector<std::uint16_t>{0, 1, 65535, 4660});
  }
  SUBCASE("int64") {
    auto a = gexec::load_npy_file(data_dir / "i64.npy");
    CHECK(values_of<std::int64_t>(a) ==
          std::vector<std::int64_t>{-(std::int64_t{1} << 40), 0, (std::int64_t{1} << 62) + 7});
  }
  SUBCASE("float16, as bits") {
    auto a = gexec::load_npy_file(data_dir / "f16.npy");
    CHECK(gexec::same_dtype(a.dtype(), gexec::dtypes::float16));
    CHECK(bits16_of(a) == std::vector<std::uint16_t>{0x3C00, 0xC000, 0x3800, 0x7BFF});  // 1, -2, 0.5, 65504
  }
  SUBCASE("format 2.0, float64") {
    auto a = gexec::load_npy_file(data_dir / "v2_f64.npy");
    CHECK(values_of<double>(a) == std::vector<double>{1.5, -0.25, 1e300});
  }
  SUBCASE("format 3.0 (utf-8 header), int32") {
    auto a = gexec::load_npy_file(data_dir / "v3_i32.npy");
    CHECK(values_of<std::int32_t>(a) == std::vector<std::int32_t>{7, -7});
  }
  SUBCASE("big-endian float32 is byte-swapped") {
    auto a = gexec::load_npy_file(data_dir / "be_f4.npy");
    CHECK(values_of<float>(a) == std::vector<float>{1.0f, -2.5f});
  }
  SUBCASE("ml_dtypes bfloat16 ('<V2'), read as bfloat16") {
    auto a = gexec::load_npy_file(data_dir / "bf16.npy", gexec::dtypes::bfloat16);
    CHECK(gexec::same_dtype(a.dtype(), gexec::dtypes::bfloat16));
    CHECK(bits16_of(a) == std::vector<std::uint16_t>{0x3F80, 0xC000, 0x4060});  // 1, -2, 3.5
  }
  SUBCASE("from memory as from the file, 64-byte aligned, owning its data") {
    gexec::ndarray a;
    {
      const std::string bytes = file_bytes(data_dir / "i64.npy");
      a = gexec::load_npy(bytes);
    }
    CHECK(a.is_aligned());
    CHECK(a.device().device_type == kDLCPU);
    CHECK(values_of<std::int64_t>(a)[2] == (std::int64_t{1} << 62) + 7);
  }
}

TEST_CASE("save_npy writes the bytes np.save wrote") {
  for (const char* name :
       {"scalar_f64.npy", "empty_f32.npy", "cube_i8.npy", "bool.npy", "u16.npy", "i64.npy", "f16.npy"}) {
    CAPTURE(name);
    const std::string bytes = file_bytes(data_dir / name);
    CHECK(gexec::save_npy(gexec::load_npy(bytes)) == bytes);
  }
  const std::string bf16 = file_bytes(data_dir / "bf16.npy");
  CHECK(gexec::save_npy(gexec::load_npy(bf16, gexec::dtypes::bfloat16)) == bf16);
  // Those numpy wrote as 2.0 and 3.0 are written as 1.0, with the same dict.
  const std::string v2 = file_bytes(data_dir / "v2_f64.npy");
  const std::string saved = gexec::save_npy(gexec::load_npy(v2));
  CHECK(saved.substr(0, 8) == std::string("\x93NUMPY\x01\x00", 8));
  CHECK(saved.size() == v2.size());  // both padded to 128 bytes before the data
  CHECK(saved.substr(10, 80) == v2.substr(12, 80));
  CHECK(saved.substr(saved.size() - 24) == v2.substr(v2.size() - 24));
}

TEST_CASE("save_npy's header: format 1.0, data aligned to 64, format 2.0 when it does not fit") {
  for (std::size_t dict_size : {0u, 53u, 54u, 55u, 117u, 1000u, 65524u}) {
    CAPTURE(dict_size);
    auto layout = gexec::detail::npy_layout_for(dict_size);
    CHECK(layout.major == 1);
    CHECK(layout.preamble == 10);
    CHECK((layout.preamble + layout.header) % 64 == 0);
    CHECK(layout.header >= dict_size + 2);  // at least one space, then the newline
    CHECK(layout.header <= dict_size + 65);
  }
  auto big = gexec::detail::npy_layout_for(70000);
  CHECK(big.major == 2);
  CHECK(big.preamble == 12);
  CHECK((big.preamble + big.header) % 64 == 0);
  CHECK(gexec::detail::npy_layout_for(65524).header <= 0xFFFF);
  CHECK(gexec::detail::npy_layout_for(65535).major == 2);

  auto a = gexec::ndarray::from_values<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  const std::string bytes = gexec::save_npy(a);
  CHECK(bytes.size() == 128 + 24);
  CHECK(bytes.substr(10, 64).starts_with("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"));
  CHECK(bytes[127] == '\n');
}

TEST_CASE("every dtype gexec stores round-trips, under the descr numpy or ml_dtypes gives it") {
  struct dtype_case {
    DLDataType dtype;
    const char* descr;
    bool needs_dtype;  // a void descr: read back only when told the dtype
  };
  const dtype_case cases[] = {
      {gexec::dtypes::boolean, "|b1", false},
      {gexec::dtypes::int4, "<V1", true},
      {gexec::dtypes::uint4, "<V1", true},
      {gexec::dtypes::int8, "|i1", false},
      {gexec::dtypes::int16, "<i2", false},
      {gexec::dtypes::int32, "<i4", false},
      {gexec::dtypes::int64, "<i8", false},
      {gexec::dtypes::uint8, "|u1", false},
      {gexec::dtypes::uint16, "<u2", false},
      {gexec::dtypes::uint32, "<u4", false},
      {gexec::dtypes::uint64, "<u8", false},
      {gexec::dtypes::float16, "<f2", false},
      {gexec::dtypes::bfloat16, "<V2", true},
      {gexec::dtypes::float32, "<f4", false},
      {gexec::dtypes::float64, "<f8", false},
      {{gexec::tvm_float8_e4m3_code, 8, 1}, "<V1", true},
      {{gexec::tvm_float8_e5m2_code, 8, 1}, "<V1", true},
  };
  const std::vector<std::vector<std::int64_t>> shapes = {{}, {0}, {5}, {2, 0, 3}, {2, 3, 4}};
  for (const auto& c : cases) {
    for (const auto& shape : shapes) {
      CAPTURE(gexec::to_string(c.dtype));
      CAPTURE(shape.size());
      auto a = gexec::ndarray::empty(shape, c.dtype);
      auto* p = static_cast<unsigned char*>(a.data());
      for (std::uint64_t i = 0; i < a.byte_size(); ++i) p[i] = static_cast<unsigned char>(i * 37 + 11);
      if (c.dtype.bits == 1)
        for (std::uint64_t i = 0; i < a.byte_size(); ++i) p[i] &= 1;

      const std::string bytes = gexec::save_npy(a);
      CHECK(bytes.find(std::string("{'descr': '") + c.descr + "', ") == 10);
      if (c.needs_dtype) check_refused(bytes, gexec::errc::unsupported, "the overload that takes the dtype");
      auto b = c.needs_dtype ? gexec::load_npy(bytes, c.dtype) : gexec::load_npy(bytes);
      CHECK(gexec::same_dtype(b.dtype(), c.dtype));
      CHECK(shape_of(b) == shape);
      REQUIRE(b.byte_size() == a.byte_size());
      CHECK(std::memcmp(a.data(), b.data(), a.byte_size()) == 0);
      CHECK(gexec::save_npy(b) == bytes);
      // The exact dtype is always accepted where one is expected.
      CHECK(gexec::same_dtype(gexec::load_npy(bytes, c.dtype).dtype(), c.dtype));
    }
  }
}

TEST_CASE("void descrs are read as the dtype the caller expects, of their element size only") {
  const std::string bf16 = file_bytes(data_dir / "bf16.npy");
  check_refused(bf16, gexec::errc::unsupported, "descr '<V2' holds raw 2-byte elements");
  check_refused(bf16, gexec::errc::dtype_mismatch, "descr '<V2' holds 2-byte elements, not float32 (4 bytes)",
                gexec::dtypes::float32);
  CHECK(gexec::same_dtype(gexec::load_npy(bf16, gexec::dtypes::int16).dtype(), gexec::dtypes::int16));
  // A typed descr must be the dtype expected.
  const std::string f16 = file_bytes(data_dir / "f16.npy");
  check_refused(f16, gexec::errc::dtype_mismatch, "descr '<f2' is float16, not the expected bfloat16",
                gexec::dtypes::bfloat16);
  check_refused(npy(dict("|V1", "(2,)"), "ab"), gexec::errc::dtype_mismatch, "not int16", gexec::dtypes::int16);
  auto e = error_of([&] { gexec::load_npy(bf16, DLDataType{kDLFloat, 32, 4}); });
  CHECK(e.code() == gexec::errc::invalid_argument);
  CHECK(gexec::load_npy(npy(dict("|V1", "(3,)"), "xyz"), gexec::dtypes::uint4).numel() == 3);
  // ml_dtypes writes float8_e5m2 as '<f1' (which np.load refuses): gexec reads it as e5m2.
  auto e5m2 = gexec::load_npy(npy(dict("<f1", "(2,)"), "\x3c\xbc"));
  CHECK(gexec::same_dtype(e5m2.dtype(), DLDataType{gexec::tvm_float8_e5m2_code, 8, 1}));
  check_refused(npy(dict("<f1", "(2,)"), "\x3c\xbc"), gexec::errc::dtype_mismatch,
                "is e5m2_float8, not the expected int8", gexec::dtypes::int8);
}

TEST_CASE("big-endian descrs are byte-swapped into the host's order") {
  const std::string i8 =
      std::string("\x80\x00\x00\x00\x00\x00\x00\x01", 8) + std::string("\xff\xff\xff\xff\xff\xff\xff\xfe", 8);
  CHECK(values_of<std::int64_t>(gexec::load_npy(npy(dict(">i8", "(2,)"), i8))) ==
        std::vector<std::int64_t>{INT64_MIN + 1, -2});
  CHECK(values_of<std::uint16_t>(gexec::load_npy(npy(dict(">u2", "(1, 2)"), "\x12\x34\xab\xcd"))) ==
        std::vector<std::uint16_t>{0x1234, 0xABCD});
  CHECK(values_of<double>(gexec::load_npy(npy(dict(">f8", "()"), std::string("\x3f\xf8\0\0\0\0\0\0", 8)))) ==
        std::vector<double>{1.5});
  // One-byte elements have no order; a big-endian void as a 2-byte dtype is swapped too.
  CHECK(values_of<std::int8_t>(gexec::load_npy(npy(dict(">i1", "(1,)"), "\xff"))) == std::vector<std::int8_t>{-1});
  CHECK(bits16_of(gexec::load_npy(npy(dict(">V2", "(1,)"), "\x3f\x80"), gexec::dtypes::bfloat16)) ==
        std::vector<std::uint16_t>{0x3F80});
}

TEST_CASE("headers written other ways numpy reads them") {
  const std::string two = raw<std::int32_t>({3, -4});
  for (const std::string& header : {
           std::string("{'descr':'<i4','fortran_order':False,'shape':(2,)}"),
           std::string("{\"shape\": (2,), \"descr\": \"<i4\", \"fortran_order\": False}"),
           std::string("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }          \n"),
           std::string("\t{ 'fortran_order' : False ,\n 'shape' : ( 2 , ) ,\r\n 'descr' : '<i4' , }\n\n"),
           std::string("{'descr': '=i4', 'fortran_order': False, 'shape': (2,)}"),
           std::string("{'descr': '|i4', 'fortran_order': False, 'shape': (2L,)}"),  // Python 2's long
           std::string("{'descr': '<i4', 'fortran_order': False, 'shape': (1, 2,), }"),
       }) {
    CAPTURE(header);
    auto a = gexec::load_npy(npy(header, two));
    CHECK(values_of<std::int32_t>(a) == std::vector<std::int32_t>{3, -4});
    CHECK(a.numel() == 2);
    CHECK(values_of<std::int32_t>(gexec::load_npy(npy(header, two, 2))) == std::vector<std::int32_t>{3, -4});
  }
  CHECK(gexec::load_npy(npy(dict("<i1", "()"), "\x05")).ndim() == 0);
  CHECK(gexec::load_npy(npy(dict("<u8", "(0, 7)"))).byte_size() == 0);
  CHECK(gexec::load_npy(npy(dict("<i4", "(0,)", "False"))).numel() == 0);
  check_refused(npy("{'descr': '<i4', 'fortran_order': False, 'shape': (2L,)}", two, 3), gexec::errc::invalid_npy,
                "dimension 0 of 'shape' is not an integer");
}

TEST_CASE("malformed files: a gexec::error naming what and where") {
  using gexec::errc;
  const std::string four = raw<float>({1, 2, 3, 4});
  SUBCASE("the preamble") {
    check_refused("", errc::invalid_npy, "npy: preamble: truncated: magic string needs 6 bytes, 0 left (at byte 0)");
    check_refused("\x93NUM", errc::invalid_npy, "truncated: magic string needs 6 bytes, 4 left (at byte 0)");
    check_refused("PK\x03\x04 a zip file, perhaps", errc::invalid_npy, "not a .npy file");
    check_refused(std::string("\x93NUMPY\x01", 7), errc::invalid_npy, "truncated: format version");
    check_refused(std::string("\x93NUMPY\x04\x00\x00\x00", 10), errc::invalid_npy,
                  "format version 4.0; gexec reads 1.0, 2.0 and 3.0 (at byte 6)");
    check_refused(std::string("\x93NUMPY\x01\x01\x00\x00", 10), errc::invalid_npy, "format version 1.1");
    check_refused(std::string("\x93NUMPY\x02\x00\x01\x00", 10), errc::invalid_npy, "truncated: header length");
    check_refused(npy(dict("<f4", "(4,)")).substr(0, 40), errc::invalid_npy,
                  "npy: header: truncated: header needs 58 bytes, 30 left (at byte 10)");
    std::string huge = npy("{}", "", 2);
    huge[8] = huge[9] = huge[10] = huge[11] = '\xff';
    check_refused(huge, errc::invalid_npy, "header needs 4294967295 bytes");
  }
  SUBCASE("the dict") {
    check_refused(npy("['descr', '<f4']", four), errc::invalid_npy,
                  "the header is not a Python dict: it starts with '[' (at byte 10)");
    check_refused(npy("{'descr': '<f4', 'fortran_order': False}", four), errc::invalid_npy,
                  "the header has no key 'shape'");
    check_refused(npy("{'descr': '<f4', 'shape': (4,)}", four), errc::invalid_npy, "no key 'fortran_order'");
    check_refused(npy("{'fortran_order': False, 'shape': (4,)}", four), errc::invalid_npy, "no key 'descr'");
    check_refused(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), 'order': 'C'}", four), errc::invalid_npy,
                  "unknown key 'order' (a .npy header has 'descr', 'fortran_order' and 'shape') (at byte 66)");
    check_refused(npy("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (4,)}", four),
                  errc::invalid_npy, "duplicate key 'descr' (at byte 27)");
    check_refused(npy("{'descr': '<f4' 'fortran_order': False, 'shape': (4,)}", four), errc::invalid_npy,
                  "expected ',' or '}' after the value of 'descr', found ''' (at byte 26)");
    check_refused(npy("{descr: '<f4'}", four), errc::invalid_npy, "expected a quoted key, found 'd'");
    check_refused(npy("{'descr' '<f4'}", four), errc::invalid_npy, "expected ':' after key 'descr'");
    check_refused(npy("{'descr': '<f4\\x00', }", four), errc::invalid_npy, "escape sequences");
    check_refused(npy("{'descr': '<f4, 'shape': (4,)}", four), errc::invalid_npy,
                  "expected ',' or '}' after the value of 'descr', found 's'");
    check_refused(npy("{'descr': '<f4", four), errc::invalid_npy, "unterminated string (at byte 20)");
    check_refused(npy(dict("<f4", "(4,)") + "x", four), errc::invalid_npy, "unexpected 'x' after the header's dict");
    check_refused(npy(dict("<f4", "(4,)") + std::string(1, '\0'), four), errc::invalid_npy, "unexpected '\\x00'");
    check_refused(npy("{'descr': '<f4', 'fortran_order': false, 'shape': (4,)}", four), errc::invalid_npy,
                  "'fortran_order' must be True or False, found 'false'");
    check_refused(npy("{'descr': '<f4', 'fortran_order': 0, 'shape': (4,)}", four), errc::invalid_npy, "found '0'");
    check_refused(npy("{", four), errc::invalid_npy, "expected a quoted key, found the end of the header");
    check_refused(npy("{'descr': '\xc3\xa9', 'fortran_order': False, 'shape': (4,)}", four, 3), errc::invalid_dtype,
                  "descr '\\xc3\\xa9' is not a dtype as numpy writes it");
  }
  SUBCASE("the shape") {
    check_refused(npy(dict("<f4", "(4)")), errc::invalid_npy,
                  "'shape' (4) is a number, not a tuple: a 1-D shape is written (4,)");
    check_refused(npy(dict("<f4", "[4]")), errc::invalid_npy, "'shape' must be a tuple such as (2, 3), found '['");
    check_refused(npy(dict("<f4", "(2, -3)")), errc::invalid_npy,
                  "dimension 1 of 'shape' is negative: -3 (at byte 64)");
    check_refused(npy(dict("<f4", "(,)")), errc::invalid_npy,
                  "expected dimension 0 of 'shape' (an integer), found ','");
    check_refused(npy(dict("<f4", "(2 3)")), errc::invalid_npy, "expected ',' or ')' in 'shape', found '3'");
    check_refused(npy(dict("<f4", "(2.0,)")), errc::invalid_npy, "dimension 0 of 'shape' is not an integer");
    check_refused(npy(dict("<f4", "(0x10,)")), errc::invalid_npy, "dimension 0 of 'shape' is not an integer");
    check_refused(npy(dict("<f4", "(04,)")), errc::invalid_npy, "dimension 0 of 'shape' has leading zeros");
    check_refused(npy(dict("<f4", "(1, 99999999999999999999)")), errc::invalid_npy,
                  "dimension 1 of 'shape' ('99999999999999999999') exceeds 2^63-1");
    check_refused(npy(dict("<f4", "(9223372036854775808,)")), errc::invalid_npy, "exceeds 2^63-1");
    check_refused(npy(dict("|u1", "(9223372036854775807, 2)")), errc::invalid_npy,
                  "'shape': shape [9223372036854775807, 2] of uint8 needs more than 2^63-1 bytes (at byte 60)");
    check_refused(npy(dict("<f8", "(4611686018427387904,)")), errc::invalid_npy, "needs more than 2^63-1 bytes");
    std::string many = "(";
    for (int i = 0; i < 65; ++i) many += "1, ";
    check_refused(npy(dict("<f4", many + ")")), errc::invalid_npy, "'shape' has more than 64 dimensions");
  }
  SUBCASE("the data") {
    check_refused(npy(dict("<f4", "(4,)"), four.substr(0, 15)), errc::invalid_npy,
                  "npy: array data: truncated: shape [4] of float32 needs 16 bytes, 15 left (at byte 68)");
    check_refused(npy(dict("<f4", "(1000000000000, 1000000)"), four), errc::invalid_npy,
                  "needs 4000000000000000000 bytes, 16 left");
    check_refused(npy(dict("<f4", "(4,)"), four + "x"), errc::invalid_npy,
                  "1 byte after the array data (shape [4] of float32); a .npy file holds one array (at byte 84)");
    check_refused(npy(dict("<f4", "(1,)"), four), errc::invalid_npy, "12 bytes after the array data");
    // A second array saved into the same file.
    const std::string one = npy(dict("<f4", "(4,)"), four);
    check_refused(one + one, errc::invalid_npy, "84 bytes after the array data");
  }
  SUBCASE("what gexec does not read") {
    check_refused(npy(dict("<f4", "(2, 2)", "True"), four), errc::unsupported,
                  "header: 'fortran_order': the array is in Fortran (column-major) order; gexec reads C order only");
    check_refused(npy(dict("|O", "(2,)"), four), errc::unsupported, "object array");
    check_refused(npy("{'descr': [('x', '<f4'), ('y', '<i4')], 'fortran_order': False, 'shape': (2,), }", four),
                  errc::unsupported, "'descr' is a list of fields (a structured dtype)");
    check_refused(npy(dict("<c8", "(2,)"), four), errc::invalid_dtype, "descr '<c8' (complex) has no gexec dtype");
    check_refused(npy(dict("<U2", "(2,)"), four), errc::invalid_dtype, "(unicode string)");
    check_refused(npy(dict("|S4", "(4,)"), four), errc::invalid_dtype, "(byte string)");
    check_refused(npy(dict("<M8[ns]", "(2,)"), four), errc::invalid_dtype, "(datetime)");
    check_refused(npy(dict("<f16", "(1,)"), four), errc::invalid_dtype, "descr '<f16' has no gexec dtype");
    check_refused(npy(dict("<i3", "(1,)"), four), errc::invalid_dtype, "descr '<i3' has no gexec dtype");
    check_refused(npy(dict("|b2", "(1,)"), four), errc::invalid_dtype, "descr '|b2' has no gexec dtype");
    check_refused(npy(dict("f4", "(4,)"), four), errc::invalid_dtype, "descr 'f4' is not a dtype as numpy writes it");
    check_refused(npy(dict("<f04", "(4,)"), four), errc::invalid_dtype, "is not a dtype as numpy writes it");
    check_refused(npy(dict("<V0", "(4,)"), four), errc::invalid_dtype, "is not a dtype as numpy writes it");
    check_refused(npy(dict("float32", "(4,)"), four), errc::invalid_dtype, "descr 'float32' is not a dtype");
  }
  SUBCASE("every prefix of a good file is refused, as invalid_npy") {
    const std::string good = file_bytes(data_dir / "cube_i8.npy");
    for (std::size_t n = 0; n < good.size(); ++n) {
      CAPTURE(n);
      CHECK(error_of([&] { gexec::load_npy(good.substr(0, n)); }).code() == errc::invalid_npy);
    }
  }
}

TEST_CASE("load_npy_file: the path in messages; regular files only") {
  temp_dir dir("load");
  const auto e = error_of([&] { gexec::load_npy_file(dir.path / "missing.npy"); });
  CHECK(e.code() == gexec::errc::io);
  CHECK(std::string(e.what()).find("missing.npy") != std::string::npos);
  CHECK(error_of([&] { gexec::load_npy_file(dir.path); }).code() == gexec::errc::io);

  const auto path = dir.path / "trailing.npy";
  std::ofstream(path, std::ios::binary) << file_bytes(data_dir / "u16.npy") << "junk";
  const auto t = error_of([&] { gexec::load_npy_file(path); });
  CHECK(t.code() == gexec::errc::invalid_npy);
  CHECK(std::string(t.what()).find("npy " + path.string() + ": array data: 4 bytes after the array data") !=
        std::string::npos);
  const auto v = error_of([&] { gexec::load_npy_file(data_dir / "bf16.npy", gexec::dtypes::float32); });
  CHECK(v.code() == gexec::errc::dtype_mismatch);
  CHECK(std::string(v.what()).find("bf16.npy: header: 'descr'") != std::string::npos);

  // Larger than the reader's buffer: the data is read straight into the tensor.
  auto big = gexec::ndarray::empty({3, 50000}, gexec::dtypes::float32);
  auto values = big.values<float>();
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.5f;
  gexec::save_npy_file(dir.path / "big.npy", big);
  auto back = gexec::load_npy_file(dir.path / "big.npy");
  CHECK(shape_of(back) == std::vector<std::int64_t>{3, 50000});
  CHECK(std::memcmp(back.data(), big.data(), big.byte_size()) == 0);
}

TEST_CASE("save_npy_file writes the whole file or leaves the old one") {
  temp_dir dir("save");
  const auto path = dir.path / "a.npy";
  auto a = gexec::ndarray::from_values<std::int16_t>({3}, {1, -2, 3});
  gexec::save_npy_file(path, a);
  CHECK(file_bytes(path) == gexec::save_npy(a));
  CHECK(dir.entries() == 1);

  auto b = gexec::ndarray::from_values<double>({2, 1}, {0.5, 8});
  gexec::save_npy_file(path, b);
  CHECK(values_of<double>(gexec::load_npy_file(path)) == std::vector<double>{0.5, 8});
  CHECK(dir.entries() == 1);

  // A tensor save_npy refuses leaves the file as it was.
  std::int64_t shape[] = {2}, strides[] = {2};
  double storage[4] = {};
  DLTensor strided{storage, gexec::cpu(), 1, gexec::dtypes::float64, shape, strides, 0};
  CHECK(error_of([&] { gexec::save_npy_file(path, gexec::ndarray::view(strided, nullptr)); }).code() ==
        gexec::errc::invalid_argument);
  CHECK(values_of<double>(gexec::load_npy_file(path)) == std::vector<double>{0.5, 8});

  const auto missing = error_of([&] { gexec::save_npy_file(dir.path / "no" / "such" / "dir.npy", a); });
  CHECK(missing.code() == gexec::errc::io);
  CHECK(std::string(missing.what()).find("dir.npy") != std::string::npos);
  std::filesystem::create_directory(dir.path / "sub");
  CHECK(error_of([&] { gexec::save_npy_file(dir.path / "sub", a); }).code() == gexec::errc::io);
  CHECK(dir.entries() == 2);  // a.npy and sub: no temporary file left behind
  CHECK(std::filesystem::is_empty(dir.path / "sub"));
}

TEST_CASE("save_npy refuses what .npy cannot hold") {
  auto check = [](const gexec::ndarray& a, gexec::errc code, const std::string& part) {
    const auto e = error_of([&] { (void)gexec::save_npy(a); });
    const std::string what = e.what();
    CAPTURE(what);
    CHECK(e.code() == code);
    CHECK(std::string(e.what()).find(part) != std::string::npos);
  };
  check(gexec::ndarray(), gexec::errc::invalid_argument, "undefined");
  std::int64_t shape[] = {2, 2}, strides[] = {1, 2};
  float storage[4] = {};
  DLTensor t{storage, DLDevice{kDLCUDA, 0}, 2, gexec::dtypes::float32, shape, nullptr, 0};
  check(gexec::ndarray::view(t, nullptr), gexec::errc::device_mismatch, "copy it to the host first");
  t.device = gexec::cpu();
  t.strides = strides;
  check(gexec::ndarray::view(t, nullptr), gexec::errc::invalid_argument, "strided");
  t.strides = nullptr;
  t.dtype = DLDataType{kDLFloat, 32, 4};
  check(gexec::ndarray::view(t, nullptr), gexec::errc::unsupported, "float32x4 has lanes");
  t.dtype = DLDataType{kDLFloat, 8, 1};
  check(gexec::ndarray::view(t, nullptr), gexec::errc::unsupported, "has no .npy descr");
  // A compact view with a byte offset writes the elements it views.
  t.dtype = gexec::dtypes::float32;
  storage[1] = 7;
  t.byte_offset = 4;
  std::int64_t one[] = {1};
  t.shape = one;
  t.ndim = 1;
  CHECK(values_of<float>(gexec::load_npy(gexec::save_npy(gexec::ndarray::view(t, nullptr)))) == std::vector<float>{7});
}

TEST_CASE("npy_names::bits writes bfloat16 and float8 as their bits, which plain numpy reads as TVM's Python holds them") {
  auto bf = gexec::ndarray::empty({3}, gexec::dtypes::bfloat16);
  const std::uint16_t bits[3] = {0x3FC0, 0xC000, 0x3E80};  // 1.5, -2, 0.25
  std::memcpy(bf.data(), bits, sizeof bits);
  const std::string as_bits = gexec::save_npy(bf, gexec::npy_names::bits);
  CHECK(as_bits.find("'descr': '<u2'") != std::string::npos);
  const gexec::ndarray back = gexec::load_npy(gexec::detail::as_bytes(as_bits));
  CHECK(gexec::same_dtype(back.dtype(), gexec::dtypes::uint16));
  CHECK(std::memcmp(back.data(), bits, sizeof bits) == 0);
  CHECK(gexec::save_npy(bf).find("'descr': '<V2'") != std::string::npos);  // ml_dtypes' name, as before
  for (const std::uint8_t code : {gexec::tvm_float8_e4m3_code, gexec::tvm_float8_e5m2_code}) {
    auto f8 = gexec::ndarray::empty({2}, {code, 8, 1});
    static_cast<std::uint8_t*>(f8.data())[0] = 0x38;
    static_cast<std::uint8_t*>(f8.data())[1] = 0xC0;
    const gexec::ndarray b = gexec::load_npy(gexec::detail::as_bytes(gexec::save_npy(f8, gexec::npy_names::bits)));
    CHECK(gexec::same_dtype(b.dtype(), gexec::dtypes::uint8));
    CHECK(static_cast<const std::uint8_t*>(b.data())[1] == 0xC0);
  }
  // Other dtypes are named as ever.
  CHECK(gexec::save_npy(gexec::ndarray::empty({1}, gexec::dtypes::float32), gexec::npy_names::bits).find("'<f4'") != std::string::npos);
}
