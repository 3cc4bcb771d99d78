#pragma once
// The backend conformance suite: what gexec::device_backend promises (backends/backend.hpp),
// checked the same way on every backend, then a graph run end to end through an executor
// on it. Written once as doctest templates; each backend registers a subject (how to make
// it, which kernels run on it, what it does not support) in a test program:
// tests/test_backend_conformance.cpp for the host-memory backends, and
// tests/cuda/test_backend_conformance_cuda.cpp for the CUDA backend.
//
// A subject S provides:
//   using backend = ...;                       the backend under test
//   static constexpr const char* name;         for messages
//   static backend make();                     a fresh backend
//   static int device_count();                 device ids 0 .. n-1 it may be asked for
//   static constexpr std::array<gap, N> unsupported;  the cases it does not support, each
//                                              with its reason; the suite reports each one
//                                              it leaves out, by name
//   using binding = ...; static binding kernels();   kernels that run on its device:
//   static constexpr const char* scale_shift;  out = in * 2 + 0.5 (float32, one shape)
//   static constexpr const char* add;          out = a + b (float32, one shape)
//
// Device memory is only ever reached through the backend's copies: the suite never
// dereferences a device pointer (the emulated CUDA driver's are not host addresses).

#include "test_support.hpp"

#include <gexec/binding/backend_hooks.hpp>
#include <gexec/executor.hpp>

#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <deque>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace conformance {

/// The cases a backend may declare it does not support.
enum class check {
  refuses_foreign_device,    ///< allocate, create_stream, create_event, set_device on another device type: errc::device_mismatch
  refuses_size_mismatch,     ///< copy_async between tensors of different byte sizes: errc::shape_mismatch
  copies_between_device_ids, ///< copies from one device id of the type to another
  refuses_foreign_workspace, ///< free_workspace of memory it did not hand out: -1, nothing freed
};

inline std::string_view name_of(check c) {
  switch (c) {
    case check::refuses_foreign_device: return "refuses_foreign_device";
    case check::refuses_size_mismatch: return "refuses_size_mismatch";
    case check::copies_between_device_ids: return "copies_between_device_ids";
    case check::refuses_foreign_workspace: return "refuses_foreign_workspace";
  }
  return "?";
}

/// A case a backend does not support, and why.
struct gap {
  check what;
  const char* why;
};

/// Whether S supports `c`; when it does not, says so in the test output.
template <class S>
bool supports(check c) {
  for (const gap& g : S::unsupported)
    if (g.what == c) {
      MESSAGE("UNSUPPORTED by " << std::string(S::name) << ": " << std::string(name_of(c)) << " (" << std::string(g.why) << ")");
      return false;
    }
  return true;
}

template <class S>
DLDevice device(int id = 0) {
  return {static_cast<DLDeviceType>(S::backend::device_type), id};
}

/// A view of `bytes` bytes at `data` on `d`, as a uint8 vector (shape held by the caller).
inline DLTensor bytes_view(void* data, DLDevice d, std::int64_t& bytes, std::uint64_t byte_offset = 0) {
  return DLTensor{data, d, 1, {kDLUInt, 8, 1}, &bytes, nullptr, byte_offset};
}

inline std::vector<std::uint8_t> pattern(std::size_t n, std::uint8_t seed) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>(seed + 7 * i);
  return v;
}

/// Holds a backend, device memory and streams for one case, giving everything back at the end.
template <class S>
struct bench {
  using B = typename S::backend;
  using stream = typename B::stream_type;
  B backend = S::make();
  std::vector<std::pair<DLDevice, void*>> memory;
  std::deque<std::pair<DLDevice, stream>> streams;  ///< a deque: references to its streams stay valid

  bench() = default;
  bench(const bench&) = delete;
  bench& operator=(const bench&) = delete;
  ~bench() {
    for (auto& [d, s] : streams) backend.destroy_stream(d, s);
    for (auto& [d, p] : memory) backend.free(d, p);
  }
  void* allocate(std::uint64_t bytes, DLDevice d = device<S>()) {
    void* p = backend.allocate(d, bytes);
    memory.emplace_back(d, p);
    return p;
  }
  stream& make_stream(DLDevice d = device<S>()) {
    streams.emplace_back(d, backend.create_stream(d));
    return streams.back().second;
  }
  /// Copies `host` to device memory at `to` (+ offset) and waits.
  void upload(const std::vector<std::uint8_t>& host, void* to, DLDevice d, std::uint64_t offset = 0) {
    std::int64_t n = static_cast<std::int64_t>(host.size());
    DLTensor from = bytes_view(const_cast<std::uint8_t*>(host.data()), gexec::cpu(), n);
    DLTensor dst = bytes_view(to, d, n, offset);
    stream& s = make_stream(d);
    backend.copy_async(from, dst, s);
    backend.synchronize(s);
  }
  /// `bytes` bytes of device memory at `from` (+ offset), copied back and waited for.
  std::vector<std::uint8_t> download(const void* from, DLDevice d, std::size_t bytes, std::uint64_t offset = 0) {
    std::vector<std::uint8_t> host(bytes, 0);
    std::int64_t n = static_cast<std::int64_t>(bytes);
    DLTensor src = bytes_view(const_cast<void*>(from), d, n, offset);
    DLTensor to = bytes_view(host.data(), gexec::cpu(), n);
    stream& s = make_stream(d);
    backend.copy_async(src, to, s);
    backend.synchronize(s);
    return host;
  }
};

inline bool aligned(const void* p, std::uintptr_t alignment) { return reinterpret_cast<std::uintptr_t>(p) % alignment == 0; }

}  // namespace conformance

// The cases, as templates over the subject (registered by GEXEC_BACKEND_CONFORMANCE).
using conformance::bench;
using conformance::bytes_view;
using conformance::check;
using conformance::device;
using conformance::pattern;
using conformance::supports;

// ---- memory ---------------------------------------------------------------------------

TEST_CASE_TEMPLATE_DEFINE("backend conformance: allocation is aligned to 64 bytes, never null, also for 0 bytes", S, backend_memory_cases) {
  bench<S> t;
  for (std::uint64_t bytes : {0ull, 1ull, 3ull, 100ull, 4096ull, 1000003ull}) {
    CAPTURE(bytes);
    void* p = t.allocate(bytes);
    CHECK(p != nullptr);
    CHECK(conformance::aligned(p, 64));
  }
  t.backend.free(device<S>(), nullptr);  // a no-op
  // What was allocated holds what is written to it.
  void* p = t.allocate(4096);
  const auto in = pattern(4096, 3);
  t.upload(in, p, device<S>());
  CHECK(t.download(p, device<S>(), 4096) == in);
}

TEST_CASE_TEMPLATE_DEFINE("backend conformance: memory that cannot be had is errc::out_of_memory, as gexec::error", S, backend_out_of_memory_cases) {
  bench<S> t;
  // Sizes no device has. The host-memory backends refuse them before asking the allocator,
  // so that no sanitizer aborts on them.
  for (std::uint64_t bytes : {std::uint64_t{1} << 63, std::numeric_limits<std::uint64_t>::max() - 63}) {
    CAPTURE(bytes);
    auto e = test::error_of([&] { t.allocate(bytes); });
    CHECK(e.code() == gexec::errc::out_of_memory);
    auto w = test::error_of([&] { (void)t.backend.alloc_workspace(device<S>(), bytes, nullptr); });
    CHECK(w.code() == gexec::errc::out_of_memory);
  }
}

TEST_CASE_TEMPLATE_DEFINE("backend conformance: a device of another type is errc::device_mismatch", S, backend_foreign_device_cases) {
  if (!supports<S>(check::refuses_foreign_device)) return;
  bench<S> t;
  const DLDevice other = S::backend::device_type == kDLCPU ? gexec::cuda() : gexec::cpu();
  CHECK(test::error_of([&] { t.allocate(64, other); }).code() == gexec::errc::device_mismatch);
  CHECK(test::error_of([&] { (void)t.backend.create_stream(other); }).code() == gexec::errc::device_mismatch);
  CHECK(test::error_of([&] { (void)t.backend.create_event(other); }).code() == gexec::errc::device_mismatch);
  CHECK(test::error_of([&] { t.backend.set_device(other); }).code() == gexec::errc::device_mismatch);
  // A copy with no side on the backend's device type.
  std::vector<std::uint8_t> a(8), b(8);
  std::int64_t n = 8;
  const DLDevice foreign{S::backend::device_type == kDLExtDev ? kDLCUDA : kDLExtDev, 0};
  DLTensor from = bytes_view(a.data(), foreign, n), to = bytes_view(b.data(), gexec::cpu(), n);
  auto& s = t.make_stream();
  CHECK(test::error_of([&] { t.backend.copy_async(from, to, s); }).code() == gexec::errc::device_mismatch);
}

// ---- copies ---------------------------------------------------------------------------

TEST_CASE_TEMPLATE_DEFINE("backend conformance: copies host to device, within the device and back, at byte offsets", S, backend_copy_cases) {
  bench<S> t;
  const DLDevice d = device<S>();
  constexpr std::size_t n = 1000;
  void* a = t.allocate(n + 64);
  void* b = t.allocate(n + 128);
  const auto in = pattern(n, 11);
  std::int64_t bytes = n;
  // Host to device at offset 64, device to device from offset 64 to 128, device to host.
  DLTensor host_in = bytes_view(const_cast<std::uint8_t*>(in.data()), gexec::cpu(), bytes);
  DLTensor on_a = bytes_view(a, d, bytes, 64), on_b = bytes_view(b, d, bytes, 128);
  std::vector<std::uint8_t> out(n, 0);
  DLTensor host_out = bytes_view(out.data(), gexec::cpu(), bytes);
  auto& s = t.make_stream();
  t.backend.copy_async(host_in, on_a, s);
  t.backend.copy_async(on_a, on_b, s);
  t.backend.copy_async(on_b, host_out, s);
  t.backend.synchronize(s);  // one stream runs its work in order
  CHECK(out == in);
  // A float32 tensor of another shape with the same bytes: copies go by bytes.
  std::vector<float> values = test::iota(250, -3.0f, 0.5f), back(250, 0.0f);
  std::int64_t shape[2] = {25, 10};
  DLTensor f_in{values.data(), gexec::cpu(), 2, gexec::dtypes::float32, shape, nullptr, 0};
  DLTensor f_dev{a, d, 2, gexec::dtypes::float32, shape, nullptr, 0};
  DLTensor f_out{back.data(), gexec::cpu(), 2, gexec::dtypes::float32, shape, nullptr, 0};
  t.backend.copy_async(f_in, f_dev, s);
  t.backend.copy_async(f_dev, f_out, s);
  t.backend.synchronize(s);
  CHECK(back == values);
}

TEST_CASE_TEMPLATE_DEFINE("backend conformance: copies between two device ids of the type", S, backend_device_id_cases) {
  if (!supports<S>(check::copies_between_device_ids)) return;
  if (S::device_count() < 2) {
    MESSAGE("SKIPPED on " << std::string(S::name) << ": " << S::device_count() << " device here, the case needs two");
    return;
  }
  bench<S> t;
  const DLDevice d0 = device<S>(0), d1 = device<S>(1);
  constexpr std::size_t n = 512;
  void* on0 = t.allocate(n, d0);
  void* on1 = t.allocate(n, d1);
  const auto in = pattern(n, 5);
  t.upload(in, on0, d0);
  std::int64_t bytes = n;
  DLTensor from = bytes_view(on0, d0, bytes), to = bytes_view(on1, d1, bytes);
  auto& s = t.make_stream(d1);
  t.backend.copy_async(from, to, s);
  t.backend.synchronize(s);
  CHECK(t.download(on1, d1, n) == in);
}

TEST_CASE_TEMPLATE_DEFINE("backend conformance: copies of different sizes are errc::shape_mismatch", S, backend_size_mismatch_cases) {
  if (!supports<S>(check::refuses_size_mismatch)) return;
  bench<S> t;
  void* p = t.allocate(64);
  std::vector<std::uint8_t> host(64);
  std::int64_t small = 32, large = 64;
  DLTensor from = bytes_view(host.data(), gexec::cpu(), large), to = bytes_view(p, device<S>(), small);
  auto& s = t.make_stream();
  auto e = test::error_of([&] { t.backend.copy_async(from, to, s); });
  CHECK(e.code() == gexec::errc::shape_mismatch);
  DLTensor back = bytes_view(host.data(), gexec::cpu(), small), dev = bytes_view(p, device<S>(), large);
  CHECK(test::error_of([&] { t.backend.copy_async(dev, back, s); }).code() == gexec::errc::shape_mismatch);
}

TEST_CASE_TEMPLATE_DEFINE("backend conformance: zero-size tensors: memory for 0 bytes, copies of nothing", S, backend_zero_size_cases) {
  bench<S> t;
  const DLDevice d = device<S>();
  void* p = t.allocate(0);
  CHECK(p != nullptr);
  std::int64_t shape[2] = {0, 7};
  auto& s = t.make_stream();
  // Null data is allowed where there is nothing to copy.
  DLTensor host{nullptr, gexec::cpu(), 2, gexec::dtypes::float32, shape, nullptr, 0};
  DLTensor dev{p, d, 2, gexec::dtypes::float32, shape, nullptr, 0};
  DLTensor dev_null{nullptr, d, 2, gexec::dtypes::float32, shape, nullptr, 0};
  t.backend.copy_async(host, dev, s);
  t.backend.copy_async(dev, dev_null, s);
  t.backend.copy_async(dev_null, host, s);
  t.backend.synchronize(s);
  // A zero-size copy leaves its neighbours alone.
  void* q = t.allocate(16);
  const auto in = pattern(16, 1);
  t.upload(in, q, d);
  std::int64_t none = 0;
  DLTensor empty_from = bytes_view(nullptr, gexec::cpu(), none), empty_to = bytes_view(q, d, none, 8);
  t.backend.copy_async(empty_from, empty_to, s);
  t.backend.synchronize(s);
  CHECK(t.download(q, d, 16) == in);
}

// ---- streams and events ---------------------------------------------------------------

TEST_CASE_TEMPLATE_DEFINE("backend conformance: an event recorded on one stream orders another stream's work after it", S, backend_event_cases) {
  bench<S> t;
  using B = typename S::backend;
  const DLDevice d = device<S>();
  constexpr std::size_t n = 4096;
  void* a = t.allocate(n);
  void* b = t.allocate(n);
  const auto first = pattern(n, 2), second = pattern(n, 9);
  std::int64_t bytes = n;
  auto& s1 = t.make_stream();
  auto& s2 = t.make_stream();
  typename B::event_type e = t.backend.create_event(d);
  // s1: host -> a; s2, after the event: a -> b, then b -> host.
  DLTensor host_first = bytes_view(const_cast<std::uint8_t*>(first.data()), gexec::cpu(), bytes);
  DLTensor on_a = bytes_view(a, d, bytes), on_b = bytes_view(b, d, bytes);
  std::vector<std::uint8_t> out(n, 0);
  DLTensor host_out = bytes_view(out.data(), gexec::cpu(), bytes);
  t.backend.copy_async(host_first, on_a, s1);
  t.backend.record(e, s1);
  t.backend.wait(s2, e);
  t.backend.copy_async(on_a, on_b, s2);
  t.backend.copy_async(on_b, host_out, s2);
  t.backend.synchronize(s2);
  CHECK(out == first);
  // The same event recorded again marks the later work.
  DLTensor host_second = bytes_view(const_cast<std::uint8_t*>(second.data()), gexec::cpu(), bytes);
  t.backend.copy_async(host_second, on_a, s1);
  t.backend.record(e, s1);
  t.backend.wait(s2, e);
  t.backend.copy_async(on_a, host_out, s2);
  t.backend.synchronize(s2);
  CHECK(out == second);
  t.backend.synchronize(s1);
  t.backend.destroy_event(d, e);
  // An event destroyed without ever being recorded.
  typename B::event_type unused = t.backend.create_event(d);
  t.backend.destroy_event(d, unused);
}

TEST_CASE_TEMPLATE_DEFINE("backend conformance: streams: many at once, each in order; destroyed with work pending", S, backend_stream_cases) {
  bench<S> t;
  const DLDevice d = device<S>();
  constexpr int count = 6;
  constexpr std::size_t n = 256;
  std::vector<void*> memory;
  std::vector<std::vector<std::uint8_t>> in, out(count, std::vector<std::uint8_t>(n, 0));
  std::int64_t bytes = n;
  std::vector<typename S::backend::stream_type*> streams;
  for (int i = 0; i < count; ++i) {
    memory.push_back(t.allocate(n));
    in.push_back(pattern(n, static_cast<std::uint8_t>(i * 31)));
    streams.push_back(&t.make_stream());
  }
  for (int i = 0; i < count; ++i) {
    DLTensor from = bytes_view(in[static_cast<std::size_t>(i)].data(), gexec::cpu(), bytes), on = bytes_view(memory[static_cast<std::size_t>(i)], d, bytes);
    DLTensor to = bytes_view(out[static_cast<std::size_t>(i)].data(), gexec::cpu(), bytes);
    t.backend.copy_async(from, on, *streams[static_cast<std::size_t>(i)]);
    t.backend.copy_async(on, to, *streams[static_cast<std::size_t>(i)]);
  }
  for (int i = count - 1; i >= 0; --i) t.backend.synchronize(*streams[static_cast<std::size_t>(i)]);
  CHECK(out == in);
  // A stream destroyed with a copy enqueued and never waited for: destroy_stream never throws.
  auto s = t.backend.create_stream(d);
  DLTensor from = bytes_view(in[0].data(), gexec::cpu(), bytes), on = bytes_view(memory[0], d, bytes);
  t.backend.copy_async(from, on, s);
  t.backend.destroy_stream(d, s);
  static_assert(noexcept(t.backend.destroy_stream(d, s)));
}

TEST_CASE_TEMPLATE_DEFINE("backend conformance: backends<cpu_backend, B>::copy is complete on return, both ways", S, backend_list_copy_cases) {
  using B = typename S::backend;
  using list = std::conditional_t<std::is_same_v<B, gexec::cpu_backend>, gexec::backends<gexec::cpu_backend>, gexec::backends<gexec::cpu_backend, B>>;
  list backends = [] {
    if constexpr (std::is_same_v<B, gexec::cpu_backend>) return list{};
    else return list(gexec::cpu_backend{}, S::make());
  }();
  B& b = backends.template get<B>();
  const DLDevice d = device<S>();
  void* p = b.allocate(d, 300);
  const auto in = pattern(300, 77);
  std::vector<std::uint8_t> out(300, 0);
  std::int64_t bytes = 300;
  DLTensor from = bytes_view(const_cast<std::uint8_t*>(in.data()), gexec::cpu(), bytes), on = bytes_view(p, d, bytes);
  DLTensor to = bytes_view(out.data(), gexec::cpu(), bytes);
  backends.copy(from, on);
  backends.copy(on, to);
  CHECK(out == in);
  b.free(d, p);
}

// ---- what kernels and TVM's runtime ask for -------------------------------------------

TEST_CASE_TEMPLATE_DEFINE("backend conformance: workspace: aligned, usable, given back; set_device; fill_zero where offered", S, backend_workspace_cases) {
  bench<S> t;
  const DLDevice d = device<S>();
  auto& s = t.make_stream();
  for (auto* on : {&s, static_cast<typename S::backend::stream_type*>(nullptr)}) {
    CAPTURE(on != nullptr);
    void* w = t.backend.alloc_workspace(d, 1000, on);
    REQUIRE(w != nullptr);
    CHECK(conformance::aligned(w, 64));
    const auto in = pattern(1000, 19);
    t.upload(in, w, d);
    CHECK(t.download(w, d, 1000) == in);
    CHECK(t.backend.free_workspace(d, w, on) == 0);
    // The steady state: the same request again, several at once.
    void* w1 = t.backend.alloc_workspace(d, 1000, on);
    void* w2 = t.backend.alloc_workspace(d, 0, on);
    CHECK((w1 && w2 && w1 != w2));
    CHECK(t.backend.free_workspace(d, w2, on) == 0);
    CHECK(t.backend.free_workspace(d, w1, on) == 0);
    CHECK(t.backend.free_workspace(d, nullptr, on) == -1);
  }
  static_assert(noexcept(t.backend.free_workspace(d, nullptr, &s)));
  if (supports<S>(check::refuses_foreign_workspace)) {
    void* mine = t.allocate(64);  // device memory, but not workspace
    CHECK(t.backend.free_workspace(d, mine, &s) == -1);
    const auto in = pattern(64, 4);
    t.upload(in, mine, d);  // still there
    CHECK(t.download(mine, d, 64) == in);
  }
  t.backend.set_device(d);
  if constexpr (requires { t.backend.fill_zero(d, nullptr, std::uint64_t{0}); }) {
    void* p = t.allocate(200);
    t.upload(pattern(200, 1), p, d);
    t.backend.fill_zero(d, p, 200);
    CHECK(t.download(p, d, 200) == std::vector<std::uint8_t>(200, 0));
  } else {
    MESSAGE(std::string(S::name) << " has no fill_zero (optional): the executor zeroes its storage by a copy");
  }
}

// ---- a graph through an executor ------------------------------------------------------

namespace conformance {

/// x (host) -> [copy to the device] -> y = scale_shift(x) -> z = add(y, p) -> [copy to the host]
/// with p a parameter and y a second output, both on the device; e, a zero-size input on
/// the device, -> add(e, e), a third output. On the host backend, everything on the host.
template <class S>
gexec::validated_graph end_to_end_graph(std::int64_t n) {
  const int dev = S::backend::device_type;
  const bool host = dev == kDLCPU;
  const auto f32 = gexec::dtypes::float32;
  gexec::graph_builder b;
  auto x = b.input("x", {n});
  auto p = b.input("p", {n}, f32, dev);
  auto e = b.input("e", {0}, f32, dev);
  gexec::node_entry on_device = host ? gexec::node_entry(x) : gexec::node_entry(b.copy("x_to_device", x, dev));
  auto y = b.op("y", S::scale_shift, {on_device}, {{{n}, f32, dev}});
  auto z = b.op("z", S::add, {y, p}, {{{n}, f32, dev}});
  auto none = b.op("empty", S::add, {e, e}, {{{0}, f32, dev}});
  b.output(host ? gexec::node_entry(z) : gexec::node_entry(b.copy("z_to_host", z, kDLCPU)));
  b.output(y);
  b.output(none);
  return b.build();
}

}  // namespace conformance

TEST_CASE_TEMPLATE_DEFINE("backend conformance: a graph runs end to end on the backend, outputs as computed here", S, backend_graph_cases) {
  using B = typename S::backend;
  constexpr bool host = B::device_type == kDLCPU;
  using list = std::conditional_t<host, gexec::backends<gexec::cpu_backend>, gexec::backends<gexec::cpu_backend, B>>;
  using model = gexec::basic_model<list, gexec::pool_allocator, typename S::binding>;
  constexpr std::int64_t n = 1000;  // more than one CUDA block
  const std::vector<float> p = test::iota(n, -7.0f, 0.125f);
  gexec::param_dict params;
  params.set("p", test::tensor({n}, p));
  gexec::model_options options;
  options.devices = host ? std::vector<DLDevice>{gexec::cpu()} : std::vector<DLDevice>{gexec::cpu(), device<S>()};
  list backends = [] {
    if constexpr (host) return list{};
    else return list(gexec::cpu_backend{}, S::make());
  }();
  model m(conformance::end_to_end_graph<S>(n), S::kernels(), params, options, std::move(backends));
  auto ex = m.instantiate();
  for (float start : {-2.0f, 40.0f}) {
    CAPTURE(start);
    const std::vector<float> x = test::iota(n, start, 0.25f);
    std::vector<float> want_y(n), want_z(n);
    for (std::size_t i = 0; i < x.size(); ++i) {
      want_y[i] = x[i] * 2.0f + 0.5f;  // exact in float32 for these values
      want_z[i] = want_y[i] + p[i];
    }
    ex.set_input("x", test::tensor({n}, x));
    ex.set_input("e", gexec::ndarray::empty({0}, gexec::dtypes::float32));
    ex.run();
    auto z = gexec::ndarray::empty({n}, gexec::dtypes::float32), y = gexec::ndarray::empty({n}, gexec::dtypes::float32);
    ex.copy_output_to(0, z);
    ex.copy_output_to(1, y);  // on the device: read back through the backend
    CHECK(test::values_of(y) == want_y);
    CHECK(test::values_of(z) == want_z);
    CHECK(ex.get_output(1).device().device_type == B::device_type);
    CHECK(ex.get_output(2).numel() == 0);
  }
  // The same model again with the branches policy, on a second executor.
  auto ex2 = m.instantiate();
  const std::vector<float> x = test::iota(n, 1.0f, -0.5f);
  ex2.set_input("x", test::tensor({n}, x));
  ex2.set_input("e", gexec::ndarray::empty({0}, gexec::dtypes::float32));
  ex2.run(gexec::parallel_branches{});
  auto z = gexec::ndarray::empty({n}, gexec::dtypes::float32);
  ex2.copy_output_to(0, z);
  std::vector<float> want(n);
  for (std::size_t i = 0; i < x.size(); ++i) want[i] = x[i] * 2.0f + 0.5f + p[i];
  CHECK(test::values_of(z) == want);
}

namespace conformance {

/// Elementwise float32 kernels for backends whose device memory the host can address
/// (the host, and the host-memory backends): each checks that its tensors lie on the
/// device type it serves, and `add` goes through the device's workspace.
template <int DeviceType>
gexec::registry host_memory_kernels() {
  auto on_device = [](const DLTensor& t, const char* kernel) {
    if (t.device.device_type != DeviceType)
      throw std::runtime_error(std::string(kernel) + ": a tensor on " + gexec::to_string(t.device) + ", not device type " + std::to_string(DeviceType));
    return static_cast<std::size_t>(t.shape[0]);
  };
  gexec::registry r;
  r.add("conformance_scale_shift", [on_device](gexec::packed_args a) {
    const std::size_t n = on_device(a.tensor(0), "conformance_scale_shift");
    on_device(a.tensor(1), "conformance_scale_shift");
    const auto* in = static_cast<const float*>(a.tensor(0).data);
    auto* out = static_cast<float*>(a.tensor(1).data);
    for (std::size_t i = 0; i < n; ++i) out[i] = in[i] * 2.0f + 0.5f;
  });
  r.add("conformance_add", [on_device](gexec::packed_args a) {
    const std::size_t n = on_device(a.tensor(0), "conformance_add");
    on_device(a.tensor(1), "conformance_add");
    on_device(a.tensor(2), "conformance_add");
    const DLDevice d = a.tensor(2).device;
    auto* ws = static_cast<float*>(gexec::detail::backend_alloc_workspace(d.device_type, d.device_id, n * 4, kDLFloat, 32));
    if (!ws) throw std::runtime_error("conformance_add: no workspace: " + gexec::detail::take_last_error());
    const auto* x = static_cast<const float*>(a.tensor(0).data);
    const auto* y = static_cast<const float*>(a.tensor(1).data);
    for (std::size_t i = 0; i < n; ++i) ws[i] = x[i] + y[i];
    if (n) std::memcpy(a.tensor(2).data, ws, n * 4);
    if (gexec::detail::backend_free_workspace(d.device_type, d.device_id, ws) != 0) throw std::runtime_error("conformance_add: free failed");
  });
  return r;
}

}  // namespace conformance

/// Registers subjects into every case of the suite (in one translation unit per program).
#define GEXEC_BACKEND_CONFORMANCE(...)                                 \
  TEST_CASE_TEMPLATE_INVOKE(backend_memory_cases, __VA_ARGS__);       \
  TEST_CASE_TEMPLATE_INVOKE(backend_out_of_memory_cases, __VA_ARGS__);  \
  TEST_CASE_TEMPLATE_INVOKE(backend_foreign_device_cases, __VA_ARGS__); \
  TEST_CASE_TEMPLATE_INVOKE(backend_copy_cases, __VA_ARGS__);         \
  TEST_CASE_TEMPLATE_INVOKE(backend_device_id_cases, __VA_ARGS__);    \
  TEST_CASE_TEMPLATE_INVOKE(backend_size_mismatch_cases, __VA_ARGS__); \
  TEST_CASE_TEMPLATE_INVOKE(backend_zero_size_cases, __VA_ARGS__);    \
  TEST_CASE_TEMPLATE_INVOKE(backend_event_cases, __VA_ARGS__);        \
  TEST_CASE_TEMPLATE_INVOKE(backend_stream_cases, __VA_ARGS__);       \
  TEST_CASE_TEMPLATE_INVOKE(backend_list_copy_cases, __VA_ARGS__);    \
  TEST_CASE_TEMPLATE_INVOKE(backend_workspace_cases, __VA_ARGS__);    \
  TEST_CASE_TEMPLATE_INVOKE(backend_graph_cases, __VA_ARGS__)
