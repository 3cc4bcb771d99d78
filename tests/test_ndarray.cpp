#include <gexec/ndarray.hpp>

#include <doctest/doctest.h>

#include <climits>
#include <cstdint>
#include <string>
#include <vector>

TEST_CASE("empty allocates zeroed, 64-byte aligned host storage, never a null pointer") {
  auto a = gexec::ndarray::empty({3, 5}, gexec::dtypes::float32);
  CHECK(a.defined());
  CHECK(a.ndim() == 2);
  CHECK(a.numel() == 15);
  CHECK(a.byte_size() == 60);
  CHECK(a.is_aligned(64));
  CHECK(a.is_contiguous());
  CHECK(gexec::same_device(a.device(), gexec::cpu()));
  for (float v : a.values<float>()) CHECK(v == 0.0f);
  auto zero = gexec::ndarray::empty({0}, gexec::dtypes::int32);
  CHECK(zero.data() != nullptr);
  CHECK(zero.byte_size() == 0);
  auto scalar = gexec::ndarray::empty({}, gexec::dtypes::float64);
  CHECK(scalar.numel() == 1);
  CHECK(scalar.byte_size() == 8);
}

TEST_CASE("empty rejects device, dtype and shape it cannot honour") {
  auto code_of = [](auto f) {
    try {
      f();
    } catch (const gexec::error& e) {
      return e.code();
    }
    return gexec::errc{};
  };
  CHECK(code_of([] { (void)gexec::ndarray::empty({2}, gexec::dtypes::float32, gexec::cuda(0)); }) == gexec::errc::unsupported);
  CHECK(code_of([] { (void)gexec::ndarray::empty({-1}, gexec::dtypes::float32); }) == gexec::errc::invalid_argument);
  CHECK(code_of([] { (void)gexec::ndarray::empty({1ll << 62, 8}, gexec::dtypes::float32); }) == gexec::errc::invalid_argument);
  CHECK(code_of([] { (void)gexec::ndarray::empty({2}, DLDataType{kDLFloat, 7, 1}); }) == gexec::errc::invalid_dtype);
  CHECK(code_of([] { (void)gexec::ndarray::from_values<float>({2, 2}, {1.0f, 2.0f}); }) == gexec::errc::shape_mismatch);
  auto a = gexec::ndarray::from_values<float>({2}, {1.0f, 2.0f});
  CHECK(code_of([&] { (void)a.values<std::int32_t>(); }) == gexec::errc::dtype_mismatch);
  CHECK(code_of([] { (void)gexec::ndarray().dltensor(); }) == gexec::errc::invalid_argument);
}

TEST_CASE("copies are handles; copy() is deep; copy_from checks shape and dtype") {
  auto a = gexec::ndarray::from_values<std::int32_t>({2, 2}, {1, 2, 3, 4});
  gexec::ndarray shared = a;
  shared.values<std::int32_t>()[0] = 10;
  CHECK(a.values<std::int32_t>()[0] == 10);
  auto deep = a.copy();
  deep.values<std::int32_t>()[1] = 20;
  CHECK(a.values<std::int32_t>()[1] == 2);
  auto dst = gexec::ndarray::empty({2, 2}, gexec::dtypes::int32);
  dst.copy_from(a);
  CHECK(dst.values<std::int32_t>()[3] == 4);
  CHECK_THROWS_AS(dst.copy_from(gexec::ndarray::empty({4}, gexec::dtypes::int32)), gexec::error);
  CHECK_THROWS_AS(dst.copy_from(gexec::ndarray::empty({2, 2}, gexec::dtypes::float32)), gexec::error);
}

TEST_CASE("a view keeps its owner alive and respects byte_offset and strides") {
  std::vector<std::int64_t> shape{2, 2};
  std::vector<std::int64_t> strides{1, 2};  // transposed, not compact
  auto owner = std::make_shared<std::vector<float>>(std::vector<float>{0, 1, 2, 3, 4});
  DLTensor t{owner->data(), gexec::cpu(), 2, gexec::dtypes::float32, shape.data(), strides.data(), sizeof(float)};
  auto v = gexec::ndarray::view(t, owner);
  std::weak_ptr<std::vector<float>> watch = owner;
  owner.reset();
  CHECK_FALSE(watch.expired());
  CHECK(*static_cast<float*>(v.data()) == 1.0f);  // byte_offset skips one float
  CHECK_FALSE(v.is_contiguous());
  CHECK_THROWS_AS((void)v.values<float>(), gexec::error);
  v = gexec::ndarray();
  CHECK(watch.expired());
}

TEST_CASE("DLPack export and import share storage and call the deleter exactly once") {
  auto a = gexec::ndarray::from_values<float>({3}, {1, 2, 3});
  std::weak_ptr<const void> watch = a.storage_owner();
  DLManagedTensor* m = a.to_dlpack();
  CHECK(m->dl_tensor.data == a.data());
  CHECK(m->dl_tensor.ndim == 1);
  CHECK(m->dl_tensor.shape[0] == 3);
  a = gexec::ndarray();
  CHECK_FALSE(watch.expired());  // the exported tensor keeps the storage alive
  {
    auto back = gexec::ndarray::from_dlpack(m);
    CHECK(back.values<float>()[2] == 3.0f);
  }
  CHECK(watch.expired());

  // A foreign producer: its deleter runs when the last gexec handle goes.
  static int deleted = 0;
  struct foreign {
    DLManagedTensor m{};
    std::int64_t shape[1] = {2};
    alignas(64) double data[2] = {0.5, 1.5};
  };
  auto* f = new foreign;
  f->m.dl_tensor = DLTensor{f->data, gexec::cpu(), 1, gexec::dtypes::float64, f->shape, nullptr, 0};
  f->m.manager_ctx = f;
  f->m.deleter = [](DLManagedTensor* self) {
    ++deleted;
    delete static_cast<foreign*>(self->manager_ctx);
  };
  {
    auto imported = gexec::ndarray::from_dlpack(&f->m);
    gexec::ndarray second = imported;
    CHECK(second.values<double>()[1] == 1.5);
    CHECK(deleted == 0);
  }
  CHECK(deleted == 1);
  CHECK_THROWS_AS((void)gexec::ndarray::from_dlpack(nullptr), gexec::error);
}

namespace {

gexec::error view_error(const DLTensor& t) {
  try {
    (void)gexec::ndarray::view(t, nullptr);
  } catch (const gexec::error& e) {
    return e;
  }
  FAIL("viewed a malformed DLTensor");
  return gexec::error(gexec::errc::unsupported, "unreachable");
}

bool mentions(const gexec::error& e, const std::string& s) { return std::string(e.what()).find(s) != std::string::npos; }

}  // namespace

TEST_CASE("view and from_dlpack refuse malformed DLTensors with invalid_argument naming the fault") {
  float data[4] = {1, 2, 3, 4};
  std::vector<std::int64_t> shape{2, 2}, negative{2, -2}, huge{std::int64_t{1} << 40, std::int64_t{1} << 40};
  std::vector<std::int64_t> many(gexec::max_ndim + 1, 1);
  const auto f32 = gexec::dtypes::float32;
  struct bad {
    const char* what;
    DLTensor t;
    const char* message;
  };
  const bad cases[] = {
      {"ndim -1", DLTensor{data, gexec::cpu(), -1, f32, shape.data(), nullptr, 0}, "negative ndim -1"},
      {"ndim INT32_MIN", DLTensor{data, gexec::cpu(), INT32_MIN, f32, shape.data(), nullptr, 0}, "negative ndim -2147483648"},
      {"ndim beyond the limit", DLTensor{data, gexec::cpu(), gexec::max_ndim + 1, f32, many.data(), nullptr, 0}, "ndim 65 exceeds gexec's limit of 64"},
      {"ndim INT32_MAX", DLTensor{data, gexec::cpu(), INT32_MAX, f32, shape.data(), nullptr, 0}, "ndim 2147483647 exceeds"},
      {"null shape", DLTensor{data, gexec::cpu(), 2, f32, nullptr, nullptr, 0}, "shape is null with ndim 2"},
      {"negative dimension", DLTensor{data, gexec::cpu(), 2, f32, negative.data(), nullptr, 0}, "dimension 1 of shape [2, -2] is negative"},
      {"overflowing size", DLTensor{data, gexec::cpu(), 2, f32, huge.data(), nullptr, 0}, "shape [1099511627776, 1099511627776] overflows"},
      {"null data", DLTensor{nullptr, gexec::cpu(), 2, f32, shape.data(), nullptr, 0}, "data is null for a tensor of 16 bytes"},
  };
  for (const bad& c : cases) {
    CAPTURE(std::string(c.what));
    auto e = view_error(c.t);
    CHECK(e.code() == gexec::errc::invalid_argument);
    CHECK_MESSAGE(mentions(e, std::string("ndarray::view: malformed DLTensor: ") + c.message), std::string(e.what()));

    // The DLPack import refuses it the same way, and releases the producer's tensor once.
    static int deleted;
    deleted = 0;
    DLManagedTensor managed{c.t, nullptr, [](DLManagedTensor*) { ++deleted; }};
    try {
      (void)gexec::ndarray::from_dlpack(&managed);
      FAIL("imported a malformed DLTensor");
    } catch (const gexec::error& e2) {
      CHECK(e2.code() == gexec::errc::invalid_argument);
      CHECK_MESSAGE(mentions(e2, std::string("from_dlpack: malformed DLTensor: ") + c.message), std::string(e2.what()));
    }
    CHECK(deleted == 1);
  }

  // What is well formed still views: 0-d with no shape, empty tensors with no data, strided views.
  float scalar = 2.5f;
  auto s = gexec::ndarray::view(DLTensor{&scalar, gexec::cpu(), 0, f32, nullptr, nullptr, 0}, nullptr);
  CHECK(s.ndim() == 0);
  CHECK(s.values<float>()[0] == 2.5f);
  std::vector<std::int64_t> empty_shape{0, 3};
  auto z = gexec::ndarray::view(DLTensor{nullptr, gexec::cpu(), 2, f32, empty_shape.data(), nullptr, 0}, nullptr);
  CHECK(z.numel() == 0);
  auto v = gexec::ndarray::view(DLTensor{data, gexec::cpu(), 2, f32, shape.data(), nullptr, 0}, nullptr);
  CHECK(v.values<float>()[3] == 4.0f);
  std::vector<std::int64_t> at_limit(gexec::max_ndim, 1);
  CHECK(gexec::ndarray::view(DLTensor{data, gexec::cpu(), gexec::max_ndim, f32, at_limit.data(), nullptr, 0}, nullptr).ndim() == gexec::max_ndim);
}

TEST_CASE("empty refuses more dimensions than view accepts") {
  try {
    (void)gexec::ndarray::empty(std::vector<std::int64_t>(gexec::max_ndim + 1, 1), gexec::dtypes::float32);
    FAIL("no error");
  } catch (const gexec::error& e) {
    CHECK(e.code() == gexec::errc::invalid_argument);
    CHECK(mentions(e, "ndarray::empty: 65 dimensions exceed gexec's limit of 64"));
  }
  CHECK(gexec::ndarray::empty(std::vector<std::int64_t>(gexec::max_ndim, 1), gexec::dtypes::float32).numel() == 1);
}

TEST_CASE("DLPack border: TVM's float8 leaves as uint8 bits, DLPack's bool enters as bool") {
  // TVM's float8 codes are DLPack 1.x's bool (6) and float8_e3m4 (7): never exported as such.
  for (std::uint8_t code : {gexec::tvm_float8_e4m3_code, gexec::tvm_float8_e5m2_code}) {
    CAPTURE(int(code));
    auto a = gexec::ndarray::empty({3}, DLDataType{code, 8, 1});
    DLManagedTensor* m = a.to_dlpack();
    CHECK(m->dl_tensor.dtype.code == kDLUInt);
    CHECK(m->dl_tensor.dtype.bits == 8);
    CHECK(m->dl_tensor.dtype.lanes == 1);
    CHECK(m->dl_tensor.data == a.data());
    CHECK(a.dtype().code == code);  // the exporter's own dtype is untouched
    m->deleter(m);
  }
  // Every other dtype leaves as it is.
  for (DLDataType t : {gexec::dtypes::float32, gexec::dtypes::boolean, gexec::dtypes::bfloat16, gexec::dtypes::int4,
                       gexec::dtypes::uint8, DLDataType{kDLFloat, 32, 4}}) {
    CAPTURE(gexec::to_string(t));
    DLManagedTensor* m = gexec::ndarray::empty({2}, t).to_dlpack();
    CHECK(gexec::same_dtype(m->dl_tensor.dtype, t));
    m->deleter(m);
  }

  // DLPack's kDLBool (code 6, 8 bits) is bool (TVM's uint1), never float8 e4m3.
  struct foreign {
    DLManagedTensor m{};
    std::int64_t shape[1] = {3};
    alignas(64) std::uint8_t data[3] = {1, 0, 1};
  };
  auto* f = new foreign;
  f->m.dl_tensor = DLTensor{f->data, gexec::cpu(), 1, DLDataType{6, 8, 1}, f->shape, nullptr, 0};
  f->m.manager_ctx = f;
  f->m.deleter = [](DLManagedTensor* self) { delete static_cast<foreign*>(self->manager_ctx); };
  auto b = gexec::ndarray::from_dlpack(&f->m);
  CHECK(gexec::to_string(b.dtype()) == "bool");
  REQUIRE(gexec::same_dtype(b.dtype(), gexec::dtypes::boolean));
  CHECK(b.values<bool>()[0]);
  CHECK_FALSE(b.values<bool>()[1]);
  CHECK(b.byte_size() == 3);

  // The translation itself (gexec/dtype.hpp), lanes kept.
  static_assert(gexec::same_dtype(gexec::to_dlpack_dtype({gexec::tvm_float8_e4m3_code, 8, 4}), {kDLUInt, 8, 4}));
  static_assert(gexec::same_dtype(gexec::from_dlpack_dtype({gexec::dlpack_bool_code, 8, 1}), gexec::dtypes::boolean));
  static_assert(gexec::same_dtype(gexec::from_dlpack_dtype(gexec::dtypes::uint8), gexec::dtypes::uint8));

  // And a gexec bool makes the round trip as bool.
  auto c = gexec::ndarray::from_dlpack(gexec::ndarray::from_values<bool>({2}, {true, false}).to_dlpack());
  CHECK(gexec::same_dtype(c.dtype(), gexec::dtypes::boolean));
}
