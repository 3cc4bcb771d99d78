#pragma once
// Tensor values as gexec-run reads them from the command line and prints them: every
// dtype gexec stores (bool, int4/uint4, int/uint 8-64, float16, bfloat16, float32/64,
// TVM's float8 e4m3 and e5m2), parsed with range checks and no exceptions from the
// standard library, and converted to and from the narrow float formats with
// round-to-nearest-even.

#include <gexec/dtype.hpp>
#include <gexec/error.hpp>
#include <gexec/ndarray.hpp>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <vector>

namespace gexec_run {

/// A binary float format narrower than float32: exponent and mantissa bits, and whether
/// it has infinities (IEEE-like) or only finite values and one NaN pattern (e4m3fn).
struct minifloat {
  int exponent_bits;
  int mantissa_bits;
  bool finite_only;
};
inline constexpr minifloat float16_format{5, 10, false};
inline constexpr minifloat bfloat16_format{8, 7, false};
inline constexpr minifloat e4m3_format{4, 3, true};
inline constexpr minifloat e5m2_format{5, 2, false};

/// `v` rounded to the nearest value of format `f` (ties to even); values beyond its range
/// become infinity, or NaN in a finite-only format.
inline std::uint32_t encode(double v, minifloat f) {
  const int bias = (1 << (f.exponent_bits - 1)) - 1;
  const std::uint32_t max_exp = (1u << f.exponent_bits) - 1;
  const std::uint32_t mant_mask = (1u << f.mantissa_bits) - 1;
  const std::uint32_t sign = std::signbit(v) ? 1u << (f.exponent_bits + f.mantissa_bits) : 0u;
  const std::uint32_t nan = f.finite_only ? (max_exp << f.mantissa_bits) | mant_mask : (max_exp << f.mantissa_bits) | (1u << (f.mantissa_bits - 1));
  const std::uint32_t inf = f.finite_only ? nan : max_exp << f.mantissa_bits;
  if (std::isnan(v)) return sign | nan;
  const double a = std::fabs(v);
  if (std::isinf(a)) return sign | inf;
  if (a == 0) return sign;
  int e2 = 0;
  std::frexp(a, &e2);  // a = m * 2^e2, m in [0.5, 1)
  int e = e2 - 1;
  const int emin = 1 - bias;
  if (e < emin) {  // subnormal: a multiple of 2^(emin - mantissa_bits); may round up to the smallest normal
    const auto m = static_cast<std::uint32_t>(std::nearbyint(std::ldexp(a, f.mantissa_bits - emin)));
    return sign | m;
  }
  auto m = static_cast<std::uint64_t>(std::nearbyint(std::ldexp(a, f.mantissa_bits - e)));
  if (m == (std::uint64_t{1} << (f.mantissa_bits + 1))) {
    m >>= 1;
    ++e;
  }
  const auto field = static_cast<std::int64_t>(e) + bias;
  const auto mant = static_cast<std::uint32_t>(m) & mant_mask;
  if (f.finite_only ? (field > static_cast<std::int64_t>(max_exp) || (field == max_exp && mant == mant_mask))
                    : field >= static_cast<std::int64_t>(max_exp))
    return sign | inf;
  return sign | (static_cast<std::uint32_t>(field) << f.mantissa_bits) | mant;
}

/// The value of bit pattern `bits` in format `f`.
inline double decode(std::uint32_t bits, minifloat f) {
  const int bias = (1 << (f.exponent_bits - 1)) - 1;
  const std::uint32_t max_exp = (1u << f.exponent_bits) - 1;
  const std::uint32_t mant_mask = (1u << f.mantissa_bits) - 1;
  const bool negative = (bits >> (f.exponent_bits + f.mantissa_bits)) & 1u;
  const std::uint32_t field = (bits >> f.mantissa_bits) & max_exp;
  const std::uint32_t mant = bits & mant_mask;
  double v;
  if (f.finite_only && field == max_exp && mant == mant_mask) v = std::numeric_limits<double>::quiet_NaN();
  else if (!f.finite_only && field == max_exp) v = mant ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else if (field == 0) v = std::ldexp(static_cast<double>(mant), 1 - bias - f.mantissa_bits);
  else v = std::ldexp(static_cast<double>(mant | (1u << f.mantissa_bits)), static_cast<int>(field) - bias - f.mantissa_bits);
  return negative ? -v : v;
}

inline const minifloat* narrow_float_format(DLDataType t) {
  if (t.code == kDLFloat && t.bits == 16) return &float16_format;
  if (t.code == kDLBfloat && t.bits == 16) return &bfloat16_format;
  if (t.code == gexec::tvm_float8_e4m3_code && t.bits == 8) return &e4m3_format;
  if (t.code == gexec::tvm_float8_e5m2_code && t.bits == 8) return &e5m2_format;
  return nullptr;
}

inline bool is_float(DLDataType t) { return t.code == kDLFloat || narrow_float_format(t) != nullptr; }

namespace detail {

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

[[noreturn]] inline void bad_value(const std::string& what, std::size_t index, std::string_view text, const std::string& why) {
  throw gexec::error(gexec::errc::invalid_argument,
                     what + ": value " + std::to_string(index) + " \"" + std::string(text) + "\" " + why);
}

inline double parse_float(const std::string& what, std::size_t index, std::string_view text) {
  std::string_view s = text;
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || end != s.data() + s.size() || ec == std::errc::invalid_argument) bad_value(what, index, text, "is not a number");
  if (ec == std::errc::result_out_of_range) bad_value(what, index, text, "is out of range");
  return v;
}

template <class I>
I parse_integer(const std::string& what, std::size_t index, std::string_view text, I lo, I hi, const std::string& type) {
  std::string_view s = text;
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if constexpr (std::is_unsigned_v<I>) {
    if (!s.empty() && s.front() == '-') {  // a negative integer is out of an unsigned range, not malformed
      std::int64_t negative = 0;
      const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), negative);
      if (end == s.data() + s.size() && ec != std::errc::invalid_argument)
        bad_value(what, index, text, "is out of range for " + type + " [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
  }
  I v{};
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || end != s.data() + s.size() || ec == std::errc::invalid_argument)
    bad_value(what, index, text, "is not an integer (the input is " + type + ")");
  if (ec == std::errc::result_out_of_range || v < lo || v > hi)
    bad_value(what, index, text, "is out of range for " + type + " [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}

/// Writes one element of dtype `t` (lanes counted as elements) at `dst`.
inline void store(void* dst, DLDataType t, const std::string& what, std::size_t index, std::string_view text) {
  const std::string type = gexec::to_string(t);
  if (const minifloat* f = narrow_float_format(t)) {
    const std::uint32_t bits = encode(parse_float(what, index, text), *f);
    if (t.bits == 16) {
      const auto b = static_cast<std::uint16_t>(bits);
      std::memcpy(dst, &b, 2);
    } else {
      const auto b = static_cast<std::uint8_t>(bits);
      std::memcpy(dst, &b, 1);
    }
    return;
  }
  if (t.code == kDLFloat && t.bits == 32) {
    const auto v = static_cast<float>(parse_float(what, index, text));
    std::memcpy(dst, &v, 4);
  } else if (t.code == kDLFloat && t.bits == 64) {
    const double v = parse_float(what, index, text);
    std::memcpy(dst, &v, 8);
  } else if (t.code == kDLUInt && t.bits == 1) {
    std::uint8_t v;
    if (text == "true" || text == "1" || text == "True") v = 1;
    else if (text == "false" || text == "0" || text == "False") v = 0;
    else bad_value(what, index, text, "is not a bool (true, false, 1 or 0)");
    std::memcpy(dst, &v, 1);
  } else if (t.code == kDLInt) {
    const std::int64_t hi = t.bits == 64 ? std::numeric_limits<std::int64_t>::max() : (std::int64_t{1} << (t.bits - 1)) - 1;
    const std::int64_t lo = t.bits == 64 ? std::numeric_limits<std::int64_t>::min() : -(std::int64_t{1} << (t.bits - 1));
    const std::int64_t v = parse_integer<std::int64_t>(what, index, text, lo, hi, type);
    std::memcpy(dst, &v, static_cast<std::size_t>(gexec::element_bytes({t.code, t.bits, 1})));  // little-endian low bytes
  } else if (t.code == kDLUInt) {
    const std::uint64_t hi = t.bits == 64 ? std::numeric_limits<std::uint64_t>::max() : (std::uint64_t{1} << t.bits) - 1;
    const std::uint64_t v = parse_integer<std::uint64_t>(what, index, text, 0, hi, type);
    std::memcpy(dst, &v, static_cast<std::size_t>(gexec::element_bytes({t.code, t.bits, 1})));
  } else {
    throw gexec::error(gexec::errc::unsupported, what + ": dtype " + type + " cannot be given as values");
  }
}

}  // namespace detail

/// "v1,v2,..." as a tensor of `shape` and `dtype`: one value per element (lanes
/// count as elements), or a single value for every element. `what` names the input in
/// errors ("--input x").
inline gexec::ndarray parse_values(std::string_view text, const std::vector<std::int64_t>& shape, DLDataType dtype,
                                   const std::string& what) {
  if (!gexec::is_supported(dtype)) throw gexec::error(gexec::errc::unsupported, what + ": dtype " + gexec::to_string(dtype) + " is not supported");
  if (dtype.lanes > 1 && dtype.bits < 8)
    throw gexec::error(gexec::errc::unsupported, what + ": " + gexec::to_string(dtype) + " values can only be given as a .npy file");
  std::vector<std::string_view> items;
  for (std::size_t start = 0;;) {
    const std::size_t comma = text.find(',', start);
    items.push_back(detail::trim(text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  auto a = gexec::ndarray::empty(shape, dtype);
  const std::uint64_t count = a.numel() * dtype.lanes;
  if (items.size() != 1 && items.size() != count)
    throw gexec::error(gexec::errc::shape_mismatch, what + ": " + std::to_string(items.size()) + " values for " + std::to_string(count) +
                                                        " elements of " + gexec::to_string(dtype) + gexec::detail::shape_to_string(shape) +
                                                        " (give one value per element, or one for all)");
  const DLDataType scalar{dtype.code, dtype.bits, 1};
  const auto step = static_cast<std::size_t>(gexec::element_bytes(scalar));
  auto* p = static_cast<std::byte*>(a.data());
  for (std::uint64_t i = 0; i < count; ++i) {
    const std::size_t k = items.size() == 1 ? 0 : static_cast<std::size_t>(i);
    if (i == 0 || items.size() > 1) detail::store(p + i * step, scalar, what, k, items[k]);
    else std::memcpy(p + i * step, p, step);
  }
  return a;
}

/// Element `i` (lanes counted as elements) of a host tensor, as a double.
inline double element_as_double(const gexec::ndarray& a, std::uint64_t i) {
  const DLDataType t = a.dtype();
  const auto* p = static_cast<const unsigned char*>(a.data()) + i * gexec::element_bytes({t.code, t.bits, 1});
  if (const minifloat* f = narrow_float_format(t)) {
    std::uint32_t bits = p[0];
    if (t.bits == 16) bits |= std::uint32_t{p[1]} << 8;
    return decode(bits, *f);
  }
  if (t.code == kDLFloat && t.bits == 32) {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
  if (t.code == kDLFloat && t.bits == 64) {
    double v;
    std::memcpy(&v, p, 8);
    return v;
  }
  if (t.code == kDLInt) {
    switch (t.bits) {
      case 4: return static_cast<std::int8_t>(p[0] << 4) >> 4;  // the low nibble, sign-extended
      case 8: return static_cast<std::int8_t>(p[0]);
      case 16: { std::int16_t v; std::memcpy(&v, p, 2); return v; }
      case 32: { std::int32_t v; std::memcpy(&v, p, 4); return v; }
      default: { std::int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    }
  }
  switch (t.bits) {
    case 1: return p[0] != 0;
    case 4: return p[0] & 0x0f;
    case 8: return p[0];
    case 16: { std::uint16_t v; std::memcpy(&v, p, 2); return v; }
    case 32: { std::uint32_t v; std::memcpy(&v, p, 4); return v; }
    default: { std::uint64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
  }
}

/// Element `i` as text: integers exactly, floats with 6 significant digits, bools as
/// true/false.
inline std::string format_element(const gexec::ndarray& a, std::uint64_t i) {
  const DLDataType t = a.dtype();
  const auto* p = static_cast<const unsigned char*>(a.data()) + i * gexec::element_bytes({t.code, t.bits, 1});
  if (t.code == kDLUInt && t.bits == 1) return p[0] ? "true" : "false";
  if (t.code == kDLInt && t.bits == 64) {
    std::int64_t v;
    std::memcpy(&v, p, 8);
    return std::to_string(v);
  }
  if (t.code == kDLUInt && t.bits == 64) {
    std::uint64_t v;
    std::memcpy(&v, p, 8);
    return std::to_string(v);
  }
  const double v = element_as_double(a, i);
  if (!is_float(t)) return std::to_string(static_cast<std::int64_t>(v));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace gexec_run
