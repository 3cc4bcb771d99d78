#include <gexec/dtype.hpp>

#include <doctest/doctest.h>

#include <string>

TEST_CASE("every dtype TVM writes parses to its DLPack code, bits and lanes and prints back") {
  struct row {
    const char* text;
    std::uint8_t code, bits;
    std::uint16_t lanes;
  };
  const row rows[] = {
      {"float16", kDLFloat, 16, 1}, {"float32", kDLFloat, 32, 1}, {"float64", kDLFloat, 64, 1},
      {"bfloat16", kDLBfloat, 16, 1}, {"int8", kDLInt, 8, 1},       {"int16", kDLInt, 16, 1},
      {"int32", kDLInt, 32, 1},     {"int64", kDLInt, 64, 1},       {"uint8", kDLUInt, 8, 1},
      {"uint16", kDLUInt, 16, 1},   {"uint32", kDLUInt, 32, 1},     {"uint64", kDLUInt, 64, 1},
      {"bool", kDLUInt, 1, 1},      {"int4", kDLInt, 4, 1},         {"uint4", kDLUInt, 4, 1},
      {"float32x4", kDLFloat, 32, 4}, {"int8x16", kDLInt, 8, 16},
      {"e4m3_float8", 6, 8, 1},     {"e5m2_float8", 7, 8, 1},
  };
  for (const row& r : rows) {
    CAPTURE(r.text);
    DLDataType t = gexec::parse_dtype(r.text);
    CHECK(t.code == r.code);
    CHECK(t.bits == r.bits);
    CHECK(t.lanes == r.lanes);
    CHECK(gexec::to_string(t) == r.text);
  }
}

TEST_CASE("unknown dtype strings are errors naming the string") {
  for (const char* bad : {"", "float", "float31", "int3", "float32x", "float32x0", "complex64", "handle", "bfloat32",
                          "int32 ", "Float32", "uint8x70000", "int999"}) {
    CAPTURE(bad);
    CHECK_FALSE(gexec::try_parse_dtype(bad).has_value());
    try {
      (void)gexec::parse_dtype(bad);
      FAIL("no error");
    } catch (const gexec::error& e) {
      CHECK(e.code() == gexec::errc::invalid_dtype);
      CHECK(std::string(e.what()).find(std::string("\"") + bad + "\"") != std::string::npos);
    }
  }
}

TEST_CASE("element sizes round sub-byte types up to a whole byte, as TVM stores them") {
  CHECK(gexec::element_bytes(gexec::dtypes::boolean) == 1);
  CHECK(gexec::element_bytes(gexec::dtypes::int4) == 1);
  CHECK(gexec::element_bytes(gexec::dtypes::float16) == 2);
  CHECK(gexec::element_bytes(gexec::parse_dtype("float32x4")) == 16);
  CHECK(gexec::same_dtype(gexec::dtype_of<float>(), gexec::dtypes::float32));
  CHECK(gexec::same_dtype(gexec::dtype_of<std::int32_t>(), gexec::dtypes::int32));
  CHECK(gexec::same_dtype(gexec::dtype_of<std::uint8_t>(), gexec::dtypes::uint8));
  CHECK(gexec::same_dtype(gexec::dtype_of<bool>(), gexec::dtypes::boolean));
}

TEST_CASE("dtypes gexec does not store are still named as users know them in messages") {
  CHECK(gexec::to_string({kDLComplex, 128, 1}) == "complex128");
  CHECK(gexec::to_string({kDLComplex, 64, 1}) == "complex64");
  CHECK(gexec::to_string({kDLOpaqueHandle, 64, 1}) == "handle64");
  CHECK(gexec::to_string({42, 8, 1}) == "code42_8");  // a code nobody defines: its number
  CHECK_FALSE(gexec::is_supported({kDLComplex, 128, 1}));
}
