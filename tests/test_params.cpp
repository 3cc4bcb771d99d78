#include "test_support.hpp"

#include <gexec/params.hpp>

#include <doctest/doctest.h>

#include "byte_builder.hpp"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

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
  const std::uint8_t nibble_values[5] = {0, 1, 2, 3, 4};
  std::memcpy(nibbles.data(), nibble_values, sizeof nibble_values);  // a loop of stores trips GCC 12's -Wstringop-overflow at -O3
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

namespace {

using temp_dir = test::scratch_dir;

/// The gexec::error that `f` throws within 10 s. A call still blocked then (on a FIFO with
/// no writer) is released by opening `fifo` for writing, and the test fails saying so.
template <class F>
gexec::error error_within(F f, const std::filesystem::path& fifo = {}) {
  auto result = std::async(std::launch::async, [&]() -> std::string {
    try {
      f();
    } catch (const gexec::error& e) {
      return std::to_string(static_cast<int>(e.code())) + "|" + e.what();
    } catch (const std::exception& e) {
      return std::string("0|not a gexec::error: ") + e.what();
    }
    return "0|no error";
  });
  if (result.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    if (!fifo.empty()) {
      int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
      if (fd >= 0) ::close(fd);
    }
    result.wait();
    FAIL("the call blocked instead of refusing the file");
  }
  const std::string r = result.get();
  const auto bar = r.find('|');
  const auto code = static_cast<gexec::errc>(std::stoi(r.substr(0, bar)));
  if (static_cast<int>(code) == 0) FAIL(r.substr(bar + 1));
  return gexec::error(code, r.substr(bar + 1));
}

bool mentions(const gexec::error& e, const std::string& s) { return std::string(e.what()).find(s) != std::string::npos; }

/// Bytes this process has read through read() and pread() (Linux /proc/self/io), or -1.
long long bytes_read_so_far() {
  std::ifstream io("/proc/self/io");
  std::string key;
  long long value = -1;
  while (io >> key >> value)
    if (key == "rchar:") return value;
  return -1;
}

/// A sparse file of `size` bytes starting with `head`; false if the filesystem cannot hold it.
bool sparse_file(const std::filesystem::path& path, std::uint64_t size, std::span<const std::byte> head) {
  // open64/ftruncate64: off_t may be 32 bits wide in a 32-bit process.
  int fd = ::open64(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  REQUIRE(fd >= 0);
  bool ok = ::ftruncate64(fd, static_cast<off64_t>(size)) == 0;
  if (ok) ok = ::pwrite(fd, head.data(), head.size(), 0) == static_cast<ssize_t>(head.size());
  ::close(fd);
  return ok;
}

}  // namespace

TEST_CASE("parameter files that are not regular files are refused, naming the path, before a byte is read") {
  temp_dir dir("not_regular");
  const auto fifo = dir.path / "params.fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  for (auto mode : {gexec::load_mode::copy, gexec::load_mode::mmap}) {
    CAPTURE(static_cast<int>(mode));
    // A FIFO with no writer: opening it for reading would wait for ever.
    auto e = error_within([&] { (void)gexec::load_param_dict_file(fifo, mode); }, fifo);
    CHECK(e.code() == gexec::errc::io);
    CHECK(mentions(e, "parameter file " + fifo.string() + " is a FIFO, not a regular file"));
    e = error_within([&] { (void)gexec::load_param_dict_file(dir.path, mode); });
    CHECK(e.code() == gexec::errc::io);
    CHECK(mentions(e, "parameter file " + dir.path.string() + " is a directory, not a regular file"));
    e = error_within([&] { (void)gexec::load_param_dict_file("/dev/zero", mode); });
    CHECK(e.code() == gexec::errc::io);
    CHECK(mentions(e, "parameter file /dev/zero is a character device, not a regular file"));
  }
  // Regular files still load, both ways; and a path that became a FIFO is refused too.
  auto path = dir.path / "ok.params";
  auto blob = reference_blob().b;
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(blob.data()), static_cast<std::streamsize>(blob.size()));
  check_reference_dict(gexec::load_param_dict_file(path));
  check_reference_dict(gexec::load_param_dict_file(path, gexec::load_mode::mmap));
  // save_param_dict_file writes regular files only, too.
  auto e = error_within([&] { gexec::save_param_dict_file(gexec::load_param_dict_file(path), dir.path); });
  CHECK(e.code() == gexec::errc::io);
  CHECK(mentions(e, dir.path.string()));
}

TEST_CASE("a large file that is not a parameter blob is refused after reading its header only") {
  if (bytes_read_so_far() < 0) {
    MESSAGE("no /proc/self/io: cannot count the bytes read; skipped");
    return;
  }
  temp_dir dir("large_bad");
  const auto path = dir.path / "sparse.params";
  constexpr std::uint64_t gib = std::uint64_t{1} << 30;
  struct case_t {
    const char* what;
    bytes head;
    gexec::errc code;
    std::string message;
  };
  bytes bad_magic;
  bad_magic.u8(0xFF);
  bytes many_names;
  many_names.u64(list_magic).u64(0).u64(std::uint64_t{1} << 40);
  bytes long_name;
  long_name.u64(list_magic).u64(0).u64(1).u64(std::uint64_t{1} << 40);
  bytes huge_tensor;  // its data would be 1 TiB, in a 1 GiB file
  huge_tensor.u64(list_magic).u64(0).u64(1).str("w").u64(1);
  record_head(huge_tensor, kDLFloat, 32, {std::int64_t{1} << 38}).i64(std::int64_t{1} << 40);
  const case_t cases[] = {
      {"bad magic", bad_magic, gexec::errc::invalid_params, "params " + path.string() + ": header: not a parameter blob (bad magic) (at byte 8)"},
      {"name count", many_names, gexec::errc::invalid_params, "header: truncated: names count 1099511627776 exceeds what the remaining"},
      {"name length", long_name, gexec::errc::invalid_params, "header: truncated: name needs 1099511627776 bytes"},
      {"tensor size", huge_tensor, gexec::errc::invalid_params, "tensor 0 (\"w\"): truncated: tensor data needs 1099511627776 bytes"},
  };
  for (const case_t& c : cases) {
    CAPTURE(std::string(c.what));
    REQUIRE(sparse_file(path, gib, c.head.b));
    for (auto mode : {gexec::load_mode::copy, gexec::load_mode::mmap}) {
      CAPTURE(static_cast<int>(mode));
      const long long before = bytes_read_so_far();
      auto e = error_within([&] { (void)gexec::load_param_dict_file(path, mode); });
      const long long read = bytes_read_so_far() - before;
      CHECK(e.code() == c.code);
      CHECK_MESSAGE(mentions(e, c.message), std::string(e.what()));
      // One buffer of the header, not the gigabyte behind it.
      CHECK(read < (1 << 20));
    }
  }
}

TEST_CASE("sizes a large sparse file really has, but memory cannot hold, are out_of_memory errors, not std::bad_alloc") {
#if defined(GEXEC_TEST_UNDER_ASAN)
  MESSAGE("AddressSanitizer aborts on failed allocations instead of failing them; skipped");
  return;
#else
  temp_dir dir("large_sparse");
  const auto path = dir.path / "sparse.params";
  constexpr std::uint64_t size = std::uint64_t{64} << 30;  // 64 GiB, nearly all a hole
  bytes big_tensor;  // one float32 tensor that fills the file
  big_tensor.u64(list_magic).u64(0).u64(1).str("w").u64(1);
  const std::uint64_t head = big_tensor.b.size() + 48 + 8;
  const std::uint64_t elements = (size - head) / 4;
  record_head(big_tensor, kDLFloat, 32, {static_cast<std::int64_t>(elements)}).i64(static_cast<std::int64_t>(elements * 4));
  bytes big_name;  // a 32 GiB name
  big_name.u64(list_magic).u64(0).u64(1).u64(std::uint64_t{32} << 30);
  for (const auto* head_bytes : {&big_tensor, &big_name}) {
    if (!sparse_file(path, head_bytes == &big_tensor ? elements * 4 + head : size, head_bytes->b)) {
      MESSAGE("the filesystem of " << path << " has no 64 GiB sparse files; skipped");
      return;
    }
    for (auto mode : {gexec::load_mode::copy, gexec::load_mode::mmap}) {
      CAPTURE(static_cast<int>(mode));
      // In a child whose address space is limited to 4 GiB, so that no allocation of
      // that size succeeds, whatever the machine's memory and overcommit policy (a
      // 32-bit process has no more than that anyway).
      const pid_t child = ::fork();
      REQUIRE(child >= 0);
      if (child == 0) {
        constexpr rlim_t four_gib = sizeof(rlim_t) > 4 ? static_cast<rlim_t>(std::uint64_t{4} << 30) : RLIM_INFINITY;
        rlimit limit{four_gib, four_gib};
        int status = ::setrlimit(RLIMIT_AS, &limit) == 0 ? 3 : 4;
        try {
          (void)gexec::load_param_dict_file(path, mode);
          status = 5;  // loaded: impossible within the limit
        } catch (const gexec::error& e) {
          const std::string m = e.what();
          const bool named = m.find(path.string()) != std::string::npos;
          if (e.code() == gexec::errc::out_of_memory && named) status = 0;
          // A 32-bit process built without 64-bit file offsets cannot even open it (named, out_of_memory too).
          const bool unopenable = sizeof(void*) == 4 && m.find(": it is larger than this 32-bit process can address") != std::string::npos;
          if (!status && !unopenable) {
            if (mode == gexec::load_mode::mmap && m.find("cannot map") == std::string::npos) status = 6;
            if (mode == gexec::load_mode::copy && head_bytes == &big_tensor &&
                m.find("tensor 0 (\"w\"): cannot allocate " + std::to_string(elements * 4) + " bytes for the tensor data") == std::string::npos)
              status = 7;
            if (mode == gexec::load_mode::copy && head_bytes == &big_name && m.find("header: out of memory") == std::string::npos)
              status = 8;
          }
          if (status) std::fprintf(stderr, "child: %s\n", e.what());
        } catch (const std::exception& e) {
          std::fprintf(stderr, "child: not a gexec::error: %s\n", e.what());
          status = 9;
        }
        ::_exit(status);
      }
      int status = 0;
      REQUIRE(::waitpid(child, &status, 0) == child);
      CHECK(WIFEXITED(status));
      CHECK(WEXITSTATUS(status) == 0);
    }
  }
#endif
}

TEST_CASE("a mapped file holds a shared flock while views of it live; cooperating writers see it in use") {
  temp_dir dir("mmap_lock");
  const auto path = dir.path / "mapped.params";
  // Names of 4 + 4 bytes put both float32[2] tensors at 8-byte aligned offsets: views.
  bytes aligned;
  aligned.u64(list_magic).u64(0).u64(2).str("wwww").str("bbbb").u64(2);
  const float a[] = {1, 2}, b[] = {3, 4};
  record_head(aligned, kDLFloat, 32, {2}).i64(8).raw(a, 8);
  record_head(aligned, kDLFloat, 32, {2}).i64(8).raw(b, 8);
  const auto& blob = aligned.b;
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(blob.data()), static_cast<std::streamsize>(blob.size()));
  auto exclusive_lock_free = [&] {
    int fd = ::open(path.c_str(), O_RDONLY);
    REQUIRE(fd >= 0);
    const bool free = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
    ::close(fd);
    return free;
  };
  gexec::param_dict replacement;
  replacement.set("x", gexec::ndarray::from_values<float>({1}, {5.0f}));
  {
    gexec::ndarray kept;
    {
      auto mapped = gexec::load_param_dict_file(path, gexec::load_mode::mmap);
      CHECK_FALSE(exclusive_lock_free());
      kept = mapped.at("bbbb");
    }
    CHECK_FALSE(exclusive_lock_free());  // a view into the mapping lives on
    auto e = error_within([&] { gexec::save_param_dict_file(replacement, path); });
    CHECK(e.code() == gexec::errc::io);
    CHECK(mentions(e, "parameter file " + path.string() + " is in use"));
    CHECK(kept.values<float>()[1] == 4.0f);  // the file was not truncated under the view
  }
  CHECK(exclusive_lock_free());
  // Copy mode keeps nothing open.
  CHECK(gexec::load_param_dict_file(path).at("bbbb").values<float>()[0] == 3.0f);
  CHECK(exclusive_lock_free());
  // A writer's exclusive lock makes loading refuse the file, in both modes.
  {
    int fd = ::open(path.c_str(), O_RDONLY);
    REQUIRE(fd >= 0);
    REQUIRE(::flock(fd, LOCK_EX) == 0);
    for (auto mode : {gexec::load_mode::copy, gexec::load_mode::mmap}) {
      auto e = error_within([&] { (void)gexec::load_param_dict_file(path, mode); });
      CHECK(e.code() == gexec::errc::io);
      CHECK(mentions(e, "parameter file " + path.string() + " is being written"));
    }
    ::close(fd);
  }
  gexec::save_param_dict_file(replacement, path);
  CHECK(gexec::load_param_dict_file(path, gexec::load_mode::mmap).at("x").values<float>()[0] == 5.0f);
}

TEST_CASE("copy mode reads tensors of any size and alignment straight from the file") {
  // Larger than the reader's buffer, at an odd offset, after a small tensor.
  gexec::param_dict d;
  std::vector<float> big(100000);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i);
  d.set("odd", gexec::ndarray::from_values<std::int8_t>({3}, {1, 2, 3}));
  d.set("big", gexec::ndarray::from_values<float>({100000}, std::span<const float>(big)));
  d.set("after", gexec::ndarray::from_values<double>({2}, {0.5, -0.5}));
  temp_dir dir("copy_sizes");
  const auto path = dir.path / "sizes.params";
  gexec::save_param_dict_file(d, path);
  for (auto mode : {gexec::load_mode::copy, gexec::load_mode::mmap}) {
    auto back = gexec::load_param_dict_file(path, mode);
    CHECK(gexec::save_param_dict(back) == gexec::save_param_dict(d));
    CHECK(back.at("big").values<float>()[99999] == 99999.0f);
    if (mode == gexec::load_mode::copy)
      for (const auto& item : back) CHECK(item.second.is_aligned());
  }
  // Cut anywhere, a file is refused as truncated, naming the path.
  auto blob = gexec::save_param_dict(d);
  for (std::size_t n : {std::size_t{0}, std::size_t{20}, std::size_t{100}, blob.size() / 2, blob.size() - 1}) {
    CAPTURE(n);
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(blob.data()), static_cast<std::streamsize>(n));
    auto e = error_within([&] { (void)gexec::load_param_dict_file(path); });
    CHECK(e.code() == gexec::errc::invalid_params);
    CHECK(mentions(e, "params " + path.string()));
    CHECK(mentions(e, "truncated"));
  }
}

namespace {

// Odd-length names and element sizes of 1, 2, 4 and 8 bytes: in TVM's layout, data
// after the first name lands at offsets no element size divides.
gexec::param_dict odd_dict() {
  gexec::param_dict d;
  auto fill = [](gexec::ndarray a, int seed) {
    auto* p = static_cast<std::uint8_t*>(a.data());
    for (std::uint64_t i = 0; i < a.byte_size(); ++i) p[i] = static_cast<std::uint8_t>(seed * 31 + i * 7);
    return a;
  };
  d.set("a", fill(gexec::ndarray::empty({3}, gexec::dtypes::int8), 1));
  d.set("bbb", fill(gexec::ndarray::empty({5, 7}, gexec::dtypes::float32), 2));
  d.set("c", fill(gexec::ndarray::empty({9}, gexec::dtypes::float16), 3));
  d.set("ddddd", fill(gexec::ndarray::empty({4, 3}, gexec::dtypes::float64), 4));
  d.set("e", fill(gexec::ndarray::empty({0}, gexec::dtypes::float32), 5));
  d.set("fff", fill(gexec::ndarray::empty({1000}, gexec::dtypes::int32), 6));
  return d;
}

bool same_bytes(const gexec::ndarray& a, const gexec::ndarray& b) {
  return a.dtype().code == b.dtype().code && a.dtype().bits == b.dtype().bits &&
         std::vector<std::int64_t>(a.shape().begin(), a.shape().end()) == std::vector<std::int64_t>(b.shape().begin(), b.shape().end()) &&
         a.byte_size() == b.byte_size() && (a.byte_size() == 0 || std::memcmp(a.data(), b.data(), a.byte_size()) == 0);
}

void check_same_dict(const gexec::param_dict& got, const gexec::param_dict& want) {
  REQUIRE(got.size() == want.size());
  auto it = got.begin();
  for (const auto& [name, a] : want) {
    CHECK(it->first == name);
    CHECK(same_bytes(it->second, a));
    ++it;
  }
}

// TVM's reader, as plain as the format: names, then records, nothing dropped. Returns
// name -> (data offset, byte size).
std::vector<std::pair<std::string, std::pair<std::size_t, std::size_t>>> walk_tvm_blob(std::span<const std::byte> b) {
  std::size_t at = 0;
  auto u64 = [&] {
    std::uint64_t v;
    REQUIRE(at + 8 <= b.size());
    std::memcpy(&v, b.data() + at, 8);
    at += 8;
    return v;
  };
  REQUIRE(u64() == param_list_magic_bytes);
  (void)u64();
  std::vector<std::pair<std::string, std::pair<std::size_t, std::size_t>>> out(u64());
  for (auto& [name, where] : out) {
    const auto n = u64();
    name.assign(reinterpret_cast<const char*>(b.data() + at), n);
    at += n;
  }
  REQUIRE(u64() == out.size());
  for (auto& [name, where] : out) {
    REQUIRE(u64() == tensor_magic_bytes);
    (void)u64();
    (void)u64();  // device
    std::int32_t ndim;
    std::memcpy(&ndim, b.data() + at, 4);
    at += 8;  // ndim, dtype
    at += 8 * static_cast<std::size_t>(ndim);
    const auto bytes = u64();
    where = {at, static_cast<std::size_t>(bytes)};
    at += bytes;
  }
  CHECK(at == b.size());
  return out;
}

}  // namespace

TEST_CASE("save_options::align writes blobs TVM reads whose tensors all map without a copy") {
  const gexec::param_dict d = odd_dict();
  // TVM's layout: most data lands misaligned, and mmap copies those tensors.
  const auto plain_path = temp_file("odd_plain", gexec::save_param_dict(d));
  {
    const gexec::param_dict m = gexec::load_param_dict_file(plain_path, gexec::load_mode::mmap);
    check_same_dict(m, d);
    REQUIRE(!m.mapped_range().empty());
    std::size_t copies = 0;
    for (const auto& [name, a] : m) copies += m.is_mapped(a) ? 0 : 1;
    CHECK(copies >= 3);
  }
  for (std::size_t align : {std::size_t{8}, std::size_t{64}, std::size_t{4096}}) {
    CAPTURE(align);
    const auto blob = gexec::save_param_dict(d, {.align = align});
    // The plain format: every record readable, padding tensors under reserved names,
    // every real tensor's data at a multiple of `align`.
    std::size_t pads = 0;
    for (const auto& [name, where] : walk_tvm_blob(blob)) {
      if (name.starts_with("__gexec_pad_")) {
        ++pads;
        continue;
      }
      CHECK(where.first % align == 0);
    }
    CHECK(pads > 0);
    check_same_dict(gexec::load_param_dict(blob), d);  // padding dropped
    CHECK(gexec::detail::read_param_names(blob).size() == d.size());
    const auto path = temp_file("odd_aligned", blob);
    const gexec::param_dict m = gexec::load_param_dict_file(path, gexec::load_mode::mmap);
    check_same_dict(m, d);
    for (const auto& item : m) {
      CAPTURE(item.first);
      const gexec::ndarray& a = item.second;
      CHECK(m.is_mapped(a));
      CHECK(reinterpret_cast<std::uintptr_t>(a.data()) % align == 0);
    }
    check_same_dict(gexec::load_param_dict_file(path), d);
    // Saved again, the blob is the same: the padding is the writer's, not the dict's.
    CHECK(gexec::save_param_dict(gexec::load_param_dict(blob), {.align = align}) == blob);
    std::filesystem::remove(path);
  }
  // A blob that is already aligned gets no padding: 32 bytes of counts, 8 + 8 of name,
  // 48 of record header put the data at 96.
  gexec::param_dict one;
  one.set("wwwwwwww", gexec::ndarray::empty({16}, gexec::dtypes::float32));
  CHECK(gexec::save_param_dict(one, {.align = 16}) == gexec::save_param_dict(one));
  std::filesystem::remove(plain_path);
}

TEST_CASE("padding names are reserved and alignments must be powers of two") {
  gexec::param_dict d;
  d.set("__gexec_pad_0", gexec::ndarray::empty({1}, gexec::dtypes::uint8));
  auto e = test::error_of([&] { (void)gexec::save_param_dict(d); });
  CHECK(e.code() == gexec::errc::invalid_argument);
  CHECK(test::contains(e, "reserved for padding"));
  CHECK(test::error_of([&] { (void)gexec::save_param_dict(odd_dict(), {.align = 48}); }).code() == gexec::errc::invalid_argument);
}

TEST_CASE("load_param_dict_file tells a progress callback of the bytes read, up to the file's size") {
  // Large enough for several reports: 40 MiB in 5 tensors.
  gexec::param_dict d;
  for (int i = 0; i < 5; ++i) {
    auto a = gexec::ndarray::empty({2 << 20}, gexec::dtypes::float32);
    std::memset(a.data(), i + 1, a.byte_size());
    d.set("t" + std::to_string(i), std::move(a));
  }
  const auto path = temp_file("progress", gexec::save_param_dict(d));
  const auto size = std::filesystem::file_size(path);
  for (auto mode : {gexec::load_mode::copy, gexec::load_mode::mmap}) {
    std::vector<std::pair<std::uint64_t, std::uint64_t>> calls;
    const gexec::param_dict got = gexec::load_param_dict_file(path, mode, [&](std::uint64_t done, std::uint64_t total) { calls.emplace_back(done, total); });
    check_same_dict(got, d);
    REQUIRE(calls.size() >= 2);
    for (std::size_t i = 0; i < calls.size(); ++i) {
      CHECK(calls[i].second == size);
      if (i) CHECK(calls[i].first > calls[i - 1].first);
    }
    CHECK(calls.back().first == size);
  }
  // The plain overloads are still there.
  check_same_dict(gexec::load_param_dict_file(path), d);
  check_same_dict(gexec::load_param_dict_file(path, gexec::load_progress()), d);
  std::filesystem::remove(path);
}
