#pragma once
// .npy files (NumPy's array format, versions 1.0, 2.0 and 3.0) read into host ndarrays,
// and host ndarrays written as .npy files that np.load reads.
//
//   gexec::ndarray x = gexec::load_npy_file("input.npy");                        // float32, int8, bool, ...
//   gexec::ndarray w = gexec::load_npy_file("w.npy", gexec::dtypes::bfloat16);   // ml_dtypes' '<V2'
//   ex.set_input("data", x);
//   ex.run();
//   gexec::save_npy_file("out.npy", ex.get_output(0));
//
// What gexec reads and writes:
//  - descrs: '|b1' bool; '|i1' '<i2' '<i4' '<i8'; '|u1' '<u2' '<u4' '<u8'; '<f2' '<f4'
//    '<f8'. Types numpy does not have are written as ml_dtypes writes them, as raw bytes
//    ("void" descrs): bfloat16 '<V2'; int4, uint4 (one byte per element, as in TVM) and
//    both float8 types '<V1'. ml_dtypes writes float8_e5m2 as '<f1', which np.load
//    refuses; gexec reads '<f1' as e5m2_float8 but writes '<V1', which numpy loads.
//    With npy_names::bits, bfloat16 and float8 are written as their bits instead ('<u2',
//    '|u1'): what TVM's Python users hold (NDArray.numpy() gives bfloat16 as uint16), and
//    what plain numpy reads as numbers.
//  - void descrs ('<V2', '|V1', ...) carry no type: they are read only by the overloads
//    that take the dtype the caller expects, as that dtype when its element size is the
//    void's. Without it they are errc::unsupported; with another size, or a typed descr
//    other than the expected dtype, errc::dtype_mismatch.
//  - big-endian descrs ('>f4', '>i8') are byte-swapped into the host's order on reading;
//    gexec writes little-endian only.
//  - fortran_order True, object arrays ('|O') and structured dtypes (a list as 'descr')
//    are errc::unsupported; complex, string, datetime and other descrs gexec has no dtype
//    for are errc::invalid_dtype.
//  - bytes after the array data are refused (errc::invalid_npy), where np.load ignores
//    them: they are most often further arrays saved into the same file, which a reader
//    of the first one alone would silently drop.
//  - the header is read as NumPy writes it, a Python dict literal of exactly the keys
//    'descr', 'fortran_order' and 'shape' (either quote, any order, whitespace between
//    tokens, trailing commas, `()` for 0-d, the `3L` of Python 2 in 1.0 and 2.0 files),
//    and nothing else of Python (no escapes, no expressions, no duplicate keys).
// Malformed files are errc::invalid_npy naming the source, the key or field and the byte.

#include "config.hpp"

#include <dlpack/dlpack.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "detail/byte_io.hpp"
#include "detail/shape.hpp"
#include "dtype.hpp"
#include "error.hpp"
#include "file_path.hpp"
#include "ndarray.hpp"

GEXEC_NAMESPACE_BEGIN

/// How save_npy names the floats numpy lacks (bfloat16, float8).
enum class npy_names {
  ml_dtypes,  ///< raw bytes ('<V2', '<V1') as ml_dtypes writes them: read back as their dtype
  bits,       ///< unsigned integers of their width ('<u2', '|u1'): their bits, as TVM's Python holds them
};

namespace detail {

inline constexpr char npy_magic[] = "\x93NUMPY";
inline constexpr std::size_t npy_magic_size = 6;
/// numpy pads the header so that the data starts at a multiple of this.
inline constexpr std::size_t npy_alignment = 64;
/// numpy leaves room after the header for the first dimension to grow to this many digits.
inline constexpr std::size_t npy_growth_digits = 21;

[[noreturn]] inline void npy_fail(errc code, const std::string& source, const char* context, const std::string& message,
                                  std::uint64_t at) {
  throw error(code, source + ": " + context + ": " + message + " (at byte " + std::to_string(at) + ")");
}

/// `s` quoted for a message: printable ASCII as is, other bytes as \xNN, long strings cut.
inline std::string npy_quote(std::string_view s) {
  constexpr std::size_t limit = 40;
  std::string out = "'";
  for (std::size_t i = 0; i < s.size() && i < limit; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      constexpr char hex[] = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out + (s.size() > limit ? "'..." : "'");
}

/// The descr save_npy writes for `t`; empty for dtypes .npy cannot hold (lanes > 1).
constexpr std::string_view npy_descr_of(DLDataType t, npy_names names = npy_names::ml_dtypes) noexcept {
  if (t.lanes != 1) return {};
  if (names == npy_names::bits && t.code == kDLBfloat && t.bits == 16) return "<u2";
  if (names == npy_names::bits && (t.code == tvm_float8_e4m3_code || t.code == tvm_float8_e5m2_code) && t.bits == 8) return "|u1";
  switch (t.code) {
    case kDLInt:
      switch (t.bits) {
        case 4:
          return "<V1";
        case 8:
          return "|i1";
        case 16:
          return "<i2";
        case 32:
          return "<i4";
        case 64:
          return "<i8";
      }
      break;
    case kDLUInt:
      switch (t.bits) {
        case 1:
          return "|b1";
        case 4:
          return "<V1";
        case 8:
          return "|u1";
        case 16:
          return "<u2";
        case 32:
          return "<u4";
        case 64:
          return "<u8";
      }
      break;
    case kDLFloat:
      switch (t.bits) {
        case 16:
          return "<f2";
        case 32:
          return "<f4";
        case 64:
          return "<f8";
      }
      break;
    case kDLBfloat:
      return t.bits == 16 ? "<V2" : "";
    case tvm_float8_e4m3_code:
    case tvm_float8_e5m2_code:
      return t.bits == 8 ? "<V1" : "";
  }
  return {};
}

/// What a descr says about the elements: a dtype, or raw bytes of a size (a void descr).
struct npy_element {
  std::optional<DLDataType> dtype;  ///< absent for void descrs
  std::uint64_t size = 0;           ///< bytes per element in the file
  bool big_endian = false;          ///< multi-byte elements stored most significant byte first
};

/// Reads a descr string as numpy writes one: byte order, kind, size ('<f4', '|V2').
/// `fail(code, message)` does not return.
template <class Fail>
npy_element parse_npy_descr(std::string_view d, Fail&& fail) {
  const std::string q = npy_quote(d);
  if (d.size() >= 2 && d[1] == 'O')
    fail(errc::unsupported, "descr " + q + " is an object array (pickled Python objects); gexec reads numbers only");
  if (d.size() < 3 || (d[0] != '<' && d[0] != '>' && d[0] != '|' && d[0] != '='))
    fail(errc::invalid_dtype, "descr " + q + " is not a dtype as numpy writes it (byte order, kind, size: '<f4')");
  const char kind = d[1];
  auto unknown = [&](const char* what) {
    fail(errc::invalid_dtype, "descr " + q + (what ? std::string(" (") + what + ")" : std::string()) +
                                  " has no gexec dtype; gexec reads bool, int, uint, float16/32/64 and void descrs");
  };
  switch (kind) {
    case 'c':
      unknown("complex");
      break;
    case 'U':
      unknown("unicode string");
      break;
    case 'S':
    case 'a':
      unknown("byte string");
      break;
    case 'M':
      unknown("datetime");
      break;
    case 'm':
      unknown("timedelta");
      break;
  }
  std::uint64_t size = 0;
  std::size_t i = 2;
  for (; i < d.size() && d[i] >= '0' && d[i] <= '9' && i < 12; ++i)
    size = size * 10 + static_cast<unsigned>(d[i] - '0');
  if (i != d.size() || d[2] == '0')
    fail(errc::invalid_dtype, "descr " + q + " is not a dtype as numpy writes it (byte order, kind, size: '<f4')");
  npy_element e;
  e.size = size;
  e.big_endian = d[0] == '>' && size > 1;
  auto sized = [&](std::uint8_t code) -> std::optional<DLDataType> {
    if (size == 1 || size == 2 || size == 4 || size == 8)
      return DLDataType{code, static_cast<std::uint8_t>(size * 8), 1};
    return std::nullopt;
  };
  switch (kind) {
    case 'b':
      if (size == 1) e.dtype = dtypes::boolean;
      break;
    case 'i':
      e.dtype = sized(kDLInt);
      break;
    case 'u':
      e.dtype = sized(kDLUInt);
      break;
    case 'f':
      // ml_dtypes writes float8_e5m2 so, and no other type.
      if (size == 1)
        e.dtype = DLDataType{tvm_float8_e5m2_code, 8, 1};
      else
        e.dtype = sized(kDLFloat);
      break;
    case 'V':
      return e;
  }
  if (!e.dtype) unknown(nullptr);
  return e;
}

/// The three values of a .npy header, with where each was found.
struct npy_header {
  std::string descr;
  bool fortran_order = false;
  std::vector<std::int64_t> shape;
  std::uint64_t descr_at = 0, fortran_order_at = 0, shape_at = 0;
};

/// Reads the Python dict literal of a .npy header (see the top of this file for what is
/// accepted); `offset` is where the text starts in the file, for messages.
class npy_header_parser {
 public:
  npy_header_parser(std::string_view text, std::uint64_t offset, unsigned major, const std::string& source)
      : text_(text), offset_(offset), major_(major), source_(source) {}

  npy_header parse() {
    npy_header h;
    bool have_descr = false, have_fortran = false, have_shape = false;
    skip_space();
    if (!eat('{')) fail("the header is not a Python dict: it starts with " + describe_here());
    for (;;) {
      skip_space();
      if (eat('}')) break;
      const std::size_t key_at = i_;
      const std::string key = quoted("a quoted key");
      skip_space();
      if (!eat(':')) fail("expected ':' after key " + npy_quote(key) + ", found " + describe_here());
      skip_space();
      auto once = [&](bool& seen) {
        if (seen) fail("duplicate key " + npy_quote(key), key_at);
        seen = true;
      };
      if (key == "descr") {
        once(have_descr);
        h.descr_at = offset_ + i_;
        if (peek() == '[')
          fail(errc::unsupported,
               "'descr' is a list of fields (a structured dtype); gexec reads arrays of one element type", i_);
        h.descr = quoted("'descr' as a quoted string");
      } else if (key == "fortran_order") {
        once(have_fortran);
        h.fortran_order_at = offset_ + i_;
        h.fortran_order = boolean();
      } else if (key == "shape") {
        once(have_shape);
        h.shape_at = offset_ + i_;
        h.shape = shape_tuple();
      } else {
        fail("unknown key " + npy_quote(key) + " (a .npy header has 'descr', 'fortran_order' and 'shape')", key_at);
      }
      skip_space();
      if (eat(',')) continue;
      if (eat('}')) break;
      fail("expected ',' or '}' after the value of " + npy_quote(key) + ", found " + describe_here());
    }
    skip_space();
    if (i_ != text_.size()) fail("unexpected " + describe_here() + " after the header's dict");
    for (auto [seen, name] :
         {std::pair{have_descr, "'descr'"}, {have_fortran, "'fortran_order'"}, {have_shape, "'shape'"}})
      if (!seen) fail(std::string("the header has no key ") + name, 0);
    return h;
  }

 private:
  [[noreturn]] void fail(errc code, const std::string& message, std::size_t at) const {
    npy_fail(code, source_, "header", message, offset_ + at);
  }
  [[noreturn]] void fail(const std::string& message, std::size_t at) const { fail(errc::invalid_npy, message, at); }
  [[noreturn]] void fail(const std::string& message) const { fail(message, i_); }

  [[nodiscard]] int peek() const noexcept { return i_ < text_.size() ? static_cast<unsigned char>(text_[i_]) : -1; }
  bool eat(char c) noexcept {
    if (peek() != static_cast<unsigned char>(c)) return false;
    ++i_;
    return true;
  }
  void skip_space() noexcept {
    while (i_ < text_.size() &&
           (text_[i_] == ' ' || text_[i_] == '\t' || text_[i_] == '\n' || text_[i_] == '\r' || text_[i_] == '\f'))
      ++i_;
  }
  [[nodiscard]] std::string describe_here() const {
    if (i_ >= text_.size()) return "the end of the header";
    return npy_quote(text_.substr(i_, 1));
  }
  static bool is_word_char(int c) noexcept {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  }

  // A string in single or double quotes, without escapes.
  std::string quoted(const char* what) {
    const int quote = peek();
    if (quote != '\'' && quote != '"') fail(std::string("expected ") + what + ", found " + describe_here());
    const std::size_t start = ++i_;
    while (i_ < text_.size() && text_[i_] != quote) {
      if (text_[i_] == '\\') fail("escape sequences in header strings are not supported");
      if (text_[i_] == '\n') break;
      ++i_;
    }
    if (i_ >= text_.size() || text_[i_] != quote) fail("unterminated string", start - 1);
    return std::string(text_.substr(start, i_++ - start));
  }

  bool boolean() {
    const std::size_t start = i_;
    while (is_word_char(peek())) ++i_;
    const std::string_view word = text_.substr(start, i_ - start);
    if (word == "True") return true;
    if (word == "False") return false;
    i_ = start;
    fail("'fortran_order' must be True or False, found " + (word.empty() ? describe_here() : npy_quote(word)));
  }

  // (), (3,), (2, 3) or (2, 3,): a tuple of non-negative integers.
  std::vector<std::int64_t> shape_tuple() {
    if (!eat('(')) fail("'shape' must be a tuple such as (2, 3), found " + describe_here());
    std::vector<std::int64_t> shape;
    bool comma = false;
    for (;;) {
      skip_space();
      if (eat(')')) break;
      if (shape.size() == static_cast<std::size_t>(max_ndim))
        fail("'shape' has more than " + std::to_string(max_ndim) + " dimensions, gexec's limit");
      shape.push_back(dimension(shape.size()));
      skip_space();
      if (eat(',')) {
        comma = true;
        continue;
      }
      if (eat(')')) break;
      fail("expected ',' or ')' in 'shape', found " + describe_here());
    }
    if (shape.size() == 1 && !comma)
      fail("'shape' (" + std::to_string(shape[0]) + ") is a number, not a tuple: a 1-D shape is written (" +
               std::to_string(shape[0]) + ",)",
           i_ - 1);
    return shape;
  }

  std::int64_t dimension(std::size_t index) {
    const std::size_t start = i_;
    const bool negative = eat('-');
    const std::size_t digits = i_;
    std::uint64_t value = 0;
    bool too_large = false;
    constexpr auto max = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    while (peek() >= '0' && peek() <= '9') {
      const auto d = static_cast<unsigned>(peek() - '0');
      if (value > (max - d) / 10)
        too_large = true;
      else
        value = value * 10 + d;
      ++i_;
    }
    const std::string dim = "dimension " + std::to_string(index) + " of 'shape'";
    if (i_ == digits) fail("expected " + dim + " (an integer), found " + describe_here());
    if (text_[digits] == '0' && i_ - digits > 1) fail(dim + " has leading zeros", start);
    if (major_ <= 2 && (peek() == 'L' || peek() == 'l')) ++i_;  // Python 2's long
    if (is_word_char(peek()) || peek() == '.') fail(dim + " is not an integer", start);
    const std::string_view written = text_.substr(start, i_ - start);
    if (negative && (value != 0 || too_large)) fail(dim + " is negative: " + std::string(written), start);
    if (too_large) fail(dim + " (" + npy_quote(written) + ") exceeds 2^63-1", start);
    return static_cast<std::int64_t>(value);
  }

  std::string_view text_;
  std::size_t i_ = 0;
  std::uint64_t offset_;
  unsigned major_;
  const std::string& source_;
};

/// Reverses the bytes of each `size`-byte element: big-endian data into the host's order.
inline void npy_swap_bytes(void* data, std::uint64_t count, std::uint64_t size) noexcept {
  auto* p = static_cast<unsigned char*>(data);
  auto each = [&](auto swap) {
    using T = decltype(swap(0));
    for (std::uint64_t i = 0; i < count; ++i, p += sizeof(T)) {
      T v;
      std::memcpy(&v, p, sizeof v);
      v = swap(v);
      std::memcpy(p, &v, sizeof v);
    }
  };
  switch (size) {
    case 2:
      each([](std::uint16_t v) { return static_cast<std::uint16_t>(__builtin_bswap16(v)); });
      break;
    case 4:
      each([](std::uint32_t v) { return static_cast<std::uint32_t>(__builtin_bswap32(v)); });
      break;
    case 8:
      each([](std::uint64_t v) { return static_cast<std::uint64_t>(__builtin_bswap64(v)); });
      break;
    default:
      for (std::uint64_t i = 0; i < count; ++i, p += size)
        for (std::uint64_t a = 0, b = size - 1; a < b; ++a, --b) std::swap(p[a], p[b]);
  }
}

/// Reads a whole .npy from a byte_reader or a file_reader (made with errc::invalid_npy);
/// `as`, when given, is the dtype the caller expects (checked by the caller to be one
/// gexec stores, with one lane).
template <class Reader>
ndarray read_npy(Reader& in, const std::string& source, std::optional<DLDataType> as) {
  in.set_context("preamble");
  char magic[npy_magic_size] = {};
  const auto have = std::min<std::uint64_t>(npy_magic_size, in.remaining());
  in.read_into(magic, have, "magic string");
  if (std::memcmp(magic, npy_magic, static_cast<std::size_t>(have)) != 0)
    npy_fail(errc::invalid_npy, source, "preamble", "not a .npy file: it does not start with \"\\x93NUMPY\"", 0);
  if (have < npy_magic_size)
    npy_fail(
        errc::invalid_npy, source, "preamble",
        "truncated: magic string needs " + std::to_string(npy_magic_size) + " bytes, " + std::to_string(have) + " left",
        0);
  const unsigned major = in.template read<std::uint8_t>("format version");
  const unsigned minor = in.template read<std::uint8_t>("format version");
  if (major < 1 || major > 3 || minor != 0)
    npy_fail(errc::invalid_npy, source, "preamble",
             "format version " + std::to_string(major) + "." + std::to_string(minor) + "; gexec reads 1.0, 2.0 and 3.0",
             npy_magic_size);
  const std::uint64_t header_size =
      major == 1 ? in.template read<std::uint16_t>("header length") : in.template read<std::uint32_t>("header length");
  in.set_context("header");
  in.require(header_size, "header");
  const std::uint64_t header_at = in.position();
  std::string text;
  try {
    text.resize(static_cast<std::size_t>(header_size));
  } catch (const std::exception&) {  // std::bad_alloc, std::length_error
    in.fail(errc::out_of_memory, "cannot allocate " + std::to_string(header_size) + " bytes for the header");
  }
  in.read_into(text.data(), header_size, "header");
  const npy_header h = npy_header_parser(text, header_at, major, source).parse();

  // The element type: the descr's, checked against the caller's if given.
  const npy_element e = parse_npy_descr(h.descr, [&](errc code, const std::string& message) {
    npy_fail(code, source, "header: 'descr'", message, h.descr_at);
  });
  DLDataType dtype{};
  if (!e.dtype) {
    if (!as)
      npy_fail(errc::unsupported, source, "header: 'descr'",
               "descr " + npy_quote(h.descr) + " holds raw " + std::to_string(e.size) +
                   "-byte elements of a type numpy does not know (ml_dtypes saves bfloat16, float8 and int4 so); "
                   "load it with the overload that takes the dtype you expect",
               h.descr_at);
    if (element_bytes(*as) != e.size)
      npy_fail(errc::dtype_mismatch, source, "header: 'descr'",
               "descr " + npy_quote(h.descr) + " holds " + std::to_string(e.size) + "-byte elements, not " +
                   to_string(*as) + " (" + std::to_string(element_bytes(*as)) + " bytes)",
               h.descr_at);
    dtype = *as;
  } else {
    dtype = *e.dtype;
    if (as && !same_dtype(dtype, *as))
      npy_fail(errc::dtype_mismatch, source, "header: 'descr'",
               "descr " + npy_quote(h.descr) + " is " + to_string(dtype) + ", not the expected " + to_string(*as),
               h.descr_at);
  }
  if (h.fortran_order)
    npy_fail(errc::unsupported, source, "header: 'fortran_order'",
             "the array is in Fortran (column-major) order; gexec reads C order only (save np.ascontiguousarray(a))",
             h.fortran_order_at);

  // The data: exactly what the shape needs, to the end of the input.
  std::vector<std::int64_t> shape = h.shape;
  const auto bytes = checked_byte_size(shape, dtype);
  if (!bytes)
    npy_fail(errc::invalid_npy, source, "header: 'shape'",
             "shape " + shape_to_string(shape) + " of " + to_string(dtype) + " needs more than 2^63-1 bytes",
             h.shape_at);
  const std::string what = "shape " + shape_to_string(shape) + " of " + to_string(dtype);
  if (*bytes > in.remaining())
    npy_fail(errc::invalid_npy, source, "array data",
             "truncated: " + what + " needs " + std::to_string(*bytes) + " bytes, " + std::to_string(in.remaining()) +
                 " left",
             in.position());
  if (in.remaining() != *bytes)
    npy_fail(errc::invalid_npy, source, "array data",
             std::to_string(in.remaining() - *bytes) + (in.remaining() - *bytes == 1 ? " byte" : " bytes") +
                 " after the array data (" + what + "); a .npy file holds one array",
             in.position() + *bytes);
  in.set_context("array data");
  ndarray a = allocate_tensor(in, shape, dtype, *bytes);
  in.read_into(a.data(), *bytes, "array data");
  if (e.big_endian) npy_swap_bytes(a.data(), a.numel(), e.size);
  return a;
}

/// Throws errc::invalid_argument unless `as` is a dtype .npy can hold for gexec.
inline DLDataType npy_expected(DLDataType as, const char* who) {
  if (!is_supported(as) || as.lanes != 1)
    throw error(errc::invalid_argument,
                std::string(who) + ": cannot read as " + to_string(as) +
                    (as.lanes != 1 ? ": .npy elements have one lane" : ": not a dtype gexec stores"));
  return as;
}

inline ndarray load_npy_bytes(std::span<const std::byte> bytes, std::optional<DLDataType> as) {
  const std::string source = "npy";
  byte_reader in(bytes, source, errc::invalid_npy);
  return read_npy(in, source, as);
}

inline ndarray load_npy_path(const file_path& path, std::optional<DLDataType> as) {
  const regular_file file(path, "npy file");
  const std::string source = "npy " + path.string();
  file_reader in(file, source, errc::invalid_npy);
  return read_npy(in, source, as);
}

/// How save_npy lays out a header whose dict takes `dict_size` bytes: format 1.0 (a 10-byte
/// preamble) where the header fits its 16-bit length, else 2.0 (12 bytes); the header is
/// the dict, spaces (at least one) and a newline, so that the data starts aligned.
struct npy_layout {
  unsigned major;
  std::size_t preamble;
  std::size_t header;
};
constexpr npy_layout npy_layout_for(std::size_t dict_size) noexcept {
  auto header_for = [&](std::size_t preamble) {
    const std::size_t header = dict_size + 1;
    return header + npy_alignment - (preamble + header) % npy_alignment;
  };
  if (const std::size_t header = header_for(10); header <= 0xFFFF) return {1, 10, header};
  return {2, 12, header_for(12)};
}

/// A name for a temporary file beside `path`, unique within this process.
inline std::string npy_temp_path(const file_path& path) {
  static std::atomic<unsigned long> counter{0};
  return std::string(path.directory_prefix()) + "." + path.filename().string() + ".tmp-" + std::to_string(::getpid()) + "-" +
         std::to_string(counter++);
}

}  // namespace detail

/// Reads a .npy file's bytes into a host ndarray owning its data. Void descrs (ml_dtypes'
/// bfloat16, float8, int4) need the overload below that is told the dtype.
inline ndarray load_npy(std::span<const std::byte> bytes) { return detail::load_npy_bytes(bytes, std::nullopt); }
inline ndarray load_npy(std::string_view bytes) { return load_npy(detail::as_bytes(bytes)); }

/// Reads a .npy file's bytes as dtype `as`: its descr must be `as` or a void of `as`'s
/// element size, else errc::dtype_mismatch.
inline ndarray load_npy(std::span<const std::byte> bytes, DLDataType as) {
  return detail::load_npy_bytes(bytes, detail::npy_expected(as, "load_npy"));
}
inline ndarray load_npy(std::string_view bytes, DLDataType as) { return load_npy(detail::as_bytes(bytes), as); }

/// Reads a .npy file: only a regular file (errc::io otherwise, naming the path), its header
/// checked before the data's storage is allocated, the data read straight into it.
inline ndarray load_npy_file(const file_path& path) { return detail::load_npy_path(path, std::nullopt); }

/// load_npy_file reading the elements as dtype `as` (see load_npy(bytes, as)).
inline ndarray load_npy_file(const file_path& path, DLDataType as) {
  return detail::load_npy_path(path, detail::npy_expected(as, "load_npy_file"));
}

/// The bytes of a .npy file holding `a` (format 1.0, or 2.0 for a header too long for it),
/// as np.save writes them. `a` must be a defined, compact host tensor of one lane.
/// `names`: how bfloat16 and float8 are named (see npy_names).
inline std::string save_npy(const ndarray& a, npy_names names = npy_names::ml_dtypes) {
  if (!a.defined()) throw error(errc::invalid_argument, "save_npy: undefined ndarray");
  if (a.device().device_type != kDLCPU)
    throw error(errc::device_mismatch,
                "save_npy: tensor is on " + to_string(a.device()) + "; copy it to the host first");
  if (!a.is_contiguous())
    throw error(errc::invalid_argument, "save_npy: tensor is strided; .npy holds compact C-order arrays");
  const std::string_view descr = detail::npy_descr_of(a.dtype(), names);
  if (descr.empty() || !is_supported(a.dtype()))
    throw error(errc::unsupported,
                "save_npy: dtype " + to_string(a.dtype()) +
                    (a.dtype().lanes != 1 ? " has lanes; .npy elements have one" : " has no .npy descr"));

  std::string dict = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': (";
  for (int i = 0; i < a.ndim(); ++i) dict += (i ? ", " : "") + std::to_string(a.shape()[i]);
  dict += a.ndim() == 1 ? ",), }" : "), }";
  if (a.ndim() > 0) dict.append(detail::npy_growth_digits - std::to_string(a.shape()[0]).size(), ' ');
  const auto layout = detail::npy_layout_for(dict.size());
  const auto data_bytes = static_cast<std::size_t>(a.byte_size());
  std::string out;
  try {
    out.reserve(layout.preamble + layout.header + data_bytes);
  } catch (const std::exception&) {  // std::bad_alloc, std::length_error
    throw error(errc::out_of_memory,
                "save_npy: cannot allocate " + std::to_string(layout.preamble + layout.header + data_bytes) + " bytes");
  }
  out.append(detail::npy_magic, detail::npy_magic_size);
  out += static_cast<char>(layout.major);
  out += '\0';
  for (std::size_t i = 0; i < layout.preamble - detail::npy_magic_size - 2; ++i)
    out += static_cast<char>((layout.header >> (8 * i)) & 0xFF);
  out += dict;
  out.append(layout.header - dict.size() - 1, ' ');
  out += '\n';
  if (data_bytes) out.append(static_cast<const char*>(a.data()), data_bytes);
  return out;
}

/// Writes save_npy(a) to `path` whole or not at all: into a new file beside it, then
/// renamed over it, so that readers see the old file or the new one, never a part (a
/// symbolic link at `path` is replaced, not followed).
inline void save_npy_file(const file_path& path, const ndarray& a, npy_names names = npy_names::ml_dtypes) {
  const std::string bytes = save_npy(a, names);
  const std::string name = "npy file " + path.string();
  auto fail = [&](const char* doing, int err) {
    throw error(errc::io, std::string("cannot ") + doing + " " + name + ": " + std::generic_category().message(err));
  };
  if (path.filename().empty()) fail("write", EISDIR);
  std::string temp;
  int fd = -1;
  for (int attempt = 0; fd < 0; ++attempt) {
    temp = detail::npy_temp_path(path);
    do fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW, 0666);
    while (fd < 0 && errno == EINTR);
    if (fd < 0 && (errno != EEXIST || attempt == 100)) fail("create a temporary file for", errno);
  }
  struct cleanup {
    int fd;
    const std::string& temp;
    bool done = false;
    ~cleanup() {
      if (fd >= 0) ::close(fd);
      if (!done) ::unlink(temp.c_str());
    }
  } guard{fd, temp};
  const char* p = bytes.data();
  std::size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("write", n < 0 ? errno : EIO);
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) fail("write", errno);
  const int rc = ::close(std::exchange(guard.fd, -1));
  if (rc != 0 && errno != EINTR) fail("write", errno);
  if (::rename(temp.c_str(), path.c_str()) != 0) fail("replace", errno);
  guard.done = true;
}

GEXEC_NAMESPACE_END
