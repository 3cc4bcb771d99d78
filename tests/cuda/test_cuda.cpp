// The CUDA backend end to end: memory, copies and their order, TVM's CUDA modules
// (argument packing, launch dimensions, dynamic shared memory, workspace), heterogeneous
// graphs, CUDA Graph capture and replay, and the error paths.
//
// One program, two drivers: with GEXEC_CUDA_DRIVER naming the host-emulated driver
// (tests/cuda/emulated_driver.h; CTest label cuda-emulated) every case runs on this
// machine, the kernels being host implementations of tests/cuda/kernels.cu; without it
// the cases run on a real GPU through libcuda.so.1 (label gpu), the kernels being the
// PTX nvcc made from kernels.cu. Without a driver or GPU the program prints SKIPPED and
// exits 77. Every result is checked against values computed here with plain loops.

#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <gexec/cuda.hpp>

#include "emulated_driver.h"

#include <dlfcn.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

using gexec::ndarray;

/// The emulated driver's test API, when the tests run on it (null members otherwise).
struct emulator {
  using stats = gexec_emu_stats;
  decltype(&gexec_emu_get_stats) get_stats = nullptr;
  decltype(&gexec_emu_trace_enable) trace_enable = nullptr;
  decltype(&gexec_emu_trace) trace_text = nullptr;
  decltype(&gexec_emu_trace_clear) trace_clear = nullptr;
  decltype(&gexec_emu_fail) fail = nullptr;
  decltype(&gexec_emu_reset) reset = nullptr;

  [[nodiscard]] bool active() const { return get_stats != nullptr; }
  [[nodiscard]] stats of(int device) const {
    stats s{};
    get_stats(device, &s);
    return s;
  }
  [[nodiscard]] std::string trace() const {
    std::string s(1 << 16, '\0');
    const unsigned long n = trace_text(s.data(), s.size());
    s.resize(std::min<unsigned long>(n, s.size() - 1));
    return s;
  }
};
emulator emu;

std::string skip_reason;

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

[[noreturn]] void abort_with(const std::string& why) {
  std::fprintf(stderr, "test_cuda: %s\n", why.c_str());
  std::abort();
}

/// Loads the emulator's test API and registers the host kernels with it.
void attach_emulator(const std::string& driver) {
  void* lib = dlopen(driver.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) abort_with(dlerror());
  emu.get_stats = reinterpret_cast<decltype(emu.get_stats)>(dlsym(lib, "gexec_emu_get_stats"));
  emu.trace_enable = reinterpret_cast<decltype(emu.trace_enable)>(dlsym(lib, "gexec_emu_trace_enable"));
  emu.trace_text = reinterpret_cast<decltype(emu.trace_text)>(dlsym(lib, "gexec_emu_trace"));
  emu.trace_clear = reinterpret_cast<decltype(emu.trace_clear)>(dlsym(lib, "gexec_emu_trace_clear"));
  emu.fail = reinterpret_cast<decltype(emu.fail)>(dlsym(lib, "gexec_emu_fail"));
  emu.reset = reinterpret_cast<decltype(emu.reset)>(dlsym(lib, "gexec_emu_reset"));
  if (!emu.get_stats || !emu.trace_enable || !emu.trace_text || !emu.trace_clear || !emu.fail || !emu.reset)
    abort_with(driver + " lacks the emulator's gexec_emu_* functions");
  void* kernels = dlopen(GEXEC_CUDA_EMULATED_KERNELS, RTLD_NOW | RTLD_LOCAL);
  if (!kernels) abort_with(dlerror());
  auto register_all = reinterpret_cast<void (*)()>(dlsym(kernels, "gexec_test_register_emulated_kernels"));
  if (!register_all) abort_with("no gexec_test_register_emulated_kernels in " GEXEC_CUDA_EMULATED_KERNELS);
  register_all();
}

const DLDataType f32{kDLFloat, 32, 1};

ndarray host(std::vector<std::int64_t> shape, const std::function<float(std::int64_t)>& value) {
  ndarray a = ndarray::empty(shape, f32);
  auto* p = static_cast<float*>(a.data());
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(a.numel()); ++i) p[i] = value(i);
  return a;
}

std::vector<float> values_of(const ndarray& a) {
  const auto* p = static_cast<const float*>(a.data());
  return {p, p + a.numel()};
}

template <class Executor>
std::vector<float> output(Executor& ex, int index, std::vector<std::int64_t> shape) {
  ndarray out = ndarray::empty(std::move(shape), f32);
  ex.copy_output_to(index, out);
  return values_of(out);
}

void check_close(const std::vector<float>& got, const std::vector<float>& want, float tol = 0) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    if (std::fabs(got[i] - want[i]) > tol * std::max(1.0f, std::fabs(want[i]))) FAIL("element " << i << ": " << got[i] << " != " << want[i]);
}

gexec::module host_library() { return gexec::load_module(GEXEC_CUDA_HOST_PTX); }

constexpr int gpu = kDLCUDA;

gexec::model_options on(std::vector<DLDevice> devices) {
  gexec::model_options o;
  o.devices = std::move(devices);
  return o;
}

/// One op on the GPU: inputs "a" (and "b"), output of `out_shape`.
gexec::cuda_model single_op(const std::string& func, const std::vector<std::vector<std::int64_t>>& inputs, std::vector<std::int64_t> out_shape,
                            const gexec::module& lib = host_library(), std::vector<DLDevice> devices = {gexec::cpu(), gexec::cuda()}) {
  gexec::graph_builder g;
  std::vector<gexec::node_entry> args;
  const char* names[] = {"a", "b", "c"};
  for (std::size_t i = 0; i < inputs.size(); ++i) args.push_back(g.input(names[i], inputs[i], f32, gpu));
  g.output(g.op("op", func, args, {{std::move(out_shape), f32, gpu}}));
  return gexec::cuda_model(g.build(), gexec::packed_c_abi(lib), {}, on(std::move(devices)));
}

/// Output 0 of a one-input model after setting input "a" and running `runs` times.
std::vector<float> run_on(const gexec::cuda_model& m, const ndarray& a, std::vector<std::int64_t> out_shape, int runs = 1) {
  auto ex = m.instantiate();
  ex.set_input("a", a);
  for (int r = 0; r < runs; ++r) ex.run();
  return output(ex, 0, std::move(out_shape));
}

/// f of each element of `a`, computed on the host.
template <class F>
std::vector<float> each(const ndarray& a, F f) {
  std::vector<float> v = values_of(a);
  for (float& x : v) x = f(x);
  return v;
}

}  // namespace

TEST_CASE("the driver is found and names its devices") {
  auto driver = gexec::cuda_driver::process_default();
  CHECK(driver->device_count() >= 1);
  CHECK(driver->version() >= 12000);
  MESSAGE("driver " << driver->path() << ", version " << driver->version() << ", " << driver->device_count() << " device(s)");
}

TEST_CASE("a driver library that is not there is errc::no_device, naming it") {
  try {
    (void)gexec::cuda_driver::load("/nonexistent/libcuda.so.1");
    FAIL("loaded");
  } catch (const gexec::error& e) {
    CHECK(e.code() == gexec::errc::no_device);
    CHECK(std::string(e.what()).find("no CUDA driver: cannot load /nonexistent/libcuda.so.1") != std::string::npos);
  }
}

TEST_CASE("backend: memory, copies in both directions and within the device, workspace pooled per stream") {
  gexec::cuda_backend b;
  const DLDevice d = gexec::cuda();
  auto s = b.create_stream(d);
  ndarray src = host({1000}, [](std::int64_t i) { return 0.5f * static_cast<float>(i); });
  ndarray dev1 = b.empty({1000}, f32, d), dev2 = b.empty({1000}, f32, d);
  ndarray back = host({1000}, [](std::int64_t) { return -1.0f; });
  const auto before = emu.active() ? emu.of(0) : emulator::stats{};
  b.copy_async(src.dltensor(), const_cast<DLTensor&>(dev1.dltensor()), s);
  b.copy_async(dev1.dltensor(), const_cast<DLTensor&>(dev2.dltensor()), s);
  b.copy_async(dev2.dltensor(), const_cast<DLTensor&>(back.dltensor()), s);
  if (emu.active()) CHECK(values_of(back)[10] == -1.0f);  // enqueued, not yet done
  b.synchronize(s);
  check_close(values_of(back), values_of(src));
  if (emu.active()) {
    const auto after = emu.of(0);
    CHECK(after.h2d - before.h2d == 1);
    CHECK(after.d2d - before.d2d == 1);
    CHECK(after.d2h - before.d2h == 1);
  }
  // A block freed on the stream is handed out again on it.
  void* w1 = b.alloc_workspace(d, 4096, &s);
  CHECK(b.free_workspace(d, w1, &s) == 0);
  void* w2 = b.alloc_workspace(d, 4000, &s);
  CHECK(w2 == w1);
  CHECK(b.free_workspace(d, w2, &s) == 0);
  CHECK(b.free_workspace(d, w2, &s) == -1);  // not out any more
  b.destroy_stream(d, s);
}

TEST_CASE("TVM CUDA host code: each kernel's arguments, launch dimensions and shared memory") {
  SUBCASE("vadd: handles and an int32, grid from blockIdx.x") {
    auto m = single_op("fused_add", {{1000}, {1000}}, {1000});
    auto ex = m.instantiate();
    ndarray a = host({1000}, [](std::int64_t i) { return static_cast<float>(i); });
    ndarray b = host({1000}, [](std::int64_t i) { return 0.25f * static_cast<float>(i % 7); });
    ex.set_input("a", a);
    ex.set_input("b", b);
    ex.run();
    std::vector<float> want(1000);
    for (int i = 0; i < 1000; ++i) want[i] = values_of(a)[i] + values_of(b)[i];
    check_close(output(ex, 0, {1000}), want);
  }
  SUBCASE("scale_shift: float32 and float64, int64 and uint32 narrowed from 64-bit values") {
    ndarray a = host({777}, [](std::int64_t i) { return 0.1f * static_cast<float>(i) - 3.0f; });
    check_close(run_on(single_op("fused_scale_shift", {{777}}, {777}), a, {777}), each(a, [](float x) { return x * 2.0f + 0.5f; }));
  }
  SUBCASE("transpose: tags in the order blockIdx.y, blockIdx.x, threadIdx.y, threadIdx.x") {
    ndarray a = host({37, 53}, [](std::int64_t i) { return static_cast<float>(i); });
    std::vector<float> want(37 * 53);
    for (int r = 0; r < 37; ++r)
      for (int c = 0; c < 53; ++c) want[c * 37 + r] = values_of(a)[r * 53 + c];
    check_close(run_on(single_op("fused_transpose", {{37, 53}}, {53, 37}), a, {53, 37}), want);
  }
  SUBCASE("row_sum: dynamic shared memory after the launch dimensions") {
    ndarray a = host({5, 300}, [](std::int64_t i) { return static_cast<float>(i % 13) * 0.5f; });
    std::vector<float> want(5, 0.0f);
    for (int r = 0; r < 5; ++r)
      for (int c = 0; c < 300; ++c) want[r] += values_of(a)[r * 300 + c];
    check_close(run_on(single_op("fused_row_sum", {{5, 300}}, {5}), a, {5}), want, 1e-6f);
  }
  SUBCASE("big_shared: 64 KiB of dynamic shared memory needs the kernel's limit raised") {
    ndarray a = host({5000}, [](std::int64_t i) { return static_cast<float>(i) * 3.0f; });
    std::vector<float> want(5000);
    for (int i = 0; i < 5000; ++i) want[i] = values_of(a)[4999 - i];
    check_close(run_on(single_op("fused_big_shared", {{5000}}, {5000}), a, {5000}), want);
    if (emu.active()) CHECK(emu.of(0).max_shared_bytes >= 65536);
  }
  SUBCASE("workspace: TVMBackendAllocWorkspace on the device, two launches using it") {
    ndarray a = host({4096}, [](std::int64_t i) { return static_cast<float>(i) - 100.0f; });
    // Three runs: the pool serves the later ones without allocating.
    check_close(run_on(single_op("fused_workspace", {{4096}}, {4096}), a, {4096}, 3), each(a, [](float x) { return 3.0f * x; }));
  }
  SUBCASE("launch values <= 0 mean 1") {
    ndarray a = host({200}, [](std::int64_t i) { return static_cast<float>(i) - 100.0f; });
    check_close(run_on(single_op("fused_launch_zero_dims", {{200}}, {200}), a, {200}), each(a, [](float x) { return std::max(0.0f, x); }));
  }
}

TEST_CASE("fresh device storage is zeroed on the device, with no host round trip") {
  gexec::graph_builder g;
  auto a = g.input("a", {4096}, f32, gpu);
  g.output(g.op("op", "fused_scale_shift", {a}, {{{4096}, f32, gpu}}));
  gexec::model_options options = on({gexec::cpu(), gexec::cuda()});
  options.zero_unset_inputs = true;  // "a" is never set: its storage must read as zeros
  gexec::cuda_model m(g.build(), gexec::packed_c_abi(host_library()), {}, options);
  const auto before = emu.active() ? emu.of(0) : emulator::stats{};
  auto ex = m.instantiate();
  ex.run();
  const std::vector<float> got = output(ex, 0, {4096});
  for (std::size_t i = 0; i < got.size(); i += 97) CHECK(got[i] == 0.5f);  // 0 * 2 + 0.5
  if (emu.active()) {
    const auto after = emu.of(0);
    CHECK(after.memsets - before.memsets >= 2);  // the activation arena and the input
    CHECK(after.h2d == before.h2d);
  }
}

TEST_CASE("kernels from a fatbin run too") {
  ndarray a = host({300}, [](std::int64_t i) { return static_cast<float>(i) - 150.0f; });
  check_close(run_on(single_op("fused_relu", {{300}}, {300}, gexec::load_module(GEXEC_CUDA_HOST_FATBIN)), a, {300}),
              each(a, [](float x) { return std::max(0.0f, x); }));
}

TEST_CASE("a heterogeneous graph: CUDA kernels, a CPU kernel between them, __copy both ways in order") {
  gexec::graph_builder g;
  auto x = g.input("x", {256}, f32, gpu);
  auto bias = g.input("bias", {256}, f32, gpu);
  auto sum = g.op("sum", "fused_add", {x, bias}, {{{256}, f32, gpu}});
  auto to_host = g.copy("to_host", sum, kDLCPU);
  auto neg = g.op("neg", "fused_negative_cpu", {to_host}, {{{256}, f32, kDLCPU}});
  auto to_gpu = g.copy("to_gpu", neg, gpu);
  g.output(g.op("relu", "fused_relu", {to_gpu}, {{{256}, f32, gpu}}));
  gexec::param_dict params;
  params.set("bias", host({256}, [](std::int64_t i) { return 100.0f - static_cast<float>(i); }));
  gexec::cuda_model m(g.build(), gexec::packed_c_abi(host_library()), params, on({gexec::cpu(), gexec::cuda()}));
  auto ex = m.instantiate();
  ndarray xin = host({256}, [](std::int64_t i) { return static_cast<float>(i % 5) - 2.0f; });
  ex.set_input("x", xin);
  if (emu.active()) {
    emu.trace_clear();
    emu.trace_enable(1);
  }
  ex.run();
  std::vector<float> want(256);
  for (int i = 0; i < 256; ++i) want[i] = std::max(0.0f, -(values_of(xin)[i] + 100.0f - static_cast<float>(i)));
  check_close(output(ex, 0, {256}), want);
  CHECK(ex.get_output(0).device().device_type == kDLCUDA);
  if (emu.active()) {
    emu.trace_enable(0);
    const std::string t = emu.trace();
    const auto add = t.find("launch vadd_kernel0"), d2h = t.find("d2h 1024"), h2d = t.find("h2d 1024", d2h == std::string::npos ? 0 : d2h),
               relu = t.find("launch relu_kernel0");
    INFO(t);
    CHECK(add < d2h);
    CHECK(d2h < h2d);
    CHECK(h2d < relu);
    CHECK(relu != std::string::npos);
  }
}

TEST_CASE("a graph naming a device no backend serves is refused when the model is built") {
  gexec::graph_builder g;
  auto a = g.input("a", {4}, f32, gpu);
  g.output(g.op("op", "fused_relu", {a}, {{{4}, f32, gpu}}));
  try {
    (void)gexec::model(g.build(), gexec::packed_c_abi(host_library()), {}, on({gexec::cpu(), gexec::cuda()}));
    FAIL("built");
  } catch (const gexec::error& e) {
    CHECK(e.code() == gexec::errc::device_mismatch);
    CHECK(std::string(e.what()).find("no backend serves cuda:0") != std::string::npos);
  }
  try {
    (void)gexec::cuda_model(g.build(), gexec::packed_c_abi(host_library()), {}, on({gexec::cpu()}));
    FAIL("built");
  } catch (const gexec::error& e) {
    CHECK(std::string(e.what()).find("no cuda device was given") != std::string::npos);
  }
}

TEST_CASE("a library whose cuda module cannot be used loads; launching one of its kernels says why") {
  gexec::module lib = gexec::load_module(GEXEC_CUDA_HOST_BADFORMAT);
  CHECK(lib.get_function("fused_negative_cpu"));  // its host functions are there
  auto m = single_op("fused_relu", {{16}}, {16}, lib);
  auto ex = m.instantiate();
  ex.set_input("a", host({16}, [](std::int64_t i) { return static_cast<float>(i); }));
  try {
    ex.run();
    FAIL("ran");
  } catch (const gexec::error& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(e.code() == gexec::errc::kernel_failed);
    CHECK(what.find("function \"__tvm_set_device\" is neither in kernel library") != std::string::npos);  // its first look-up
    CHECK(what.find("the library's device modules could not be read") != std::string::npos);
    CHECK(what.find("has format \"spirv\" (gexec loads ptx, cubin and fatbin)") != std::string::npos);
  }
}

TEST_CASE("a single-file library: embedded graph and parameters, kernels from its cuda module") {
  auto m = gexec::cuda_model::load(GEXEC_CUDA_HOST_FACTORY, on({gexec::cpu(), gexec::cuda()}));
  auto ex = m.instantiate();
  ndarray x = host({64}, [](std::int64_t i) { return static_cast<float>(i % 9) - 12.0f; });
  ex.set_input("x", x);
  ex.run();
  std::vector<float> want(64);
  for (int i = 0; i < 64; ++i) want[i] = std::max(0.0f, values_of(x)[i] + 0.25f * static_cast<float>(i));
  check_close(output(ex, 0, {64}), want);
}

TEST_CASE("zero-copy inputs and outputs on the device") {
  auto m = single_op("fused_relu", {{128}}, {128});
  auto ex = m.instantiate();
  gexec::cuda_backend& b = m.get_backends().get<gexec::cuda_backend>();
  ndarray in = b.empty({128}, f32), out = b.empty({128}, f32);
  ndarray xin = host({128}, [](std::int64_t i) { return static_cast<float>(i) - 64.0f; });
  gexec::backends<gexec::cpu_backend, gexec::cuda_backend>{}.copy(xin.dltensor(), const_cast<DLTensor&>(in.dltensor()));
  ex.set_input_zero_copy("a", in);
  ex.set_output_zero_copy(0, out);
  ex.run();
  ex.synchronize();
  ndarray back = ndarray::empty({128}, f32);
  m.get_backends().copy(out.dltensor(), const_cast<DLTensor&>(back.dltensor()));
  std::vector<float> want(128);
  for (int i = 0; i < 128; ++i) want[i] = std::max(0.0f, values_of(xin)[i]);
  check_close(values_of(back), want);
  // A host tensor cannot be bound zero-copy to a device entry.
  CHECK_THROWS_WITH_AS(ex.set_input_zero_copy("a", xin), doctest::Contains("expected cuda:0"), gexec::error);
}

TEST_CASE("CUDA Graph: capture once, replay, recapture when a binding changes; results equal eager runs") {
  // A chain of 16 kernels on one device.
  gexec::graph_builder g;
  gexec::node_entry e = g.input("a", {512}, f32, gpu);
  for (int k = 0; k < 16; ++k) e = g.op("n" + std::to_string(k), k % 2 ? "fused_relu" : "fused_scale_shift", {e}, {{{512}, f32, gpu}});
  g.output(e);
  gexec::cuda_model m(g.build(), gexec::packed_c_abi(host_library()), {}, on({gexec::cuda()}));
  auto eager = m.instantiate(), replayed = m.instantiate();
  auto want_for = [](const ndarray& a) {
    std::vector<float> v = values_of(a);
    for (int k = 0; k < 16; ++k)
      for (float& x : v) x = k % 2 ? std::max(0.0f, x) : x * 2.0f + 0.5f;
    return v;
  };
  ndarray a = host({512}, [](std::int64_t i) { return static_cast<float>(i % 17) - 8.0f; });
  eager.set_input("a", a);
  replayed.set_input("a", a);
  eager.run();
  const gexec::cuda_graph policy;
  for (int run = 0; run < 4; ++run) replayed.run(policy);
  check_close(output(replayed, 0, {512}), output(eager, 0, {512}));
  check_close(output(replayed, 0, {512}), want_for(a));
  auto s = gexec::cuda_graph::stats(replayed);
  CHECK(s.eager_reason.empty());
  CHECK(s.captures == 1);
  CHECK(s.instantiations == 1);
  CHECK(s.launches == 3);  // the first run is eager
  // New input values through the same memory: replayed as captured.
  ndarray a2 = host({512}, [](std::int64_t i) { return 1.0f - 0.01f * static_cast<float>(i); });
  replayed.set_input("a", a2);
  replayed.run(policy);
  check_close(output(replayed, 0, {512}), want_for(a2));
  CHECK(gexec::cuda_graph::stats(replayed).captures == 1);
  // A zero-copy input moves the pointer the first kernel reads: captured again.
  gexec::cuda_backend& b = m.get_backends().get<gexec::cuda_backend>();
  ndarray dev_in = b.empty({512}, f32);
  ndarray a3 = host({512}, [](std::int64_t i) { return 0.5f * static_cast<float>(i % 11) - 2.0f; });
  m.get_backends().copy(a3.dltensor(), const_cast<DLTensor&>(dev_in.dltensor()));
  replayed.set_input_zero_copy("a", dev_in);
  replayed.run(policy);
  check_close(output(replayed, 0, {512}), want_for(a3));
  s = gexec::cuda_graph::stats(replayed);
  CHECK(s.captures == 2);
  CHECK(s.updates + s.instantiations == 2);
  if (emu.active()) CHECK(emu.of(0).graph_launches >= 5);
}

TEST_CASE("CUDA Graph on a model that lists the host too, where every step runs on the GPU, is captured") {
  // As gexec-run and the Triton backend build models: the host beside the GPU, for
  // entries a heterogeneous graph would place there.
  gexec::graph_builder g;
  gexec::node_entry e = g.input("a", {64}, f32, gpu);
  for (int k = 0; k < 4; ++k) e = g.op("n" + std::to_string(k), k % 2 ? "fused_relu" : "fused_scale_shift", {e}, {{{64}, f32, gpu}});
  g.output(e);
  gexec::cuda_model m(g.build(), gexec::packed_c_abi(host_library()), {}, on({gexec::cpu(), gexec::cuda()}));
  auto ex = m.instantiate();
  ndarray a = host({64}, [](std::int64_t i) { return static_cast<float>(i % 7) - 3.0f; });
  ex.set_input("a", a);
  for (int run = 0; run < 3; ++run) ex.run(gexec::cuda_graph{});
  std::vector<float> want = values_of(a);
  for (int k = 0; k < 4; ++k)
    for (float& x : want) x = k % 2 ? std::max(0.0f, x) : x * 2.0f + 0.5f;
  check_close(output(ex, 0, {64}), want);
  const auto s = gexec::cuda_graph::stats(ex);
  CHECK(s.eager_reason.empty());
  CHECK(s.captures == 1);
  CHECK(s.launches == 2);
}

TEST_CASE("CUDA Graph on a heterogeneous model runs eagerly and says why") {
  gexec::graph_builder g;
  auto x = g.input("x", {8}, f32, gpu);
  auto h = g.copy("to_host", x, kDLCPU);
  g.output(g.op("neg", "fused_negative_cpu", {h}, {{{8}, f32, kDLCPU}}));
  gexec::cuda_model m(g.build(), gexec::packed_c_abi(host_library()), {}, on({gexec::cpu(), gexec::cuda()}));
  auto ex = m.instantiate();
  ex.set_input("x", host({8}, [](std::int64_t i) { return static_cast<float>(i); }));
  ex.run(gexec::cuda_graph{});
  ex.run(gexec::cuda_graph{});
  check_close(output(ex, 0, {8}), {0, -1, -2, -3, -4, -5, -6, -7});
  CHECK(gexec::cuda_graph::stats(ex).eager_reason.find("one CUDA device only") != std::string::npos);
}

TEST_CASE("parallel_streams: independent branches on several streams, ordered by events, a host branch included") {
  // a: 6 x scale_shift; b: 3 x relu, to the host, negative there, back, scale_shift; add(a, b).
  gexec::graph_builder g;
  gexec::node_entry a = g.input("a", {1024}, f32, gpu), b = g.input("b", {1024}, f32, gpu);
  for (int k = 0; k < 6; ++k) a = g.op("s" + std::to_string(k), "fused_scale_shift", {a}, {{{1024}, f32, gpu}});
  for (int k = 0; k < 3; ++k) b = g.op("r" + std::to_string(k), "fused_relu", {b}, {{{1024}, f32, gpu}});
  b = g.copy("to_host", b, kDLCPU);
  b = g.op("neg", "fused_negative_cpu", {b}, {{{1024}, f32, kDLCPU}});
  b = g.copy("to_gpu", b, gpu);
  b = g.op("t", "fused_scale_shift", {b}, {{{1024}, f32, gpu}});
  g.output(g.op("sum", "fused_add", {a, b}, {{{1024}, f32, gpu}}));
  gexec::cuda_model m(g.build(), gexec::packed_c_abi(host_library()), {}, on({gexec::cpu(), gexec::cuda()}));
  auto ex = m.instantiate();
  const long streams_before = emu.active() ? emu.of(0).streams : 0;
  for (int run = 0; run < 3; ++run) {  // new values each run: nothing left from the last one passes
    ndarray ain = host({1024}, [run](std::int64_t i) { return 0.001f * static_cast<float>(i) - 0.5f * static_cast<float>(run); });
    ndarray bin = host({1024}, [run](std::int64_t i) { return static_cast<float>((i + run) % 9) - 2.0f; });
    std::vector<float> want(1024);
    for (std::size_t i = 0; i < 1024; ++i) {
      float x = values_of(ain)[i];
      for (int k = 0; k < 6; ++k) x = std::fma(x, 2.0f, 0.5f);
      want[i] = x + std::fma(-std::max(0.0f, values_of(bin)[i]), 2.0f, 0.5f);
    }
    ex.set_input("a", ain);
    ex.set_input("b", bin);
    ex.run(gexec::parallel_streams{});
    check_close(output(ex, 0, {1024}), want, 1e-6f);
    if (run == 2) {  // the plain loop agrees
      ex.run();
      check_close(output(ex, 0, {1024}), want, 1e-6f);
    }
  }
  if (emu.active()) {
    CHECK(emu.of(0).streams - streams_before >= 1);  // a second stream, kept by the executor
    CHECK(emu.of(0).events >= 1);
  }
}

TEST_CASE("two executors of one model on two threads, each on its own stream") {
  auto m = single_op("fused_scale_shift", {{4096}}, {4096});
  std::vector<std::vector<float>> results(2);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      auto ex = m.instantiate();
      ndarray a = host({4096}, [t](std::int64_t i) { return static_cast<float>(i * (t + 1)); });
      for (int r = 0; r < 20; ++r) {
        ex.set_input("a", a);
        ex.run();
      }
      results[static_cast<std::size_t>(t)] = output(ex, 0, {4096});
    });
  for (auto& t : threads) t.join();
  for (int t = 0; t < 2; ++t)
    for (int i = 0; i < 4096; i += 511) CHECK(results[static_cast<std::size_t>(t)][static_cast<std::size_t>(i)] == static_cast<float>(i * (t + 1)) * 2.0f + 0.5f);
}

TEST_CASE("a second GPU by device id") {
  if (gexec::cuda_driver::process_default()->device_count() < 2) {
    MESSAGE("SKIPPED: one CUDA device");
    return;
  }
  auto m = single_op("fused_relu", {{64}}, {64}, host_library(), {gexec::cpu(), gexec::cuda(1)});
  auto ex = m.instantiate();
  const long before = emu.active() ? emu.of(1).launches : 0;
  ex.set_input("a", host({64}, [](std::int64_t i) { return static_cast<float>(i) - 32.0f; }));
  ex.run();
  std::vector<float> got = output(ex, 0, {64});
  for (int i = 0; i < 64; ++i) CHECK(got[static_cast<std::size_t>(i)] == std::max(0.0f, static_cast<float>(i) - 32.0f));
  if (emu.active()) CHECK(emu.of(1).launches == before + 1);
}

TEST_CASE("a launch the driver refuses names the kernel, its launch and the CUDA error; the executor stays usable") {
  if (!emu.active()) {
    MESSAGE("SKIPPED on a real GPU: needs the emulator's fault injection");
    return;
  }
  auto m = single_op("fused_relu", {{64}}, {64});
  auto ex = m.instantiate();
  ex.set_input("a", host({64}, [](std::int64_t i) { return static_cast<float>(i) - 32.0f; }));
  emu.fail("cuLaunchKernel", 1, 0);  // CUDA_ERROR_INVALID_VALUE, not sticky
  try {
    ex.run();
    FAIL("ran");
  } catch (const gexec::error& e) {
    const std::string what = e.what();
    CHECK(e.code() == gexec::errc::kernel_failed);
    CHECK(what.find("node \"op\"") != std::string::npos);
    CHECK(what.find("CUDA kernel relu_kernel0 (grid 1x1x1, block 256x1x1, 0 bytes of dynamic shared memory)") != std::string::npos);
    CHECK(what.find("CUDA_ERROR_INVALID_VALUE (invalid argument)") != std::string::npos);
  }
  ex.run();
  std::vector<float> got = output(ex, 0, {64});
  CHECK(got[40] == 8.0f);
}

TEST_CASE("a sticky asynchronous fault: named by its node with synchronize_each_launch, and the device refused afterwards") {
  // On a real GPU an illegal address ends the context for the whole process: last case.
  const std::string path = env_or_empty("GEXEC_CUDA_DRIVER").empty() ? "libcuda.so.1" : env_or_empty("GEXEC_CUDA_DRIVER");
  auto driver = gexec::cuda_driver::load(path);
  gexec::cuda_backends backends(gexec::cpu_backend{}, gexec::cuda_backend({.driver = driver, .synchronize_each_launch = true}));
  gexec::graph_builder g;
  auto a = g.input("a", {16}, f32, gpu);
  g.output(g.op("faulty", "fused_fault", {a}, {{{16}, f32, gpu}}));
  gexec::cuda_model m(g.build(), gexec::packed_c_abi(host_library()), {}, on({gexec::cpu(), gexec::cuda()}), std::move(backends));
  auto ex = m.instantiate();
  ex.set_input("a", host({16}, [](std::int64_t) { return 1.0f; }));
  try {
    ex.run();
    FAIL("ran");
  } catch (const gexec::error& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find("node \"faulty\"") != std::string::npos);
    CHECK(what.find("CUDA kernel fault_kernel0") != std::string::npos);
    CHECK(what.find("CUDA_ERROR_ILLEGAL_ADDRESS") != std::string::npos);
    CHECK(what.find("unusable from now on") != std::string::npos);
  }
  CHECK(driver->sticky_error(0) == gexec::cuda_api::CUDA_ERROR_ILLEGAL_ADDRESS);
  CHECK_THROWS_WITH_AS(ex.set_input("a", host({16}, [](std::int64_t) { return 1.0f; })), doctest::Contains("unusable after CUDA_ERROR_ILLEGAL_ADDRESS"),
                       gexec::error);
  if (emu.active()) emu.reset();
}

int main(int argc, char** argv) {
  const std::string driver = env_or_empty("GEXEC_CUDA_DRIVER");
  try {
    auto d = gexec::cuda_driver::process_default();
    std::printf("CUDA driver %s (version %d), %d device(s)%s\n", d->path().c_str(), d->version(), d->device_count(),
                driver.empty() ? "" : ": the host-emulated driver, not a GPU");
  } catch (const gexec::error& e) {
    std::printf("SKIPPED: %s\n", e.what());
    return 77;
  }
  if (!driver.empty()) attach_emulator(driver);
  doctest::Context context(argc, argv);
  return context.run();
}
