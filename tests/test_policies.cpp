// The policy slots: one executor suite written once and run over every device-backend
// set, storage planner and execution policy; then what each slot promises on its own
// (emulated devices, planner checks, dependency order, observers).

#include "test_support.hpp"

#include <gexec/backends/emulated.hpp>
#include <gexec/binding/backend_hooks.hpp>
#include <gexec/executor.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

using test::contains;
using test::error_of;
using test::tensor;
using test::values_of;

namespace {

using host = gexec::backends<gexec::cpu_backend>;
using hetero = gexec::backends<gexec::cpu_backend, gexec::emulated_backend<>>;

template <class B, class P, class E>
struct config {
  using backends = B;
  using planner = P;
  using policy = E;
  static constexpr bool heterogeneous = std::is_same_v<B, hetero>;
};

constexpr std::int64_t n = 64;

float* data_of(const DLTensor& t) { return static_cast<float*>(t.data); }

void expect_device(const DLTensor& t, int type, const char* kernel) {
  if (t.device.device_type != type)
    throw std::runtime_error(std::string(kernel) + ": tensor on device type " + std::to_string(t.device.device_type));
}

/// Elementwise kernels over `n` floats, each checking the device it runs on.
gexec::registry kernels() {
  gexec::registry r;
  r.add("add1", [](gexec::packed_args a) {
    expect_device(a.tensor(0), kDLCPU, "add1");
    for (std::int64_t i = 0; i < n; ++i) data_of(a.tensor(1))[i] = data_of(a.tensor(0))[i] + 1;
  });
  r.add("scale2", [](gexec::packed_args a) {
    expect_device(a.tensor(0), kDLCPU, "scale2");
    if (data_of(a.tensor(0))[0] < -1000) throw std::runtime_error("scale2: input out of range");
    for (std::int64_t i = 0; i < n; ++i) data_of(a.tensor(1))[i] = data_of(a.tensor(0))[i] * 2;
  });
  r.add("add", [](gexec::packed_args a) {
    for (int k = 0; k < 3; ++k) expect_device(a.tensor(k), kDLCPU, "add");
    for (std::int64_t i = 0; i < n; ++i) data_of(a.tensor(2))[i] = data_of(a.tensor(0))[i] + data_of(a.tensor(1))[i];
  });
  // On the emulated device, with workspace from that device's backend.
  r.add("ext_add1", [](gexec::packed_args a) {
    expect_device(a.tensor(0), gexec::emulated_device_type, "ext_add1");
    expect_device(a.tensor(1), gexec::emulated_device_type, "ext_add1");
    auto* ws = static_cast<float*>(gexec::detail::backend_alloc_workspace(gexec::emulated_device_type, 0, n * 4, kDLFloat, 32));
    if (!ws) throw std::runtime_error("ext_add1: no workspace: " + gexec::detail::take_last_error());
    for (std::int64_t i = 0; i < n; ++i) ws[i] = data_of(a.tensor(0))[i] + 1;
    for (std::int64_t i = 0; i < n; ++i) data_of(a.tensor(1))[i] = ws[i];
    if (gexec::detail::backend_free_workspace(gexec::emulated_device_type, 0, ws) != 0) throw std::runtime_error("ext_add1: free failed");
  });
  return r;
}

/// x -> a -> (b1 -> b2 -> reshape -> r1 -> reshape) + (c1 -> c2) = d; e = d + p; f = 2x.
/// The two branches are independent; r1 reuses b1's storage id and, on the host, c1
/// does too (a storage-reuse hazard between branches). Heterogeneously the second
/// branch runs on the emulated device between two __copy steps.
gexec::validated_graph branches_graph(bool heterogeneous) {
  gexec::graph_builder b;
  const auto f32 = gexec::dtypes::float32;
  auto x = b.input("x", {n});
  auto p = b.input("p", {n});
  auto a = b.op("a", "add1", {x}, {{{n}}});
  auto b1 = b.op("b1", "scale2", {a}, {{{n}}});  // entry 3, storage id 3
  auto b2 = b.op("b2", "scale2", {b1}, {{{n}}});
  gexec::node_entry c;
  if (heterogeneous) {
    const int ext = gexec::emulated_device_type;
    auto c0 = b.copy("to_ext", a, ext);  // entry 5
    auto c1 = b.op("c1", "ext_add1", {c0}, {{{n}, f32, ext}});
    auto c2 = b.op("c2", "ext_add1", {c1}, {{{n}, f32, ext, 5}});
    c = b.copy("to_host", c2, kDLCPU);
  } else {
    auto c1 = b.op("c1", "add1", {a}, {{{n}, f32, 0, 3}});
    c = b.op("c2", "add1", {c1}, {{{n}}});
  }
  auto r = b.nop("r", b2, {8, 8});
  auto r1 = b.op("r1", "add1", {r}, {{{8, 8}, f32, 0, 3}});
  auto r2 = b.nop("r2", r1, {n});
  auto d = b.op("d", "add", {r2, c}, {{{n}}});
  auto e = b.op("e", "add", {d, p}, {{{n}}});
  auto f = b.op("f", "scale2", {x}, {{{n}}});
  b.output(d);
  b.output(e);
  b.output(f);
  return b.build();
}

struct expected {
  std::vector<float> d, e, f;
};
expected compute(const std::vector<float>& x, const std::vector<float>& p) {
  expected out;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float a = x[i] + 1;
    out.d.push_back((a * 4 + 1) + (a + 2));
    out.e.push_back(out.d.back() + p[i]);
    out.f.push_back(x[i] * 2);
  }
  return out;
}

template <class C>
using model_of = gexec::basic_model<typename C::backends, gexec::pool_allocator, gexec::registry, typename C::planner>;

template <class C>
struct fixture {
  std::shared_ptr<gexec::emulated_stats> stats = std::make_shared<gexec::emulated_stats>();
  std::vector<float> p = test::iota(n, 0.5f, 0.25f);
  model_of<C> model = make();

  model_of<C> make() {
    gexec::param_dict params;
    params.set("p", tensor({n}, p));
    if constexpr (C::heterogeneous)
      return model_of<C>(branches_graph(true), kernels(), params, gexec::detail::on_devices({gexec::cpu(), gexec::emulated()}),
                         hetero(gexec::cpu_backend{}, gexec::emulated_backend<>(stats)));
    else
      return model_of<C>(branches_graph(false), kernels(), params);
  }
};

/// Records the order of hooks: one sequence number before and after each step.
struct order_recorder {
  std::mutex mu;
  std::atomic<int> clock{0};
  std::vector<int> started, finished;
  std::vector<int> times_run;
  explicit order_recorder(std::size_t steps) : started(steps, -1), finished(steps, -1), times_run(steps, 0) {}
  void before(const gexec::step_event& e) {
    std::lock_guard g(mu);
    started[e.step] = clock++;
    ++times_run[e.step];
  }
  void after(const gexec::step_event& e) {
    std::lock_guard g(mu);
    finished[e.step] = clock++;
  }
};

}  // namespace

#define GEXEC_CONFIGS                                                                                              \
  config<host, gexec::as_compiled, gexec::sequential>, config<host, gexec::as_compiled, gexec::parallel_branches>, \
      config<host, gexec::liveness, gexec::sequential>, config<host, gexec::liveness, gexec::parallel_branches>,   \
      config<hetero, gexec::as_compiled, gexec::sequential>, config<hetero, gexec::as_compiled, gexec::parallel_branches>, \
      config<hetero, gexec::liveness, gexec::sequential>, config<hetero, gexec::liveness, gexec::parallel_branches>

TEST_CASE_TEMPLATE("every policy computes the same outputs as plain arithmetic", C, GEXEC_CONFIGS) {
  fixture<C> fx;
  auto ex = fx.model.instantiate();
  for (int round = 0; round < 3; ++round) {
    const auto x = test::iota(n, static_cast<float>(round) - 3.0f, 0.5f);
    ex.set_input("x", tensor({n}, x));
    ex.run(typename C::policy{});
    const expected want = compute(x, fx.p);
    CHECK(values_of(ex.get_output(0)) == want.d);
    CHECK(values_of(ex.get_output(1)) == want.e);
    CHECK(values_of(ex.get_output(2)) == want.f);
  }
  // A second executor of the model computes independently of the first.
  auto other = fx.model.instantiate();
  const auto x2 = test::iota(n, 100.0f);
  other.set_input("x", tensor({n}, x2));
  other.run(typename C::policy{});
  CHECK(values_of(other.get_output(1)) == compute(x2, fx.p).e);
  CHECK(values_of(ex.get_output(1)) == compute(test::iota(n, -1.0f, 0.5f), fx.p).e);
}

TEST_CASE_TEMPLATE("zero-copy inputs and outputs under every policy", C, GEXEC_CONFIGS) {
  fixture<C> fx;
  auto ex = fx.model.instantiate();
  const auto x = test::iota(n, 2.0f);
  auto in = tensor({n}, x);
  auto out = gexec::ndarray::empty({n}, gexec::dtypes::float32);
  ex.set_input_zero_copy("x", in);
  ex.set_output_zero_copy(0, out);
  ex.run(typename C::policy{});
  CHECK(values_of(out) == compute(x, fx.p).d);
  CHECK(values_of(in) == x);  // nothing computed over the caller's input
  CHECK(values_of(ex.get_output(2)) == compute(x, fx.p).f);
}

TEST_CASE_TEMPLATE("observers see every step once, after the steps it depends on", C, GEXEC_CONFIGS) {
  fixture<C> fx;
  auto ex = fx.model.instantiate();
  ex.set_input("x", tensor({n}, test::iota(n)));
  const auto steps = fx.model.plan().step_node.size();
  order_recorder rec(steps);
  ex.run(typename C::policy{}, rec);
  const gexec::step_graph& deps = ex.get_model_state()->dependencies();
  for (std::size_t k = 0; k < steps; ++k) {
    CHECK(rec.times_run[k] == 1);
    for (std::uint32_t i = deps.succ_begin[k]; i < deps.succ_begin[k + 1]; ++i) CHECK(rec.finished[k] < rec.started[deps.succ[i]]);
  }
  // The data edges of the graph are among the dependencies: d after both branches.
  CHECK(deps.width >= 2);
  gexec::node_timer timer(ex.get_graph());
  ex.run(typename C::policy{}, timer);
  ex.run(typename C::policy{}, timer);
  const auto report = timer.report();
  CHECK(report.size() == steps);
  for (const auto& r : report) CHECK(r.calls == 2);
}

TEST_CASE_TEMPLATE("a failing kernel names its node and leaves the executor usable", C, GEXEC_CONFIGS) {
  fixture<C> fx;
  auto ex = fx.model.instantiate();
  auto bad = test::iota(n, -5000.0f);
  ex.set_input("x", tensor({n}, bad));
  auto e = error_of([&] { ex.run(typename C::policy{}); });
  CHECK(e.code() == gexec::errc::kernel_failed);
  CHECK(contains(e, "scale2: input out of range"));
  const auto x = test::iota(n, 1.0f);
  ex.set_input("x", tensor({n}, x));
  ex.run(typename C::policy{});
  CHECK(values_of(ex.get_output(1)) == compute(x, fx.p).e);
  // debug_get_output runs up to a node and reads that entry.
  auto a = ex.debug_get_output("a");
  CHECK(values_of(a) == test::iota(n, 2.0f));
}

TEST_CASE_TEMPLATE("the planner's storage: never above the compiled plan, never below the bound", C, GEXEC_CONFIGS) {
  fixture<C> fx;
  const gexec::storage_figures& s = fx.model.storage();
  CHECK(s.planned <= s.as_compiled);
  CHECK(s.lower_bound <= s.planned);
  if constexpr (std::is_same_v<typename C::planner, gexec::liveness>) CHECK(s.planned < s.as_compiled);
  else CHECK(s.planned == s.as_compiled);
  auto ex = fx.model.instantiate();
  if constexpr (C::heterogeneous) {
    // Storage on both devices, one stream per device, freed with the last owner.
    auto& dev = (*fx.stats)[0];
    CHECK(dev.allocations.load() >= 1);
    CHECK(dev.streams.load() == 1);
    const long before_to_device = dev.to_device, before_to_host = dev.to_host;
    ex.set_input("x", tensor({n}, test::iota(n)));
    ex.run(typename C::policy{});
    CHECK(dev.to_device - before_to_device == 1);
    CHECK(dev.to_host - before_to_host == 1);
    CHECK(dev.workspaces.load() == 0);
    CHECK(dev.set_device.load() >= 1);
    CHECK(dev.synchronizations.load() >= 1);
  }
}

TEST_CASE("emulated devices: storage on the device id given, all of it returned") {
  auto stats = std::make_shared<gexec::emulated_stats>();
  {
    gexec::basic_model<hetero, gexec::pool_allocator, gexec::registry> m(
        branches_graph(true), kernels(), gexec::detail::on_devices({gexec::cpu(), gexec::emulated(1)}),
        hetero(gexec::cpu_backend{}, gexec::emulated_backend<>(stats)));
    auto a = m.instantiate(), b = m.instantiate();
    CHECK((*stats)[1].allocations.load() == 2);  // one arena per executor on emulated:1
    CHECK((*stats)[1].streams.load() == 2);
    CHECK((*stats)[0].allocations.load() == 0);
    // ext_add1 asks for workspace on emulated:0 while running on emulated:1: the backend serves both ids.
    a.set_input("x", tensor({n}, test::iota(n)));
    a.set_input("p", tensor({n}, test::iota(n)));
    const long copies = (*stats)[1].to_device;
    a.run();
    CHECK((*stats)[1].to_device.load() - copies == 1);
    // An entry on the device reads back through the backend; zero-copy there needs a tensor on that device.
    auto host_buffer = tensor({n}, test::iota(n));
    std::vector<std::int64_t> shape{n};
    DLTensor on_device{host_buffer.data(), gexec::emulated(1), 1, gexec::dtypes::float32, shape.data(), nullptr, 0};
    auto e = error_of([&] { a.set_output_zero_copy(0, gexec::ndarray::view(on_device, host_buffer.storage_owner())); });
    CHECK(e.code() == gexec::errc::device_mismatch);
  }
  CHECK((*stats)[1].allocations.load() == 0);
  CHECK((*stats)[1].bytes.load() == 0);
  CHECK((*stats)[1].streams.load() == 0);
}

TEST_CASE("a graph naming a device no backend serves is an error at creation") {
  auto e = error_of([&] { (void)gexec::basic_model(branches_graph(true), kernels(), gexec::detail::on_devices({gexec::cpu()})); });
  CHECK(e.code() == gexec::errc::device_mismatch);
  CHECK(contains(e, "ext_dev"));
  e = error_of([&] { (void)gexec::basic_model(branches_graph(false), kernels(), gexec::detail::on_devices({gexec::cpu(), gexec::emulated()})); });
  CHECK(e.code() == gexec::errc::device_mismatch);
  CHECK(contains(e, "no backend serves ext_dev:0"));
}

TEST_CASE("a kernel reading a tensor on another device, with no __copy between, is an error at creation") {
  const auto f32 = gexec::dtypes::float32;
  const int ext = gexec::emulated_device_type;
  auto make = [&](bool input_elsewhere) {
    gexec::graph_builder b;
    auto x = b.input("x", {n});
    auto a = b.op("a", "add1", {x}, {{{n}}});                                           // on the host
    auto c = b.op("c", "ext_add1", {a}, {{{n}, f32, input_elsewhere ? ext : kDLCPU}});  // output placed on ext_dev or the host
    if (!input_elsewhere) {  // an output on another device than the kernel's first
      auto d = b.op("d", "add", {a, c}, {{{n}, f32, kDLCPU}, {{n}, f32, ext}});
      b.output(d);
    } else {
      b.output(c);
    }
    return b.build();
  };
  auto create = [&](gexec::validated_graph g) {
    return error_of([&] {
      (void)gexec::basic_model<hetero, gexec::pool_allocator, gexec::registry>(g, kernels(), gexec::detail::on_devices({gexec::cpu(), gexec::emulated()}),
                                                                                hetero(gexec::cpu_backend{}, gexec::emulated_backend<>()));
    });
  };
  auto e = create(make(true));
  CHECK(e.code() == gexec::errc::device_mismatch);
  CHECK(contains(e, "node \"c\""));
  CHECK(contains(e, "runs on ext_dev:0"));
  CHECK(contains(e, "argument 0, input 0 (entry 1, output of node \"a\"), is on cpu:0"));
  e = create(make(false));
  CHECK(e.code() == gexec::errc::device_mismatch);
  CHECK(contains(e, "node \"d\""));
  CHECK(contains(e, "argument 3, output 1, is on ext_dev:0"));
}

TEST_CASE("storage ids need not be below the number of entries: any non-negative id is one, as in TVM") {
  gexec::graph_builder b;
  auto x = b.input("x", {n});
  auto a = b.op("a", "add1", {x}, {{{n}}});
  auto s = b.op("s", "scale2", {a}, {{{n}}});
  auto t = b.op("t", "add1", {s}, {{{n}}});
  b.output(t);
  gexec::graph g = *b.build();
  g.attrs.storage_id = {7, 1000000, 2000000000, 1000000};  // a and t share storage, as compiled
  const std::string json = gexec::to_json(g);
  const auto x_values = test::iota(n, 0.5f);
  std::vector<float> expect;
  for (float v : x_values) expect.push_back((v + 1) * 2 + 1);
  for (const auto& vg : {gexec::parse_graph(json), gexec::validate(g)}) {
    auto m = gexec::basic_model(vg, kernels());
    CHECK(m.storage().as_compiled == 2 * n * 4);  // two activation buffers: 1000000 (a, t) and 2000000000 (s)
    auto ex = m.instantiate();
    ex.set_input("x", tensor({n}, x_values));
    ex.run();
    CHECK(values_of(ex.get_output(0)) == expect);
  }
  g.attrs.storage_id[2] = 1000000;  // a and s live at once on one storage: the plan's check still catches it
  auto e = error_of([&] { (void)gexec::basic_model(gexec::parse_graph(gexec::to_json(g)), kernels()); });
  CHECK(e.code() == gexec::errc::invalid_graph);
  CHECK(contains(e, "share memory while both are live"));
  g.attrs.storage_id[2] = -1;
  e = error_of([&] { (void)gexec::parse_graph(gexec::to_json(g)); });
  CHECK(e.code() == gexec::errc::invalid_graph);
  CHECK(contains(e, "storage id -1 is negative"));
}

TEST_CASE("inconsistent storage plans are errors at creation, whatever the planner") {
  gexec::registry r = kernels();
  auto plan_error = [&](gexec::validated_graph g) {
    auto e = error_of([&] { (void)gexec::basic_model(g, r); });
    CHECK(e.code() == gexec::errc::invalid_graph);
    return e;
  };
  const auto f32 = gexec::dtypes::float32;
  {  // two inputs on one storage id
    gexec::graph_builder b;
    auto x = b.input("x", {n});
    auto y = b.input("y", {n});
    auto s = b.op("s", "add", {x, y}, {{{n}}});
    b.output(s);
    gexec::graph g = *b.build();
    g.attrs.storage_id[1] = 0;
    CHECK(contains(plan_error(gexec::validate(g)), "share memory while both are live (two graph inputs)"));
  }
  {  // a parameter sharing storage with a later intermediate
    gexec::graph_builder b;
    auto x = b.input("x", {n});
    auto w = b.input("w", {n});
    auto s = b.op("s", "add1", {x}, {{{n}, f32, 0, 1}});
    auto t = b.op("t", "add", {s, w}, {{{n}}});
    b.output(t);
    CHECK(contains(plan_error(b.build()), "is a graph input in activation storage"));
  }
  {  // two intermediates live at once on one storage id
    gexec::graph_builder b;
    auto x = b.input("x", {n});
    auto s = b.op("s", "add1", {x}, {{{n}, f32, 0, 1}});
    auto t = b.op("t", "add1", {s}, {{{n}, f32, 0, 1}});
    auto u = b.op("u", "add", {s, t}, {{{n}}});
    b.output(u);
    CHECK(contains(plan_error(b.build()), "share memory while both are live"));
  }
}

TEST_CASE("the storage plan check sorts a slot's values by the step that writes them, in whatever order they come") {
  // Three activations of 64 bytes in one 128-byte slot, listed out of step order: c
  // (written at step 5), a (step 1, read until 3), b (step 2, read until 6).
  gexec::storage_problem p;
  p.num_nodes = 8;
  auto value = [](std::uint32_t root, std::uint32_t first, std::uint32_t last) {
    gexec::storage_value v;
    v.root = root;
    v.storage_id = root;
    v.bytes = 64;
    v.first = first;
    v.last = last;
    return v;
  };
  p.values = {value(30, 5, 7), value(10, 1, 3), value(20, 2, 6)};
  p.num_storage_ids = 31;
  gexec::storage_assignment a;
  a.slots.push_back({gexec::cpu(), 128, gexec::storage_kind::activation});
  a.slot = {0, 0, 0};
  // c reuses a's bytes (a is dead after step 3); b sits beside them: no clash.
  a.offset = {0, 0, 64};
  CHECK_NOTHROW(gexec::detail::check_assignment(p, a, "test"));
  // c on b's bytes while b is live (steps 2..6 and 5..7 overlap): the clash named.
  a.offset = {64, 0, 64};
  const auto e = error_of([&] { gexec::detail::check_assignment(p, a, "test"); });
  CHECK(e.code() == gexec::errc::invalid_graph);
  CHECK(contains(e, "entry 30 (storage id 30) and entry 20 (storage id 20) share memory while both are live"));
}

namespace {
/// A planner as a user would write one: every value in one slot per device, one after
/// another (no reuse at all). And a wrong one, which puts everything at offset 0.
struct back_to_back {
  gexec::storage_assignment plan(const gexec::storage_problem& p) const {
    gexec::storage_assignment a;
    for (const gexec::storage_value& v : p.values) {
      a.slot.push_back(static_cast<std::uint32_t>(a.slots.size()));
      a.offset.push_back(0);
      a.slots.push_back({v.device, v.bytes, v.is_input ? gexec::storage_kind::input : gexec::storage_kind::activation});
    }
    return a;
  }
};
struct everything_at_zero {
  gexec::storage_assignment plan(const gexec::storage_problem& p) const {
    gexec::storage_assignment a = back_to_back{}.plan(p);
    std::uint64_t biggest = 0;
    for (const auto& v : p.values) biggest = std::max(biggest, v.bytes);
    gexec::storage_slot arena{gexec::cpu(), biggest, gexec::storage_kind::activation};
    for (std::size_t i = 0; i < p.values.size(); ++i)
      if (!p.values[i].is_input) a.slot[i] = static_cast<std::uint32_t>(a.slots.size());
    a.slots.push_back(arena);
    return a;
  }
};
}  // namespace

TEST_CASE("a planner of one's own: checked, and run like the others") {
  gexec::param_dict params;
  const auto p = test::iota(n, 3.0f);
  params.set("p", tensor({n}, p));
  gexec::basic_model<host, gexec::pool_allocator, gexec::registry, back_to_back> mine(branches_graph(false), kernels(), params);
  CHECK(mine.storage().planned > mine.storage().as_compiled);  // no reuse: more than TVM's plan
  auto ex = mine.instantiate();
  const auto x = test::iota(n, -2.0f);
  ex.set_input("x", tensor({n}, x));
  ex.run(gexec::parallel_branches{});
  CHECK(values_of(ex.get_output(1)) == compute(x, p).e);
  auto e = error_of([&] { (void)gexec::basic_model<host, gexec::pool_allocator, gexec::registry, everything_at_zero>(branches_graph(false), kernels(), params); });
  CHECK(e.code() == gexec::errc::invalid_graph);
  CHECK(contains(e, "storage plan (the planner)"));
  CHECK(contains(e, "share memory while both are live"));
}

namespace {
/// An execution policy of one's own: the dependency graph in reverse priority (of the
/// ready steps, always the latest). Any order the edges allow gives the same outputs.
struct latest_ready_first {
  template <class Program>
  void execute(Program& steps) const {
    const gexec::step_graph& deps = steps.dependencies();
    std::vector<std::uint32_t> pending(deps.num_preds);
    std::set<std::uint32_t> ready;
    for (std::uint32_t k = 0; k < steps.size(); ++k)
      if (pending[k] == 0) ready.insert(k);
    while (!ready.empty()) {
      const std::uint32_t k = *ready.rbegin();
      ready.erase(k);
      steps.run_step(k);
      for (std::uint32_t i = deps.succ_begin[k]; i < deps.succ_begin[k + 1]; ++i)
        if (--pending[deps.succ[i]] == 0) ready.insert(deps.succ[i]);
    }
  }
};
}  // namespace

TEST_CASE("an execution policy of one's own runs steps in any order the edges allow") {
  static_assert(gexec::execution_policy<latest_ready_first>);
  for (bool liveness : {false, true}) {
    CAPTURE(liveness);
    gexec::param_dict params;
    const auto p = test::iota(n, 1.0f);
    params.set("p", tensor({n}, p));
    const auto x = test::iota(n, 7.0f, -0.5f);
    auto check = [&](auto m) {
      auto ex = m.instantiate();
      ex.set_input("x", tensor({n}, x));
      order_recorder rec(m.plan().step_node.size());
      ex.run(latest_ready_first{}, rec);
      CHECK(values_of(ex.get_output(0)) == compute(x, p).d);
      CHECK(values_of(ex.get_output(1)) == compute(x, p).e);
      CHECK(values_of(ex.get_output(2)) == compute(x, p).f);
      // Out of order indeed: f (the last step) ran first, where its memory is its own
      // (liveness reuses bytes of dead values for it: then it waits for their readers).
      if (!liveness) CHECK(rec.started.back() == 0);
      else CHECK(m.instantiate().get_model_state()->dependencies().num_preds.back() > 0);
    };
    if (liveness) check(gexec::basic_model<host, gexec::pool_allocator, gexec::registry, gexec::liveness>(branches_graph(false), kernels(), params));
    else check(gexec::basic_model(branches_graph(false), kernels(), params));
  }
}

TEST_CASE("control_deps order steps that share no data") {
  std::atomic<int> clock{0};
  std::atomic<int> first_done{-1}, second_start{-1};
  gexec::registry r;
  r.add("first", [&](gexec::packed_args) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    first_done = clock++;
  });
  r.add("second", [&](gexec::packed_args) { second_start = clock++; });
  gexec::graph_builder b;
  auto x = b.input("x", {n});
  auto one = b.op("one", "first", {x}, {{{n}}});
  auto two = b.op("two", "second", {x}, {{{n}}});
  b.output(one);
  b.output(two);
  gexec::graph g = *b.build();
  {
    gexec::basic_model m(gexec::validate(g), r);
    CHECK(m.instantiate().get_model_state()->dependencies().num_preds[1] == 0);  // independent without the edge
  }
  g.nodes[2].control_deps.push_back(1);
  auto m = gexec::basic_model(gexec::validate(g), r, gexec::model_options{{gexec::cpu()}, gexec::runtime::create({.num_threads = 2})});
  auto ex = m.instantiate();
  ex.set_input("x", tensor({n}, test::iota(n)));
  for (int i = 0; i < 3; ++i) {
    ex.run(gexec::parallel_branches{});
    CHECK(first_done < second_start);
  }
  // A control dependency on a later node is not a graph.
  g.nodes[1].control_deps.push_back(2);
  auto e = error_of([&] { (void)gexec::validate(g); });
  CHECK(e.code() == gexec::errc::invalid_graph);
  CHECK(contains(e, "does not come before node 1"));
}

TEST_CASE("parallel branches of kernels that launch parallel work: no deadlock, same outputs") {
  // Two branches of four test_parallel_heavy each (TVMBackendParallelLaunch inside).
  gexec::graph_builder b;
  auto x = b.input("x", {4096});
  gexec::node_entry left = x, right = x;
  for (int i = 0; i < 4; ++i) {
    left = b.op("l" + std::to_string(i), "test_parallel_heavy", {left}, {{{4096}}});
    right = b.op("r" + std::to_string(i), "test_parallel_heavy", {right}, {{{4096}}});
  }
  auto sum = b.op("sum", "test_add", {left, right}, {{{4096}}});
  b.output(sum);
  auto rt = gexec::runtime::create({.num_threads = 2});
  gexec::basic_model m(b.build(), test::kernels(), gexec::model_options{{gexec::cpu()}, rt});
  auto seq = m.instantiate(), par = m.instantiate();
  const auto xs = test::iota(4096, -1.0f, 0.001f);
  seq.set_input("x", tensor({4096}, xs));
  par.set_input("x", tensor({4096}, xs));
  seq.run();
  for (int i = 0; i < 5; ++i) par.run(gexec::parallel_branches{});
  CHECK(values_of(par.get_output(0)) == values_of(seq.get_output(0)));
}

TEST_CASE("parallel branches: kernels' parallel loops take the workers no branch holds") {
  // x -> stem -> (left, right) -> join -> tail: each kernel launches parallel work through
  // TVMBackendParallelLaunch's hook and notes how many tasks it got. The stem and the tail
  // run while no branch holds a worker: their launches get both threads (in some run:
  // a helper leaving may hold its worker a moment longer). Before, every kernel under
  // parallel_branches ran its parallel loop alone.
  auto rt = gexec::runtime::create({.num_threads = 2});
  if (rt->num_threads() < 2 || gexec::detail::available_cores() < 2) {
    MESSAGE("SKIPPED: fewer than 2 cores");
    return;
  }
  struct seen {
    std::mutex mu;
    std::map<std::string, int> most;  // per kernel: the most tasks one of its launches got
  };
  auto s = std::make_shared<seen>();
  gexec::registry r;
  for (const char* name : {"stem", "left", "right", "tail"}) {
    r.add(name, [s, name](gexec::packed_args a) {
      // Branches long enough for a helper to wake up and take one (a helper posted for a
      // step the run's thread takes first holds its worker until it has looked).
      if (name[0] == 'l' || name[0] == 'r') std::this_thread::sleep_for(std::chrono::milliseconds(2));
      std::atomic<int> tasks{0};
      auto task = [](int, TVMParallelGroupEnv* penv, void* cdata) -> int {
        static_cast<std::atomic<int>*>(cdata)->store(penv->num_task);
        return 0;
      };
      // Force parallel: a launch that does not learn (the hook's would decide by itself).
      REQUIRE(gexec::detail::current_pool().launch(task, &tasks, 0) == 0);
      {
        std::lock_guard g(s->mu);
        s->most[name] = std::max(s->most[name], tasks.load());
      }
      for (std::int64_t i = 0; i < n; ++i) data_of(a.tensor(a.size() - 1))[i] = data_of(a.tensor(0))[i] + 1;
    });
  }
  r.add("join", [](gexec::packed_args a) {
    for (std::int64_t i = 0; i < n; ++i) data_of(a.tensor(2))[i] = data_of(a.tensor(0))[i] + data_of(a.tensor(1))[i];
  });
  gexec::graph_builder b;
  auto x = b.input("x", {n});
  auto stem = b.op("stem", "stem", {x}, {{{n}}});
  auto left = b.op("left", "left", {stem}, {{{n}}});
  auto right = b.op("right", "right", {stem}, {{{n}}});
  auto join = b.op("join", "join", {left, right}, {{{n}}});
  auto tail = b.op("tail", "tail", {join}, {{{n}}});
  b.output(tail);
  gexec::basic_model m(b.build(), r, gexec::model_options{{gexec::cpu()}, rt});
  auto ex = m.instantiate();
  ex.set_input("x", tensor({n}, test::iota(n)));
  for (int i = 0; i < 20; ++i) ex.run(gexec::parallel_branches{});
  std::vector<float> expect(n);
  for (std::int64_t i = 0; i < n; ++i) expect[i] = 2.0f * (static_cast<float>(i) + 2.0f) + 1.0f;
  CHECK(values_of(ex.get_output(0)) == expect);
  std::lock_guard g(s->mu);
  CHECK(s->most["stem"] == 2);
  CHECK(s->most["tail"] == 2);
}

TEST_CASE("runs whose launches all run alone use a one-thread pool, and one run in kSerialRuns + 1 learns again") {
  // A kernel that launches parallel work the way TVM's hook does (independent tasks that
  // learn) and notes the pool it saw. "alone" pays only alone (its tasks but the first are
  // slow, as on a descheduled worker): after learning that, short runs use the one-thread
  // pool, where a launch is a plain call. "parallel" pays in parallel (its single task is
  // slow): its runs keep the workers.
  auto rt = gexec::runtime::create({.num_threads = 2});
  if (rt->num_threads() < 2 || gexec::detail::available_cores() < 2) {
    MESSAGE("SKIPPED: fewer than 2 cores");
    return;
  }
  auto seen = std::make_shared<std::vector<int>>();  // per run: the most threads the kernel's pool had
  gexec::registry r;
  auto add_kernel = [&](const char* name, FTVMParallelLambda task) {
    r.add(name, [seen, task](gexec::packed_args a) {
      gexec::detail::thread_pool& pool = gexec::detail::current_pool();
      seen->push_back(pool.max_concurrency());
      REQUIRE(pool.launch(task, nullptr, 0, {.tasks = gexec::detail::task_kind::independent, .learn = true}) == 0);
      for (std::int64_t i = 0; i < n; ++i) data_of(a.tensor(1))[i] = data_of(a.tensor(0))[i] + 1;
    });
  };
  add_kernel("alone", [](int task_id, TVMParallelGroupEnv*, void*) -> int {
    if (task_id != 0) std::this_thread::sleep_for(std::chrono::microseconds(300));
    return 0;
  });
  add_kernel("parallel", [](int, TVMParallelGroupEnv* penv, void*) -> int {
    if (penv->num_task == 1) std::this_thread::sleep_for(std::chrono::microseconds(300));
    return 0;
  });
  constexpr auto period = gexec::detail::serial_runs::kSerialRuns + 1;
  for (const char* kernel : {"alone", "parallel"}) {
    CAPTURE(kernel);
    gexec::graph_builder b;
    b.output(b.op("k", kernel, {b.input("x", {n})}, {{{n}}}));
    gexec::basic_model m(b.build(), r, gexec::model_options{{gexec::cpu()}, rt});
    auto ex = m.instantiate();
    ex.set_input("x", tensor({n}, test::iota(n)));
    for (int i = 0; i < 100; ++i) ex.run();  // learnt
    seen->clear();
    for (std::uint32_t i = 0; i < 2 * period; ++i) ex.run();
    std::vector<float> expect = test::iota(n);
    for (float& v : expect) v += 1;
    CHECK(values_of(ex.get_output(0)) == expect);
    const auto serial = std::count(seen->begin(), seen->end(), 1);
    if (kernel[0] == 'a') {
      // Each learning run is followed by kSerialRuns serial ones, unless the machine
      // stalled it past kShortRunUs: most runs are serial, and runs still learn.
      CHECK(serial >= period);
      CHECK(serial < 2 * period);
    } else {
      CHECK(serial == 0);
    }
  }
}

TEST_CASE("run() without an observer is the plain loop; an observer is called around each step") {
  gexec::basic_model m(branches_graph(false), kernels());
  auto ex = m.instantiate();
  ex.set_input("x", tensor({n}, test::iota(n)));
  ex.set_input("p", tensor({n}, test::iota(n)));
  struct counter {
    int befores = 0, afters = 0;
    void before(const gexec::step_event&) { ++befores; }
    void after(const gexec::step_event&) { ++afters; }
  } c;
  ex.run(c);
  CHECK(c.befores == static_cast<int>(m.plan().step_node.size()));
  CHECK(c.afters == c.befores);
  static_assert(sizeof(gexec::no_observer) == 1 && std::is_empty_v<gexec::no_observer>);
}

TEST_CASE("an output on the emulated device: zero-copy with a tensor there, read back through the backend") {
  auto stats = std::make_shared<gexec::emulated_stats>();
  gexec::graph_builder b;
  auto x = b.input("x", {n});
  auto on_device = b.copy("to_ext", x, gexec::emulated_device_type);
  auto y = b.op("y", "ext_add1", {on_device}, {{{n}, gexec::dtypes::float32, gexec::emulated_device_type}});
  b.output(y);
  gexec::basic_model<hetero, gexec::pool_allocator, gexec::registry> m(
      b.build(), kernels(), gexec::detail::on_devices({gexec::cpu(), gexec::emulated()}), hetero(gexec::cpu_backend{}, gexec::emulated_backend<>(stats)));
  auto ex = m.instantiate();
  ex.set_input("x", tensor({n}, test::iota(n)));
  ex.run(gexec::parallel_branches{});
  CHECK(ex.get_output(0).device().device_type == gexec::emulated_device_type);
  auto host = gexec::ndarray::empty({n}, gexec::dtypes::float32);
  const long to_host = (*stats)[0].to_host;
  ex.copy_output_to(0, host);
  CHECK((*stats)[0].to_host - to_host == 1);
  CHECK(values_of(host) == test::iota(n, 1.0f));
  // Bound zero-copy to memory of that device, the kernel writes there directly.
  auto buffer = tensor({n}, std::vector<float>(n, -1.0f));
  std::vector<std::int64_t> shape{n};
  DLTensor device_view{buffer.data(), gexec::emulated(), 1, gexec::dtypes::float32, shape.data(), nullptr, 0};
  ex.set_output_zero_copy(0, gexec::ndarray::view(device_view, buffer.storage_owner()));
  ex.set_input("x", tensor({n}, test::iota(n, 10.0f)));
  ex.run();
  ex.synchronize();
  CHECK(values_of(buffer) == test::iota(n, 11.0f));
  // A host tensor for a device output is refused.
  auto e = error_of([&] { ex.set_output_zero_copy(0, gexec::ndarray::empty({n}, gexec::dtypes::float32)); });
  CHECK(e.code() == gexec::errc::device_mismatch);
  CHECK(contains(e, "expected ext_dev:0"));
}

TEST_CASE_TEMPLATE("backends: streams order copies, events mark them, workspace is the device's", B, gexec::cpu_backend, gexec::emulated_backend<>) {
  B backend;
  const DLDevice d{static_cast<DLDeviceType>(B::device_type), 0};
  std::vector<float> host_in = test::iota(16, 1.0f), host_out(16, 0.0f);
  std::int64_t shape[1] = {16};
  void* memory = backend.allocate(d, 64);
  REQUIRE(memory != nullptr);
  DLTensor from{host_in.data(), gexec::cpu(), 1, gexec::dtypes::float32, shape, nullptr, 0};
  DLTensor on_device{memory, d, 1, gexec::dtypes::float32, shape, nullptr, 0};
  DLTensor to{host_out.data(), gexec::cpu(), 1, gexec::dtypes::float32, shape, nullptr, 0};
  auto stream = backend.create_stream(d);
  auto event = backend.create_event(d);
  backend.copy_async(from, on_device, stream);  // host to device
  backend.record(event, stream);
  auto other = backend.create_stream(d);
  backend.wait(other, event);
  backend.copy_async(on_device, to, other);  // device to host, after the first copy
  backend.synchronize(other);
  CHECK(host_out == host_in);
  void* ws = backend.alloc_workspace(d, 100, nullptr);
  CHECK(ws != nullptr);
  CHECK(backend.free_workspace(d, ws, nullptr) == 0);
  backend.set_device(d);
  if constexpr (!std::is_same_v<B, gexec::cpu_backend>) {
    auto unrecorded = backend.create_event(d);
    auto e = error_of([&] { backend.wait(stream, unrecorded); });
    CHECK(contains(e, "never recorded"));
    backend.destroy_event(d, unrecorded);
  }
  backend.destroy_event(d, event);
  backend.destroy_stream(d, other);
  backend.destroy_stream(d, stream);
  backend.free(d, memory);
  if constexpr (!std::is_same_v<B, gexec::cpu_backend>) {
    CHECK(backend.stats()[0].allocations.load() == 0);
    CHECK(backend.stats()[0].streams.load() == 0);
    CHECK(backend.stats()[0].events.load() == 0);
    CHECK(backend.stats()[0].to_device.load() == 1);
    CHECK(backend.stats()[0].to_host.load() == 1);
    CHECK_THROWS_AS(backend.allocate(gexec::cpu(), 16), gexec::error);
  }
}

namespace {
/// A policy that forgets thread_context() on the thread it makes.
struct own_thread {
  template <class Program>
  void execute(Program& steps) const {
    std::exception_ptr failure;
    std::thread t([&] {
      try {
        steps.run(0, steps.size());
      } catch (...) {
        failure = std::current_exception();
      }
    });
    t.join();
    if (failure) std::rethrow_exception(failure);
  }
};
}  // namespace

TEST_CASE("a policy that runs steps on a thread of its own without the run's context is refused") {
  gexec::basic_model m(branches_graph(false), kernels());
  auto ex = m.instantiate();
  ex.set_input("x", tensor({n}, test::iota(n)));
  ex.set_input("p", tensor({n}, test::iota(n)));
  auto e = error_of([&] { ex.run(own_thread{}); });
  CHECK(e.code() == gexec::errc::invalid_argument);
  CHECK(contains(e, "thread_context()"));
}

namespace {
/// x, y -> __nop "n" whose two outputs have storage ids of their own (one copy step per
/// output) -> a = add1(n:0), b = scale2(n:1).
gexec::validated_graph nop_copies_graph() {
  const std::string shape = "[" + std::to_string(n) + "]";
  return gexec::parse_graph(R"({"nodes": [
      {"op": "null", "name": "x", "inputs": []},
      {"op": "null", "name": "y", "inputs": []},
      {"op": "tvm_op", "name": "n", "attrs": {"func_name": "__nop", "num_inputs": "2", "num_outputs": "2", "flatten_data": "0"},
       "inputs": [[0, 0, 0], [1, 0, 0]]},
      {"op": "tvm_op", "name": "a", "attrs": {"func_name": "add1", "num_inputs": "1", "num_outputs": "1", "flatten_data": "0"},
       "inputs": [[2, 0, 0]]},
      {"op": "tvm_op", "name": "b", "attrs": {"func_name": "scale2", "num_inputs": "1", "num_outputs": "1", "flatten_data": "0"},
       "inputs": [[2, 1, 0]]}],
    "arg_nodes": [0, 1], "heads": [[3, 0, 0], [4, 0, 0]], "node_row_ptr": [0, 1, 2, 4, 5, 6],
    "attrs": {"dltype": ["list_str", ["float32", "float32", "float32", "float32", "float32", "float32"]],
              "storage_id": ["list_int", [0, 1, 2, 3, 4, 5]],
              "shape": ["list_shape", [)" + shape + "," + shape + "," + shape + "," + shape + "," + shape + "," + shape + "]]}}");
}
}  // namespace

TEST_CASE("a __nop copying several outputs: each reader waits for the copy of its own output") {
  const auto x = test::iota(n, 1.0f), y = test::iota(n, -3.0f, 0.5f);
  std::vector<float> a, b;
  for (std::int64_t i = 0; i < n; ++i) {
    a.push_back(x[static_cast<std::size_t>(i)] + 1);
    b.push_back(y[static_cast<std::size_t>(i)] * 2);
  }
  auto m = gexec::basic_model(nop_copies_graph(), kernels(), gexec::param_dict{},
                              gexec::model_options{{gexec::cpu()}, gexec::runtime::create({.num_threads = 2})});
  // Steps: the copies of n:0 and n:1, then a and b. Each reader depends on its own copy.
  const gexec::step_graph& deps = m.instantiate().get_model_state()->dependencies();
  REQUIRE(deps.num_preds.size() == 4);
  auto succ_of = [&](std::uint32_t k) { return std::vector<std::uint32_t>(deps.succ.begin() + deps.succ_begin[k], deps.succ.begin() + deps.succ_begin[k + 1]); };
  CHECK(succ_of(0) == std::vector<std::uint32_t>{2});
  CHECK(succ_of(1) == std::vector<std::uint32_t>{3});
  auto ex = m.instantiate();
  ex.set_input("x", tensor({n}, x));
  ex.set_input("y", tensor({n}, y));
  // The order the edges allow that ran a before its copy: a read stale data.
  ex.run(latest_ready_first{});
  CHECK(values_of(ex.get_output(0)) == a);
  CHECK(values_of(ex.get_output(1)) == b);
  // On the pool, with a timer whose hooks see both copies of one node at once.
  gexec::node_timer timer(ex.get_graph());
  for (int i = 0; i < 40; ++i) {
    ex.set_input("x", tensor({n}, test::iota(n, static_cast<float>(i))));
    ex.run(gexec::parallel_branches{}, timer);
    std::vector<float> expect;
    for (std::int64_t j = 0; j < n; ++j) expect.push_back(static_cast<float>(i + j) + 1);
    CHECK(values_of(ex.get_output(0)) == expect);
    CHECK(values_of(ex.get_output(1)) == b);
  }
  const auto report = timer.report();
  REQUIRE(report.size() == 3);
  for (const auto& t : report) CHECK(t.calls == (t.name == "n" ? 80u : 40u));  // two steps per run for n
}

namespace {
using liveness_model = gexec::basic_model<host, gexec::pool_allocator, gexec::registry, gexec::liveness>;

/// Inputs left unset read as zeros: the graphs below are planned and run, not computed.
gexec::model_options zero_inputs() {
  gexec::model_options o;
  o.zero_unset_inputs = true;
  return o;
}

/// Kernels that do nothing, for graphs that are planned and run, not computed.
gexec::registry no_op_kernels(std::initializer_list<const char*> names) {
  gexec::registry r;
  for (const char* name : names) r.add(name, [](gexec::packed_args) {});
  return r;
}

/// Self-attention over 16 tokens of 16 floats, 2 heads: q, k, v of x, per head the
/// scores and their softmax, the context, projected and added to x. Nodes 1 to 12; x is 0.
gexec::validated_graph attention_graph() {
  gexec::graph_builder b;
  auto t = [](std::vector<std::int64_t> shape) { return std::vector<gexec::tensor_type>{{std::move(shape)}}; };
  auto x = b.input("x", {16, 16});
  auto q = b.op("q", "dense", {x}, t({16, 16}));
  auto k = b.op("k", "dense", {x}, t({16, 16}));
  auto v = b.op("v", "dense", {x}, t({16, 16}));
  auto qt = b.op("qt", "transpose", {q}, t({2, 16, 8}));
  auto kt = b.op("kt", "transpose", {k}, t({2, 16, 8}));
  auto vt = b.op("vt", "transpose", {v}, t({2, 16, 8}));
  auto scores = b.op("scores", "batch_matmul", {qt, kt}, t({2, 16, 16}));
  auto soft = b.op("softmax", "softmax", {scores}, t({2, 16, 16}));
  auto context = b.op("context", "batch_matmul", {soft, vt}, t({2, 16, 8}));
  auto back = b.op("back", "transpose", {context}, t({16, 16}));
  auto out = b.op("out", "dense", {back}, t({16, 16}));
  b.output(b.op("residual", "add", {out, x}, t({16, 16})));
  return b.build();
}

/// Brute force over every pair of computed values of a plan: [first node, last node]
/// from the graph (outputs to the end), bytes from the plan. Where two share bytes of a
/// slot, they must not be live together, and the step writing the later one must come
/// after the writer and every reader of the earlier one in `deps`.
void check_pairs(const gexec::compact_graph& g, const gexec::plan& p, const gexec::step_graph& deps) {
  const auto n_entries = static_cast<std::uint32_t>(g.num_entries());
  std::vector<std::uint32_t> first(n_entries), last(n_entries), step_of_node(g.num_nodes(), UINT32_MAX);
  std::vector<std::vector<std::uint32_t>> readers(n_entries);  // steps
  for (std::uint32_t k = 0; k < p.step_node.size(); ++k) step_of_node[p.step_node[k]] = k;
  for (std::uint32_t nid = 0; nid < g.num_nodes(); ++nid)
    for (std::uint32_t o = 0; o < g.num_outputs(nid); ++o) first[g.entry_id(nid, o)] = last[g.entry_id(nid, o)] = nid;
  for (std::uint32_t nid = 0; nid < g.num_nodes(); ++nid)
    for (const gexec::node_entry& in : g.node_inputs(nid)) {
      const std::uint32_t e = p.alias_root[g.entry_id(in)];
      last[e] = std::max(last[e], nid);
      readers[e].push_back(step_of_node[nid]);
    }
  for (const gexec::node_entry& h : g.heads) last[p.alias_root[g.entry_id(h)]] = UINT32_MAX;
  // Inputs in input storage share it with nothing; a donated input (in the activations)
  // is written before the run: alive from its start, with no step writing it.
  std::vector<bool> input(n_entries, false), donated(n_entries, false);
  for (std::uint32_t nid : g.arg_nodes) {
    const std::uint32_t e = g.entry_id(nid, 0);
    if (p.storage[p.entry_slot[e]].kind == gexec::storage_kind::input) input[e] = true;
    else donated[e] = true, first[e] = 0;
  }
  auto reaches = [&](std::uint32_t from, std::uint32_t to) {  // depth-first over the successors
    std::vector<bool> seen(deps.num_preds.size(), false);
    std::vector<std::uint32_t> stack = {from};
    while (!stack.empty()) {
      const std::uint32_t k = stack.back();
      stack.pop_back();
      if (k == to) return true;
      for (std::uint32_t i = deps.succ_begin[k]; i < deps.succ_begin[k + 1]; ++i)
        if (!seen[deps.succ[i]]) {
          seen[deps.succ[i]] = true;
          stack.push_back(deps.succ[i]);
        }
    }
    return false;
  };
  for (std::uint32_t u = 0; u < n_entries; ++u)
    for (std::uint32_t v = u + 1; v < n_entries; ++v) {
      if (p.alias_root[u] != u || p.alias_root[v] != v || input[u] || input[v] || p.entry_slot[u] != p.entry_slot[v]) continue;
      const std::uint64_t u_end = p.entry_offset[u] + std::max<std::uint64_t>(p.alias_group_bytes(g, u), 1);
      const std::uint64_t v_end = p.entry_offset[v] + std::max<std::uint64_t>(p.alias_group_bytes(g, v), 1);
      if (p.entry_offset[u] >= v_end || p.entry_offset[v] >= u_end) continue;
      CAPTURE(u);
      CAPTURE(v);
      REQUIRE(last[u] < first[v]);
      REQUIRE(!donated[v]);  // alive from the start: nothing is under it
      const std::uint32_t writer = step_of_node[first[v]];
      if (!donated[u]) CHECK(reaches(step_of_node[first[u]], writer));
      for (std::uint32_t r : readers[u]) CHECK(reaches(r, writer));
    }
}
}  // namespace

TEST_CASE("liveness plans a 50,000-way fan-out: each output its own bytes, the bound exactly") {
  // One input read by 50,000 ops of 64, 128, 192 and 256 bytes in turn, all outputs: all
  // live together at the end, so the arena is their sum, 12,500 x 640 bytes, which is
  // also the bound. (Planning this took minutes when each value looked at every other.)
  constexpr std::uint32_t ops = 50'000;
  gexec::graph_builder b;
  auto x = b.input("x", {16});
  for (std::uint32_t k = 0; k < ops; ++k) b.output(b.op(std::to_string(k), "noop", {x}, {{{16 * (1 + k % 4)}}}));
  const gexec::validated_graph g = b.build();
  liveness_model m(g, no_op_kernels({"noop"}), zero_inputs());
  CHECK(m.storage().lower_bound == 8'000'000);
  CHECK(m.storage().planned == 8'000'000);
  CHECK(m.storage().as_compiled == 8'000'000);
  const gexec::plan& p = m.plan();
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;  // [offset, end) of each output
  for (std::uint32_t k = 0; k < ops; ++k) {
    const std::uint32_t e = g.compact().entry_id(k + 1, 0);
    REQUIRE(p.storage[p.entry_slot[e]].kind == gexec::storage_kind::activation);
    ranges.emplace_back(p.entry_offset[e], p.entry_offset[e] + 64 * (1 + k % 4));
    CHECK(p.entry_slot[e] == p.entry_slot[g.compact().entry_id(1, 0)]);  // one arena
  }
  std::sort(ranges.begin(), ranges.end());
  for (std::size_t i = 1; i < ranges.size(); ++i) REQUIRE(ranges[i - 1].second <= ranges[i].first);
  CHECK(ranges.back().second <= p.storage[p.entry_slot[g.compact().entry_id(1, 0)]].bytes);
  // Nothing shares bytes and every op reads only the input: no step waits for another.
  const gexec::step_graph deps = gexec::detail::make_step_graph(g.compact(), p);
  CHECK(deps.num_preds.size() == ops);
  CHECK(std::all_of(deps.num_preds.begin(), deps.num_preds.end(), [](std::uint32_t k) { return k == 0; }));
  CHECK(deps.succ.empty());
  CHECK(deps.width == ops);
  auto ex = m.instantiate();
  ex.run();
}

TEST_CASE("liveness plans self-attention within 1.05 x the bound, every reuse ordered") {
  // Live at the scores' step: qt, kt, vt (1,024 bytes each) and the scores (2,048): 5,120
  // bytes, the most at any step. Largest first alone took 6,144.
  const gexec::validated_graph g = attention_graph();
  liveness_model m(g, no_op_kernels({"dense", "transpose", "batch_matmul", "softmax", "add"}), zero_inputs());
  CHECK(m.storage().lower_bound == 5120);
  CHECK(m.storage().planned * 100 <= 5120 * 105);
  check_pairs(g.compact(), m.plan(), gexec::detail::make_step_graph(g.compact(), m.plan()));
  auto ex = m.instantiate();
  ex.run(gexec::parallel_branches{});
}

namespace {
/// Numbers in [0, bound) from a linear congruential generator: the same for a seed on
/// every platform.
struct seeded {
  std::uint64_t s;
  std::uint64_t operator()(std::uint64_t bound) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (s >> 33) % bound;
  }
};

/// A chain of 60 nodes of 16 to 16 x `units` floats ("one", or "two" where a node reads
/// an earlier value too), drawn by `seed`; the outputs are the last value and value
/// `second`.
gexec::validated_graph random_chain(std::uint64_t seed, std::uint64_t units, std::size_t second) {
  seeded next{seed};
  gexec::graph_builder b;
  std::vector<gexec::node_entry> values = {b.input("x", {64})};
  for (int k = 0; k < 60; ++k) {
    std::vector<gexec::node_entry> in = {values.back()};
    if (next(3) == 0) in.push_back(values[next(values.size())]);
    const auto elems = static_cast<std::int64_t>(16 * (1 + next(units)));
    values.push_back(b.op(std::to_string(k), in.size() > 1 ? "two" : "one", std::move(in), {{{elems}}}));
  }
  b.output(values.back());
  b.output(values[second]);
  return b.build();
}
}  // namespace

TEST_CASE("storage reuse in the step graph: every later value waits for the earlier ones under it") {
  // Chains with branches and long edges of values of many sizes, so that values reuse
  // parts of several earlier ones and are partly reused in turn.
  for (std::uint64_t seed : {1u, 2u, 3u, 4u}) {
    CAPTURE(seed);
    const gexec::validated_graph g = random_chain(seed, 24, 30);
    liveness_model m(g, no_op_kernels({"one", "two"}));
    CHECK(m.storage().planned <= m.storage().as_compiled);
    CHECK(m.storage().lower_bound <= m.storage().planned);
    check_pairs(g.compact(), m.plan(), gexec::detail::make_step_graph(g.compact(), m.plan()));
  }
}

TEST_CASE("storage reuse in the step graph: values over a donated input wait for its readers") {
  // Several inputs, each read by a few nodes of a chain and then dead, so that later
  // values of many sizes take their bytes.
  for (std::uint64_t seed : {5u, 6u, 7u}) {
    CAPTURE(seed);
    seeded next{seed};
    gexec::graph_builder b;
    std::vector<gexec::node_entry> inputs, values = {b.input("x0", {64})};
    inputs.push_back(values.back());
    for (int k = 0; k < 50; ++k) {
      std::vector<gexec::node_entry> in = {values.back()};
      if (k % 10 == 5) {
        std::string name(1, 'x');  // not "x" + to_string(): GCC 12 warns of a bogus overflow
        name += std::to_string(inputs.size());
        inputs.push_back(b.input(name, {static_cast<std::int64_t>(16 * (1 + next(24)))}));
      }
      if (next(3) == 0) in.push_back(inputs[next(inputs.size())]);
      const auto elems = static_cast<std::int64_t>(16 * (1 + next(24)));
      values.push_back(b.op(std::to_string(k), in.size() > 1 ? "two" : "one", std::move(in), {{{elems}}}));
    }
    b.output(values.back());
    const gexec::validated_graph g = b.build();
    gexec::model_options o;
    o.donate_inputs = true;
    liveness_model m(g, no_op_kernels({"one", "two"}), o);
    REQUIRE(m.plan().donated.size() == inputs.size());
    for (std::uint32_t i : m.plan().donated)
      CHECK(m.plan().storage[m.plan().entry_slot[g.compact().entry_id(g.compact().arg_nodes[i], 0)]].kind == gexec::storage_kind::activation);
    CHECK(m.storage().lower_bound <= m.storage().planned);
    check_pairs(g.compact(), m.plan(), gexec::detail::make_step_graph(g.compact(), m.plan()));
  }
}

namespace {
/// x -> a = x + 1 -> b = 2a -> c = b + 1 -> d = c + p (the output), p a parameter.
gexec::validated_graph donation_graph() {
  gexec::graph_builder b;
  auto x = b.input("x", {n});
  auto p = b.input("p", {n});
  auto a = b.op("a", "add1", {x}, {{{n}}});
  auto bb = b.op("b", "scale2", {a}, {{{n}}});
  auto c = b.op("c", "add1", {bb}, {{{n}}});
  b.output(b.op("d", "add", {c, p}, {{{n}}}));
  return b.build();
}
std::vector<float> donation_expected(const std::vector<float>& x, const std::vector<float>& p) {
  std::vector<float> d;
  for (std::size_t i = 0; i < x.size(); ++i) d.push_back(((x[i] + 1) * 2 + 1) + p[i]);
  return d;
}
}  // namespace

TEST_CASE_TEMPLATE("donated inputs: in the activations, used up by each run, read in place when bound zero-copy", P, gexec::liveness,
                   gexec::as_compiled) {
  using model_t = gexec::basic_model<host, gexec::pool_allocator, gexec::registry, P>;
  const std::vector<float> p = test::iota(n, 0.5f, 0.25f);
  gexec::param_dict params;
  params.set("p", tensor({n}, p));
  gexec::model_options donate;
  donate.donate_inputs = true;
  model_t kept(donation_graph(), kernels(), params), donated(donation_graph(), kernels(), params, donate);
  const gexec::compact_graph& g = donated.compact();
  const std::uint32_t x_entry = g.entry_id(g.arg_nodes[0], 0);
  REQUIRE(g.name(g.arg_nodes[0]) == "x");
  CHECK(donated.plan().donated == std::vector<std::uint32_t>{0});  // p is a parameter
  CHECK(kept.plan().donated.empty());
  CHECK(donated.plan().storage[donated.plan().entry_slot[x_entry]].kind == gexec::storage_kind::activation);
  CHECK(kept.plan().storage[kept.plan().entry_slot[x_entry]].kind == gexec::storage_kind::input);

  auto a = kept.instantiate();
  auto ex = donated.instantiate();
  const std::vector<float> x1 = test::iota(n, -3.0f, 0.5f), x2 = test::iota(n, 7.0f, -0.125f);
  a.set_input("x", tensor({n}, x1));
  ex.set_input("x", tensor({n}, x1));
  a.run();
  ex.run();
  CHECK(values_of(ex.get_output(0)) == donation_expected(x1, p));
  CHECK(values_of(a.get_output(0)) == donation_expected(x1, p));
  if constexpr (std::is_same_v<P, gexec::liveness>) {
    // The executor holds no bytes of its own for x: b, made after x's last reader, took them.
    CHECK(a.storage_bytes() - ex.storage_bytes() == n * 4);
    const auto& entries = ex.get_instance_plan().entries;
    REQUIRE(g.name(3) == "b");
    CHECK(entries[x_entry].data == entries[g.entry_id(3, 0)].data);
  } else {
    CHECK(a.storage_bytes() == ex.storage_bytes());  // TVM's storage ids: x keeps its own
  }
  CHECK(values_of(a.get_input("x")) == x1);  // not donated: still there

  // Used up: no second run, no get_input, until it is set again.
  gexec::error e = error_of([&] { ex.run(); });
  CHECK(contains(e, "run: input \"x\" was used up by the last run"));
  CHECK(contains(e, "model_options::donate_inputs"));
  e = error_of([&] { (void)ex.get_input("x"); });
  CHECK(contains(e, "get_input \"x\": the last run used up this input"));
  ex.set_input("x", tensor({n}, x2));
  CHECK(values_of(ex.get_input("x")) == x2);
  ex.run(gexec::parallel_branches{});
  CHECK(values_of(ex.get_output(0)) == donation_expected(x2, p));
  CHECK(contains(error_of([&] { ex.run(gexec::parallel_branches{}); }), "used up by the last run"));

  // Bound zero-copy: read where it lies, never written, never used up.
  gexec::ndarray bound = gexec::ndarray::empty({n}, gexec::dtypes::float32);
  std::copy(x2.begin(), x2.end(), static_cast<float*>(bound.data()));
  ex.set_input_zero_copy("x", bound);
  ex.run();
  ex.run();
  CHECK(values_of(ex.get_output(0)) == donation_expected(x2, p));
  CHECK(values_of(bound) == x2);
  CHECK(ex.get_input("x").data() == bound.data());
  // Set by copy again: in the activations, used up once more.
  ex.set_input("x", tensor({n}, x1));
  ex.run();
  CHECK(values_of(ex.get_output(0)) == donation_expected(x1, p));
  CHECK(contains(error_of([&] { ex.run(); }), "used up by the last run"));

  // Not with zero_unset_inputs: a used-up input is not zeros.
  gexec::model_options both = donate;
  both.zero_unset_inputs = true;
  CHECK(contains(error_of([&] { model_t(donation_graph(), kernels(), params, both); }), "donate_inputs and zero_unset_inputs together"));
}

namespace {
/// Per call of `p`, the largest run of bytes (64-byte aligned start) of a host activation
/// slot that no value alive at that call's node holds, by brute force over the values.
std::vector<std::uint64_t> largest_free(const gexec::compact_graph& g, const gexec::plan& p) {
  const auto n_entries = static_cast<std::uint32_t>(g.num_entries());
  std::vector<std::uint32_t> first(n_entries), last(n_entries);
  for (std::uint32_t nid = 0; nid < g.num_nodes(); ++nid)
    for (std::uint32_t o = 0; o < g.num_outputs(nid); ++o) first[g.entry_id(nid, o)] = last[g.entry_id(nid, o)] = nid;
  for (std::uint32_t nid : g.arg_nodes) first[g.entry_id(nid, 0)] = 0;
  for (std::uint32_t nid = 0; nid < g.num_nodes(); ++nid)
    for (const gexec::node_entry& in : g.node_inputs(nid)) last[p.alias_root[g.entry_id(in)]] = std::max(last[p.alias_root[g.entry_id(in)]], nid);
  for (const gexec::node_entry& h : g.heads) last[p.alias_root[g.entry_id(h)]] = UINT32_MAX;
  std::vector<std::uint64_t> out;
  for (const gexec::call_template& c : p.calls) {
    std::uint64_t best = 0;
    for (std::uint32_t s = 0; s < p.storage.size(); ++s) {
      if (p.storage[s].kind != gexec::storage_kind::activation || p.storage[s].device.device_type != kDLCPU) continue;
      std::vector<std::pair<std::uint64_t, std::uint64_t>> held;
      for (std::uint32_t e = 0; e < n_entries; ++e)
        if (p.alias_root[e] == e && p.entry_slot[e] == s && first[e] <= c.node_id && c.node_id <= last[e])
          held.emplace_back(p.entry_offset[e], p.entry_offset[e] + std::max<std::uint64_t>(p.alias_group_bytes(g, e), 1));
      held.emplace_back(p.storage[s].bytes, p.storage[s].bytes);
      std::sort(held.begin(), held.end());
      std::uint64_t at = 0;
      for (const auto& [b, e] : held) {
        const std::uint64_t from = (at + 63) / 64 * 64;
        if (b > from) best = std::max(best, b - from);
        at = std::max(at, e);
      }
    }
    out.push_back(best);
  }
  return out;
}

/// Kernels that take `ws_floats` floats of host workspace, fill it with garbage, compute
/// through it, and note where it was and at which node.
struct workspace_use {
  void* data;
  std::uint64_t bytes;
  std::string node;
};
std::vector<workspace_use>& workspace_uses() {
  static std::vector<workspace_use> uses;
  return uses;
}
gexec::registry workspace_kernels() {
  gexec::registry r;
  auto through_workspace = [](gexec::packed_args a, float scale, float add) {
    const DLTensor &in = a.tensor(0), &out = a.tensor(1);
    const std::int64_t m = in.shape[0], o = out.shape[0];
    const auto bytes = static_cast<std::uint64_t>(std::max(m, o) * 4 * 2);
    auto* ws = static_cast<float*>(gexec::detail::backend_alloc_workspace(kDLCPU, 0, bytes, kDLFloat, 32));
    if (!ws) throw std::runtime_error("no workspace: " + gexec::detail::take_last_error());
    workspace_uses().push_back({ws, bytes, ""});
    std::fill(ws, ws + bytes / 4, -1.0e30f);
    for (std::int64_t i = 0; i < o; ++i) ws[i] = data_of(in)[i % m] * scale + add;
    for (std::int64_t i = 0; i < o; ++i) data_of(out)[i] = ws[i];
    if (gexec::detail::backend_free_workspace(kDLCPU, 0, ws) != 0) throw std::runtime_error("free failed");
  };
  r.add("ws_scale2", [=](gexec::packed_args a) { through_workspace(a, 2, 0); });
  r.add("ws_add1", [=](gexec::packed_args a) { through_workspace(a, 1, 1); });
  auto plain = [](gexec::packed_args a, float scale, float add) {
    const DLTensor &in = a.tensor(0), &out = a.tensor(1);
    for (std::int64_t i = 0; i < out.shape[0]; ++i) data_of(out)[i] = data_of(in)[i % in.shape[0]] * scale + add;
  };
  r.add("scale2", [=](gexec::packed_args a) { plain(a, 2, 0); });
  r.add("add1", [=](gexec::packed_args a) { plain(a, 1, 1); });
  return r;
}
}  // namespace

TEST_CASE("workspace gaps: per call, the largest run of host activation bytes no value alive then holds") {
  for (std::uint64_t seed : {11u, 12u, 13u, 14u}) {
    CAPTURE(seed);
    const gexec::validated_graph g = random_chain(seed, 40, 20);
    gexec::model_options o;
    o.donate_inputs = seed % 2 == 0;
    liveness_model live(g, no_op_kernels({"one", "two"}), o);
    gexec::basic_model<host, gexec::pool_allocator, gexec::registry, gexec::as_compiled> compiled(g, no_op_kernels({"one", "two"}), o);
    for (const gexec::plan* p : {&live.plan(), &compiled.plan()}) {
      const auto gaps = gexec::detail::make_workspace_gaps(g.compact(), *p);
      const auto expect = largest_free(g.compact(), *p);
      REQUIRE(gaps.size() == expect.size());
      std::size_t some = 0;
      for (std::size_t k = 0; k < gaps.size(); ++k) {
        CAPTURE(k);
        CHECK(gaps[k].bytes == expect[k]);
        CHECK(gaps[k].offset % 64 == 0);
        some += gaps[k].bytes > 0;
      }
      CHECK(some > 0);
    }
  }
}

TEST_CASE("workspace lent from the activations: only bytes no live value holds, only while steps run alone") {
  // x -> a (4n) -> b (n) -> b2 (n) -> c (4n) -> d (n); the arena holds 5n floats (a and b,
  // or b2 and c, alive at once), and b2, with b and b2 alone alive, asks 2n of the 3n free.
  gexec::graph_builder b;
  auto x = b.input("x", {n});
  auto a = b.op("a", "scale2", {x}, {{{4 * n}}});
  auto bb = b.op("b", "add1", {a}, {{{n}}});
  auto b2 = b.op("b2", "ws_add1", {bb}, {{{n}}});
  auto c = b.op("c", "scale2", {b2}, {{{4 * n}}});
  b.output(b.op("d", "add1", {c}, {{{n}}}));
  const gexec::validated_graph g = b.build();
  liveness_model m(g, workspace_kernels());
  const std::vector<float> x1 = test::iota(n, -2.0f, 0.75f);
  std::vector<float> expect;
  for (float v : x1) expect.push_back(((v * 2 + 1) + 1) * 2 + 1);

  auto ex = m.instantiate();
  const auto& entries = ex.get_instance_plan().entries;
  const gexec::compact_graph& cg = m.compact();
  REQUIRE(cg.name(3) == "b2");
  // The values alive at b2 (node 3): b (node 2) and b2 itself.
  auto bytes_of = [&](std::uint32_t nid) {
    const auto* lo = static_cast<const std::byte*>(entries[cg.entry_id(nid, 0)].data);
    return std::make_pair(lo, lo + m.plan().alias_group_bytes(cg, cg.entry_id(nid, 0)));
  };
  const auto* arena_lo = bytes_of(1).first;
  for (std::uint32_t nid = 2; nid < cg.num_nodes(); ++nid) arena_lo = std::min(arena_lo, bytes_of(nid).first);
  const auto* arena_hi = arena_lo + m.plan().storage[m.plan().entry_slot[cg.entry_id(1, 0)]].bytes;
  CHECK(arena_hi - arena_lo == 5 * n * 4);
  auto check_lent = [&](const workspace_use& u) {
    const auto* w = static_cast<const std::byte*>(u.data);
    CHECK(arena_lo <= w);
    CHECK(w + u.bytes <= arena_hi);
    for (std::uint32_t nid : {2u, 3u}) {
      const auto [lo, hi] = bytes_of(nid);
      CHECK((w + u.bytes <= lo || hi <= w));
    }
  };
  auto run_on_fresh_thread = [&](auto&& run) {  // its workspace arena starts empty
    std::uint64_t reserved = 0;
    std::thread t([&] {
      run();
      reserved = gexec::detail::workspace_arena::this_thread().reserved();
    });
    t.join();
    return reserved;
  };

  const std::uint64_t reserved = run_on_fresh_thread([&] {
    for (int run = 0; run < 2; ++run) {
      workspace_uses().clear();
      ex.set_input("x", tensor({n}, x1));
      ex.run();
      REQUIRE(workspace_uses().size() == 1);
      check_lent(workspace_uses()[0]);
      CHECK(values_of(ex.get_output(0)) == expect);
    }
  });
  CHECK(reserved == 0);  // the thread took nothing of its own

  // Steps that may run side by side borrow nothing.
  const std::uint64_t own = run_on_fresh_thread([&] {
    workspace_uses().clear();
    ex.set_input("x", tensor({n}, x1));
    ex.run(gexec::parallel_branches{});
    REQUIRE(workspace_uses().size() == 1);
    const auto* w = static_cast<const std::byte*>(workspace_uses()[0].data);
    CHECK((w + workspace_uses()[0].bytes <= arena_lo || arena_hi <= w));
    CHECK(values_of(ex.get_output(0)) == expect);
  });
  CHECK(own > 0);

  // The workspace limit holds for lent memory too: b2's 8n bytes, with the arena's 12n free.
  gexec::model_options limited;
  limited.max_workspace_bytes = 8 * n - 64;
  liveness_model lm(g, workspace_kernels(), limited);
  auto lex = lm.instantiate();
  lex.set_input("x", tensor({n}, x1));
  const gexec::error e = error_of([&] { lex.run(); });
  CHECK(e.code() == gexec::errc::kernel_failed);
  CHECK(std::string(e.what()).find("would exceed the limit of " + std::to_string(8 * n - 64) + " bytes") != std::string::npos);
}

TEST_CASE("planners and execution policies by name: one helper for tools and configurations") {
  CHECK(gexec::with_planner("as_compiled", [](auto p) { return std::is_same_v<decltype(p), gexec::as_compiled>; }));
  CHECK(gexec::with_planner("liveness", [](auto p) { return std::is_same_v<decltype(p), gexec::liveness>; }));
  CHECK(gexec::with_policy("sequential", [](auto p) { return std::is_same_v<decltype(p), gexec::sequential>; }));
  CHECK(gexec::with_policy("parallel", [](auto p) { return std::is_same_v<decltype(p), gexec::parallel_branches>; }));
  CHECK(gexec::is_planner_name("liveness"));
  CHECK_FALSE(gexec::is_planner_name("Liveness"));
  CHECK(gexec::is_policy_name("parallel"));
  CHECK_FALSE(gexec::is_policy_name("parallel_branches"));
  auto e = error_of([] { gexec::with_planner("greedy", [](auto) {}); });
  CHECK(e.code() == gexec::errc::invalid_argument);
  CHECK(contains(e, "planner \"greedy\" is not one gexec knows (as_compiled, liveness)"));
  e = error_of([] { gexec::with_policy("", [](auto) {}); });
  CHECK(contains(e, "execution policy \"\" is not one gexec knows (sequential, parallel)"));
  // The planner chosen by name plans the model: liveness takes less than the compiled plan here.
  const auto planned = [](std::string_view name) {
    return gexec::with_planner(name, [](auto p) {
      gexec::param_dict params;
      params.set("p", tensor({n}, test::iota(n)));
      return gexec::basic_model<host, gexec::pool_allocator, gexec::registry, decltype(p)>(branches_graph(false), kernels(), params).storage().planned;
    });
  };
  CHECK(planned("liveness") < planned("as_compiled"));
  // The same choice as a value of the model (model_options::planner): one model type.
  const auto planned_by_value = [](gexec::any_planner planner) {
    gexec::param_dict params;
    params.set("p", tensor({n}, test::iota(n)));
    gexec::model_options o;
    o.planner = std::move(planner);
    gexec::basic_model<host, gexec::pool_allocator, gexec::registry> m(branches_graph(false), kernels(), params, o);
    auto ex = m.instantiate();
    ex.set_input("x", tensor({n}, test::iota(n)));
    ex.run();
    const auto out = ex.get_output(0).values<float>();
    return std::pair(m.storage(), std::vector<float>(out.begin(), out.end()));
  };
  const auto [by_ids, out_ids] = planned_by_value({});
  const auto [by_name, out_name] = planned_by_value(gexec::planner_named("liveness"));
  const auto [by_type, out_type] = planned_by_value(gexec::liveness{});
  CHECK(by_ids.planned == planned("as_compiled"));
  CHECK(by_ids.planned == by_ids.as_compiled);
  CHECK(by_name.planned == planned("liveness"));
  CHECK(by_type.planned == by_name.planned);
  CHECK(by_name.as_compiled == by_ids.as_compiled);
  CHECK(out_name == out_ids);
  CHECK(out_type == out_ids);
  CHECK(gexec::planner_named("as_compiled").keeps_storage_ids());
  CHECK_FALSE(gexec::planner_named("liveness").keeps_storage_ids());
  CHECK_FALSE(static_cast<bool>(gexec::any_planner{}));
  CHECK(contains(error_of([] { (void)gexec::planner_named("greedy"); }), "planner \"greedy\" is not one gexec knows"));
}
