/* An old client: compiled against c_api_v1.h (the first version of the table, frozen),
 * never against the current header, and run against the current library, whose table
 * has grown since. It asks for version 1 and runs examples/mlp through it. */
#include "c_api_v1.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const gexec_api* api;

static int fail(gexec_status* s, const char* what) {
  fprintf(stderr, "%s failed: %d %s\n", what, api->status_code(s), api->status_message(s));
  api->status_release(s);
  return 1;
}
#define OK(call)                                   \
  do {                                             \
    gexec_status* s_ = (call);                     \
    if (s_) return fail(s_, #call);                \
  } while (0)

int main(void) {
  api = gexec_get_api_base()->get_api(GEXEC_C_API_VERSION);
  if (!api) {
    fprintf(stderr, "the library serves no version-1 table\n");
    return 1;
  }
  gexec_model* model = NULL;
  OK(api->model_load_files(NULL, GEXEC_SOURCE_DIR "/examples/mlp/graph.json", GEXEC_TEST_KERNELS,
                           GEXEC_SOURCE_DIR "/examples/mlp/params.bin", &model));
  gexec_executor* ex = NULL;
  OK(api->executor_create(model, &ex));
  int64_t shape[2] = {1, 4};
  float x[4] = {0.5f, -1.0f, 2.0f, 0.25f}, y[3] = {0, 0, 0};
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = x;
  t.device.device_type = kDLCPU;
  t.ndim = 2;
  t.dtype.code = kDLFloat;
  t.dtype.bits = 32;
  t.dtype.lanes = 1;
  t.shape = shape;
  OK(api->executor_set_input(ex, 0, &t));
  OK(api->executor_run(ex));
  OK(api->executor_copy_output(ex, 0, y, sizeof y));
  const float expected[3] = {0.400786f, 0.336452f, 0.262762f};
  for (int i = 0; i < 3; ++i)
    if (fabsf(y[i] - expected[i]) > 2e-6f) {
      fprintf(stderr, "output %d is %f, expected %f\n", i, y[i], expected[i]);
      return 1;
    }
  gexec_status* s = api->executor_copy_output(ex, 0, y, 4);
  if (!s || api->status_code(s) != GEXEC_ERRC_INVALID_ARGUMENT) {
    fprintf(stderr, "a small buffer was not refused\n");
    return 1;
  }
  api->status_release(s);
  OK(api->executor_release(ex));
  OK(api->model_release(model));
  printf("version-1 client on gexec %s: %f %f %f\n", gexec_get_api_base()->get_version_string(), y[0], y[1], y[2]);
  return 0;
}
