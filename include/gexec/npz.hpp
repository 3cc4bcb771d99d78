#pragma once
// .npz archives as numpy's savez writes them: a zip of .npy members, stored without
// compression (np.savez_compressed's deflated members are refused, naming the member).
// Read in the archive's order, names without ".npy"; written with CRC-32s that Python's
// zipfile checks, members stored, Zip64 records where an archive needs them on reading.
// The whole directory is checked before any member is decoded: each name once, no two
// members sharing bytes (what an archive decodes to is bounded by its size); one member
// can be read alone, as numpy reads them.
//
//   for (auto& [name, a] : gexec::load_npz_file("inputs.npz")) ex.set_input(name, a);
//   gexec::save_npz_file("outputs.npz", {{"softmax", ex.get_output(0)}});

#include "config.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "detail/byte_io.hpp"
#include "detail/json_path.hpp"
#include "error.hpp"
#include "file_path.hpp"
#include "ndarray.hpp"
#include "npy.hpp"

GEXEC_NAMESPACE_BEGIN

namespace detail {

inline std::uint32_t crc32(std::span<const std::byte> bytes) noexcept {
  static const std::array<std::uint32_t, 256> table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  std::uint32_t c = 0xFFFFFFFFu;
  for (std::byte b : bytes) c = table[(c ^ static_cast<std::uint8_t>(b)) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

class npz_reader {
 public:
  npz_reader(std::span<const std::byte> zip, std::string what) : zip_(zip), what_(std::move(what)) {}

  /// Where one member's .npy bytes lie.
  struct member {
    std::string name;  ///< without ".npy"
    std::size_t header = 0;  ///< its local header's offset
    std::span<const std::byte> bytes;
    std::uint32_t crc = 0;
    std::size_t entry = 0;  ///< its central directory entry's offset
  };

  /// Every member of the archive, checked before any is decoded: stored, inside the
  /// archive, named once, and no two sharing bytes (so that what they decode to is
  /// bounded by the archive's size).
  std::vector<member> members() const {
    // The end of central directory record: the last 22+ bytes, a comment after it.
    if (zip_.size() < 22) fail(0, "too short for a zip archive (" + std::to_string(zip_.size()) + " bytes)");
    std::size_t eocd = zip_.size() - 22;
    while (u32(eocd) != 0x06054b50u) {
      if (eocd == 0 || zip_.size() - eocd > 22 + 0xFFFF) fail(0, "not a zip archive (no end of central directory record)");
      --eocd;
    }
    std::uint64_t count = u16(eocd + 10), cd_size = u32(eocd + 12), cd_offset = u32(eocd + 16);
    if ((count == 0xFFFF || cd_offset == 0xFFFFFFFFu || cd_size == 0xFFFFFFFFu) && eocd >= 20 && u32(eocd - 20) == 0x07064b50u) {
      const std::uint64_t z = u64(eocd - 20 + 8);  // the Zip64 end of central directory record
      if (z > zip_.size() - 56 || u32(static_cast<std::size_t>(z)) != 0x06064b50u) fail(eocd - 20, "bad Zip64 locator");
      count = u64(static_cast<std::size_t>(z) + 32);
      cd_size = u64(static_cast<std::size_t>(z) + 40);
      cd_offset = u64(static_cast<std::size_t>(z) + 48);
    }
    if (cd_offset > zip_.size() || cd_size > zip_.size() - cd_offset) fail(eocd, "central directory past the end of the archive");
    std::vector<member> out;
    std::unordered_map<std::string_view, std::size_t> names;  // name -> index in `out`
    std::size_t at = static_cast<std::size_t>(cd_offset);
    for (std::uint64_t i = 0; i < count; ++i) {
      need(at, 46);
      if (u32(at) != 0x02014b50u) fail(at, "bad central directory entry");
      const std::uint16_t method = u16(at + 10);
      std::uint64_t compressed = u32(at + 20), size = u32(at + 24);
      const std::size_t name_len = u16(at + 28), extra_len = u16(at + 30), comment_len = u16(at + 32);
      std::uint64_t local = u32(at + 42);
      need(at + 46, name_len + extra_len);
      std::string name(reinterpret_cast<const char*>(zip_.data()) + at + 46, name_len);
      // Zip64 sizes and offset, in that order, for the fields that overflowed.
      for (std::size_t e = at + 46 + name_len; e + 4 <= at + 46 + name_len + extra_len;) {
        const std::uint16_t id = u16(e), len = u16(e + 2);
        std::size_t f = e + 4;
        if (id == 0x0001) {
          if (size == 0xFFFFFFFFu && f + 8 <= e + 4 + len) size = u64(f), f += 8;
          if (compressed == 0xFFFFFFFFu && f + 8 <= e + 4 + len) compressed = u64(f), f += 8;
          if (local == 0xFFFFFFFFu && f + 8 <= e + 4 + len) local = u64(f), f += 8;
        }
        e += 4 + len;
      }
      const std::string label = "member \"" + printable(name) + "\"";
      if (method != 0)
        fail(at, label + " is compressed (method " + std::to_string(method) +
                     ", as np.savez_compressed writes); gexec reads np.savez's stored members");
      if (compressed != size) fail(at, label + ": stored with a compressed size " + std::to_string(compressed) + " != size " + std::to_string(size));
      if (local > zip_.size()) fail(at, label + ": local header offset " + std::to_string(local) + " past the end");
      const auto l = static_cast<std::size_t>(local);
      need(l, 30);
      if (u32(l) != 0x04034b50u) fail(l, label + ": bad local header");
      const std::size_t data = l + 30 + u16(l + 26) + u16(l + 28);
      if (data > zip_.size() || size > zip_.size() - data) fail(l, label + ": data past the end of the archive");
      // numpy names a member "<name>.npy" (an array named "" is ".npy").
      if (name.ends_with(".npy")) name.resize(name.size() - 4);
      member m{std::move(name), l, zip_.subspan(data, static_cast<std::size_t>(size)), u32(at + 16), at};
      out.push_back(std::move(m));
      at += 46 + name_len + extra_len + comment_len;
    }
    for (std::size_t i = 0; i < out.size(); ++i)
      if (const auto [it, fresh] = names.emplace(out[i].name, i); !fresh)
        fail(out[i].entry, "member \"" + printable(out[i].name) + "\" appears twice (an archive names each array once)");
    std::vector<const member*> by_offset;
    for (const member& m : out) by_offset.push_back(&m);
    std::stable_sort(by_offset.begin(), by_offset.end(), [](const member* a, const member* b) { return a->header < b->header; });
    for (std::size_t i = 1; i < by_offset.size(); ++i) {
      const member& a = *by_offset[i - 1];
      const member& b = *by_offset[i];
      const std::size_t a_end = static_cast<std::size_t>(a.bytes.data() + a.bytes.size() - zip_.data());
      if (b.header < a_end)
        fail(b.header, "member \"" + printable(b.name) + "\" overlaps member \"" + printable(a.name) + "\" (bytes " + std::to_string(a.header) +
                           " to " + std::to_string(a_end) + "): members share no bytes");
    }
    return out;
  }

  /// One member's array, its CRC-32 checked.
  ndarray read(const member& m) const {
    const std::string label = "member \"" + printable(m.name) + "\"";
    if (crc32(m.bytes) != m.crc) fail(static_cast<std::uint64_t>(m.bytes.data() - zip_.data()), label + ": CRC-32 mismatch");
    try {
      return load_npy(m.bytes);
    } catch (const error& e) {
      throw error(e.code(), what_ + ": " + label + ": " + e.what());
    }
  }

  /// Every array, in the archive's order.
  std::vector<std::pair<std::string, ndarray>> read() const {
    std::vector<std::pair<std::string, ndarray>> out;
    for (member& m : members()) {
      ndarray a = read(m);
      out.emplace_back(std::move(m.name), std::move(a));
    }
    return out;
  }

  /// The arrays named in `names`, in that order, read alone (errc::not_found naming one the
  /// archive lacks, and the names it has).
  std::vector<std::pair<std::string, ndarray>> read(const std::vector<std::string>& names) const {
    const std::vector<member> all = members();
    std::vector<std::pair<std::string, ndarray>> out;
    for (const std::string& name : names) {
      const auto it = std::find_if(all.begin(), all.end(), [&](const member& m) { return m.name == name; });
      if (it == all.end()) {
        std::string have;
        for (const member& m : all) have += (have.empty() ? "\"" : ", \"") + printable(m.name) + "\"";
        throw error(errc::not_found, what_ + ": no array \"" + printable(name) + "\" (it holds " + (have.empty() ? "none" : have) + ")");
      }
      out.emplace_back(name, read(*it));
    }
    return out;
  }

 private:
  [[noreturn]] void fail(std::uint64_t at, const std::string& message) const {
    throw error(errc::invalid_argument, what_ + ": at byte " + std::to_string(at) + ": " + message);
  }
  void need(std::size_t at, std::size_t n) const {
    if (at > zip_.size() || n > zip_.size() - at) fail(at, "truncated");
  }
  std::uint64_t le(std::size_t at, int n) const {
    need(at, static_cast<std::size_t>(n));
    std::uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<std::uint8_t>(zip_[at + static_cast<std::size_t>(i)]);
    return v;
  }
  std::uint16_t u16(std::size_t at) const { return static_cast<std::uint16_t>(le(at, 2)); }
  std::uint32_t u32(std::size_t at) const { return static_cast<std::uint32_t>(le(at, 4)); }
  std::uint64_t u64(std::size_t at) const { return le(at, 8); }

  std::span<const std::byte> zip_;
  std::string what_;
};

inline void put_le(std::string& out, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out += static_cast<char>((v >> (8 * i)) & 0xFF);
}

}  // namespace detail

/// The arrays of an .npz archive's bytes, in its order, named without ".npy".
inline std::vector<std::pair<std::string, ndarray>> load_npz(std::span<const std::byte> bytes) {
  return detail::npz_reader(bytes, "npz").read();
}

/// The arrays of an .npz file (a regular file; errc::io otherwise, naming the path).
inline std::vector<std::pair<std::string, ndarray>> load_npz_file(const file_path& path) {
  const std::string bytes = detail::regular_file(path, "npz file").read_all();
  return detail::npz_reader(detail::as_bytes(bytes), "npz " + path.string()).read();
}

/// Only the arrays named in `names` of an .npz file, in that order; the others are not
/// decoded (errc::not_found naming an array the archive lacks).
inline std::vector<std::pair<std::string, ndarray>> load_npz_file(const file_path& path, const std::vector<std::string>& names) {
  const std::string bytes = detail::regular_file(path, "npz file").read_all();
  return detail::npz_reader(detail::as_bytes(bytes), "npz " + path.string()).read(names);
}

/// The bytes of an .npz archive holding `arrays` as "<name>.npy" members, stored, as
/// np.savez writes them (archives of 4 GiB or more are refused); `names` as for save_npy.
inline std::string save_npz(const std::vector<std::pair<std::string, ndarray>>& arrays, npy_names names = npy_names::ml_dtypes) {
  std::string out, directory;
  std::unordered_map<std::string_view, int> seen;
  for (const auto& [name, a] : arrays) {
    if (!seen.emplace(name, 0).second)
      throw error(errc::invalid_argument, "save_npz: two arrays are named \"" + detail::printable(name) + "\": not written");
    const std::string npy = save_npy(a, names), file = name + ".npy";
    if (out.size() + npy.size() + file.size() + 30 >= 0xFFFFFFFFu || file.size() > 0xFFFF)
      throw error(errc::invalid_argument, "save_npz: the archive would reach 4 GiB (or a name 64 KiB): not written");
    const std::uint32_t crc = detail::crc32(detail::as_bytes(npy));
    const auto offset = out.size();
    auto common = [&](std::string& s) {  // version needed .. name length
      detail::put_le(s, 20, 2);          // version needed: 2.0
      detail::put_le(s, 0, 2);           // flags
      detail::put_le(s, 0, 2);           // stored
      detail::put_le(s, 0, 2);           // time
      detail::put_le(s, (1980 - 1980) << 9 | 1 << 5 | 1, 2);  // date: 1980-01-01
      detail::put_le(s, crc, 4);
      detail::put_le(s, npy.size(), 4);
      detail::put_le(s, npy.size(), 4);
      detail::put_le(s, file.size(), 2);
    };
    detail::put_le(out, 0x04034b50u, 4);
    common(out);
    detail::put_le(out, 0, 2);  // extra length
    out += file;
    out += npy;
    detail::put_le(directory, 0x02014b50u, 4);
    detail::put_le(directory, 20, 2);  // version made by
    common(directory);
    detail::put_le(directory, 0, 2);  // extra
    detail::put_le(directory, 0, 2);  // comment
    detail::put_le(directory, 0, 2);  // disk
    detail::put_le(directory, 0, 2);  // internal attributes
    detail::put_le(directory, 0, 4);  // external attributes
    detail::put_le(directory, offset, 4);
    directory += file;
  }
  if (arrays.size() >= 0xFFFF || out.size() + directory.size() >= 0xFFFFFFFFu)
    throw error(errc::invalid_argument, "save_npz: too many arrays or bytes for a zip archive without Zip64: not written");
  const auto cd_offset = out.size();
  out += directory;
  detail::put_le(out, 0x06054b50u, 4);
  detail::put_le(out, 0, 4);  // disks
  detail::put_le(out, arrays.size(), 2);
  detail::put_le(out, arrays.size(), 2);
  detail::put_le(out, directory.size(), 4);
  detail::put_le(out, cd_offset, 4);
  detail::put_le(out, 0, 2);  // comment
  return out;
}

GEXEC_NAMESPACE_END
