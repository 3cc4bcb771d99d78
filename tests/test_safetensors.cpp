// .safetensors files: read from bytes laid out here by hand as the format describes them,
// written and read back, converted to TVM's blob and back bit for bit, and every malformed
// header refused with the file offset at fault. (Files written by the `safetensors`
// package from PyPI are read in the Python tests.)

#include <gexec/params.hpp>

#include "test_support.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace test;

namespace {

/// A .safetensors file: the 8-byte length, `header` as given, then `data`.
std::vector<std::byte> file_of(const std::string& header, const std::vector<std::byte>& data) {
  std::vector<std::byte> out(8 + header.size());
  const std::uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, header.data(), header.size());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

template <class T>
std::vector<std::byte> bytes_of(const std::vector<T>& v) {
  std::vector<std::byte> out(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(out.data(), v.data(), out.size());
  return out;
}

std::vector<std::byte> concat(std::vector<std::byte> a, const std::vector<std::byte>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::string message_of(const std::vector<std::byte>& file) {
  const gexec::error e = error_of([&] { (void)gexec::load_param_dict(std::span<const std::byte>(file)); });
  CHECK(e.code() == gexec::errc::invalid_params);
  return e.what();
}

fs::path scratch_file(const std::string& name) { return fs::temp_directory_path() / ("gexec_safetensors_" + name); }

void write_file(const fs::path& p, const std::vector<std::byte>& bytes) {
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

TEST_CASE("a file laid out by hand loads in the header's order, with dtypes, shapes and values") {
  const std::vector<float> w = {1.5f, -2, 0.25f, 8, 9, -0.5f};
  const std::vector<std::int64_t> ids = {7, -3};
  const std::vector<std::uint8_t> flags = {1, 0, 1};
  // "w" comes first in the header though its data comes second.
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2,3],"data_offsets":[16,40]},)"
      R"("ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]},"flags":{"dtype":"BOOL","shape":[3],"data_offsets":[40,43]}})";
  const auto file = file_of(header, concat(concat(bytes_of(ids), bytes_of(w)), bytes_of(flags)));
  const gexec::param_dict d = gexec::load_param_dict(std::span<const std::byte>(file));
  REQUIRE(d.size() == 3);
  std::vector<std::string> names;
  for (const auto& [name, a] : d) names.push_back(name);
  CHECK(names == std::vector<std::string>{"w", "ids", "flags"});
  CHECK(values_of(d.at("w")) == w);
  CHECK(d.at("w").shape().size() == 2);
  CHECK(gexec::same_dtype(d.at("ids").dtype(), gexec::dtypes::int64));
  CHECK(std::memcmp(d.at("ids").data(), ids.data(), 16) == 0);
  CHECK(gexec::same_dtype(d.at("flags").dtype(), gexec::dtypes::boolean));
  CHECK(std::memcmp(d.at("flags").data(), flags.data(), 3) == 0);
}

TEST_CASE("save_safetensors: the layout the format describes, data aligned, read back equal; TVM's blob and back bit for bit") {
  gexec::param_dict d;
  d.set("byte", gexec::ndarray::from_values<std::uint8_t>({3}, std::vector<std::uint8_t>{1, 2, 3}));
  d.set("weight \"q\"", tensor({2, 2}, {1, 2, 3, 4}));
  d.set("half", gexec::ndarray::from_values<std::uint16_t>({2}, std::vector<std::uint16_t>{0x3c00, 0xc000}));
  {
    auto bf = gexec::ndarray::empty({2}, gexec::parse_dtype("bfloat16"));
    const std::uint16_t bits[2] = {0x3f80, 0x4000};
    std::memcpy(bf.data(), bits, 4);
    d.set("bf", bf);
  }
  d.set("scalar", gexec::ndarray::from_values<double>({}, std::vector<double>{2.5}));
  d.set("empty", tensor({0, 4}, {}));
  const std::vector<std::byte> file = gexec::save_safetensors(d);
  std::uint64_t n = 0;
  std::memcpy(&n, file.data(), 8);
  CHECK((8 + n) % 8 == 0);
  const std::string header(reinterpret_cast<const char*>(file.data()) + 8, n);
  // the header in the dict's order, the data largest elements first (stable): scalar, weight, empty, half, bf, byte
  CHECK(header.find(R"("byte":{"dtype":"U8","shape":[3],"data_offsets":[32,35]})") == 1);
  CHECK(header.find(R"("weight \"q\"":{"dtype":"F32","shape":[2,2],"data_offsets":[8,24]})") != std::string::npos);
  CHECK(header.find(R"("scalar":{"dtype":"F64","shape":[],"data_offsets":[0,8]})") != std::string::npos);
  CHECK(header.find(R"("half":{"dtype":"U16","shape":[2],"data_offsets":[24,28]})") != std::string::npos);
  CHECK(header.find(R"("bf":{"dtype":"BF16","shape":[2],"data_offsets":[28,32]})") != std::string::npos);
  CHECK(header.find(R"("empty":{"dtype":"F32","shape":[0,4],"data_offsets":[24,24]})") != std::string::npos);
  CHECK(file.size() == 8 + n + 35);

  const gexec::param_dict back = gexec::load_param_dict(std::span<const std::byte>(file));
  REQUIRE(back.size() == d.size());
  auto it = back.begin();
  for (const auto& [name, a] : d) {
    CHECK(it->first == name);
    CHECK(gexec::same_dtype(it->second.dtype(), a.dtype()));
    CHECK(std::equal(a.shape().begin(), a.shape().end(), it->second.shape().begin(), it->second.shape().end()));
    CHECK(std::memcmp(a.data(), it->second.data(), a.byte_size()) == 0);
    ++it;
  }
  // TVM blob -> safetensors -> TVM blob: the same bytes
  const std::vector<std::byte> blob = gexec::save_param_dict(d);
  CHECK(gexec::save_param_dict(gexec::load_param_dict(std::span<const std::byte>(gexec::save_safetensors(gexec::load_param_dict(std::span<const std::byte>(blob)))))) == blob);
  // safetensors -> TVM blob -> safetensors: the same bytes
  CHECK(gexec::save_safetensors(gexec::load_param_dict(std::span<const std::byte>(gexec::save_param_dict(back)))) == file);

  // files: by copy and by mmap, where every tensor maps without a copy
  const fs::path p = scratch_file("roundtrip.safetensors");
  gexec::save_safetensors_file(d, p);
  const gexec::param_dict copied = gexec::load_param_dict_file(p);
  CHECK(gexec::save_safetensors(copied) == file);
  {
    const gexec::param_dict mapped = gexec::load_param_dict_file(p, gexec::load_mode::mmap);
    for (const auto& item : mapped)  // (clang 14 does not capture structured bindings in doctest's lambdas)
      if (item.second.byte_size()) CHECK_MESSAGE(mapped.is_mapped(item.second), item.first);
    CHECK(gexec::save_safetensors(mapped) == file);
  }
  fs::remove(p);

  auto int4 = gexec::ndarray::empty({2}, gexec::parse_dtype("int4"));
  gexec::param_dict bad;
  bad.set("nibbles", int4);
  CHECK(contains(error_of([&] { (void)gexec::save_safetensors(bad); }), "tensor \"nibbles\" is int4, which the .safetensors format has no dtype for"));
}

TEST_CASE("malformed files are refused with the offset at fault") {
  const auto data = bytes_of(std::vector<float>{1, 2, 3, 4});
  auto one = [&](const std::string& tensor_fields) { return file_of(R"({"t":{)" + tensor_fields + "}}", data); };
  CHECK_NOTHROW((void)gexec::load_param_dict(std::span<const std::byte>(one(R"("dtype":"F32","shape":[4],"data_offsets":[0,16])"))));

  // the length: past the end of the file, named at byte 0, in memory and in a file
  std::vector<std::byte> too_long = one(R"("dtype":"F32","shape":[4],"data_offsets":[0,16])");
  too_long[5] = std::byte{1};
  CHECK(message_of(too_long).find("at byte 0: header length " + std::to_string((std::uint64_t{1} << 40) + 55) + " runs past the end of the file (79 bytes)") !=
        std::string::npos);
  const fs::path p = scratch_file("long.safetensors");
  write_file(p, too_long);
  const gexec::error e = error_of([&] { (void)gexec::load_param_dict_file(p); });
  CHECK(e.code() == gexec::errc::invalid_params);
  CHECK(contains(e, "safetensors " + p.string() + ": at byte 0: header length"));
  fs::remove(p);

  // the JSON: malformed at a known byte
  const std::string bad_json = R"({"t":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},,})";
  CHECK(message_of(file_of(bad_json, data)).find("at byte " + std::to_string(8 + bad_json.find(",,") + 1) + ": malformed JSON header") !=
        std::string::npos);
  CHECK(message_of(file_of("{\"t\":[1,2]}", data)).find("at byte 9: tensor \"t\" is not an object") != std::string::npos);

  // dtypes, shapes, fields
  CHECK(message_of(one(R"("dtype":"C64","shape":[2],"data_offsets":[0,16])")).find("at byte 9: tensor \"t\": dtype \"C64\" is not one gexec stores") !=
        std::string::npos);
  CHECK(message_of(one(R"("dtype":"F32","shape":[-4],"data_offsets":[0,16])")).find("shape [-4] is not a list of sizes") != std::string::npos);
  CHECK(message_of(one(R"("dtype":"F32","shape":[4],"data_offsets":[0,16],"x":1)")).find("unknown field \"x\"") != std::string::npos);
  CHECK(message_of(one(R"("dtype":"F32","shape":[4])")).find("lacks data_offsets") != std::string::npos);

  // offsets: out of range, disagreeing with the shape, overlapping, leaving holes
  const std::string header_20 = R"({"t":{"dtype":"F32","shape":[5],"data_offsets":[0,20]}})";
  CHECK(message_of(file_of(header_20, data)).find("at byte " + std::to_string(8 + header_20.size()) +
                                                  ": tensor \"t\": data_offsets [0, 20] run past the end of the data (16 bytes)") != std::string::npos);
  const std::string header_3 = R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[4,16]}})";
  CHECK(message_of(file_of(header_3, data)).find("at byte " + std::to_string(8 + header_3.size() + 4) +
                                                 ": tensor \"t\": data_offsets [4, 16] hold 12 bytes, its shape [3] of float32 needs 12") ==
        std::string::npos);  // 12 == 12: that one is fine, and the hole before it is the fault
  CHECK(message_of(file_of(header_3, data)).find("at byte " + std::to_string(8 + header_3.size()) + ": data bytes 0 to 4 belong to no tensor") !=
        std::string::npos);
  const std::string overlap = R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})";
  CHECK(message_of(file_of(overlap, data)).find("at byte " + std::to_string(8 + overlap.size() + 8) +
                                                ": tensor \"b\" (data bytes 8 to 16) overlaps tensor \"a\" (data bytes 0 to 12)") != std::string::npos);
  const std::string wrong_size = R"({"t":{"dtype":"F16","shape":[4],"data_offsets":[0,16]}})";
  CHECK(message_of(file_of(wrong_size, data)).find("hold 16 bytes, its shape [4] of float16 needs 8") != std::string::npos);
  const std::string tail = R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  CHECK(message_of(file_of(tail, data)).find("at byte " + std::to_string(8 + tail.size() + 8) + ": data bytes 8 to 16 belong to no tensor") !=
        std::string::npos);
}

TEST_CASE("a tensor named twice is refused, also when one spelling escapes it; a field named twice too") {
  const auto data = bytes_of(std::vector<float>{1, 2, 3, 4});
  const std::string twice = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})";
  CHECK(message_of(file_of(twice, data)).find("\"a\" is given twice") != std::string::npos);
  const std::string escaped = R"({"ab":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"\u0061b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})";
  CHECK(message_of(file_of(escaped, data)).find("\"ab\" is given twice") != std::string::npos);
  const std::string field = R"({"t":{"dtype":"F32","dtype":"F16","shape":[4],"data_offsets":[0,16]}})";
  CHECK(message_of(file_of(field, data)).find("\"t.dtype\" is given twice") != std::string::npos);
}

TEST_CASE("save_safetensors refuses what its reader refuses: names that are not UTF-8, \"__metadata__\", a name twice") {
  auto dict_of = [](std::vector<std::string> names) {
    std::vector<std::pair<std::string, gexec::ndarray>> d;
    for (auto& n : names) d.emplace_back(std::move(n), gexec::ndarray::empty({2}, gexec::dtype_of<float>()));
    return d;
  };
  CHECK(contains(error_of([&] { (void)gexec::save_safetensors(dict_of({"ok", "bad\xff"})); }), "tensor name \"bad\xff\" is not UTF-8"));
  CHECK(contains(error_of([&] { (void)gexec::save_safetensors(dict_of({"\xc0\xaf"})); }), "is not UTF-8"));  // an overlong '/'
  CHECK(contains(error_of([&] { (void)gexec::save_safetensors(dict_of({"__metadata__"})); }), "cannot be named \"__metadata__\""));
  CHECK(contains(error_of([&] { (void)gexec::save_safetensors(dict_of({"w", "b", "w"})); }), "two tensors are named \"w\""));
  CHECK(error_of([&] { (void)gexec::save_safetensors(dict_of({"__metadata__"})); }).code() == gexec::errc::invalid_argument);
  // Names the format takes are written and read back as they were: UTF-8, quotes, controls.
  const auto fine = dict_of({"caf\xc3\xa9", "q\"uote", "tab\there", "", "\xf0\x9f\x98\x80"});
  const auto file = gexec::save_safetensors(fine);
  const gexec::param_dict back = gexec::load_param_dict(std::span<const std::byte>(file));
  REQUIRE(back.size() == fine.size());
  std::size_t i = 0;
  for (const auto& [name, value] : back) CHECK(name == fine[i++].first);
}

TEST_CASE("the header is read as strict JSON without Boost: where it stops being JSON, and what it holds, are named") {
  const auto data = bytes_of(std::vector<float>{1, 2, 3, 4});
  auto one = [&](const std::string& tensor_fields) { return file_of(R"({"t":{)" + tensor_fields + "}}", data); };
  const std::string good = R"({"t":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})";
  for (std::size_t n = 2; n < good.size(); ++n) {  // a one-byte header is refused by its length
    const std::string message = message_of(file_of(good.substr(0, n), data));
    CAPTURE(message);
    CHECK(message.find("malformed JSON header") != std::string::npos);
  }
  CHECK(message_of(file_of(good + "x", data)).find("at byte " + std::to_string(8 + good.size()) + ": malformed JSON header (extra data)") !=
        std::string::npos);
  CHECK(message_of(file_of("{\"a\":" + std::string(40, '[') + std::string(40, ']') + "}", data)).find("too deep") != std::string::npos);
  CHECK(message_of(one(R"("dtype":"F32","shape":[4.0],"data_offsets":[0,16])")).find("shape [4.0] is not a list of sizes") != std::string::npos);
  CHECK(message_of(one(R"("dtype":"F32","shape":[4],"data_offsets":[-0,16e0])")).find("data_offsets [0,16e0] is not [begin, end]") !=
        std::string::npos);
  const std::string in_array = R"({"__metadata__":{"a":"x"},"t":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"u":[{"k":1,"k":2}]})";
  CHECK(message_of(file_of(in_array, data)).find("\"u[0].k\" is given twice") != std::string::npos);
  const std::string metadata_number = R"({"__metadata__":{"a":1},"t":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})";
  CHECK(message_of(file_of(metadata_number, data)).find("__metadata__ \"a\" is not a string") != std::string::npos);
}
