// The executor end to end over gexec_test_kernels, a C library of kernels in TVM's
// packed C ABI that check their arguments the way TVM-compiled code does. Expected
// values are computed here with plain loops.

#include <gexec/executor.hpp>

#include "test_support.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>
#include <numeric>
#include <string>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

using namespace test;

TEST_CASE("a chain of kernels computes what plain loops compute") {
  gexec::graph_builder b;
  auto x = b.input("x", {2, 3});
  auto y = b.input("y", {2, 3});
  auto s = b.op("add", "test_add", {x, y}, {{{2, 3}}});
  auto m = b.op("mul", "test_multiply", {s, y}, {{{2, 3}}});
  auto r = b.op("relu", "test_relu", {m}, {{{2, 3}}});
  b.output(b.op("inc", "test_add_one", {r}, {{{2, 3}}}));
  auto ex = gexec::create(b.build(), kernels());

  auto xv = iota(6, -3.0f), yv = iota(6, 0.5f, -0.25f);
  ex.set_input("x", tensor({2, 3}, xv));
  ex.set_input(1, tensor({2, 3}, yv));
  ex.run();
  std::vector<float> want(6);
  for (int i = 0; i < 6; ++i) want[i] = std::max((xv[i] + yv[i]) * yv[i], 0.0f) + 1.0f;
  CHECK(values_of(ex.get_output(0)) == want);
  CHECK(ex.get_num_inputs() == 2);
  CHECK(ex.get_num_outputs() == 1);
  // Running again with new inputs gives the new answer.
  ex.set_input("x", tensor({2, 3}, std::vector<float>(6, 1.0f)));
  ex.run();
  for (int i = 0; i < 6; ++i) want[i] = std::max((1.0f + yv[i]) * yv[i], 0.0f) + 1.0f;
  CHECK(values_of(ex.get_output(0)) == want);
}

TEST_CASE("diamond, dense and softmax: an MLP with parameters") {
  gexec::graph_builder b;
  auto x = b.input("x", {2, 4});
  auto w = b.input("w", {3, 4});
  auto d = b.op("dense", "test_dense", {x, w}, {{{2, 3}}});
  auto left = b.op("relu", "test_relu", {d}, {{{2, 3}}});
  auto right = b.op("inc", "test_add_one", {d}, {{{2, 3}}});
  auto join = b.op("join", "test_add", {left, right}, {{{2, 3}}});
  b.output(b.op("softmax", "test_softmax", {join}, {{{2, 3}}}));
  auto ex = gexec::create(gexec::to_json(b.build()), kernels());

  auto xv = iota(8, -1.0f, 0.3f), wv = iota(12, 0.5f, -0.1f);
  gexec::param_dict params;
  params.set("w", tensor({3, 4}, wv));
  params.set("unused", tensor({1}, {0.0f}));  // unknown names are ignored, as in TVM
  ex.load_params(gexec::save_param_dict(params));
  ex.set_input("x", tensor({2, 4}, xv));
  ex.run();

  std::vector<double> want(6);
  for (int i = 0; i < 2; ++i) {
    double z[3], mx = -1e30, sum = 0;
    for (int j = 0; j < 3; ++j) {
      double dot = 0;
      for (int k = 0; k < 4; ++k) dot += double(xv[i * 4 + k]) * wv[j * 4 + k];
      z[j] = std::max(dot, 0.0) + (dot + 1.0);
      mx = std::max(mx, z[j]);
    }
    for (double& v : z) sum += std::exp(v - mx);
    for (int j = 0; j < 3; ++j) want[i * 3 + j] = std::exp(z[j] - mx) / sum;
  }
  auto got = values_of(ex.get_output(0));
  for (int i = 0; i < 6; ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-5));
  // Parameters are not inputs in get_input_info, but keep their input index.
  auto info = ex.get_input_info();
  REQUIRE(info.size() == 1);
  CHECK(info[0].name == "x");
  CHECK(ex.get_input_index("w") == 1);
  CHECK(values_of(ex.get_input("w")) == wv);
}

TEST_CASE("multi-output nodes: outputs, their info and debug_get_output are per entry") {
  gexec::graph_builder b;
  auto x = b.input("x", {4, 2});
  auto parts = b.op("split", "test_split", {x}, {{{2, 2}}, {{2, 2}}});
  auto second = b.op("inc", "test_add_one", {parts[1]}, {{{2, 2}}});
  b.output(parts[0]);
  b.output(second);
  b.output(parts[1]);
  auto ex = gexec::create(b.build(), kernels());
  auto xv = iota(8);
  ex.set_input("x", tensor({4, 2}, xv));
  ex.run();
  CHECK(values_of(ex.get_output(0)) == std::vector<float>{0, 1, 2, 3});
  CHECK(values_of(ex.get_output(1)) == std::vector<float>{5, 6, 7, 8});
  CHECK(values_of(ex.get_output(2)) == std::vector<float>{4, 5, 6, 7});

  auto info = ex.get_output_info();
  REQUIRE(info.size() == 3);
  CHECK(info[0].name == "split:0");
  CHECK(info[2].name == "split:2");
  CHECK(info[1].shape == std::vector<std::int64_t>{2, 2});
  CHECK(ex.get_output_index("split:2") == 2);
  CHECK(ex.get_output_index("inc") == 1);
  CHECK(ex.get_output_index("nothing") == -1);
  CHECK(ex.get_input_index("nothing") == -1);

  // debug_get_output by entry: entry 2 is the split's second output.
  auto dbg = ex.debug_get_output(2);
  CHECK(values_of(dbg) == std::vector<float>{4, 5, 6, 7});
  CHECK(values_of(ex.debug_get_output("split", 1)) == std::vector<float>{4, 5, 6, 7});
  CHECK(values_of(ex.debug_get_output("inc")) == std::vector<float>{5, 6, 7, 8});
  CHECK(error_of([&] { (void)ex.debug_get_output("nope"); }).code() == gexec::errc::not_found);
  CHECK(error_of([&] { (void)ex.debug_get_output("split", 2); }).code() == gexec::errc::invalid_argument);
  CHECK(error_of([&] { (void)ex.debug_get_output(99u); }).code() == gexec::errc::invalid_argument);
}

TEST_CASE("debug_get_output runs only up to its node") {
  gexec::graph_builder b;
  auto x = b.input("x", {2});
  auto a = b.op("a", "test_add_one", {x}, {{{2}}});
  b.output(b.op("fail", "test_fail", {a}, {{{2}}}));
  auto ex = gexec::create(b.build(), kernels());
  ex.set_input("x", tensor({2}, {1, 2}));
  CHECK(values_of(ex.debug_get_output("a")) == std::vector<float>{2, 3});  // test_fail never ran
  auto e = error_of([&] { ex.run(); });
  CHECK(e.code() == gexec::errc::kernel_failed);
  CHECK(contains(e, "node \"fail\" (nodes[2], test_fail) failed: test_fail: deliberate failure"));
}

TEST_CASE("__nop reshapes vanish and alias their input; flatten_data passes 1-d shapes") {
  gexec::graph_builder b;
  auto x = b.input("x", {2, 8});
  auto r = b.nop("reshape", x, {16});
  auto y = b.op("inc16", "test_add_one_16", {r}, {{{16}}});
  auto back = b.nop("reshape_back", y, {4, 4});
  auto z = b.op("flat_inc16", "test_add_one_16", {back}, {{{4, 4}}}, {.flatten_data = true});
  b.output(z);
  b.output(r);
  auto g = b.build();
  auto ex = gexec::create(g, kernels());
  CHECK(ex.get_plan().calls.size() == 2);  // the two reshapes are not steps
  auto xv = iota(16);
  ex.set_input("x", tensor({2, 8}, xv));
  ex.run();
  std::vector<float> want = xv;
  for (float& v : want) v += 2;
  CHECK(values_of(ex.get_output(0)) == want);
  CHECK(ex.get_output(0).shape().size() == 2);
  CHECK(values_of(ex.get_output(1)) == xv);  // the reshape of the input is the input
}

TEST_CASE("a __nop whose output has its own storage becomes a copy") {
  gexec::graph_builder b;
  auto x = b.input("x", {2, 2});
  auto r = b.op("reshape", "__nop", {x}, {{{4}}});  // fresh storage id, unlike TVM's plans
  b.output(b.op("inc", "test_add_one", {r}, {{{4}}}));
  auto ex = gexec::create(b.build(), kernels());
  CHECK(ex.get_plan().copies.size() == 1);
  ex.set_input("x", tensor({2, 2}, {1, 2, 3, 4}));
  ex.run();
  CHECK(values_of(ex.get_output(0)) == std::vector<float>{2, 3, 4, 5});
}

TEST_CASE("0-d tensors, int32 kernels and an input that is also an output") {
  gexec::graph_builder b;
  auto a = b.input("a", {}, gexec::dtypes::int32);
  auto c = b.input("c", {}, gexec::dtypes::int32);
  b.output(b.op("sum", "test_add_int32", {a, c}, {{{}, gexec::dtypes::int32}}));
  b.output(a);
  auto ex = gexec::create(b.build(), kernels());
  ex.set_input("a", gexec::ndarray::from_values<std::int32_t>({}, {40}));
  ex.set_input("c", gexec::ndarray::from_values<std::int32_t>({}, {2}));
  ex.run();
  CHECK(ex.get_output(0).values<std::int32_t>()[0] == 42);
  CHECK(ex.get_output(1).values<std::int32_t>()[0] == 40);
  CHECK(ex.get_output(0).ndim() == 0);

  // Zero-copy input and zero-copy output on the same storage: the output is copied.
  auto in = gexec::ndarray::from_values<std::int32_t>({}, {7});
  auto out = gexec::ndarray::empty({}, gexec::dtypes::int32);
  ex.set_input_zero_copy("a", in);
  ex.set_output_zero_copy(1, out);
  ex.run();
  CHECK(out.values<std::int32_t>()[0] == 7);
  CHECK(ex.get_output(1).data() == out.data());
  CHECK(ex.get_output(0).values<std::int32_t>()[0] == 9);
}

TEST_CASE("a graph with no outputs runs its kernels") {
  gexec::graph_builder b;
  auto x = b.input("x", {3});
  b.op("inc", "test_add_one", {x}, {{{3}}});
  auto ex = gexec::create(b.build(), kernels());
  CHECK(ex.get_num_outputs() == 0);
  ex.set_input("x", tensor({3}, {1, 2, 3}));
  ex.run();
  CHECK(values_of(ex.debug_get_output("inc")) == std::vector<float>{2, 3, 4});
  CHECK(error_of([&] { (void)ex.get_output(0); }).code() == gexec::errc::invalid_argument);
}

TEST_CASE("zero-copy rewires every user of the storage, reshapes included, and checks the tensor") {
  gexec::graph_builder b;
  auto x = b.input("x", {16});
  auto r = b.nop("reshape", x, {4, 4});
  auto y = b.op("inc", "test_add_one", {r}, {{{4, 4}}});
  b.output(b.op("inc16", "test_add_one_16", {b.nop("flat", y, {16})}, {{{16}}}));
  auto ex = gexec::create(b.build(), kernels());
  auto in = tensor({16}, iota(16));
  auto out = gexec::ndarray::empty({16}, gexec::dtypes::float32);
  ex.set_input_zero_copy("x", in);
  ex.set_output_zero_copy(0, out);
  ex.run();
  std::vector<float> want = iota(16, 2.0f);
  CHECK(values_of(out) == want);
  CHECK(ex.get_output(0).data() == out.data());  // get_output after zero-copy is the user's buffer
  // The user's buffer is read in place: change it and run again.
  in.values<float>()[0] = 100;
  ex.run();
  CHECK(out.values<float>()[0] == 102);
  // set_input copies into gexec's own memory again, leaving the user's buffer alone.
  ex.set_input("x", tensor({16}, std::vector<float>(16, 0.0f)));
  ex.run();
  CHECK(out.values<float>()[0] == 2);
  CHECK(in.values<float>()[0] == 100);

  auto e = error_of([&] { ex.set_input_zero_copy("x", tensor({4, 4}, iota(16))); });
  CHECK(e.code() == gexec::errc::shape_mismatch);
  CHECK(contains(e, "set_input_zero_copy \"x\": shape is [4, 4], expected [16]"));
  e = error_of([&] { ex.set_input_zero_copy("x", gexec::ndarray::empty({16}, gexec::dtypes::int32)); });
  CHECK(e.code() == gexec::errc::dtype_mismatch);
  CHECK(contains(e, "dtype is int32, expected float32"));
  // A view one float into an aligned buffer is misaligned.
  auto big = tensor({17}, iota(17));
  std::vector<std::int64_t> shape{16};
  DLTensor shifted{static_cast<float*>(big.data()) + 1, gexec::cpu(), 1, gexec::dtypes::float32, shape.data(), nullptr, 0};
  e = error_of([&] { ex.set_input_zero_copy("x", gexec::ndarray::view(shifted, big.storage_owner())); });
  CHECK(e.code() == gexec::errc::misaligned);
  CHECK(contains(e, "not 64-byte aligned"));
  DLTensor on_gpu{big.data(), gexec::cuda(0), 1, gexec::dtypes::float32, shape.data(), nullptr, 0};
  e = error_of([&] { ex.set_output_zero_copy(0, gexec::ndarray::view(on_gpu, big.storage_owner())); });
  CHECK(e.code() == gexec::errc::device_mismatch);
  CHECK(contains(e, "tensor is on cuda:0, expected cpu:0"));
}

TEST_CASE("zero-copy leaves storage the planner reused for larger tensors alone") {
  // out[i] = in[0] + i, over the whole output, as any kernel writes its output.
  gexec::registry reg;
  reg.add("spread", [](gexec::packed_args a) {
    const DLTensor& in = a.tensor(0);
    DLTensor& out = a.tensor(1);
    for (std::int64_t i = 0; i < out.shape[0]; ++i) static_cast<float*>(out.data)[i] = static_cast<float*>(in.data)[0] + static_cast<float>(i);
  });
  // t [64] and y [2] share storage 1 (t is dead by then).
  gexec::graph_builder b;
  auto x = b.input("x", {1});
  auto t = b.op("t", "spread", {x}, {{{64}, gexec::dtypes::float32, 0, 1}});
  auto u = b.op("u", "spread", {t}, {{{64}}});
  auto y = b.op("y", "spread", {u}, {{{2}, gexec::dtypes::float32, 0, 1}});
  b.output(y);
  auto ex = gexec::create(b.build(), reg);

  // The caller's tensors are views into larger buffers whose other elements must survive.
  auto in_buffer = tensor({32}, std::vector<float>(32, 7.0f));
  auto out_buffer = tensor({32}, std::vector<float>(32, 9.0f));
  std::vector<std::int64_t> one{1}, two{2};
  DLTensor in_view{in_buffer.data(), gexec::cpu(), 1, gexec::dtypes::float32, one.data(), nullptr, 0};
  DLTensor out_view{out_buffer.data(), gexec::cpu(), 1, gexec::dtypes::float32, two.data(), nullptr, 0};
  in_buffer.values<float>()[0] = 5.0f;
  ex.set_input_zero_copy("x", gexec::ndarray::view(in_view, in_buffer.storage_owner()));
  ex.set_output_zero_copy(0, gexec::ndarray::view(out_view, out_buffer.storage_owner()));
  ex.run();
  CHECK(out_buffer.values<float>()[0] == 5.0f);
  CHECK(out_buffer.values<float>()[1] == 6.0f);
  for (int i = 2; i < 32; ++i) CHECK(out_buffer.values<float>()[static_cast<std::size_t>(i)] == 9.0f);
  CHECK(in_buffer.values<float>()[0] == 5.0f);  // the input is not overwritten by t
  for (int i = 1; i < 32; ++i) CHECK(in_buffer.values<float>()[static_cast<std::size_t>(i)] == 7.0f);
}

TEST_CASE("storage no address space holds is an error at creation, not a wrapped arena") {
  gexec::registry reg;
  // Each entry fits in int64, so the graph is valid; their sum does not fit.
  gexec::graph_builder b;
  auto x = b.input("a", {INT64_MAX}, gexec::dtypes::int8);
  auto y = b.input("b", {INT64_MAX}, gexec::dtypes::int8);
  b.output(x);
  b.output(y);
  auto e = error_of([&] { (void)gexec::create(b.build(), reg); });
  CHECK(e.code() == gexec::errc::out_of_memory);
  CHECK(contains(e, "exceeds an address space"));
  // One input larger than any machine's memory (2^61 bytes): input storage is taken on
  // first use, and then the failure is a clean out_of_memory, before allocating.
  gexec::graph_builder big;
  big.output(big.input("x", {std::int64_t{1} << 59}));
  // (A 32-bit process has no address space for it at all: the model is refused.)
  gexec::model_options zeros;
  zeros.zero_unset_inputs = true;
  if constexpr (sizeof(void*) < 8) {
    e = error_of([&] { (void)gexec::basic_model(big.build(), reg, zeros); });
    CHECK(e.code() == gexec::errc::out_of_memory);
    CHECK(contains(e, "model: the storage on cpu:0 exceeds an address space"));
  } else {
    gexec::basic_model m(big.build(), reg, zeros);
    auto huge = m.instantiate();
    e = error_of([&] { huge.run(); });
    CHECK(e.code() == gexec::errc::out_of_memory);
    CHECK(contains(e, "executor storage: 2305843009213693952 bytes would exceed the limit of"));
    CHECK(contains(e, "(model_options::max_storage_bytes)"));
  }
}

TEST_CASE("an executor's host storage reads as zeros and is not written before the first run") {
  // 1 Mi floats in and out: storage in mappings of their own, whose pages the system
  // zeroes on first touch. Creating the executor touches none of them (no memset).
  constexpr std::int64_t n = std::int64_t{1} << 20;
  gexec::graph_builder b;
  auto x = b.input("x", {n});
  b.output(b.op("inc", "test_add_one", {x}, {{{n}}}));
  gexec::basic_model m(b.build(), kernels());
  auto ex = m.instantiate();
  const gexec::ndarray out = ex.get_output(0);
  const auto* bytes = static_cast<const unsigned char*>(out.data());
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  auto resident_pages = [&] {  // of the output's whole pages
    const std::uintptr_t begin = (reinterpret_cast<std::uintptr_t>(bytes) + page - 1) / page * page;
    const std::uintptr_t end = (reinterpret_cast<std::uintptr_t>(bytes) + n * 4) / page * page;
    std::vector<unsigned char> in_core((end - begin) / page);
    REQUIRE(mincore(reinterpret_cast<void*>(begin), end - begin, in_core.data()) == 0);
    std::size_t r = 0;
    for (unsigned char c : in_core) r += c & 1;
    return r;
  };
  if (gexec::detail::long_lived_mapped_bytes != UINT64_MAX)  // under AddressSanitizer: the heap, zeroed
    CHECK(resident_pages() == 0);
  const std::vector<float> before = values_of(out);
  CHECK(std::all_of(before.begin(), before.end(), [](float v) { return v == 0.0f; }));
  ex.set_input("x", tensor({n}, iota(static_cast<std::size_t>(n))));
  ex.run();
  const std::vector<float> after = values_of(ex.get_output(0));
  CHECK(after[0] == 1.0f);
  CHECK(after[static_cast<std::size_t>(n - 1)] == static_cast<float>(n));
}

TEST_CASE("set_input and copy_output_to check names, indices, shapes and dtypes") {
  gexec::graph_builder b;
  auto x = b.input("x", {2, 3});
  b.output(b.op("inc", "test_add_one", {x}, {{{2, 3}}}));
  auto ex = gexec::create(b.build(), kernels());
  auto e = error_of([&] { ex.set_input("y", tensor({2, 3}, iota(6))); });
  CHECK(e.code() == gexec::errc::not_found);
  CHECK(contains(e, "no input named \"y\" (inputs: x)"));
  e = error_of([&] { ex.set_input("x", tensor({3, 2}, iota(6))); });
  CHECK(e.code() == gexec::errc::shape_mismatch);
  CHECK(contains(e, "set_input \"x\": shape is [3, 2], expected [2, 3]"));
  e = error_of([&] { ex.set_input("x", gexec::ndarray::empty({2, 3}, gexec::dtypes::float64)); });
  CHECK(e.code() == gexec::errc::dtype_mismatch);
  CHECK(error_of([&] { ex.set_input(5, tensor({2, 3}, iota(6))); }).code() == gexec::errc::invalid_argument);
  CHECK(error_of([&] { ex.set_input(-1, tensor({2, 3}, iota(6))); }).code() == gexec::errc::invalid_argument);
  CHECK(error_of([&] { ex.set_input("x", gexec::ndarray()); }).code() == gexec::errc::invalid_argument);

  ex.set_input("x", tensor({2, 3}, iota(6)));
  ex.run();
  auto dst = gexec::ndarray::empty({2, 3}, gexec::dtypes::float32);
  ex.copy_output_to(0, dst);
  CHECK(values_of(dst) == iota(6, 1.0f));
  CHECK(error_of([&] { ex.copy_output_to(0, gexec::ndarray::empty({6}, gexec::dtypes::float32)); }).code() == gexec::errc::shape_mismatch);
  CHECK(error_of([&] { ex.copy_output_to(1, dst); }).code() == gexec::errc::invalid_argument);
  auto from_inputs = ex.run_from_inputs({{"x", tensor({2, 3}, iota(6, 10.0f))}});
  CHECK(values_of(from_inputs.at(0)) == iota(6, 11.0f));
}

TEST_CASE("a failed load_params changes nothing") {
  gexec::graph_builder b;
  auto x = b.input("x", {2});
  auto w = b.input("w", {2});
  auto v = b.input("v", {2});
  b.output(b.op("add", "test_add", {b.op("a", "test_add", {x, w}, {{{2}}}), v}, {{{2}}}));
  auto ex = gexec::create(b.build(), kernels());
  gexec::param_dict good;
  good.set("w", tensor({2}, {1, 2}));
  good.set("v", tensor({2}, {10, 20}));
  ex.load_params(good);
  gexec::param_dict bad;
  bad.set("w", tensor({2}, {100, 200}));   // fine on its own
  bad.set("v", tensor({3}, {0, 0, 0}));    // wrong shape: the whole load fails
  auto e = error_of([&] { ex.load_params(gexec::save_param_dict(bad)); });
  CHECK(e.code() == gexec::errc::shape_mismatch);
  CHECK(contains(e, "load_params \"v\""));
  CHECK(error_of([&] { ex.load_params(std::string_view("garbage")); }).code() == gexec::errc::invalid_params);
  ex.set_input("x", tensor({2}, {0, 0}));
  ex.run();
  CHECK(values_of(ex.get_output(0)) == std::vector<float>{11, 22});
}

TEST_CASE("ten executors share one set of parameters, which outlives the executor it came from") {
  gexec::graph_builder b;
  auto x = b.input("x", {4});
  auto w = b.input("w", {4});
  b.output(b.op("mul", "test_multiply", {x, w}, {{{4}}}));
  const std::string json = gexec::to_json(b.build());
  gexec::param_dict params;
  params.set("w", tensor({4}, {1, 2, 3, 4}));
  const auto blob = gexec::save_param_dict(params);

  std::vector<gexec::graph_executor<>> executors;
  {
    auto owner = gexec::create(json, kernels());
    owner.load_params(blob);
    for (int i = 0; i < 10; ++i) {
      executors.push_back(gexec::create(json, kernels()));
      executors.back().share_params(owner, blob);
    }
    CHECK(executors[3].get_input("w").data() == owner.get_input("w").data());
  }  // the owner is gone; its parameter memory is not
  for (int i = 0; i < 10; ++i) {
    auto& ex = executors[static_cast<std::size_t>(i)];
    ex.set_input("x", tensor({4}, std::vector<float>(4, static_cast<float>(i))));
    ex.run();
    CHECK(values_of(ex.get_output(0)) == std::vector<float>{1.0f * i, 2.0f * i, 3.0f * i, 4.0f * i});
    CHECK(ex.get_input_info().size() == 1);
  }
}

TEST_CASE("creation fails, naming node and symbol, for a kernel the library lacks") {
  gexec::graph_builder b;
  auto x = b.input("x", {2});
  b.output(b.op("mystery", "no_such_kernel", {x}, {{{2}}}));
  auto e = error_of([&] { (void)gexec::create(b.build(), kernels()); });
  CHECK(e.code() == gexec::errc::symbol_not_found);
  CHECK(contains(e, "node \"mystery\" (nodes[1]): calls \"no_such_kernel\", which kernel library"));
  CHECK(contains(e, "libgexec_test_kernels.so does not provide"));
}

TEST_CASE("kernel argument checks surface as errors naming the node") {
  gexec::graph_builder b;
  auto x = b.input("x", {15});
  b.output(b.op("inc16", "test_add_one_16", {x}, {{{15}}}));
  auto ex = gexec::create(b.build(), kernels());
  ex.set_input("x", tensor({15}, iota(15)));
  auto e = error_of([&] { ex.run(); });
  CHECK(e.code() == gexec::errc::kernel_failed);
  CHECK(contains(e, "node \"inc16\" (nodes[1], test_add_one_16) failed: test_add_one_16: arg 0 (x): shape[0] is 15, expected 16"));
}

TEST_CASE("devices: a graph on a device no backend serves is rejected at creation") {
  gexec::graph_builder b;
  auto x = b.input("x", {2});
  b.output(b.op("inc", "test_add_one", {b.copy("to_gpu", x, kDLCUDA)}, {{{2}, gexec::dtypes::float32, kDLCUDA}}));
  auto e = error_of([&] { (void)gexec::create(b.build(), kernels(), {gexec::cpu()}); });
  CHECK(e.code() == gexec::errc::device_mismatch);
  CHECK(contains(e, "output is placed on cuda, but no cuda device was given"));
  e = error_of([&] { (void)gexec::create(b.build(), kernels(), {gexec::cpu(), gexec::cuda()}); });
  CHECK(e.code() == gexec::errc::device_mismatch);
  CHECK(contains(e, "no backend serves cuda:0"));
  CHECK(error_of([&] { (void)gexec::create(b.build(), kernels(), {}); }).code() == gexec::errc::invalid_argument);
}

TEST_CASE("workspace, parallel launch with a barrier, and failures inside parallel tasks") {
  gexec::graph_builder b;
  auto x = b.input("x", {1000});
  auto rev = b.op("rev", "test_reverse_ws", {x}, {{{1000}}});
  auto dbl = b.op("dbl", "test_parallel_scale2", {rev}, {{{1000}}});
  b.output(dbl);
  auto ex = gexec::create(b.build(), kernels());
  auto xv = iota(1000);
  ex.set_input("x", tensor({1000}, xv));
  for (int round = 0; round < 50; ++round) {  // the barrier and the workspace stack, many times
    ex.run();
    auto got = values_of(ex.get_output(0));
    bool ok = true;
    for (int i = 0; i < 1000; ++i) ok &= got[static_cast<std::size_t>(i)] == 2.0f * xv[static_cast<std::size_t>(999 - i)];
    REQUIRE(ok);
  }

  gexec::graph_builder f;
  auto y = f.input("y", {64});
  f.output(f.op("pfail", "test_parallel_fail", {y}, {{{64}}}));
  auto failing = gexec::create(f.build(), kernels());
  failing.set_input("y", tensor({64}, iota(64)));
  auto e = error_of([&] { failing.run(); });
  CHECK(e.code() == gexec::errc::kernel_failed);
  CHECK(contains(e, "node \"pfail\" (nodes[1], test_parallel_fail) failed: test_parallel_fail: task failed"));
}

TEST_CASE("kernels reach user functions through the environment, and unknown names fail cleanly") {
  gexec::graph_builder b;
  auto x = b.input("x", {3});
  b.output(b.op("env", "test_call_env", {x}, {{{3}}}));
  const auto g = b.build();
  auto ex = gexec::create(g, kernels());
  ex.set_input("x", tensor({3}, {1, 2, 3}));
  // Not registered yet: the kernel's look-up fails and the error names the function.
  auto e = error_of([&] { ex.run(); });
  CHECK(e.code() == gexec::errc::kernel_failed);
  CHECK(contains(e, "function \"gexec.test.scale\" is neither in kernel library"));

  gexec::register_global_function("gexec.test.scale", [](gexec::packed_args a) {
    const DLTensor& in = a.tensor(0);
    DLTensor& out = a.tensor(1);
    auto scale = static_cast<float>(a.float_value(2));
    for (std::int64_t i = 0; i < in.shape[0]; ++i) static_cast<float*>(out.data)[i] = static_cast<float*>(in.data)[i] * scale;
  });
  ex.run();
  CHECK(values_of(ex.get_output(0)) == std::vector<float>{3, 6, 9});
  CHECK(gexec::remove_global_function("gexec.test.scale"));
  CHECK(gexec::find_global_function("gexec.test.scale") == nullptr);
}

TEST_CASE("modules: __tvm_main__, one module per file, and load errors") {
  CHECK((kernels().get_function("__tvm_main__").fn == kernels().get_function("test_add").fn));
  CHECK(kernels().get_function("test_add"));
  CHECK_FALSE(kernels().get_function("not_there"));
  CHECK((gexec::load_module(GEXEC_TEST_KERNELS).get_function("test_add").fn == kernels().get_function("test_add").fn));
  auto e = error_of([] { (void)gexec::load_module("/nonexistent/lib.so"); });
  CHECK(e.code() == gexec::errc::io);
  CHECK(contains(e, "/nonexistent/lib.so"));
  e = error_of([] { (void)gexec::load_module(GEXEC_SOURCE_DIR "/README.md"); });
  CHECK(e.code() == gexec::errc::io);
  CHECK(contains(e, "README.md"));
}

TEST_CASE("the registry binding runs C++ callables by name, with exceptions as kernel errors") {
  gexec::registry reg;
  reg.add("twice", [](gexec::packed_args a) {
    const DLTensor& in = a.tensor(0);
    DLTensor& out = a.tensor(1);
    for (std::int64_t i = 0; i < in.shape[0]; ++i) static_cast<float*>(out.data)[i] = 2 * static_cast<float*>(in.data)[i];
  });
  reg.add("throws", [](gexec::packed_args a) -> int { return (void)a.tensor(5), 0; });
  gexec::graph_builder b;
  auto x = b.input("x", {3});
  auto y = b.op("t", "twice", {x}, {{{3}}});
  b.output(y);
  auto ex = gexec::create(b.build(), reg);
  ex.set_input("x", tensor({3}, {1, 2, 3}));
  ex.run();
  CHECK(values_of(ex.get_output(0)) == std::vector<float>{2, 4, 6});

  b.output(b.op("bad", "throws", {y}, {{{3}}}));
  auto bad = gexec::create(b.build(), reg);
  bad.set_input("x", tensor({3}, {1, 2, 3}));
  auto e = error_of([&] { bad.run(); });
  CHECK(e.code() == gexec::errc::kernel_failed);
  CHECK(contains(e, "node \"bad\" (nodes[2], throws) failed: gexec: invalid_argument: argument 5 of 2"));
  gexec::graph_builder c;
  c.output(c.op("k", "unregistered", {c.input("x", {1})}, {{{1}}}));
  CHECK(contains(error_of([&] { (void)gexec::create(c.build(), reg); }), "which kernel registry does not provide"));
}

namespace {

int twice_count = 0;
void twice(gexec::packed_args a) {
  const DLTensor& in = a.tensor(0);
  DLTensor& out = a.tensor(1);
  for (std::int64_t i = 0; i < in.shape[0]; ++i) static_cast<float*>(out.data)[i] = 2 * static_cast<float*>(in.data)[i];
  ++twice_count;
}
int refuse(gexec::packed_args) {
  gexec::detail::set_last_error("refuse: no");
  return -1;
}

}  // namespace

TEST_CASE("a static registry binds kernels fixed at compile time") {
  using kernels = gexec::static_registry<gexec::kernel<"twice", &twice>, gexec::kernel<"refuse", &refuse>>;
  CHECK((kernels{}.resolve("twice").fn != nullptr));
  CHECK(kernels{}.resolve("twice").resource_handle == nullptr);
  CHECK_FALSE(kernels{}.resolve("thrice"));
  gexec::graph_builder b;
  auto x = b.input("x", {3});
  auto y = b.op("t1", "twice", {x}, {{{3}}});
  b.output(b.op("t2", "twice", {y}, {{{3}}}));
  auto ex = gexec::create(b.build(), kernels{});
  ex.set_input("x", tensor({3}, {1, 2, 3}));
  twice_count = 0;
  ex.run();
  CHECK(twice_count == 2);
  CHECK(values_of(ex.get_output(0)) == std::vector<float>{4, 8, 12});
  b.output(b.op("r", "refuse", {y}, {{{3}}}));
  auto failing = gexec::create(b.build(), kernels{});
  failing.set_input("x", tensor({3}, {1, 2, 3}));
  CHECK(contains(error_of([&] { failing.run(); }), "node \"r\" (nodes[3], refuse) failed: refuse: no"));
  gexec::graph_builder c;
  c.output(c.op("k", "thrice", {c.input("x", {1})}, {{{1}}}));
  CHECK(contains(error_of([&] { (void)gexec::create(c.build(), kernels{}); }), "which static kernel registry does not provide"));
}

TEST_CASE("benchmark follows TVM's time evaluator") {
  int calls = 0;
  auto r = gexec::benchmark([&] { ++calls; }, {.repeat = 3, .number = 4});
  CHECK(r.results.size() == 3);
  CHECK(calls >= 1 + 3 * 4);
  CHECK(r.min <= r.median);
  CHECK(r.median <= r.max);
  CHECK(r.mean >= r.min);
  CHECK(r.mean <= r.max);
  // min_repeat_ms grows the inner loop until one repeat lasts that long.
  auto slow = gexec::benchmark([] { std::this_thread::sleep_for(std::chrono::microseconds(200)); }, {.repeat = 2, .number = 1, .min_repeat_ms = 5});
  for (double s : slow.results) CHECK(s >= 150e-6);
  gexec::graph_builder b;
  b.output(b.op("inc", "test_add_one", {b.input("x", {4})}, {{{4}}}));
  auto ex = gexec::create(b.build(), kernels());
  ex.set_input("x", tensor({4}, iota(4)));
  auto er = gexec::benchmark(ex, {.repeat = 2, .number = 10});
  CHECK(er.results.size() == 2);
  CHECK(er.min > 0);
}

TEST_CASE("zero-copy inputs and outputs rebind on every call, alternating between two buffers") {
  gexec::graph_builder b;
  auto x = b.input("x", {8});
  b.output(b.op("inc", "test_add_one", {x}, {{{8}}}));
  auto ex = gexec::create(b.build(), kernels());
  gexec::ndarray in[2] = {tensor({8}, iota(8, 0.0f)), tensor({8}, iota(8, 100.0f))};
  gexec::ndarray out[2] = {tensor({8}, std::vector<float>(8, -1.0f)), tensor({8}, std::vector<float>(8, -2.0f))};
  for (int round = 0; round < 10; ++round) {
    const int k = round % 2;
    ex.set_input_zero_copy("x", in[k]);
    ex.set_output_zero_copy(0, out[k]);
    in[k].values<float>()[0] = static_cast<float>(round);  // read in place, at run time
    ex.run();
    CAPTURE(round);
    std::vector<float> want = values_of(in[k]);
    for (float& v : want) v += 1;
    CHECK(values_of(out[k]) == want);
    CHECK(ex.get_output(0).data() == out[k].data());
    // The other output buffer keeps what the previous round wrote there (or its fill).
    if (round == 0) CHECK(values_of(out[1]) == std::vector<float>(8, -2.0f));
    if (round > 0) CHECK(out[1 - k].values<float>()[0] == static_cast<float>(round - 1) + 1);
  }
  // The caller may free a buffer it rebound away from: the executor no longer writes there.
  {
    auto temporary = tensor({8}, std::vector<float>(8, 0.0f));
    ex.set_output_zero_copy(0, temporary);
  }
  ex.set_output_zero_copy(0, out[0]);
  ex.run();
  CHECK(ex.get_output(0).data() == out[0].data());
}

TEST_CASE("an executor entered by a second thread while it runs refuses with errc::busy") {
  static std::atomic<int> stage{0};
  stage = 0;
  gexec::registry reg;
  reg.add("hold", [](gexec::packed_args a) {
    const DLTensor& in = a.tensor(0);
    DLTensor& out = a.tensor(1);
    static_cast<float*>(out.data)[0] = static_cast<float*>(in.data)[0];
    if (stage.load() != 0) return;  // only the first run holds
    stage = 1;
    while (stage.load() != 2) std::this_thread::yield();
  });
  gexec::graph_builder b;
  b.output(b.op("h", "hold", {b.input("x", {1})}, {{{1}}}));
  auto ex = gexec::create(b.build(), reg);
  ex.set_input("x", tensor({1}, {7}));
  std::thread runner([&] { ex.run(); });
  while (stage.load() != 1) std::this_thread::yield();
  for (auto call : {+[](decltype(ex)& e) { e.run(); }, +[](decltype(ex)& e) { e.set_input("x", tensor({1}, {1})); },
                    +[](decltype(ex)& e) { e.set_output_zero_copy(0, tensor({1}, {0})); }}) {
    auto e = error_of([&] { call(ex); });
    CHECK(e.code() == gexec::errc::busy);
    CHECK(contains(e, "in use by another thread"));
  }
  stage = 2;
  runner.join();
  CHECK(values_of(ex.get_output(0)) == std::vector<float>{7});
  ex.run();  // free again
}

TEST_CASE("a kernel that fails without a message is not blamed with an older one") {
  gexec::registry reg;
  reg.add("chatty", [](gexec::packed_args a) -> int {
    gexec::detail::set_last_error("chatty: a message left behind on success");
    (void)a;
    return 0;
  });
  reg.add("silent_fail", [](gexec::packed_args) -> int { return -1; });
  gexec::graph_builder b;
  auto x = b.input("x", {1});
  auto c = b.op("c", "chatty", {x}, {{{1}}});
  b.output(b.op("f", "silent_fail", {c}, {{{1}}}));
  auto ex = gexec::create(b.build(), reg);
  ex.set_input("x", tensor({1}, {1}));
  auto e = error_of([&] { ex.run(); });
  CHECK(contains(e, "node \"f\" (nodes[2], silent_fail) failed: no message"));
  CHECK_FALSE(contains(e, "chatty"));
}

TEST_CASE("a moved-from executor is an error, not a silent no-op") {
  gexec::graph_builder b;
  b.output(b.op("inc", "test_add_one", {b.input("x", {2})}, {{{2}}}));
  auto ex = gexec::create(b.build(), kernels());
  auto moved = std::move(ex);
  CHECK(contains(error_of([&] { ex.run(); }), "moved from"));  // NOLINT(bugprone-use-after-move): the point
  CHECK(ex.get_num_inputs() == 0);
  moved.set_input("x", tensor({2}, {1, 2}));
  moved.run();
  CHECK(values_of(moved.get_output(0)) == std::vector<float>{2, 3});
}
