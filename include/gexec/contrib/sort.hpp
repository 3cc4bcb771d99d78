#pragma once
// TVM's sort functions, which compiled kernels look up through the environment
// (TVMBackendGetFuncFromEnv): on CPU, TVM up to v0.19 lowers relay.argsort,
// relay.sort and relay.topk to calls of "tvm.contrib.sort.argsort", "...sort" and
// "...topk" instead of generating code for them. Opt-in, so a program that runs no such
// model does not carry them:
//
//   #include <gexec/contrib/sort.hpp>
//   gexec::contrib::register_sort_functions();      // into runtime::global()
//
// The results are those of TVM v0.19.0 (src/runtime/contrib/sort/sort.cc) bit for bit:
// the same arguments, dtypes and order. Equal values keep their original order, in
// descending order too. TVM compares with < and >, which NaN defeats, so a row holding
// NaN comes out however std::stable_sort and the std heap functions arrange it; gexec
// performs the same steps with the same comparisons, so it agrees with TVM built on the
// same C++ standard library (libstdc++ on Linux).
//
// Where TVM misbehaves on arguments its compiled code never passes, gexec does not copy
// it: byte_offset is honoured (TVM ignores it), topk's k <= -2 means "all" as 0 and -1
// do (TVM fails in vector::reserve), rows past 2^31 elements do not overflow, and a bad
// tensor, axis or dtype is an error naming the function and the argument instead of
// undefined behaviour.

#include "../config.hpp"

#include <dlpack/dlpack.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "../dtype.hpp"
#include "../error.hpp"
#include "../packed_function.hpp"
#include "../runtime.hpp"
#include "../tvm_abi.hpp"

GEXEC_NAMESPACE_BEGIN

namespace detail::contrib_sort {

inline constexpr std::string_view argsort_name = "tvm.contrib.sort.argsort";
inline constexpr std::string_view sort_name = "tvm.contrib.sort.sort";
inline constexpr std::string_view topk_name = "tvm.contrib.sort.topk";

/// TVM's kTVMArgBool: TVM >= 0.18 passes bool arguments (is_ascend) with this code;
/// earlier versions pass them as integers. TVM accepts either for either.
inline constexpr int tc_bool = 15;

/// A float16 element: compared by its value as a float, as TVM compares it, and
/// written back as the bits it was read as.
struct half {
  std::uint16_t bits;
};

inline float half_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  const std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));  // inf, NaN
  if (exponent != 0) return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
  const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;  // zero or subnormal, exact
  return sign ? -magnitude : magnitude;
}

template <class T>
auto sort_key(T v) noexcept {
  if constexpr (std::is_same_v<T, half>)
    return half_to_float(v.bits);
  else
    return v;
}

/// One element of a row: its position along the axis and its value.
template <class T>
struct item {
  std::int64_t index;
  T value;
};

template <class T>
T load(const std::byte* base, std::int64_t i) noexcept {
  T v;
  std::memcpy(&v, base + i * static_cast<std::int64_t>(sizeof(T)), sizeof(T));
  return v;
}

template <class T>
void store(std::byte* base, std::int64_t i, T v) noexcept {
  std::memcpy(base + i * static_cast<std::int64_t>(sizeof(T)), &v, sizeof(T));
}

// ---- arguments --------------------------------------------------------------------

/// A tensor argument, checked: host memory, compact, in bounds of int64 arithmetic.
struct tensor_arg {
  const DLTensor* t;
  std::int64_t numel;
  [[nodiscard]] const std::byte* data() const noexcept { return static_cast<const std::byte*>(t->data) + t->byte_offset; }
  [[nodiscard]] std::byte* mutable_data() const noexcept { return static_cast<std::byte*>(t->data) + t->byte_offset; }
};

/// The call being served: the function's name and its arguments, so that every error
/// names both.
class call_site {
 public:
  call_site(std::string_view function, packed_args args) noexcept : function_(function), args_(args) {}

  [[nodiscard]] int size() const noexcept { return args_.num_args; }
  [[nodiscard]] std::string_view function() const noexcept { return function_; }

  [[noreturn]] void fail(errc code, const std::string& what) const { throw error(code, std::string(function_) + ": " + what); }

  [[nodiscard]] static std::string label(int i, std::string_view name) {
    return "argument " + std::to_string(i) + " (" + std::string(name) + ")";
  }

  [[nodiscard]] int code(int i) const noexcept { return args_.type_codes[i]; }

  /// An integer argument; TVM v0.19 also takes a bool where it reads an int.
  [[nodiscard]] std::int64_t integer(int i, std::string_view name) const {
    if (code(i) != tc_int && code(i) != tc_bool)
      fail(errc::invalid_argument, label(i, name) + " is not an integer (type code " + std::to_string(code(i)) + ")");
    return args_.values[i].v_int64;
  }

  /// An integer TVM reads into a C int: outside int's range, TVM fails its check.
  [[nodiscard]] std::int64_t int32(int i, std::string_view name) const {
    const std::int64_t v = integer(i, name);
    if (v < std::numeric_limits<std::int32_t>::min() || v > std::numeric_limits<std::int32_t>::max())
      fail(errc::invalid_argument, label(i, name) + " is " + std::to_string(v) + ", outside the range of a 32-bit int");
    return v;
  }

  [[nodiscard]] bool flag(int i, std::string_view name) const { return integer(i, name) != 0; }

  [[nodiscard]] std::string_view text(int i, std::string_view name) const {
    if (code(i) != tc_str || args_.values[i].v_str == nullptr)
      fail(errc::invalid_argument, label(i, name) + " is not a string (type code " + std::to_string(code(i)) + ")");
    return args_.values[i].v_str;
  }

  [[nodiscard]] tensor_arg tensor(int i, std::string_view name) const {
    const int c = code(i);
    if ((c != tc_dltensor && c != tc_ndarray && c != tc_handle) || args_.values[i].v_handle == nullptr)
      fail(errc::invalid_argument, label(i, name) + " is not a tensor (type code " + std::to_string(c) + ")");
    const auto* t = static_cast<const DLTensor*>(args_.values[i].v_handle);
    if (t->ndim < 0) fail_at(i, name, errc::invalid_argument, " has ndim " + std::to_string(t->ndim));
    if (t->ndim > 0 && t->shape == nullptr) fail_at(i, name, errc::invalid_argument, " has no shape");
    bool empty = false;
    for (int d = 0; d < t->ndim; ++d) {
      if (t->shape[d] < 0)
        fail_at(i, name, errc::invalid_argument, " has extent " + std::to_string(t->shape[d]) + " in dimension " + std::to_string(d));
      empty = empty || t->shape[d] == 0;
    }
    std::int64_t numel = empty ? 0 : 1;
    for (int d = 0; d < t->ndim && !empty; ++d) {
      if (numel > std::numeric_limits<std::int64_t>::max() / t->shape[d])
        fail_at(i, name, errc::invalid_argument, " has more elements than a 64-bit count holds");
      numel *= t->shape[d];
    }
    const std::uint64_t width = (t->dtype.bits + 7u) / 8u;
    if (width != 0 && numel > std::numeric_limits<std::int64_t>::max() / static_cast<std::int64_t>(width))
      fail_at(i, name, errc::invalid_argument, " has more bytes than a 64-bit size holds");
    if (t->device.device_type != kDLCPU && t->device.device_type != kDLCUDAHost && t->device.device_type != kDLROCMHost)
      fail_at(i, name, errc::device_mismatch, " is on device type " + std::to_string(t->device.device_type) + ", not in host memory");
    if (numel > 0 && t->data == nullptr) fail_at(i, name, errc::invalid_argument, " has no data");
    if (t->strides && numel > 0) {
      std::int64_t expected = 1;
      for (int d = t->ndim - 1; d >= 0; --d) {
        if (t->shape[d] == 1) continue;  // any stride walks one element
        if (t->strides[d] != expected)
          fail_at(i, name, errc::unsupported,
                  " is not compact (stride " + std::to_string(t->strides[d]) + " in dimension " + std::to_string(d) + ")");
        expected *= t->shape[d];
      }
    }
    return {t, numel};
  }

  /// `axis` of `data` counted from the front; negative counts from the end.
  [[nodiscard]] int axis(int i, const tensor_arg& data) const {
    const std::int64_t given = integer(i, "axis");
    const std::int64_t a = given < 0 ? given + data.t->ndim : given;
    if (a < 0 || a >= data.t->ndim)
      fail(errc::invalid_argument, label(i, "axis") + " is " + std::to_string(given) + ", out of range for data of " +
                                       std::to_string(data.t->ndim) + " dimensions");
    return static_cast<int>(a);
  }

  /// `out` has `data`'s shape, except `extent` along `axis`.
  void expect_shape(const tensor_arg& out, int i, std::string_view name, const tensor_arg& data, int axis, std::int64_t extent) const {
    bool same = out.t->ndim == data.t->ndim;
    for (int d = 0; same && d < data.t->ndim; ++d) same = out.t->shape[d] == (d == axis ? extent : data.t->shape[d]);
    if (!same) {
      std::string want = "[";
      for (int d = 0; d < data.t->ndim; ++d) want += (d ? ", " : "") + std::to_string(d == axis ? extent : data.t->shape[d]);
      fail(errc::shape_mismatch, label(i, name) + " has shape " + shape_text(*out.t) + ", expected " + want + "]");
    }
  }

 private:
  [[noreturn]] void fail_at(int i, std::string_view name, errc code, const std::string& what) const { fail(code, label(i, name) + what); }

  static std::string shape_text(const DLTensor& t) {
    std::string s = "[";
    for (int d = 0; d < t.ndim; ++d) s += (d ? ", " : "") + std::to_string(t.shape[d]);
    return s + "]";
  }

  std::string_view function_;
  packed_args args_;
};

// ---- dtypes -----------------------------------------------------------------------

/// The element types TVM's sort functions handle.
enum class kind { f16, f32, f64, i8, u8, i32, i64, other };

inline kind kind_of(DLDataType t) noexcept {
  if (t.lanes != 1) return kind::other;
  if (t.code == kDLFloat && t.bits == 16) return kind::f16;
  if (t.code == kDLFloat && t.bits == 32) return kind::f32;
  if (t.code == kDLFloat && t.bits == 64) return kind::f64;
  if (t.code == kDLInt && t.bits == 8) return kind::i8;
  if (t.code == kDLUInt && t.bits == 8) return kind::u8;
  if (t.code == kDLInt && t.bits == 32) return kind::i32;
  if (t.code == kDLInt && t.bits == 64) return kind::i64;
  return kind::other;
}

template <class T>
struct type_tag {
  using type = T;
};

template <class F>
void visit(kind k, F&& f) {
  switch (k) {
    case kind::f16: return f(type_tag<half>{});
    case kind::f32: return f(type_tag<float>{});
    case kind::f64: return f(type_tag<double>{});
    case kind::i8: return f(type_tag<std::int8_t>{});
    case kind::u8: return f(type_tag<std::uint8_t>{});
    case kind::i32: return f(type_tag<std::int32_t>{});
    case kind::i64: return f(type_tag<std::int64_t>{});
    case kind::other: break;
  }
}

/// Data dtypes of argsort and sort, and the index dtypes of argsort and topk.
inline bool is_sortable(kind k) noexcept { return k == kind::f16 || k == kind::f32 || k == kind::f64 || k == kind::i32 || k == kind::i64; }
inline bool is_index(kind k) noexcept { return k == kind::i32 || k == kind::i64 || k == kind::f32 || k == kind::f64; }

// ---- rows -------------------------------------------------------------------------

/// The rows along `axis`: `outer` blocks of `n` elements `inner` apart, `inner` rows per block.
struct rows {
  std::int64_t outer = 1, n = 0, inner = 1;
};

inline rows rows_of(const DLTensor& t, int axis) noexcept {
  rows r;
  r.n = t.shape[axis];
  for (int d = 0; d < t.ndim; ++d) {
    if (d < axis) r.outer *= t.shape[d];
    if (d > axis) r.inner *= t.shape[d];
  }
  return r;
}

/// Reads row (o, i) of `data` into `row`, in order along the axis.
template <class T>
void read_row(std::vector<item<T>>& row, const std::byte* data, const rows& r, std::int64_t o, std::int64_t i, std::int64_t count) {
  row.clear();
  const std::int64_t first = o * r.n * r.inner + i;
  for (std::int64_t k = 0; k < count; ++k) row.push_back({k, load<T>(data, first + k * r.inner)});
}

/// The ordered row, as argsort and sort order it: by value only, so a stable sort keeps
/// equal values in their original order.
template <class T>
void order_row(std::vector<item<T>>& row, bool ascending) {
  if (ascending)
    std::stable_sort(row.begin(), row.end(), [](const item<T>& l, const item<T>& r) { return sort_key(l.value) < sort_key(r.value); });
  else
    std::stable_sort(row.begin(), row.end(), [](const item<T>& l, const item<T>& r) { return sort_key(l.value) > sort_key(r.value); });
}

/// Whether `l` comes before `r` in topk's order: by value, equal values by position.
template <class T, bool Ascending>
struct topk_before {
  bool operator()(const item<T>& l, const item<T>& r) const noexcept {
    const auto a = sort_key(l.value), b = sort_key(r.value);
    if (a == b) return l.index < r.index;
    if constexpr (Ascending)
      return a < b;
    else
      return a > b;
  }
};

/// The first `k` (1 <= k) elements of row (o, i) in topk's order, as TVM finds them: a
/// heap of the first k whose front is the one that comes last, each later element
/// replacing it when it comes before it, then a stable sort of what the heap holds.
template <class T, bool Ascending>
void top_of_row(std::vector<item<T>>& kept, const std::byte* data, const rows& r, std::int64_t o, std::int64_t i, std::int64_t k) {
  const topk_before<T, Ascending> before{};
  const std::int64_t held = std::min(k, r.n);
  read_row(kept, data, r, o, i, held);
  std::make_heap(kept.begin(), kept.end(), before);
  const std::int64_t first = o * r.n * r.inner + i;
  for (std::int64_t j = held; j < r.n; ++j) {
    const item<T> next{j, load<T>(data, first + j * r.inner)};
    if (!before(next, kept.front())) continue;
    kept.push_back(next);
    std::push_heap(kept.begin(), kept.end(), before);
    std::pop_heap(kept.begin(), kept.end(), before);
    kept.pop_back();
  }
  std::stable_sort(kept.begin(), kept.end(), before);
}

/// Each row along `axis` ordered, then `take(item)` (its index or its value) written to `out`.
template <class T, class Take>
void write_ordered(const tensor_arg& data, const tensor_arg& out, int axis, bool ascending, Take take) {
  if (data.numel == 0) return;
  const rows r = rows_of(*data.t, axis);
  std::vector<item<T>> row;
  row.reserve(static_cast<std::size_t>(r.n));
  std::byte* y = out.mutable_data();
  for (std::int64_t o = 0; o < r.outer; ++o)
    for (std::int64_t i = 0; i < r.inner; ++i) {
      read_row(row, data.data(), r, o, i, r.n);
      order_row(row, ascending);
      const std::int64_t first = o * r.n * r.inner + i;
      for (std::int64_t k = 0; k < r.n; ++k) store(y, first + k * r.inner, take(row[static_cast<std::size_t>(k)]));
    }
}

template <class T, class Index>
void run_argsort(const tensor_arg& data, const tensor_arg& out, int axis, bool ascending) {
  write_ordered<T>(data, out, axis, ascending, [](const item<T>& e) { return static_cast<Index>(e.index); });
}

template <class T>
void run_sort(const tensor_arg& data, const tensor_arg& out, int axis, bool ascending) {
  write_ordered<T>(data, out, axis, ascending, [](const item<T>& e) { return e.value; });
}

/// values and indices may be null (ret_type "indices" / "values"); k >= 1.
template <class T, class Index, bool Ascending>
void run_topk(const tensor_arg& data, const tensor_arg* values, const tensor_arg* indices, int axis, std::int64_t k) {
  if (data.numel == 0) return;
  const rows r = rows_of(*data.t, axis);
  std::vector<item<T>> kept;
  kept.reserve(static_cast<std::size_t>(std::min(k, r.n)) + 1);
  for (std::int64_t o = 0; o < r.outer; ++o)
    for (std::int64_t i = 0; i < r.inner; ++i) {
      top_of_row<T, Ascending>(kept, data.data(), r, o, i, k);
      // Outputs have k along the axis; when k > n only the first n are written, as TVM does.
      const std::int64_t first = o * k * r.inner + i;
      for (std::size_t j = 0; j < kept.size(); ++j) {
        const std::int64_t at = first + static_cast<std::int64_t>(j) * r.inner;
        if (values) store(values->mutable_data(), at, kept[j].value);
        if (indices) store(indices->mutable_data(), at, static_cast<Index>(kept[j].index));
      }
    }
}

/// The arguments argsort and sort share: (data, out, axis, is_ascend), data of a dtype
/// they sort; `out_name` names the second in errors.
struct row_call {
  tensor_arg data, out;
  int axis;
  bool ascending;
  kind data_kind;
};
inline row_call read_row_call(const call_site& call, const char* out_name) {
  if (call.size() != 4)
    call.fail(errc::invalid_argument, std::string("expected 4 arguments (data, ") + out_name + ", axis, is_ascend), got " +
                                          std::to_string(call.size()));
  const tensor_arg data = call.tensor(0, "data");
  const tensor_arg out = call.tensor(1, out_name);
  const int axis = call.axis(2, data);
  const bool ascending = call.flag(3, "is_ascend");
  const kind dk = kind_of(data.t->dtype);
  if (!is_sortable(dk))
    call.fail(errc::unsupported,
              call.label(0, "data") + " is " + gexec::to_string(data.t->dtype) + "; supported: float16, float32, float64, int32, int64");
  return {data, out, axis, ascending, dk};
}

}  // namespace detail::contrib_sort

namespace contrib {

/// tvm.contrib.sort.argsort(data, indices, axis, is_ascend): the positions that sort
/// each row of `data` along `axis` (negative counts from the end); equal values keep
/// their order. data: float16/32/64, int32/64; indices: int32/64, float32/64, data's shape.
inline void argsort(packed_args args) {
  namespace cs = detail::contrib_sort;
  const cs::call_site call(cs::argsort_name, args);
  const cs::row_call c = cs::read_row_call(call, "indices");
  const cs::tensor_arg &data = c.data, &out = c.out;
  const int axis = c.axis;
  const bool ascending = c.ascending;
  const cs::kind dk = c.data_kind;
  const cs::kind ok = cs::kind_of(out.t->dtype);
  if (!cs::is_index(ok))
    call.fail(errc::unsupported,
              call.label(1, "indices") + " is " + gexec::to_string(out.t->dtype) + "; supported: int32, int64, float32, float64");
  call.expect_shape(out, 1, "indices", data, axis, data.t->shape[axis]);
  cs::visit(dk, [&]<class T>(cs::type_tag<T>) {
    cs::visit(ok, [&]<class Index>(cs::type_tag<Index>) {
      if constexpr (!std::is_same_v<Index, cs::half>) cs::run_argsort<T, Index>(data, out, axis, ascending);
    });
  });
}

/// tvm.contrib.sort.sort(data, out, axis, is_ascend): each row of `data` along `axis`
/// sorted into `out` (data's shape and dtype: float16/32/64, int32/64); stable.
inline void sort(packed_args args) {
  namespace cs = detail::contrib_sort;
  const cs::call_site call(cs::sort_name, args);
  const cs::row_call c = cs::read_row_call(call, "out");
  const cs::tensor_arg &data = c.data, &out = c.out;
  const int axis = c.axis;
  const bool ascending = c.ascending;
  const cs::kind dk = c.data_kind;
  if (!same_dtype(data.t->dtype, out.t->dtype))
    call.fail(errc::dtype_mismatch,
              call.label(1, "out") + " is " + gexec::to_string(out.t->dtype) + ", data is " + gexec::to_string(data.t->dtype));
  call.expect_shape(out, 1, "out", data, axis, data.t->shape[axis]);
  cs::visit(dk, [&]<class T>(cs::type_tag<T>) { cs::run_sort<T>(data, out, axis, ascending); });
}

/// tvm.contrib.sort.topk(data, [values], [indices], k, axis, ret_type, is_ascend): the
/// first k of each row along `axis` in sorted order (descending unless is_ascend), equal
/// values by position; k < 1 means all. ret_type "both" passes values then indices (7
/// arguments), "values" or "indices" one output (6). Outputs have data's shape with k
/// along the axis; values has data's dtype. data: float16/32/64, int8, uint8, int32/64;
/// indices: int32/64, float32/64, and data's own dtype for int8 and uint8.
inline void topk(packed_args args) {
  namespace cs = detail::contrib_sort;
  const cs::call_site call(cs::topk_name, args);
  const int n = call.size();
  if (n != 6 && n != 7)
    call.fail(errc::invalid_argument,
              "expected 7 arguments (data, values, indices, k, axis, ret_type, is_ascend) or 6 (one output), got " + std::to_string(n));
  const std::string_view ret_type = call.text(n - 2, "ret_type");
  const bool both = ret_type == "both";
  if (!both && ret_type != "values" && ret_type != "indices")
    call.fail(errc::invalid_argument,
              call.label(n - 2, "ret_type") + " is \"" + std::string(ret_type) + "\"; expected \"both\", \"values\" or \"indices\"");
  if (both != (n == 7))
    call.fail(errc::invalid_argument,
              "ret_type \"" + std::string(ret_type) + "\" takes " + (both ? "7" : "6") + " arguments, got " + std::to_string(n));
  const cs::tensor_arg data = call.tensor(0, "data");
  cs::tensor_arg values{}, indices{};
  const bool want_values = ret_type != "indices", want_indices = ret_type != "values";
  if (want_values) values = call.tensor(1, "values");
  if (want_indices) indices = call.tensor(both ? 2 : 1, "indices");
  const std::int64_t k_given = call.int32(n - 4, "k");
  const int axis = call.axis(n - 3, data);
  const bool ascending = call.flag(n - 1, "is_ascend");

  const cs::kind dk = cs::kind_of(data.t->dtype);
  if (!cs::is_sortable(dk) && dk != cs::kind::i8 && dk != cs::kind::u8)
    call.fail(errc::unsupported, call.label(0, "data") + " is " + gexec::to_string(data.t->dtype) +
                                     "; supported: float16, float32, float64, int8, uint8, int32, int64");
  // Without an indices output TVM dispatches as if they were int64, which every data dtype has.
  const cs::kind ik = want_indices ? cs::kind_of(indices.t->dtype) : cs::kind::i64;
  if (want_indices && !cs::is_index(ik) && !(ik == dk && (dk == cs::kind::i8 || dk == cs::kind::u8)))
    call.fail(errc::unsupported, call.label(both ? 2 : 1, "indices") + " is " + gexec::to_string(indices.t->dtype) +
                                     "; supported: int32, int64, float32, float64" +
                                     (dk == cs::kind::i8 || dk == cs::kind::u8 ? ", " + gexec::to_string(data.t->dtype) : std::string()));
  if (want_values && !same_dtype(values.t->dtype, data.t->dtype))
    call.fail(errc::dtype_mismatch,
              call.label(1, "values") + " is " + gexec::to_string(values.t->dtype) + ", data is " + gexec::to_string(data.t->dtype));
  const std::int64_t k = k_given < 1 ? data.t->shape[axis] : k_given;
  if (want_values) call.expect_shape(values, 1, "values", data, axis, k);
  if (want_indices) call.expect_shape(indices, both ? 2 : 1, "indices", data, axis, k);

  const cs::tensor_arg* v = want_values ? &values : nullptr;
  const cs::tensor_arg* x = want_indices ? &indices : nullptr;
  cs::visit(dk, [&]<class T>(cs::type_tag<T>) {
    cs::visit(ik, [&]<class Index>(cs::type_tag<Index>) {
      if constexpr (!std::is_same_v<Index, cs::half>) {
        if (ascending)
          cs::run_topk<T, Index, true>(data, v, x, axis, k);
        else
          cs::run_topk<T, Index, false>(data, v, x, axis, k);
      }
    });
  });
}

/// Registers argsort, sort and topk under TVM's names ("tvm.contrib.sort.argsort", ...)
/// with `rt`, for the models that run on it; replaces earlier registrations.
inline void register_sort_functions(runtime& rt) {
  namespace cs = detail::contrib_sort;
  rt.register_function(cs::argsort_name, packed_function{&detail::static_trampoline<&argsort>, nullptr});
  rt.register_function(cs::sort_name, packed_function{&detail::static_trampoline<&sort>, nullptr});
  rt.register_function(cs::topk_name, packed_function{&detail::static_trampoline<&topk>, nullptr});
}

/// Registers them with the process default runtime, which every model sees.
inline void register_sort_functions() { register_sort_functions(runtime::global()); }

}  // namespace contrib

GEXEC_NAMESPACE_END
