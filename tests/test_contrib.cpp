// gexec/contrib/sort.hpp: TVM's tvm.contrib.sort.argsort, .sort and .topk. Expected
// values are worked out by hand for small rows (ties, descending order, every axis), and
// compared with a brute-force reference (rank = number of elements that come before)
// for larger ones. The NaN cases hold what TVM's own runtime returned for the same call.

#include <gexec/contrib/sort.hpp>

#include <doctest/doctest.h>

#include <gexec/function_registry.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

using gexec::contrib::argsort;
using gexec::contrib::sort;
using gexec::contrib::topk;
using fn_t = void (*)(gexec::packed_args);

constexpr int tc_bool = 15;  // TVM >= 0.18 passes is_ascend with kTVMArgBool

/// A host tensor over a vector; dl() describes it (pointers refreshed on every call).
template <class T>
struct tensor {
  std::vector<T> values;
  std::vector<std::int64_t> shape;
  DLDataType dtype = gexec::dtype_of<T>();
  DLTensor t{};

  tensor(std::vector<T> v, std::vector<std::int64_t> s) : values(std::move(v)), shape(std::move(s)) {}
  tensor(std::vector<T> v, std::vector<std::int64_t> s, DLDataType d) : values(std::move(v)), shape(std::move(s)), dtype(d) {}

  DLTensor* dl() {
    t.data = values.data();
    t.device = {kDLCPU, 0};
    t.ndim = static_cast<std::int32_t>(shape.size());
    t.dtype = dtype;
    t.shape = shape.data();
    t.strides = nullptr;
    t.byte_offset = 0;
    return &t;
  }
};

/// An output of `n` elements filled with `fill`, so untouched elements show.
template <class T>
tensor<T> output(std::vector<std::int64_t> shape, T fill = T(99)) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return tensor<T>(std::vector<T>(static_cast<std::size_t>(n), fill), std::move(shape));
}

struct arg {
  TVMValue value;
  int code;
};

arg t_(DLTensor* t) {
  TVMValue v;
  v.v_handle = t;
  return {v, gexec::tc_dltensor};
}
arg i_(std::int64_t x, int code = gexec::tc_int) {
  TVMValue v;
  v.v_int64 = x;
  return {v, code};
}
arg b_(bool x) { return i_(x ? 1 : 0, tc_bool); }
arg s_(const char* s) {
  TVMValue v;
  v.v_str = s;
  return {v, gexec::tc_str};
}

void call(fn_t f, std::initializer_list<arg> args) {
  std::vector<TVMValue> values;
  std::vector<int> codes;
  for (const arg& a : args) {
    values.push_back(a.value);
    codes.push_back(a.code);
  }
  f(gexec::packed_args{values.data(), codes.data(), static_cast<int>(values.size())});
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// float16 bit patterns
constexpr std::uint16_t h_zero = 0x0000, h_neg_zero = 0x8000, h_one = 0x3c00, h_neg_one = 0xbc00, h_two = 0x4000, h_three = 0x4200,
                        h_inf = 0x7c00, h_neg_inf = 0xfc00, h_tiny = 0x0001, h_neg_tiny = 0x8001;

}  // namespace

TEST_CASE("argsort: ascending and descending, equal values keep their order") {
  tensor<float> x({3, 1, 2, 1, 3, 0}, {6});
  auto y = output<std::int32_t>({6});
  call(argsort, {t_(x.dl()), t_(y.dl()), i_(0), i_(1)});
  CHECK(y.values == std::vector<std::int32_t>{5, 1, 3, 2, 0, 4});
  call(argsort, {t_(x.dl()), t_(y.dl()), i_(-1), i_(0)});
  CHECK(y.values == std::vector<std::int32_t>{0, 4, 2, 1, 3, 5});
  // is_ascend as TVM >= 0.18 passes it
  call(argsort, {t_(x.dl()), t_(y.dl()), i_(0), b_(false)});
  CHECK(y.values == std::vector<std::int32_t>{0, 4, 2, 1, 3, 5});
  call(argsort, {t_(x.dl()), t_(y.dl()), i_(0), b_(true)});
  CHECK(y.values == std::vector<std::int32_t>{5, 1, 3, 2, 0, 4});
}

TEST_CASE("argsort: each axis of a 2-D tensor, negative axes counting from the end") {
  tensor<float> x({3, 1, 2, 0, 5, 2}, {2, 3});
  auto y = output<std::int64_t>({2, 3});
  for (int axis : {1, -1}) {
    call(argsort, {t_(x.dl()), t_(y.dl()), i_(axis), i_(1)});
    CHECK(y.values == std::vector<std::int64_t>{1, 2, 0, 0, 2, 1});
  }
  for (int axis : {0, -2}) {
    call(argsort, {t_(x.dl()), t_(y.dl()), i_(axis), i_(1)});
    CHECK(y.values == std::vector<std::int64_t>{1, 0, 0, 0, 1, 1});  // column 2 ties: 0 then 1
    call(argsort, {t_(x.dl()), t_(y.dl()), i_(axis), i_(0)});
    CHECK(y.values == std::vector<std::int64_t>{0, 1, 0, 1, 0, 1});
  }
}

TEST_CASE("argsort and sort along the middle axis of a 3-D tensor") {
  // data[b][k][a], sorted along k
  tensor<float> x({5, 1, 2, 1, 2, 0, 0, 3, 9, 3, -1, 3}, {2, 3, 2});
  auto y = output<std::int32_t>({2, 3, 2});
  call(argsort, {t_(x.dl()), t_(y.dl()), i_(1), i_(1)});
  CHECK(y.values == std::vector<std::int32_t>{1, 2, 2, 0, 0, 1, 2, 0, 0, 1, 1, 2});
  call(argsort, {t_(x.dl()), t_(y.dl()), i_(-2), i_(0)});
  CHECK(y.values == std::vector<std::int32_t>{0, 0, 1, 1, 2, 2, 1, 0, 0, 1, 2, 2});
  auto s = output<float>({2, 3, 2});
  call(sort, {t_(x.dl()), t_(s.dl()), i_(1), i_(1)});
  CHECK(s.values == std::vector<float>{2, 0, 2, 1, 5, 1, -1, 3, 0, 3, 9, 3});
  call(sort, {t_(x.dl()), t_(s.dl()), i_(1), i_(0)});
  CHECK(s.values == std::vector<float>{5, 1, 2, 1, 2, 0, 9, 3, 0, 3, -1, 3});
}

TEST_CASE("argsort: every data dtype with every index dtype TVM registers") {
  const std::vector<double> row = {3, 1, 2, 1, -3, 0};
  const std::vector<std::int64_t> asc = {4, 5, 1, 3, 2, 0}, desc = {0, 2, 1, 3, 5, 4};
  auto check_indices = [&](DLTensor* data, const char* what) {
    CAPTURE(what);
    auto i32 = output<std::int32_t>({6});
    auto i64 = output<std::int64_t>({6});
    auto f32 = output<float>({6});
    auto f64 = output<double>({6});
    for (bool ascending : {true, false}) {
      const std::vector<std::int64_t>& want = ascending ? asc : desc;
      call(argsort, {t_(data), t_(i32.dl()), i_(0), i_(ascending)});
      call(argsort, {t_(data), t_(i64.dl()), i_(0), i_(ascending)});
      call(argsort, {t_(data), t_(f32.dl()), i_(0), i_(ascending)});
      call(argsort, {t_(data), t_(f64.dl()), i_(0), i_(ascending)});
      for (std::size_t i = 0; i < want.size(); ++i) {
        CHECK(i32.values[i] == want[i]);
        CHECK(i64.values[i] == want[i]);
        CHECK(f32.values[i] == static_cast<float>(want[i]));
        CHECK(f64.values[i] == static_cast<double>(want[i]));
      }
    }
  };
  tensor<float> f32({3, 1, 2, 1, -3, 0}, {6});
  tensor<double> f64({3, 1, 2, 1, -3, 0}, {6});
  tensor<std::int32_t> i32({3, 1, 2, 1, -3, 0}, {6});
  tensor<std::int64_t> i64({3, 1, 2, 1, -3, 0}, {6});
  tensor<std::uint16_t> f16({h_three, h_one, h_two, h_one, 0xc200 /* -3 */, h_zero}, {6}, gexec::dtypes::float16);
  check_indices(f32.dl(), "float32");
  check_indices(f64.dl(), "float64");
  check_indices(i32.dl(), "int32");
  check_indices(i64.dl(), "int64");
  check_indices(f16.dl(), "float16");
}

TEST_CASE("float16 is ordered by value, not by its bits, and sorted values keep their bits") {
  tensor<std::uint16_t> x({h_one, h_neg_one, h_tiny, h_neg_tiny, h_inf, h_neg_inf, h_neg_zero, h_zero}, {8}, gexec::dtypes::float16);
  auto y = output<std::int32_t>({8});
  call(argsort, {t_(x.dl()), t_(y.dl()), i_(0), i_(1)});
  CHECK(y.values == std::vector<std::int32_t>{5, 1, 3, 6, 7, 2, 0, 4});  // -0 and 0 are equal: original order
  auto s = tensor<std::uint16_t>(std::vector<std::uint16_t>(8, 0xffff), {8}, gexec::dtypes::float16);
  call(sort, {t_(x.dl()), t_(s.dl()), i_(0), i_(0)});
  CHECK(s.values == std::vector<std::uint16_t>{h_inf, h_one, h_tiny, h_neg_zero, h_zero, h_neg_tiny, h_neg_one, h_neg_inf});
}

TEST_CASE("sort: every dtype, both directions, signed zeros kept as they were") {
  tensor<std::int32_t> i32({4, -2, 7, -2, 0}, {5});
  auto o32 = output<std::int32_t>({5});
  call(sort, {t_(i32.dl()), t_(o32.dl()), i_(0), i_(1)});
  CHECK(o32.values == std::vector<std::int32_t>{-2, -2, 0, 4, 7});
  tensor<std::int64_t> i64({std::numeric_limits<std::int64_t>::max(), -1, std::numeric_limits<std::int64_t>::min()}, {3});
  auto o64 = output<std::int64_t>({3});
  call(sort, {t_(i64.dl()), t_(o64.dl()), i_(0), i_(0)});
  CHECK(o64.values == std::vector<std::int64_t>{std::numeric_limits<std::int64_t>::max(), -1, std::numeric_limits<std::int64_t>::min()});
  tensor<double> f64({0.5, -0.25, 1e300, -1e300}, {2, 2});
  auto od = output<double>({2, 2});
  call(sort, {t_(f64.dl()), t_(od.dl()), i_(0), i_(1)});
  CHECK(od.values == std::vector<double>{0.5, -1e300, 1e300, -0.25});
  tensor<float> z({0.0f, -0.0f, 0.0f, -1.0f}, {4});
  auto oz = output<float>({4});
  call(sort, {t_(z.dl()), t_(oz.dl()), i_(0), i_(0)});
  CHECK(oz.values == std::vector<float>{0, 0, 0, -1});
  CHECK(!std::signbit(oz.values[0]));
  CHECK(std::signbit(oz.values[1]));
  CHECK(!std::signbit(oz.values[2]));
}

TEST_CASE("sort in place (output is the input), as TVM allows") {
  tensor<float> x({3, 1, 2, 0, 5, 2}, {2, 3});
  call(sort, {t_(x.dl()), t_(x.dl()), i_(0), i_(0)});
  CHECK(x.values == std::vector<float>{3, 5, 2, 0, 1, 2});
  call(sort, {t_(x.dl()), t_(x.dl()), i_(1), i_(1)});
  CHECK(x.values == std::vector<float>{2, 3, 5, 0, 1, 2});
}

TEST_CASE("topk: each ret_type, descending and ascending, equal values by position") {
  tensor<float> x({3, 1, 2, 1, 3, 0}, {6});
  SUBCASE("both") {
    auto v = output<float>({3});
    auto i = output<std::int32_t>({3});
    call(topk, {t_(x.dl()), t_(v.dl()), t_(i.dl()), i_(3), i_(0), s_("both"), i_(0)});
    CHECK(v.values == std::vector<float>{3, 3, 2});
    CHECK(i.values == std::vector<std::int32_t>{0, 4, 2});
    call(topk, {t_(x.dl()), t_(v.dl()), t_(i.dl()), i_(3), i_(-1), s_("both"), b_(true)});
    CHECK(v.values == std::vector<float>{0, 1, 1});
    CHECK(i.values == std::vector<std::int32_t>{5, 1, 3});
  }
  SUBCASE("values") {
    auto v = output<float>({4});
    call(topk, {t_(x.dl()), t_(v.dl()), i_(4), i_(0), s_("values"), i_(0)});
    CHECK(v.values == std::vector<float>{3, 3, 2, 1});
  }
  SUBCASE("indices") {
    auto i = output<std::int64_t>({4});
    call(topk, {t_(x.dl()), t_(i.dl()), i_(4), i_(0), s_("indices"), i_(0)});
    CHECK(i.values == std::vector<std::int64_t>{0, 4, 2, 1});
    call(topk, {t_(x.dl()), t_(i.dl()), i_(4), i_(0), s_("indices"), i_(1)});
    CHECK(i.values == std::vector<std::int64_t>{5, 1, 3, 2});
  }
}

TEST_CASE("topk: k < 1 means all, k > n fills the first n and leaves the rest") {
  tensor<float> x({3, 1, 2, 1, 3, 0}, {6});
  for (int k : {0, -1, -7}) {
    CAPTURE(k);
    auto v = output<float>({6});
    auto i = output<std::int32_t>({6});
    call(topk, {t_(x.dl()), t_(v.dl()), t_(i.dl()), i_(k), i_(0), s_("both"), i_(0)});
    CHECK(v.values == std::vector<float>{3, 3, 2, 1, 1, 0});
    CHECK(i.values == std::vector<std::int32_t>{0, 4, 2, 1, 3, 5});
  }
  auto v = output<float>({8});
  auto i = output<std::int32_t>({8});
  call(topk, {t_(x.dl()), t_(v.dl()), t_(i.dl()), i_(8), i_(0), s_("both"), i_(1)});
  CHECK(v.values == std::vector<float>{0, 1, 1, 2, 3, 3, 99, 99});
  CHECK(i.values == std::vector<std::int32_t>{5, 1, 3, 2, 0, 4, 99, 99});
}

TEST_CASE("topk along the middle axis of a 3-D tensor and the first of a 2-D one") {
  tensor<float> x({5, 1, 2, 1, 2, 0, 0, 3, 9, 3, -1, 3}, {2, 3, 2});
  auto v = output<float>({2, 2, 2});
  auto i = output<std::int64_t>({2, 2, 2});
  call(topk, {t_(x.dl()), t_(v.dl()), t_(i.dl()), i_(2), i_(1), s_("both"), i_(0)});
  CHECK(v.values == std::vector<float>{5, 1, 2, 1, 9, 3, 0, 3});
  CHECK(i.values == std::vector<std::int64_t>{0, 0, 1, 1, 1, 0, 0, 1});

  tensor<std::int32_t> m({3, 1, 2, 0, 5, 2}, {2, 3});
  auto mi = output<std::int32_t>({1, 3});
  call(topk, {t_(m.dl()), t_(mi.dl()), i_(1), i_(-2), s_("indices"), i_(1)});
  CHECK(mi.values == std::vector<std::int32_t>{1, 0, 0});
}

TEST_CASE("topk: int8 and uint8 data with their own dtype as indices, float16 and int64 data") {
  tensor<std::uint8_t> u({3, 200, 3, 7}, {4});
  auto uv = output<std::uint8_t>({2});
  auto ui = output<std::uint8_t>({2});
  call(topk, {t_(u.dl()), t_(uv.dl()), t_(ui.dl()), i_(2), i_(0), s_("both"), i_(0)});
  CHECK(uv.values == std::vector<std::uint8_t>{200, 7});
  CHECK(ui.values == std::vector<std::uint8_t>{1, 3});
  call(topk, {t_(u.dl()), t_(uv.dl()), i_(2), i_(0), s_("values"), i_(1)});
  CHECK(uv.values == std::vector<std::uint8_t>{3, 3});

  tensor<std::int8_t> s({-3, 100, -128, 0}, {4});
  auto sv = output<std::int8_t>({3});
  auto si = output<std::int8_t>({3});
  call(topk, {t_(s.dl()), t_(sv.dl()), t_(si.dl()), i_(3), i_(0), s_("both"), i_(1)});
  CHECK(sv.values == std::vector<std::int8_t>{-128, -3, 0});
  CHECK(si.values == std::vector<std::int8_t>{2, 0, 3});
  auto sf = output<double>({3});
  call(topk, {t_(s.dl()), t_(sf.dl()), i_(3), i_(0), s_("indices"), i_(0)});
  CHECK(sf.values == std::vector<double>{1, 3, 0});

  tensor<std::uint16_t> h({h_one, h_neg_inf, h_three, h_neg_zero, h_zero}, {5}, gexec::dtypes::float16);
  auto hv = tensor<std::uint16_t>(std::vector<std::uint16_t>(3, 0xffff), {3}, gexec::dtypes::float16);
  auto hi = output<std::int32_t>({3});
  call(topk, {t_(h.dl()), t_(hv.dl()), t_(hi.dl()), i_(3), i_(0), s_("both"), i_(1)});
  CHECK(hv.values == std::vector<std::uint16_t>{h_neg_inf, h_neg_zero, h_zero});
  CHECK(hi.values == std::vector<std::int32_t>{1, 3, 4});

  tensor<std::int64_t> l({std::numeric_limits<std::int64_t>::min(), 5, 5, std::numeric_limits<std::int64_t>::max()}, {4});
  auto lv = output<std::int64_t>({2});
  auto li = output<float>({2});
  call(topk, {t_(l.dl()), t_(lv.dl()), t_(li.dl()), i_(2), i_(0), s_("both"), i_(0)});
  CHECK(lv.values == std::vector<std::int64_t>{std::numeric_limits<std::int64_t>::max(), 5});
  CHECK(li.values == std::vector<float>{3, 1});
}

TEST_CASE("larger rows with many ties agree with a brute-force stable order") {
  std::mt19937 rng(7);
  for (const std::vector<std::int64_t>& shape : {std::vector<std::int64_t>{300}, {4, 57, 3}, {2, 5, 40}}) {
    const auto nd = static_cast<int>(shape.size());
    std::int64_t numel = 1;
    for (std::int64_t d : shape) numel *= d;
    std::vector<float> values(static_cast<std::size_t>(numel));
    for (float& v : values) v = static_cast<float>(static_cast<int>(rng() % 9) - 4) * 0.5f;
    tensor<float> x(values, shape);
    for (int axis = 0; axis < nd; ++axis) {
      std::int64_t outer = 1, inner = 1;
      for (int d = 0; d < axis; ++d) outer *= shape[static_cast<std::size_t>(d)];
      for (int d = axis + 1; d < nd; ++d) inner *= shape[static_cast<std::size_t>(d)];
      const std::int64_t n = shape[static_cast<std::size_t>(axis)];
      for (bool ascending : {true, false}) {
        CAPTURE(axis);
        CAPTURE(ascending);
        auto full = output<std::int32_t>(shape);
        call(argsort, {t_(x.dl()), t_(full.dl()), i_(axis), i_(ascending)});
        auto sorted = output<float>(shape);
        call(sort, {t_(x.dl()), t_(sorted.dl()), i_(axis - nd), i_(ascending)});
        for (std::int64_t k : {std::int64_t{1}, std::int64_t{5}, n - 1, n}) {
          std::vector<std::int64_t> kshape = shape;
          kshape[static_cast<std::size_t>(axis)] = k;
          auto tv = output<float>(kshape);
          auto ti = output<std::int64_t>(kshape);
          call(topk, {t_(x.dl()), t_(tv.dl()), t_(ti.dl()), i_(k), i_(axis), s_("both"), i_(ascending)});
          bool ok = true;
          for (std::int64_t o = 0; o < outer; ++o)
            for (std::int64_t in = 0; in < inner; ++in) {
              auto at = [&](std::int64_t j) { return values[static_cast<std::size_t>((o * n + j) * inner + in)]; };
              // The element at position r of the stable order: the one with r elements before it.
              for (std::int64_t j = 0; j < n; ++j) {
                std::int64_t rank = 0;
                for (std::int64_t m = 0; m < n; ++m) {
                  const bool before = ascending ? at(m) < at(j) : at(m) > at(j);
                  rank += before || (at(m) == at(j) && m < j);
                }
                const auto pos = static_cast<std::size_t>((o * n + rank) * inner + in);
                ok = ok && full.values[pos] == j && sorted.values[pos] == at(j);
                if (rank < k) {
                  const auto kpos = static_cast<std::size_t>((o * k + rank) * inner + in);
                  ok = ok && ti.values[kpos] == j && tv.values[kpos] == at(j);
                }
              }
            }
          CAPTURE(k);
          CHECK(ok);
        }
      }
    }
  }
}

#if defined(__GLIBCXX__)
TEST_CASE("NaN: the order TVM's runtime returns for the same rows (libstdc++)") {
  // TVM 0.16's libtvm_runtime (x86-64 Linux wheel) on these calls; TVM v0.19's sort.cc
  // is the same code. NaN defeats < and >, so this is whatever the std algorithms make of it.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  tensor<float> x({3, nan, 1, nan, 2, 0, 5, -1, nan, 4, 7, 2.5f, 1, 1}, {14});
  auto y = output<std::int32_t>({14});
  call(argsort, {t_(x.dl()), t_(y.dl()), i_(0), i_(1)});
  CHECK(y.values == std::vector<std::int32_t>{7, 5, 2, 0, 1, 3, 4, 6, 8, 12, 13, 11, 9, 10});
  call(argsort, {t_(x.dl()), t_(y.dl()), i_(0), i_(0)});
  CHECK(y.values == std::vector<std::int32_t>{10, 6, 9, 0, 1, 2, 3, 4, 5, 7, 8, 11, 12, 13});
  auto i3 = output<std::int32_t>({3});
  call(topk, {t_(x.dl()), t_(i3.dl()), i_(3), i_(0), s_("indices"), i_(0)});
  CHECK(i3.values == std::vector<std::int32_t>{6, 1, 10});
  auto i5 = output<std::int32_t>({5});
  call(topk, {t_(x.dl()), t_(i5.dl()), i_(5), i_(0), s_("indices"), i_(0)});
  CHECK(i5.values == std::vector<std::int32_t>{10, 9, 1, 3, 6});
  auto all = output<std::int32_t>({14});
  call(topk, {t_(x.dl()), t_(all.dl()), i_(0), i_(0), s_("indices"), i_(0)});
  CHECK(all.values == std::vector<std::int32_t>{10, 9, 4, 13, 5, 8, 0, 12, 7, 3, 1, 6, 11, 2});
  auto v20 = output<float>({20});
  auto i20 = output<std::int32_t>({20});
  call(topk, {t_(x.dl()), t_(v20.dl()), t_(i20.dl()), i_(20), i_(0), s_("both"), i_(1)});
  CHECK(i20.values == std::vector<std::int32_t>{7, 13, 11, 0, 9, 6, 10, 8, 3, 1, 5, 2, 12, 4, 99, 99, 99, 99, 99, 99});
  CHECK(std::isnan(v20.values[7]));
  CHECK(v20.values[10] == 0.0f);
}
#endif

TEST_CASE("byte_offset, explicit compact strides and empty tensors") {
  tensor<float> x({-9, -9, 3, 1, 2}, {3});
  x.dl()->byte_offset = 2 * sizeof(float);
  auto y = output<std::int32_t>({3});
  call(argsort, {t_(&x.t), t_(y.dl()), i_(0), i_(1)});
  CHECK(y.values == std::vector<std::int32_t>{1, 2, 0});

  tensor<float> m({3, 1, 2, 0, 5, 2}, {2, 3});
  std::int64_t strides[] = {3, 1};
  m.dl()->strides = strides;
  auto my = output<std::int32_t>({2, 3});
  call(argsort, {t_(&m.t), t_(my.dl()), i_(1), i_(1)});
  CHECK(my.values == std::vector<std::int32_t>{1, 2, 0, 0, 2, 1});
  std::int64_t unit_strides[] = {7, 1};  // any stride of an extent-1 dimension walks one element
  tensor<float> r({2, 1, 3}, {1, 3});
  r.dl()->strides = unit_strides;
  auto ry = output<std::int32_t>({1, 3});
  call(argsort, {t_(&r.t), t_(ry.dl()), i_(1), i_(1)});
  CHECK(ry.values == std::vector<std::int32_t>{1, 0, 2});

  tensor<float> empty({}, {0});
  empty.dl()->data = nullptr;
  auto ey = tensor<std::int32_t>({}, {0});
  call(argsort, {t_(empty.dl()), t_(ey.dl()), i_(0), i_(1)});
  call(sort, {t_(empty.dl()), t_(empty.dl()), i_(-1), i_(1)});
  call(topk, {t_(empty.dl()), t_(ey.dl()), i_(0), i_(0), s_("indices"), i_(1)});
  tensor<float> wide({}, {3, 0});
  auto wy = tensor<std::int32_t>({}, {3, 0});
  call(argsort, {t_(wide.dl()), t_(wy.dl()), i_(0), i_(1)});
  auto wk = tensor<std::int32_t>({}, {2, 0});
  call(topk, {t_(wide.dl()), t_(wk.dl()), i_(2), i_(0), s_("indices"), i_(1)});
}

TEST_CASE("bad calls are errors naming the function and the argument, and write nothing") {
  tensor<float> x({3, 1, 2, 0, 5, 2}, {2, 3});
  auto y = output<std::int32_t>({2, 3});
  auto expect = [&](fn_t f, std::initializer_list<arg> args, const char* function, const char* part, gexec::errc code) {
    CAPTURE(part);
    std::string what;
    try {
      call(f, args);
      FAIL_CHECK("no error");
    } catch (const gexec::error& e) {
      what = e.what();
      CHECK(e.code() == code);
    }
    CHECK_MESSAGE(contains(what, function), what);
    CHECK_MESSAGE(contains(what, part), what);
    CHECK(y.values == std::vector<std::int32_t>(6, 99));
  };
  const char* as = "tvm.contrib.sort.argsort";
  const char* so = "tvm.contrib.sort.sort";
  const char* tk = "tvm.contrib.sort.topk";
  using gexec::errc;

  expect(argsort, {t_(x.dl()), t_(y.dl()), i_(0)}, as, "expected 4 arguments", errc::invalid_argument);
  expect(argsort, {t_(x.dl()), t_(y.dl()), i_(0), i_(1), i_(1)}, as, "expected 4 arguments", errc::invalid_argument);
  expect(argsort, {i_(5), t_(y.dl()), i_(0), i_(1)}, as, "argument 0 (data) is not a tensor", errc::invalid_argument);
  expect(argsort, {t_(nullptr), t_(y.dl()), i_(0), i_(1)}, as, "argument 0 (data) is not a tensor", errc::invalid_argument);
  expect(argsort, {t_(x.dl()), s_("y"), i_(0), i_(1)}, as, "argument 1 (indices) is not a tensor", errc::invalid_argument);
  expect(argsort, {t_(x.dl()), t_(y.dl()), i_(2), i_(1)}, as, "argument 2 (axis) is 2, out of range", errc::invalid_argument);
  expect(argsort, {t_(x.dl()), t_(y.dl()), i_(-3), i_(1)}, as, "argument 2 (axis) is -3, out of range", errc::invalid_argument);
  expect(argsort, {t_(x.dl()), t_(y.dl()), s_("0"), i_(1)}, as, "argument 2 (axis) is not an integer", errc::invalid_argument);
  expect(argsort, {t_(x.dl()), t_(y.dl()), i_(0), s_("true")}, as, "argument 3 (is_ascend) is not an integer", errc::invalid_argument);

  tensor<float> scalar({1}, {});
  auto scalar_out = output<std::int32_t>({});
  expect(argsort, {t_(scalar.dl()), t_(scalar_out.dl()), i_(-1), i_(1)}, as, "out of range for data of 0 dimensions",
         errc::invalid_argument);
  expect(sort, {t_(scalar.dl()), t_(scalar.dl()), i_(0), i_(1)}, so, "out of range for data of 0 dimensions", errc::invalid_argument);

  tensor<float> null_data({}, {2, 3});
  null_data.dl()->data = nullptr;
  expect(argsort, {t_(&null_data.t), t_(y.dl()), i_(0), i_(1)}, as, "argument 0 (data) has no data", errc::invalid_argument);
  tensor<float> negative({}, {-1});
  expect(argsort, {t_(negative.dl()), t_(y.dl()), i_(0), i_(1)}, as, "argument 0 (data) has extent -1", errc::invalid_argument);
  tensor<float> transposed({3, 1, 2, 0, 5, 2}, {3, 2});
  std::int64_t strides[] = {1, 3};
  transposed.dl()->strides = strides;
  auto yt = output<std::int32_t>({3, 2});
  expect(argsort, {t_(&transposed.t), t_(yt.dl()), i_(0), i_(1)}, as, "argument 0 (data) is not compact", errc::unsupported);
  tensor<float> on_gpu({3, 1, 2, 0, 5, 2}, {2, 3});
  on_gpu.dl()->device = {kDLCUDA, 0};
  expect(argsort, {t_(&on_gpu.t), t_(y.dl()), i_(0), i_(1)}, as, "argument 0 (data) is on device type 2", errc::device_mismatch);

  auto wrong_shape = output<std::int32_t>({3, 2});
  expect(argsort, {t_(x.dl()), t_(wrong_shape.dl()), i_(0), i_(1)}, as, "argument 1 (indices) has shape [3, 2], expected [2, 3]",
         errc::shape_mismatch);
  auto fewer_dims = output<std::int32_t>({6});
  expect(argsort, {t_(x.dl()), t_(fewer_dims.dl()), i_(0), i_(1)}, as, "argument 1 (indices) has shape [6]", errc::shape_mismatch);

  tensor<std::int16_t> i16({1, 2, 3, 4, 5, 6}, {2, 3});
  expect(argsort, {t_(i16.dl()), t_(y.dl()), i_(0), i_(1)}, as, "argument 0 (data) is int16", errc::unsupported);
  tensor<std::uint8_t> u8({1, 2, 3, 4, 5, 6}, {2, 3});
  expect(argsort, {t_(u8.dl()), t_(y.dl()), i_(0), i_(1)}, as, "argument 0 (data) is uint8", errc::unsupported);
  expect(sort, {t_(u8.dl()), t_(u8.dl()), i_(0), i_(1)}, so, "argument 0 (data) is uint8", errc::unsupported);
  tensor<float> lanes({1, 2, 3, 4, 5, 6}, {2, 3}, DLDataType{kDLFloat, 32, 2});
  expect(argsort, {t_(lanes.dl()), t_(y.dl()), i_(0), i_(1)}, as, "argument 0 (data) is float32x2", errc::unsupported);
  tensor<std::uint16_t> f16({1, 2, 3, 4, 5, 6}, {2, 3}, gexec::dtypes::float16);
  auto f16_out = tensor<std::uint16_t>(std::vector<std::uint16_t>(6), {2, 3}, gexec::dtypes::float16);
  expect(argsort, {t_(f16.dl()), t_(f16_out.dl()), i_(0), i_(1)}, as, "argument 1 (indices) is float16", errc::unsupported);
  auto bf16 = tensor<std::uint16_t>(std::vector<std::uint16_t>(6), {2, 3}, gexec::dtypes::bfloat16);
  expect(sort, {t_(bf16.dl()), t_(bf16.dl()), i_(0), i_(1)}, so, "argument 0 (data) is bfloat16", errc::unsupported);
  auto out_f64 = output<double>({2, 3});
  expect(sort, {t_(x.dl()), t_(out_f64.dl()), i_(0), i_(1)}, so, "argument 1 (out) is float64, data is float32", errc::dtype_mismatch);
  expect(sort, {t_(x.dl()), t_(y.dl()), i_(0)}, so, "expected 4 arguments", errc::invalid_argument);

  auto v = output<float>({2, 3});
  expect(topk, {t_(x.dl()), t_(v.dl()), t_(y.dl()), i_(3), i_(1), s_("all"), i_(0)}, tk, "argument 5 (ret_type) is \"all\"",
         errc::invalid_argument);
  expect(topk, {t_(x.dl()), t_(y.dl()), i_(3), i_(1), s_("both"), i_(0)}, tk, "ret_type \"both\" takes 7 arguments, got 6",
         errc::invalid_argument);
  expect(topk, {t_(x.dl()), t_(v.dl()), t_(y.dl()), i_(3), i_(1), s_("indices"), i_(0)}, tk,
         "ret_type \"indices\" takes 6 arguments, got 7", errc::invalid_argument);
  expect(topk, {t_(x.dl()), t_(y.dl()), i_(3), i_(1), i_(0)}, tk, "expected 7 arguments", errc::invalid_argument);
  expect(topk, {t_(x.dl()), t_(y.dl()), i_(3), i_(1), i_(7), i_(0)}, tk, "argument 4 (ret_type) is not a string", errc::invalid_argument);
  expect(topk, {t_(x.dl()), t_(y.dl()), i_(std::int64_t{1} << 40), i_(1), s_("indices"), i_(0)}, tk, "argument 2 (k) is 1099511627776",
         errc::invalid_argument);
  expect(topk, {t_(x.dl()), t_(y.dl()), i_(3), i_(2), s_("indices"), i_(0)}, tk, "argument 3 (axis) is 2, out of range",
         errc::invalid_argument);
  auto k2 = output<std::int32_t>({2, 2});
  expect(topk, {t_(x.dl()), t_(v.dl()), t_(y.dl()), i_(2), i_(1), s_("both"), i_(0)}, tk,
         "argument 1 (values) has shape [2, 3], expected [2, 2]", errc::shape_mismatch);
  expect(topk, {t_(x.dl()), t_(k2.dl()), i_(0), i_(1), s_("indices"), i_(0)}, tk, "argument 1 (indices) has shape [2, 2], expected [2, 3]",
         errc::shape_mismatch);  // k < 1: all of the axis
  auto int_values = output<std::int32_t>({2, 3});
  expect(topk, {t_(x.dl()), t_(int_values.dl()), t_(y.dl()), i_(3), i_(1), s_("both"), i_(0)}, tk,
         "argument 1 (values) is int32, data is float32", errc::dtype_mismatch);
  tensor<std::int8_t> i8_idx(std::vector<std::int8_t>(6), {2, 3});
  expect(topk, {t_(x.dl()), t_(i8_idx.dl()), i_(3), i_(1), s_("indices"), i_(0)}, tk, "argument 1 (indices) is int8", errc::unsupported);
  tensor<std::uint16_t> u16({1, 2, 3, 4, 5, 6}, {2, 3});
  expect(topk, {t_(u16.dl()), t_(y.dl()), i_(3), i_(1), s_("indices"), i_(0)}, tk, "argument 0 (data) is uint16", errc::unsupported);
}

TEST_CASE("register_sort_functions: a runtime of its own, the process default, and errors through the packed ABI") {
  auto rt = gexec::runtime::create({.num_threads = 1});
  gexec::contrib::register_sort_functions(*rt);
  for (const char* name : {"tvm.contrib.sort.argsort", "tvm.contrib.sort.sort", "tvm.contrib.sort.topk"}) {
    CAPTURE(name);
    CHECK(rt->find_function(name) != nullptr);
  }

  const gexec::packed_function* f = rt->find_function("tvm.contrib.sort.topk");
  REQUIRE(f != nullptr);
  tensor<float> x({3, 1, 2, 1, 3, 0}, {6});
  auto i = output<std::int64_t>({2});
  TVMValue values[6];
  int codes[6] = {gexec::tc_dltensor, gexec::tc_dltensor, gexec::tc_int, gexec::tc_int, gexec::tc_str, tc_bool};
  values[0].v_handle = x.dl();
  values[1].v_handle = i.dl();
  values[2].v_int64 = 2;
  values[3].v_int64 = -1;
  values[4].v_str = "indices";
  values[5].v_int64 = 0;
  TVMValue ret;
  int ret_code = -1;
  CHECK(f->fn(values, codes, 6, &ret, &ret_code, f->resource_handle) == 0);
  CHECK(i.values == std::vector<std::int64_t>{0, 4});

  gexec::detail::take_last_error();
  values[4].v_str = "top";
  CHECK(f->fn(values, codes, 6, &ret, &ret_code, f->resource_handle) == -1);
  const std::string message = gexec::detail::take_last_error();
  CHECK_MESSAGE(contains(message, "tvm.contrib.sort.topk"), message);
  CHECK_MESSAGE(contains(message, "ret_type"), message);

  if (!gexec::find_global_function("tvm.contrib.sort.sort")) {
    gexec::contrib::register_sort_functions();
    CHECK(gexec::find_global_function("tvm.contrib.sort.argsort") != nullptr);
    CHECK(gexec::find_global_function("tvm.contrib.sort.sort") != nullptr);
    CHECK(gexec::find_global_function("tvm.contrib.sort.topk") != nullptr);
  }
}
