#include <gexec/ndarray.hpp>

#include <doctest/doctest.h>

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
