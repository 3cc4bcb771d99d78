#pragma once
// The characters, strings and numbers of JSON as gexec's own readers read them (the
// graph scanner, graph/scanner.hpp; any value, json_value.hpp): a cursor over the text
// that consumes what it expects and says false on anything else. Strings are decoded as Boost.JSON decodes them
// (escapes, surrogate pairs, UTF-8 checked); numbers are the plain integers TVM writes.

#include "../config.hpp"

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "json_path.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

/// A position in a JSON text that ends in '}' and whitespace (graph_scanner::run checks
/// it): reads past the position are bounded by that last '}' where not by end_.
/// string_body() and what it calls are bounded by end_ alone, for texts of any ending
/// (json_value_reader reads those).
class json_cursor {
 protected:
  explicit json_cursor(std::string_view text) noexcept
      : p_(text.data()), end_(text.data() + text.size()), begin_(text.data()) {}

  // ---- characters ---------------------------------------------------------------

  static std::uint64_t load8(const char* s) noexcept {
    std::uint64_t x;
    std::memcpy(&x, s, 8);
    return x;
  }
  static bool is_ws(char c) noexcept { return ws_table[static_cast<unsigned char>(c)] != 0; }
  void skip_ws() noexcept {
    while (is_ws(*p_)) ++p_;
  }
  /// Skips whitespace, then consumes `c` (not '}') if it is next.
  bool eat(char c) noexcept {
    if (*p_ == c) return ++p_, true;
    skip_ws();
    if (*p_ == c) return ++p_, true;
    return false;
  }
  /// eat(c) for ':' or ',', and one space after it (as TVM writes them).
  bool eat_sep(char c) noexcept {
    if (!eat(c)) return false;
    p_ += *p_ == ' ';
    return true;
  }
  /// Skips whitespace; whether `c` is next (not consumed).
  bool peek(char c) noexcept {
    skip_ws();
    return *p_ == c;
  }
  /// After a value in an array or object: true on ',' (another follows), false on
  /// `close` (consumed); `bad` is set on anything else, and on an inner object closing
  /// at the text's last '}'.
  bool next_or_close(char close, bool& bad, bool top = false) noexcept {
    skip_ws();
    const char c = *p_;
    if (c == ',') {
      ++p_;
      p_ += *p_ == ' ';
      return true;
    }
    if (c != close || (p_ == last_ && !top)) {
      bad = true;
      return false;
    }
    ++p_;
    return false;
  }
  /// Consumes `k` followed by a closing quote (the opening one already consumed).
  template <std::size_t N>
  bool word(const char (&k)[N]) noexcept {
    constexpr std::size_t len = N - 1;
    if (static_cast<std::size_t>(end_ - p_) <= len || std::memcmp(p_, k, len) != 0 || p_[len] != '"') return false;
    p_ += len + 1;
    return true;
  }
  /// Consumes the characters of `k` if they come next, as they are.
  template <std::size_t N>
  bool lit(const char (&k)[N]) noexcept {
    constexpr std::size_t len = N - 1;
    if (last_ - p_ < static_cast<std::ptrdiff_t>(len)) return false;
    if constexpr (len >= 8) {
      if (!equal_long(p_, k, len)) return false;
    } else if (std::memcmp(p_, k, len) != 0) {
      return false;
    }
    p_ += len;
    return true;
  }
  /// Whether a[0, k) equals b[0, k), k >= 8, eight bytes at a time.
  static bool equal_long(const char* a, const char* b, std::size_t k) noexcept {
    std::size_t j = 0;
    for (; j + 8 <= k; j += 8)
      if (load8(a + j) != load8(b + j)) return false;
    return j == k || load8(a + k - 8) == load8(b + k - 8);
  }
  /// `"k"` as a whole string value.
  template <std::size_t N>
  bool quoted(const char (&k)[N]) noexcept {
    return eat('"') && word(k);
  }

  /// Where a string that had to be decoded is kept: until the next string decoded for
  /// now, until the node is done, or until the scan is.
  enum class keep : std::uint8_t { now, node, graph };

  /// The rest of a string whose opening quote is consumed. Printable ASCII without
  /// escapes is a view into the text; anything else goes to string_slow(). `name`: the
  /// string must hold no control character, graph_rules::printable_name (which printable
  /// ASCII keeps).
  bool string_body(std::string_view& out, keep k = keep::now, bool name = false) {
    const char* s = p_;
    constexpr std::uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    while (end_ - p_ >= 8) {
      const std::uint64_t x = load8(p_);
      const std::uint64_t q = x ^ (ones * '"'), b = x ^ (ones * '\\');
      const std::uint64_t special = ((q - ones) & ~q) | ((b - ones) & ~b) | ((x - ones * 0x20) & ~x) | ((x + ones * 1) & highs) | x;
      // A quote, backslash, control or non-ASCII byte, or DEL (0x7f + 1 sets the high bit).
      // Borrows and carries run toward later bytes only, so the first byte flagged is one.
      if ((special & highs) != 0) {
        if constexpr (std::endian::native != std::endian::little) break;
        p_ += std::countr_zero(special & highs) / 8;
        if (*p_ != '"') [[unlikely]]
          return slow(s, out, k, name);
        out = std::string_view(s, static_cast<std::size_t>(p_ - s));
        ++p_;
        return true;
      }
      p_ += 8;
    }
    for (; p_ != end_; ++p_) {
      const auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        out = std::string_view(s, static_cast<std::size_t>(p_ - s));
        ++p_;
        return true;
      }
      if (c < 0x20 || c >= 0x7f || c == '\\') return slow(s, out, k, name);
    }
    return false;
  }
  bool string_value(std::string_view& out, keep k = keep::now) { return eat('"') && string_body(out, k); }
  /// Whether `s`, which string_body() returned, is the text itself (not decoded): the
  /// string just read ends where `s` does.
  bool raw(std::string_view s) const noexcept { return s.data() + s.size() + 1 == p_; }

  bool slow(const char* s, std::string_view& out, keep k, bool name) {
    const std::string_view v = string_slow(s, k, name);  // by value, so that `out` stays in registers
    if (v.data() == nullptr) return false;
    out = v;
    return true;
  }
  /// string_body() from `s` on, for strings with escapes, bytes past ASCII or DEL: null
  /// on what Boost.JSON refuses (a control character, an unknown escape, a lone
  /// surrogate, UTF-8 that is not well formed) and on a `name` that breaks
  /// graph_rules::printable_name. Without escapes, a view into the text.
  [[gnu::noinline, gnu::cold]] std::string_view string_slow(const char* s, keep k, bool name) {
    constexpr std::string_view fail;
    std::string* to = nullptr;  // the decoded string, from the first escape on
    const char* plain = s;      // text not yet copied to `to`
    const char* q = s;
    auto hex4 = [&](const char* h, unsigned& u) {
      if (end_ - h < 4) return false;
      u = 0;
      for (int j = 0; j < 4; ++j) {
        const unsigned c = static_cast<unsigned char>(h[j]);
        const unsigned d = c - '0' < 10u ? c - '0' : (c | 0x20u) - 'a' < 6u ? (c | 0x20u) - 'a' + 10 : 16;
        if (d == 16) return false;
        u = u * 16 + d;
      }
      return true;
    };
    while (q != end_) {
      const auto c = static_cast<unsigned char>(*q);
      if (c == '"') break;
      if (c < 0x20) return fail;
      if (c < 0x80 && c != '\\') {
        ++q;
        continue;
      }
      if (c >= 0x80) {  // well-formed UTF-8 (Unicode 15, table 3-7), as Boost.JSON checks it
        const std::ptrdiff_t len = utf8_sequence(q, end_ - q);
        if (len == 0) return fail;
        q += len;
        continue;
      }
      // An escape: what came before it is copied as it is, the escape decoded.
      if (!to) {
        if (k == keep::now) scratch_.clear();
        to = k == keep::now ? &scratch_ : (k == keep::node ? node_kept_ : graph_kept_).emplace_back(std::make_unique<std::string>()).get();
      }
      to->append(plain, q);
      if (end_ - q < 2) return fail;
      switch (q[1]) {
        case '"': *to += '"'; break;
        case '\\': *to += '\\'; break;
        case '/': *to += '/'; break;
        case 'b': *to += '\b'; break;
        case 'f': *to += '\f'; break;
        case 'n': *to += '\n'; break;
        case 'r': *to += '\r'; break;
        case 't': *to += '\t'; break;
        case 'u': {
          unsigned u = 0;
          if (!hex4(q + 2, u)) return fail;
          q += 4;
          if (u >= 0xd800 && u <= 0xdfff) {  // a surrogate pair, or Boost.JSON refuses it
            unsigned low = 0;
            if (u > 0xdbff || end_ - q < 8 || q[2] != '\\' || q[3] != 'u' || !hex4(q + 4, low) || low < 0xdc00 || low > 0xdfff) return fail;
            q += 6;
            u = 0x10000 + ((u - 0xd800) << 10) + (low - 0xdc00);
          }
          if (u < 0x80) {
            *to += static_cast<char>(u);
          } else if (u < 0x800) {
            *to += static_cast<char>(0xc0 | (u >> 6));
            *to += static_cast<char>(0x80 | (u & 0x3f));
          } else if (u < 0x10000) {
            *to += static_cast<char>(0xe0 | (u >> 12));
            *to += static_cast<char>(0x80 | ((u >> 6) & 0x3f));
            *to += static_cast<char>(0x80 | (u & 0x3f));
          } else {
            *to += static_cast<char>(0xf0 | (u >> 18));
            *to += static_cast<char>(0x80 | ((u >> 12) & 0x3f));
            *to += static_cast<char>(0x80 | ((u >> 6) & 0x3f));
            *to += static_cast<char>(0x80 | (u & 0x3f));
          }
          break;
        }
        default: return fail;
      }
      q += 2;
      plain = q;
    }
    if (q == end_) return fail;
    std::string_view out(s, static_cast<std::size_t>(q - s));
    if (to) {
      to->append(plain, q);
      out = *to;
    }
    p_ = q + 1;
    return !name || !has_control_character(out) ? out : fail;
  }
  /// Consumes the rest of a string (opening quote consumed) if it is `same`, a view
  /// into the text that string_body() returned.
  bool same_string(std::string_view same) noexcept {
    const std::size_t k = same.size() + 1;  // with its closing quote
    if (same.empty() || static_cast<std::size_t>(end_ - p_) < k) return false;
    if constexpr (std::endian::native == std::endian::little) {
      if (k <= 8 && end_ - p_ >= 8 && end_ - same.data() >= 8) {
        const std::uint64_t mask = k == 8 ? ~std::uint64_t{0} : (std::uint64_t{1} << (8 * k)) - 1;
        if (((load8(p_) ^ load8(same.data())) & mask) != 0) return false;
        p_ += k;
        return true;
      }
    }
    if (k >= 8 ? !equal_long(p_, same.data(), k) : std::memcmp(p_, same.data(), k) != 0) return false;
    p_ += k;
    return true;
  }

  // ---- numbers -------------------------------------------------------------------

  static unsigned digit(char c) noexcept { return static_cast<unsigned char>(c - '0'); }
  /// A JSON integer in [lo, hi] with at most 18 digits.
  bool integer(std::int64_t& out, std::int64_t lo, std::int64_t hi) noexcept {
    if (digit(*p_) >= 10) skip_ws();
    const bool neg = *p_ == '-';
    p_ += neg;
    const char* s = p_;
    std::uint64_t v = 0;
    for (unsigned e; (e = digit(*p_)) < 10; ++p_) v = v * 10 + e;
    const auto digits = p_ - s;
    if (digits == 0 || digits > 18 || (*s == '0' && digits > 1)) return false;
    // A fraction or exponent after the digits fails the caller's check of what comes next.
    const std::int64_t x = neg ? -static_cast<std::int64_t>(v) : static_cast<std::int64_t>(v);
    if ((neg && v == 0) || x < lo || x > hi) return false;  // "-0": left to the other readers
    out = x;
    return true;
  }
  /// A non-negative JSON integer that fits in 32 bits.
  bool u32(std::uint32_t& out) noexcept {
    unsigned d = digit(*p_);
    if (d >= 10) {
      skip_ws();
      d = digit(*p_);
      if (d >= 10) return false;
    }
    const char* s = p_++;
    std::uint64_t v = d;
    for (unsigned e; (e = digit(*p_)) < 10; ++p_) v = v * 10 + e;
    const auto digits = p_ - s;
    if (digits > 10 || (d == 0 && digits > 1) || v > std::numeric_limits<std::uint32_t>::max()) return false;
    // A fraction or exponent after the digits fails the caller's check of what comes next.
    out = static_cast<std::uint32_t>(v);
    return true;
  }
  /// A string of decimal digits as TVM writes numeric node attributes (std::from_chars
  /// into uint32: leading zeros allowed, nothing else), its opening quote consumed.
  bool u32_body(std::uint32_t& out) noexcept {
    if (const unsigned d = digit(*p_); d < 10 && p_[1] == '"') {  // one digit, as TVM writes most of them
      out = d;
      p_ += 2;
      return true;
    }
    const char* s = p_;
    std::uint64_t v = 0;
    while (static_cast<unsigned char>(*p_ - '0') < 10) v = v * 10 + static_cast<unsigned>(*p_++ - '0');
    const auto digits = p_ - s;
    if (digits == 0 || digits > 19 || v > std::numeric_limits<std::uint32_t>::max() || *p_ != '"') return false;
    ++p_;
    out = static_cast<std::uint32_t>(v);
    return true;
  }

  static constexpr auto ws_table = [] {
    std::array<std::uint8_t, 256> t{};
    t[' '] = t['\n'] = t['\r'] = t['\t'] = 1;
    return t;
  }();

  const char* p_;
  const char* end_;
  const char* begin_;
  const char* last_ = nullptr;  // the text's last '}'
  std::string scratch_;              // a string decoded for now (keep::now)
  std::vector<std::unique_ptr<std::string>> node_kept_, graph_kept_;  // strings decoded for keep::node, keep::graph (stable addresses)
};

}  // namespace detail
GEXEC_NAMESPACE_END
