/* Runs examples/mlp through the C API: main <graph.json> <kernel library> <params.bin>.
 * Prints the softmax for x = 0.5, -1, 2, 0.25 to six digits. */
#include <gexec/c_api.h>

#include <stdio.h>

static const gexec_api* api;

static int failed(gexec_status* s, const char* what) {
  if (!s) return 0;
  fprintf(stderr, "%s: error %d: %s\n", what, api->status_code(s), api->status_message(s));
  api->status_release(s);
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s <graph.json> <kernel library> <params.bin>\n", argv[0]);
    return 2;
  }
  api = gexec_get_api_base()->get_api(GEXEC_C_API_VERSION);
  if (!api) {
    fprintf(stderr, "the library is older than <gexec/c_api.h>\n");
    return 1;
  }
  gexec_model* model = NULL;
  gexec_executor* ex = NULL;
  if (failed(api->model_load_files(NULL, argv[1], argv[2], argv[3], &model), "model_load_files")) return 1;
  if (failed(api->executor_create(model, &ex), "executor_create")) return 1;
  float x[4] = {0.5f, -1.0f, 2.0f, 0.25f};
  int64_t shape[2] = {1, 4};
  DLTensor t = {0};
  t.data = x;
  t.device.device_type = kDLCPU;
  t.ndim = 2;
  t.dtype.code = kDLFloat;
  t.dtype.bits = 32;
  t.dtype.lanes = 1;
  t.shape = shape;
  float y[3];
  if (failed(api->executor_set_input(ex, 0, &t), "executor_set_input") || failed(api->executor_run(ex), "executor_run") ||
      failed(api->executor_copy_output(ex, 0, y, sizeof y), "executor_copy_output"))
    return 1;
  printf("c consumer ok: y = %f %f %f\n", y[0], y[1], y[2]);
  if (failed(api->executor_release(ex), "executor_release") || failed(api->model_release(model), "model_release")) return 1;
  return 0;
}
