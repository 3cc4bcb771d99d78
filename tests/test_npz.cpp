// .npz archives: written and read back (an array named "" too), and archives edited by
// hand the way an attacker would: members sharing bytes, a name twice, one member
// corrupted while another is read alone.

#include <gexec/npz.hpp>

#include "test_support.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

using namespace test;

namespace {

gexec::ndarray floats(std::vector<float> v) {
  auto a = gexec::ndarray::empty({static_cast<std::int64_t>(v.size())}, gexec::dtype_of<float>());
  if (!v.empty()) std::memcpy(a.data(), v.data(), v.size() * sizeof(float));
  return a;
}

std::vector<float> values(const gexec::ndarray& a) {
  std::vector<float> v(static_cast<std::size_t>(a.numel()));
  if (!v.empty()) std::memcpy(v.data(), a.data(), v.size() * sizeof(float));
  return v;
}

std::uint32_t u32_at(const std::string& s, std::size_t at) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[at + static_cast<std::size_t>(i)]);
  return v;
}
void put_u16(std::string& s, std::size_t at, std::uint32_t v) {
  s[at] = static_cast<char>(v & 0xFF);
  s[at + 1] = static_cast<char>((v >> 8) & 0xFF);
}
void put_u32(std::string& s, std::size_t at, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) s[at + static_cast<std::size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xFF);
}

/// An archive's parts as save_npz lays them out: members, central directory, end record.
struct layout {
  std::string members, directory, end;
};
layout split(const std::string& zip) {
  const std::size_t eocd = zip.size() - 22;
  REQUIRE(u32_at(zip, eocd) == 0x06054b50u);
  const std::size_t cd = u32_at(zip, eocd + 16);
  return {zip.substr(0, cd), zip.substr(cd, eocd - cd), zip.substr(eocd)};
}
std::string join(const layout& l, std::uint32_t count) {
  std::string end = l.end;
  put_u16(end, 8, count);
  put_u16(end, 10, count);
  put_u32(end, 12, static_cast<std::uint32_t>(l.directory.size()));
  put_u32(end, 16, static_cast<std::uint32_t>(l.members.size()));
  return l.members + l.directory + end;
}

gexec::error npz_error(const std::string& zip) {
  return error_of([&] { (void)gexec::load_npz(gexec::detail::as_bytes(zip)); });
}

}  // namespace

TEST_CASE("arrays round-trip in order, an array named \"\" keeping its name") {
  const std::string zip = gexec::save_npz({{"x", floats({1, 2})}, {"", floats({3})}, {"y.z", floats({})}});
  const auto back = gexec::load_npz(gexec::detail::as_bytes(zip));
  REQUIRE(back.size() == 3);
  CHECK(back[0].first == "x");
  CHECK(back[1].first == "");
  CHECK(back[2].first == "y.z");
  CHECK(values(back[0].second) == std::vector<float>{1, 2});
  CHECK(values(back[1].second) == std::vector<float>{3});
  CHECK(back[2].second.numel() == 0);
  CHECK(contains(error_of([] { (void)gexec::save_npz({{"x", floats({1})}, {"x", floats({2})}}); }), "two arrays are named \"x\""));
}

TEST_CASE("members sharing bytes are refused before any is decoded: one member listed 300 times") {
  const layout one = split(gexec::save_npz({{"a", floats(std::vector<float>(1024, 1.0f))}}));
  // The directory entry again and again, each under another name ("a.npy" with its first
  // two bytes changed), all at the one member: 300 arrays from one array's bytes.
  layout many = one;
  for (int i = 1; i < 300; ++i) {
    std::string entry = one.directory;
    entry[entry.size() - 5] = static_cast<char>('A' + i % 26);
    entry[entry.size() - 4] = static_cast<char>('A' + i / 26);
    many.directory += entry;
  }
  const gexec::error e = npz_error(join(many, 300));
  CHECK(e.code() == gexec::errc::invalid_argument);
  CHECK(contains(e, "overlaps member \"a\""));
  CHECK(contains(e, "members share no bytes"));
}

TEST_CASE("a name twice is refused") {
  std::string zip = gexec::save_npz({{"x", floats({1})}, {"y", floats({2})}});
  for (std::size_t at = zip.find("y.npy"); at != std::string::npos; at = zip.find("y.npy", at + 1)) zip[at] = 'x';
  const gexec::error e = npz_error(zip);
  CHECK(contains(e, "member \"x\" appears twice"));
}

TEST_CASE("one array read alone: the others are not decoded; a missing one is named") {
  std::string zip = gexec::save_npz({{"good", floats({1, 2})}, {"bad", floats({5, 6})}});
  // The second member's data changed: its CRC-32 no longer matches.
  const std::size_t data = zip.rfind(std::string("\0\0\xa0\x40", 4));
  REQUIRE(data != std::string::npos);
  zip[data + 3] = '\x41';
  CHECK(contains(npz_error(zip), "member \"bad\": CRC-32 mismatch"));
  scratch_dir dir("npz_alone");
  const auto file = dir.path / "x.npz";
  std::ofstream(file, std::ios::binary) << zip;
  const auto good = gexec::load_npz_file(file, {"good"});
  REQUIRE(good.size() == 1);
  CHECK(values(good[0].second) == std::vector<float>{1, 2});
  const gexec::error e = error_of([&] { (void)gexec::load_npz_file(file, {"nothing"}); });
  CHECK(e.code() == gexec::errc::not_found);
  CHECK(contains(e, "no array \"nothing\" (it holds \"good\", \"bad\")"));
}
