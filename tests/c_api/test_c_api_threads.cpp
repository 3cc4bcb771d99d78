// Many executors of one model on 4 threads, through the C API only (label tsan): each
// thread makes its own executors from the shared model and checks its results.
#include <gexec/c_api.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <thread>
#include <vector>

namespace {

const gexec_api* api = nullptr;
std::atomic<int> failures{0};

bool ok(gexec_status* s, const char* what) {
  if (!s) return true;
  std::fprintf(stderr, "%s failed: %d %s\n", what, api->status_code(s), api->status_message(s));
  api->status_release(s);
  ++failures;
  return false;
}

void worker(const gexec_model* model, int seed) {
  for (int round = 0; round < 8; ++round) {
    gexec_executor* ex = nullptr;
    if (!ok(api->executor_create(model, &ex), "executor_create")) return;
    std::int64_t shape[2] = {1, 4};
    for (int i = 0; i < 25; ++i) {
      const float scale = 1.0f + static_cast<float>((seed + i) % 3);  // scaled inputs: different results per thread
      float x[4] = {0.5f * scale, -1.0f * scale, 2.0f * scale, 0.25f * scale}, y[3] = {};
      DLTensor t{};
      t.data = x;
      t.device = {kDLCPU, 0};
      t.ndim = 2;
      t.dtype = {kDLFloat, 32, 1};
      t.shape = shape;
      if (!ok(api->executor_set_input(ex, 0, &t), "set_input") || !ok(api->executor_run(ex), "run") ||
          !ok(api->executor_copy_output(ex, 0, y, sizeof y), "copy_output"))
        break;
      const float sum = y[0] + y[1] + y[2];
      if (std::fabs(sum - 1.0f) > 1e-5f || (scale == 1.0f && std::fabs(y[0] - 0.400786f) > 2e-6f)) {
        std::fprintf(stderr, "thread %d: wrong output %f %f %f\n", seed, y[0], y[1], y[2]);
        ++failures;
      }
    }
    ok(api->executor_release(ex), "executor_release");
  }
}

}  // namespace

int main() {
  api = gexec_get_api_base()->get_api(GEXEC_C_API_VERSION);
  if (!api) return 1;
  gexec_runtime* rt = nullptr;
  gexec_model* model = nullptr;
  if (!ok(api->runtime_create(2, &rt), "runtime_create") ||
      !ok(api->model_load_files(rt, GEXEC_SOURCE_DIR "/examples/mlp/graph.json", GEXEC_TEST_KERNELS,
                                GEXEC_SOURCE_DIR "/examples/mlp/params.bin", &model),
          "model_load_files"))
    return 1;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back(worker, model, t);
  for (auto& t : threads) t.join();
  ok(api->model_release(model), "model_release");
  ok(api->runtime_release(rt), "runtime_release");
  std::printf("4 threads x 8 executors x 25 runs: %d failure(s)\n", failures.load());
  return failures == 0 ? 0 : 1;
}
