// The thread-safety contract, exercised: one model shared by many threads, each with
// its own executor; parallel loops of several executors on one pool at once; function
// registration while kernels call registered functions. Built and run under
// ThreadSanitizer by the test command (label tsan), as well as in the normal builds.

#include <gexec/executor.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr std::int64_t kN = 256;
constexpr int kInputs = 16;

// x -> 2x (parallel, with a barrier) -> reversed (workspace) -> times 3 * scale (a
// registered function the kernel looks up) -> + w (a parameter of the model).
gexec::validated_graph pipeline() {
  gexec::graph_builder b;
  auto x = b.input("x", {kN});
  auto w = b.input("w", {kN});
  auto d = b.op("dbl", "test_parallel_scale2", {x}, {{{kN}}});
  auto r = b.op("rev", "test_reverse_ws", {d}, {{{kN}}});
  auto e = b.op("env", "test_call_env", {r}, {{{kN}}});
  b.output(b.op("add", "test_add", {e, w}, {{{kN}}}));
  return b.build();
}

gexec::ndarray input(int k) {
  std::vector<float> v(kN);
  for (std::int64_t i = 0; i < kN; ++i) v[static_cast<std::size_t>(i)] = static_cast<float>(k * 1000 + i) * 0.25f;
  return gexec::ndarray::from_values<float>({kN}, std::span<const float>(v));
}

// A plain-loop computation of the pipeline, independent of gexec.
std::vector<float> expected(int k, const std::vector<float>& w, float scale) {
  std::vector<float> x(kN), y(kN);
  const gexec::ndarray x_in = input(k);
  auto in = x_in.values<float>();
  for (std::int64_t i = 0; i < kN; ++i) x[static_cast<std::size_t>(i)] = 2.0f * in[static_cast<std::size_t>(i)];
  for (std::int64_t i = 0; i < kN; ++i) {
    const float reversed = x[static_cast<std::size_t>(kN - 1 - i)];
    y[static_cast<std::size_t>(i)] = reversed * static_cast<float>(3.0 * scale) + w[static_cast<std::size_t>(i)];
  }
  return y;
}

void register_scale(gexec::runtime& rt, float scale) {
  rt.register_function("gexec.test.scale", [scale](gexec::packed_args a) {
    const DLTensor& in = a.tensor(0);
    DLTensor& out = a.tensor(1);
    const auto factor = static_cast<float>(a.float_value(2) * scale);
    for (std::int64_t i = 0; i < in.shape[0]; ++i) static_cast<float*>(out.data)[i] = static_cast<float*>(in.data)[i] * factor;
  });
}


/// The pipeline over the sample kernels with weights `w`, on runtime `rt` (which then
/// serves gexec.test.scale at 0.5).
gexec::model pipeline_model(const std::shared_ptr<gexec::runtime>& rt, const std::vector<float>& w) {
  register_scale(*rt, 0.5f);
  gexec::param_dict params;
  params.set("w", gexec::ndarray::from_values<float>({kN}, std::span<const float>(w)));
  gexec::model_options options;
  options.runtime = rt;
  return gexec::model(pipeline(), gexec::load_module(GEXEC_TEST_KERNELS), params, options);
}
}  // namespace

TEST_CASE("many threads, one model, an executor each: 100,000 runs bit-identical to a sequential run") {
  auto rt = gexec::runtime::create({.num_threads = 2});
  register_scale(*rt, 0.5f);
  std::vector<float> w(kN);
  for (std::int64_t i = 0; i < kN; ++i) w[static_cast<std::size_t>(i)] = static_cast<float>(i % 7) - 3.0f;
  gexec::param_dict params;
  params.set("w", gexec::ndarray::from_values<float>({kN}, std::span<const float>(w)));
  gexec::model_options options;
  options.runtime = rt;
  const gexec::model m(pipeline(), gexec::load_module(GEXEC_TEST_KERNELS), params, options);

  // The sequential reference, checked against plain loops.
  std::vector<std::vector<float>> reference(kInputs);
  {
    auto ex = m.instantiate();
    for (int k = 0; k < kInputs; ++k) {
      ex.set_input("x", input(k));
      ex.run();
      auto out = ex.get_output(0).values<float>();
      reference[static_cast<std::size_t>(k)].assign(out.begin(), out.end());
      const auto want = expected(k, w, 0.5f);
      REQUIRE(reference[static_cast<std::size_t>(k)] == want);
    }
  }

  constexpr int kThreads = 8;
  constexpr int kRuns = 100000;
  std::vector<gexec::ndarray> inputs;
  for (int k = 0; k < kInputs; ++k) inputs.push_back(input(k));
  std::atomic<int> mismatches{0}, failures{0}, runs{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      try {
        auto ex = m.instantiate();
        for (int i = 0; i < kRuns / kThreads; ++i) {
          const int k = (t + i) % kInputs;
          ex.set_input("x", inputs[static_cast<std::size_t>(k)]);
          ex.run();
          const auto& want = reference[static_cast<std::size_t>(k)];
          if (std::memcmp(ex.get_output(0).data(), want.data(), want.size() * sizeof(float)) != 0) ++mismatches;
          ++runs;
        }
      } catch (...) {
        ++failures;
      }
    });
  for (auto& th : threads) th.join();
  CHECK(failures == 0);
  CHECK(runs == kRuns);
  CHECK(mismatches == 0);
}

TEST_CASE("run_in_turn: threads taking turns on one executor wait instead of failing, and none starves") {
  auto rt = gexec::runtime::create({.num_threads = 2});
  const std::vector<float> w(kN, 1.0f);
  const gexec::model m = pipeline_model(rt, w);
  auto ex = m.instantiate();
  ex.set_input("x", input(3));
  const auto want = expected(3, w, 0.5f);

  // One thread runs in a tight loop until the others are done: each of them is still
  // served (a thread retrying on errc::busy could wait for ever).
  constexpr int kWaiters = 3, kRuns = 200;
  std::atomic<int> finished{0}, waiter_failures{0}, plain_refused{0}, plain_ran{0}, looper_runs{0};
  std::thread looper([&] {
    while (finished.load() < kWaiters) {
      ex.run_in_turn();
      ++looper_runs;
    }
  });
  std::vector<std::thread> waiters;
  for (int t = 0; t < kWaiters; ++t)
    waiters.emplace_back([&] {
      try {
        for (int i = 0; i < kRuns; ++i) ex.run_in_turn(gexec::sequential{});
      } catch (...) {
        ++waiter_failures;
      }
      ++finished;
    });
  // A caller that does not wait is refused while another thread is inside, as ever.
  std::thread plain([&] {
    while (finished.load() < kWaiters) {
      try {
        ex.run();
        ++plain_ran;
      } catch (const gexec::error& e) {
        if (e.code() == gexec::errc::busy) ++plain_refused;
        else throw;
      }
    }
  });
  for (auto& th : waiters) th.join();
  looper.join();
  plain.join();
  CHECK(waiter_failures == 0);
  CHECK(finished == kWaiters);
  CHECK(looper_runs > 0);
  MESSAGE("plain run(): " << plain_ran.load() << " ran, " << plain_refused.load() << " refused as busy");
  auto out = ex.get_output(0).values<float>();
  CHECK(std::vector<float>(out.begin(), out.end()) == want);
}

TEST_CASE("registering functions while kernels call registered functions") {
  auto rt = gexec::runtime::create({.num_threads = 2});
  register_scale(*rt, 1.0f);
  gexec::model_options options;
  options.runtime = rt;
  gexec::param_dict params;
  params.set("w", gexec::ndarray::from_values<float>({kN}, std::span<const float>(std::vector<float>(kN, 0.0f))));
  const gexec::model m(pipeline(), gexec::load_module(GEXEC_TEST_KERNELS), params, options);
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0};
  std::thread registrar([&] {
    for (int i = 0; i < 2000 && !stop; ++i) register_scale(*rt, (i % 2) ? 1.0f : 2.0f);
    for (int i = 0; i < 100; ++i) rt->register_function("gexec.test.other" + std::to_string(i), [](gexec::packed_args) {});
  });
  std::vector<std::thread> runners;
  for (int t = 0; t < 3; ++t)
    runners.emplace_back([&] {
      auto ex = m.instantiate();
      ex.set_input("x", input(1));
      for (int i = 0; i < 2000; ++i) {
        ex.run();
        // Every run sees one whole registration: scale 1 or 2, never a torn mix.
        const float got = ex.get_output(0).values<float>()[0];
        const float one = expected(1, std::vector<float>(kN, 0.0f), 1.0f)[0];
        if (got != one && got != 2.0f * one) ++wrong;
      }
    });
  for (auto& th : runners) th.join();
  stop = true;
  registrar.join();
  CHECK(wrong == 0);
}

TEST_CASE("the registry binding may be extended while models are built from it") {
  gexec::registry reg;
  reg.add("inc", [](gexec::packed_args a) {
    const DLTensor& in = a.tensor(0);
    DLTensor& out = a.tensor(1);
    static_cast<float*>(out.data)[0] = static_cast<float*>(in.data)[0] + 1;
  });
  gexec::graph_builder b;
  b.output(b.op("i", "inc", {b.input("x", {1})}, {{{1}}}));
  const auto g = b.build();
  std::thread adder([&] {
    for (int i = 0; i < 500; ++i) reg.add("k" + std::to_string(i), [](gexec::packed_args) {});
  });
  int ok = 0;
  for (int i = 0; i < 200; ++i) {
    auto ex = gexec::create(g, reg);
    ex.set_input("x", gexec::ndarray::from_values<float>({1}, {1.0f}));
    ex.run();
    ok += ex.get_output(0).values<float>()[0] == 2.0f;
  }
  adder.join();
  CHECK(ok == 200);
}

namespace {
/// An observer that calls back into the executor it observes, from the thread inside it.
template <class Executor>
struct reentering {
  Executor* ex;
  bool wait;  ///< run_in_turn (else run)
  std::string refused;
  void before(const gexec::step_event&) {
    try {
      if (wait) ex->run_in_turn();
      else ex->run();
    } catch (const gexec::error& e) {
      if (e.code() == gexec::errc::busy) refused = e.what();
    }
  }
  void after(const gexec::step_event&) {}
};
}  // namespace

TEST_CASE("calling back into the executor from the thread inside it is refused as busy, never a wait for itself") {
  auto rt = gexec::runtime::create({.num_threads = 1});
  const std::vector<float> w(kN, 1.0f);
  const gexec::model m = pipeline_model(rt, w);
  auto ex = m.instantiate();
  ex.set_input("x", input(3));
  for (const bool outer_waits : {false, true})
    for (const bool inner_waits : {false, true}) {
      CAPTURE(outer_waits);
      CAPTURE(inner_waits);
      reentering<decltype(ex)> o{&ex, inner_waits, {}};
      if (outer_waits) ex.run_in_turn(gexec::sequential{}, o);
      else ex.run(gexec::sequential{}, o);
      CHECK(o.refused.find("this thread is inside the executor already") != std::string::npos);
    }
  // The executor is free again afterwards, for this thread and for another.
  ex.run_in_turn();
  std::thread([&] { ex.run(); }).join();
  auto out = ex.get_output(0).values<float>();
  CHECK(std::vector<float>(out.begin(), out.end()) == expected(3, w, 0.5f));
}
