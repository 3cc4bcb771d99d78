#pragma once
// Little-endian byte appends, written out by hand in tests so that expected binary
// layouts do not come from gexec's own writer.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

struct bytes {
  std::vector<std::byte> b;
  bytes& u8(std::uint8_t v) { return raw(&v, 1); }
  bytes& u16(std::uint16_t v) { return raw(&v, 2); }
  bytes& i32(std::int32_t v) { return raw(&v, 4); }
  bytes& u64(std::uint64_t v) { return raw(&v, 8); }
  bytes& i64(std::int64_t v) { return raw(&v, 8); }
  bytes& str(const std::string& s) { return u64(s.size()).raw(s.data(), s.size()); }
  bytes& raw(const void* p, std::size_t n) {
    auto* c = static_cast<const std::byte*>(p);
    b.insert(b.end(), c, c + n);
    return *this;
  }
};

inline constexpr std::uint64_t param_list_magic_bytes = 0xF7E58D4F05049CB7ULL;
inline constexpr std::uint64_t tensor_magic_bytes = 0xDD5E40F096B4A13FULL;
