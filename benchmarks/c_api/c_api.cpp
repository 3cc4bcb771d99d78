// The C API's cost per run(): examples/mlp (three nodes, the sample kernels) run through
// gexec_api::executor_run and through the C++ executor's run(), in the same process, on
// executors of one model, measured in turn (best of many repeats each).
//
//   gexec_bench_c_api [repeats]
//
// Links gexec_c_static, so both paths run the same copy of gexec. Prints ns per run for
// both and the difference (the C API's goal: within 20 ns of the C++ call).

#include <gexec/c_api.h>
#include <gexec/executor.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace {

const gexec_api* api = nullptr;

void check(gexec_status* s, const char* what) {
  if (!s) return;
  std::fprintf(stderr, "gexec_bench_c_api: %s: %s\n", what, api->status_message(s));
  std::exit(1);
}

/// Seconds per call of f, the best of `repeats` batches of `number` calls.
template <class F>
double best_ns(F&& f, int repeats, int number) {
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < number; ++i) f();
    const std::chrono::duration<double, std::nano> took = std::chrono::steady_clock::now() - start;
    best = std::min(best, took.count() / number);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 200;
  const int number = 2000;
  api = gexec_get_api_base()->get_api(GEXEC_C_API_VERSION);
  const char* graph = GEXEC_SOURCE_DIR "/examples/mlp/graph.json";
  const char* params = GEXEC_SOURCE_DIR "/examples/mlp/params.bin";

  gexec_model* cm = nullptr;
  gexec_executor* cex = nullptr;
  check(api->model_load_files(nullptr, graph, GEXEC_TEST_KERNELS, params, &cm), "model_load_files");
  check(api->executor_create(cm, &cex), "executor_create");
  auto m = gexec::model::load(graph, GEXEC_TEST_KERNELS, params);
  auto ex = m.instantiate();

  std::int64_t shape[2] = {1, 4};
  float x[4] = {0.5f, -1.0f, 2.0f, 0.25f};
  DLTensor t{};
  t.data = x;
  t.device = {kDLCPU, 0};
  t.ndim = 2;
  t.dtype = {kDLFloat, 32, 1};
  t.shape = shape;
  check(api->executor_set_input(cex, 0, &t), "set_input");
  ex.set_input(0, gexec::ndarray::view(t, nullptr));

  // Warm both, then measure in turn so that drift of the machine falls on both.
  for (int i = 0; i < 10000; ++i) {
    check(api->executor_run(cex), "run");
    ex.run();
  }
  double c_ns = 1e30, cpp_ns = 1e30;
  for (int round = 0; round < 5; ++round) {
    c_ns = std::min(c_ns, best_ns([&] { check(api->executor_run(cex), "run"); }, repeats / 5 + 1, number));
    cpp_ns = std::min(cpp_ns, best_ns([&] { ex.run(); }, repeats / 5 + 1, number));
  }
  std::printf("run() of examples/mlp (3 nodes), best ns per run over %d x %d runs each\n", repeats, number);
  std::printf("  C++ executor.run():   %8.1f ns\n", cpp_ns);
  std::printf("  C API executor_run:   %8.1f ns\n", c_ns);
  std::printf("  difference:           %+8.1f ns (goal: within 20 ns)\n", c_ns - cpp_ns);
  check(api->executor_release(cex), "executor_release");
  check(api->model_release(cm), "model_release");
  return 0;
}
