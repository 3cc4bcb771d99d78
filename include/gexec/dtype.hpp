#pragma once
// Element types: DLPack's DLDataType, spelled the way TVM writes it in graph JSON.

#include "config.hpp"

#include <dlpack/dlpack.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "error.hpp"

GEXEC_NAMESPACE_BEGIN

/// Type codes TVM v0.19 uses beyond DLPack 0.6's (its float8 codes differ from DLPack 1.x).
inline constexpr std::uint8_t tvm_float8_e4m3_code = 6;
inline constexpr std::uint8_t tvm_float8_e5m2_code = 7;

/// DLPack's bool (kDLBool since DLPack 0.8, 8 bits an element): the code TVM's float8 e4m3 also uses.
inline constexpr std::uint8_t dlpack_bool_code = 6;

/// At a DLPack border TVM's float8 codes (6, 7) would read as DLPack's bool and float8_e3m4: float8 leaves as uint8 bits.
constexpr DLDataType to_dlpack_dtype(DLDataType t) noexcept {
  if ((t.code == tvm_float8_e4m3_code || t.code == tvm_float8_e5m2_code) && t.bits == 8) return {kDLUInt, 8, t.lanes};
  return t;
}

/// At a DLPack border DLPack's bool (code 6, 8 bits) enters as bool (TVM's uint1), never as TVM's float8 e4m3.
constexpr DLDataType from_dlpack_dtype(DLDataType t) noexcept {
  if (t.code == dlpack_bool_code && t.bits == 8) return {kDLUInt, 1, t.lanes};
  return t;
}

constexpr bool same_dtype(DLDataType a, DLDataType b) noexcept {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

/// True for the element types TVM's graph executor stores: int/uint 8-64, int4/uint4,
/// bool (uint1), float 16-64, bfloat16, TVM's float8 codes; any lane count >= 1.
constexpr bool is_supported(DLDataType t) noexcept {
  if (t.lanes == 0) return false;
  switch (t.code) {
    case kDLInt: return t.bits == 4 || t.bits == 8 || t.bits == 16 || t.bits == 32 || t.bits == 64;
    case kDLUInt: return t.bits == 1 || t.bits == 4 || t.bits == 8 || t.bits == 16 || t.bits == 32 || t.bits == 64;
    case kDLFloat: return t.bits == 16 || t.bits == 32 || t.bits == 64;
    case kDLBfloat: return t.bits == 16;
    case tvm_float8_e4m3_code:
    case tvm_float8_e5m2_code: return t.bits == 8;
    default: return false;
  }
}

/// Bytes one element occupies in memory: bool and 4-bit types take a whole byte, as in TVM.
constexpr std::uint64_t element_bytes(DLDataType t) noexcept {
  return (static_cast<std::uint64_t>(t.bits) * t.lanes + 7) / 8;
}

/// "float32", "int8", "bool", "float32x4", ... as TVM prints it.
inline std::string to_string(DLDataType t) {
  if (t.code == kDLUInt && t.bits == 1 && t.lanes == 1) return "bool";
  // Appended piece by piece: GCC 12 at -O2/-O3 warns (-Wrestrict, wrongly) about
  // "x" + std::to_string(...) here.
  std::string s;
  s.reserve(24);
  switch (t.code) {
    case kDLInt: s.append("int"); break;
    case kDLUInt: s.append("uint"); break;
    case kDLFloat: s.append("float"); break;
    case kDLBfloat: s.append("bfloat"); break;
    case tvm_float8_e4m3_code: s.append("e4m3_float"); break;
    case tvm_float8_e5m2_code: s.append("e5m2_float"); break;
    case kDLOpaqueHandle: s.append("handle"); break;
    case kDLComplex: s.append("complex"); break;  // named, though gexec stores none
    default: s.append("code").append(std::to_string(t.code)).append("_"); break;
  }
  s.append(std::to_string(t.bits));
  if (t.lanes > 1) s.append("x").append(std::to_string(t.lanes));
  return s;
}

namespace detail {
/// Reads the decimal digits at `p` (one at least; no sign, no space) into `out`, as
/// std::from_chars does, for numbers up to `limit`: where they end, or nullptr if there
/// are none or they exceed `limit`. (<charconv> costs about 600 preprocessed lines.)
inline const char* read_decimal(const char* p, const char* end, unsigned limit, unsigned& out) noexcept {
  const char* const start = p;
  unsigned long long v = 0;
  for (; p != end && *p >= '0' && *p <= '9'; ++p)
    if ((v = v * 10 + static_cast<unsigned>(*p - '0')) > limit) return nullptr;
  if (p == start) return nullptr;
  out = static_cast<unsigned>(v);
  return p;
}
}  // namespace detail

/// Parses a dtype string; std::nullopt for anything TVM's graph executor would not store.
inline std::optional<DLDataType> try_parse_dtype(std::string_view s) noexcept {
  if (s == "bool") return DLDataType{kDLUInt, 1, 1};
  constexpr std::pair<std::string_view, std::uint8_t> prefixes[] = {
      {"uint", kDLUInt}, {"int", kDLInt}, {"float", kDLFloat}, {"bfloat", kDLBfloat},
      {"e4m3_float", tvm_float8_e4m3_code}, {"e5m2_float", tvm_float8_e5m2_code}};
  for (auto [prefix, code] : prefixes) {
    if (!s.starts_with(prefix)) continue;
    const char* p = s.data() + prefix.size();
    const char* end = s.data() + s.size();
    unsigned bits = 0, lanes = 1;
    const char* after_bits = detail::read_decimal(p, end, 255, bits);
    if (!after_bits) return std::nullopt;
    if (after_bits != end) {
      if (*after_bits != 'x') return std::nullopt;
      if (detail::read_decimal(after_bits + 1, end, 65535, lanes) != end) return std::nullopt;
    }
    DLDataType t{code, static_cast<std::uint8_t>(bits), static_cast<std::uint16_t>(lanes)};
    return is_supported(t) ? std::optional(t) : std::nullopt;
  }
  return std::nullopt;
}

/// Parses a dtype string, throwing gexec::error(errc::invalid_dtype) for unknown ones.
inline DLDataType parse_dtype(std::string_view s) {
  if (auto t = try_parse_dtype(s)) return *t;
  throw error(errc::invalid_dtype, "unknown dtype \"" + std::string(s) + "\"");
}

/// Named dtypes for C++ callers.
namespace dtypes {
inline constexpr DLDataType boolean{kDLUInt, 1, 1};
inline constexpr DLDataType int4{kDLInt, 4, 1};
inline constexpr DLDataType uint4{kDLUInt, 4, 1};
inline constexpr DLDataType int8{kDLInt, 8, 1};
inline constexpr DLDataType int16{kDLInt, 16, 1};
inline constexpr DLDataType int32{kDLInt, 32, 1};
inline constexpr DLDataType int64{kDLInt, 64, 1};
inline constexpr DLDataType uint8{kDLUInt, 8, 1};
inline constexpr DLDataType uint16{kDLUInt, 16, 1};
inline constexpr DLDataType uint32{kDLUInt, 32, 1};
inline constexpr DLDataType uint64{kDLUInt, 64, 1};
inline constexpr DLDataType float16{kDLFloat, 16, 1};
inline constexpr DLDataType bfloat16{kDLBfloat, 16, 1};
inline constexpr DLDataType float32{kDLFloat, 32, 1};
inline constexpr DLDataType float64{kDLFloat, 64, 1};
}  // namespace dtypes

/// The dtype of a C++ arithmetic type, for typed access to tensors.
template <class T>
constexpr DLDataType dtype_of() noexcept {
  if constexpr (std::is_same_v<T, bool>) return dtypes::boolean;
  else if constexpr (std::is_floating_point_v<T>) return {kDLFloat, sizeof(T) * 8, 1};
  else if constexpr (std::is_signed_v<T>) return {kDLInt, sizeof(T) * 8, 1};
  else return {kDLUInt, sizeof(T) * 8, 1};
}

GEXEC_NAMESPACE_END
