// libFuzzer target: load_npy on arbitrary bytes, with and without an expected dtype.
// Malformed input must end in gexec::error and nothing else. For an array that loads:
//  - save_npy writes it, and load_npy reads that back as the same array (void descrs
//    told the dtype), and writing that again gives the same bytes;
//  - where the input's preamble and header are those save_npy writes for it, save_npy
//    gives back the input byte for byte;
//  - reading it as its own dtype gives the same array.

#include <gexec/npy.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace {

[[noreturn]] void property_failed(const char* what, const std::string& detail = {}) {
  std::fprintf(stderr, "fuzz_npy: %s\n%s\n", what, detail.c_str());
  std::abort();
}

bool same_array(const gexec::ndarray& a, const gexec::ndarray& b) {
  if (!a.defined() || !b.defined()) return false;
  if (!gexec::same_dtype(a.dtype(), b.dtype())) return false;
  if (!std::equal(a.shape().begin(), a.shape().end(), b.shape().begin(), b.shape().end())) return false;
  if (a.byte_size() != b.byte_size()) return false;
  return a.byte_size() == 0 || std::memcmp(a.data(), b.data(), static_cast<std::size_t>(a.byte_size())) == 0;
}

// The dtypes an expected-dtype load is tried with, picked by the input's last byte.
constexpr DLDataType expected_dtypes[] = {
    gexec::dtypes::boolean,
    gexec::dtypes::int4,
    gexec::dtypes::uint4,
    gexec::dtypes::int8,
    gexec::dtypes::uint8,
    gexec::dtypes::int16,
    gexec::dtypes::uint16,
    gexec::dtypes::float16,
    gexec::dtypes::bfloat16,
    gexec::dtypes::int32,
    gexec::dtypes::float32,
    gexec::dtypes::int64,
    gexec::dtypes::float64,
    {gexec::tvm_float8_e4m3_code, 8, 1},
    {gexec::tvm_float8_e5m2_code, 8, 1},
};

void check_round_trip(std::span<const std::byte> input, const gexec::ndarray& a) {
  std::string saved;
  try {
    saved = gexec::save_npy(a);
  } catch (const gexec::error& e) {
    property_failed("save_npy fails on a loaded array", e.what());
  }
  gexec::ndarray back;
  try {
    back = gexec::load_npy(saved, a.dtype());
  } catch (const gexec::error& e) {
    property_failed("load_npy rejects what save_npy wrote", e.what());
  }
  if (!same_array(a, back)) property_failed("reloading the saved bytes changes the array");
  if (gexec::save_npy(back) != saved) property_failed("saving the reloaded array gives other bytes");
  try {
    if (!same_array(a, gexec::load_npy(input, a.dtype())))
      property_failed("reading as its own dtype changes the array");
  } catch (const gexec::error& e) {
    property_failed("an input that loads is refused when its own dtype is expected", e.what());
  }

  // An input whose preamble and header are the ones save_npy writes for the array it
  // holds comes back byte for byte: the data was read as it lies in the file.
  const std::string_view in(reinterpret_cast<const char*>(input.data()), input.size());
  const std::size_t header_end = saved.size() - static_cast<std::size_t>(a.byte_size());
  if (in.size() == saved.size() && in.substr(0, header_end) == std::string_view(saved).substr(0, header_end) &&
      in != saved)
    property_failed("save_npy(load_npy(x)) differs from x in the data, with the same header");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> input(reinterpret_cast<const std::byte*>(data), size);
  std::optional<gexec::ndarray> loaded;
  try {
    loaded = gexec::load_npy(input);
  } catch (const gexec::error&) {
  }
  if (loaded) check_round_trip(input, *loaded);

  // The same bytes read as a dtype the caller expects: void descrs load, others must match.
  const DLDataType as = expected_dtypes[size ? data[size - 1] % std::size(expected_dtypes) : 0];
  try {
    gexec::ndarray a = gexec::load_npy(input, as);
    if (!gexec::same_dtype(a.dtype(), as)) property_failed("load_npy(bytes, as) gives another dtype");
    if (loaded && !same_array(a, *loaded)) property_failed("load_npy(bytes, as) reads a typed file differently");
    check_round_trip(input, a);
  } catch (const gexec::error& e) {
    if (loaded && gexec::same_dtype(loaded->dtype(), as))
      property_failed("load_npy(bytes, its own dtype) fails where load_npy(bytes) succeeds", e.what());
  }
  return 0;
}
