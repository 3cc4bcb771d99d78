/* The C API from C (C11): examples/mlp loaded four ways (its three files, from memory
 * with and without parameters, and a single-file library as TVM's export_library makes
 * one, tests/make_factory_library.cpp), run, and compared with the values gexec-run's
 * packaging test checks (softmax of the MLP for x = 0.5, -1, 2, 0.25, as numpy computes it);
 * then the errors: each code, and a message naming the problem. Uses the header and the
 * table only. */
#include <gexec/c_api.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
static const gexec_api* api;

#define CHECK(cond)                                                          \
  do {                                                                       \
    if (!(cond)) {                                                           \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                            \
    }                                                                        \
  } while (0)

/* A call that must succeed: prints the status and stops the test if it does not. */
#define OK(call)                                                                                          \
  do {                                                                                                    \
    gexec_status* s_ = (call);                                                                            \
    if (s_) {                                                                                             \
      fprintf(stderr, "%s:%d: %s failed: %d %s\n", __FILE__, __LINE__, #call, api->status_code(s_),      \
              api->status_message(s_));                                                                   \
      api->status_release(s_);                                                                            \
      exit(1);                                                                                            \
    }                                                                                                     \
  } while (0)

/* A call that must fail with `code` and a message containing `needle`. */
static void expect_error(gexec_status* s, int code, const char* needle, const char* what, int line) {
  if (!s) {
    fprintf(stderr, "line %d: %s succeeded, expected code %d\n", line, what, code);
    ++failures;
    return;
  }
  if (api->status_code(s) != code || !strstr(api->status_message(s), needle)) {
    fprintf(stderr, "line %d: %s: got code %d \"%s\", expected code %d and \"%s\"\n", line, what, api->status_code(s),
            api->status_message(s), code, needle);
    ++failures;
  } else {
    printf("  ok: %s -> %d %s\n", what, code, api->status_message(s));
  }
  api->status_release(s);
}
#define EXPECT_ERROR(call, code, needle) expect_error((call), (code), (needle), #call, __LINE__)

static char* read_file(const char* path, size_t* size) {
  FILE* f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char* data = malloc((size_t)n + 1);
  if (data && fread(data, 1, (size_t)n, f) != (size_t)n) {
    free(data);
    data = NULL;
  }
  fclose(f);
  if (data) {
    data[n] = 0;
    *size = (size_t)n;
  }
  return data;
}

static const float expected[3] = {0.400786f, 0.336452f, 0.262762f};

static DLTensor host_tensor(void* data, int64_t* shape, int ndim, uint8_t code, uint8_t bits) {
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.device.device_type = kDLCPU;
  t.ndim = ndim;
  t.dtype.code = code;
  t.dtype.bits = bits;
  t.dtype.lanes = 1;
  t.shape = shape;
  return t;
}

/* ---- DLPack 1.x: managed tensors made by the caller, counting their releases ---- */

static int released = 0;

typedef struct {
  gexec_dlpack_tensor t;
  int64_t shape[2];
  float data[16] __attribute__((aligned(64)));
} caller_tensor;

static void caller_deleter(gexec_dlpack_tensor* self) {
  ++released;
  free(self->manager_ctx);
}

/* x of the MLP as a managed tensor of DLPack `major`.1 with type `code`. */
static gexec_dlpack_tensor* managed_x(uint32_t major, uint8_t code) {
  caller_tensor* c = aligned_alloc(64, sizeof(caller_tensor));
  memset(c, 0, sizeof *c);
  c->t.version.major = major;
  c->t.version.minor = 1;
  c->t.manager_ctx = c;
  c->t.deleter = caller_deleter;
  c->shape[0] = 1, c->shape[1] = 4;
  c->data[0] = 0.5f, c->data[1] = -1.0f, c->data[2] = 2.0f, c->data[3] = 0.25f;
  c->t.dl_tensor = host_tensor(c->data, c->shape, 2, code, code == 6 ? 8 : 32);
  return &c->t;
}

static void dlpack_border(gexec_model* model) {
  printf("DLPack 1.x:\n");
  gexec_executor* ex = NULL;
  OK(api->executor_create(model, &ex));
  /* A copy: released before the call returns. */
  released = 0;
  OK(api->executor_set_input_dlpack(ex, 0, managed_x(1, kDLFloat), 0));
  CHECK(released == 1);
  OK(api->executor_run(ex));
  gexec_dlpack_tensor* view = NULL;
  gexec_dlpack_tensor* copy = NULL;
  OK(api->executor_get_output_dlpack(ex, 0, 0, &view));
  OK(api->executor_get_output_dlpack(ex, 0, 1, &copy));
  CHECK(view->version.major == 1 && view->flags == GEXEC_DLPACK_FLAG_READ_ONLY);
  CHECK(copy->version.major == 1 && copy->flags == GEXEC_DLPACK_FLAG_IS_COPIED);
  CHECK(view->dl_tensor.ndim == 2 && view->dl_tensor.shape[1] == 3 && view->dl_tensor.dtype.code == kDLFloat);
  CHECK(copy->dl_tensor.data != view->dl_tensor.data);
  /* Zero copy: held until the executor lets it go. */
  released = 0;
  OK(api->executor_set_input_dlpack(ex, 0, managed_x(1, kDLFloat), 1));
  CHECK(released == 0);
  OK(api->executor_run(ex));
  OK(api->executor_set_input_dlpack(ex, 0, managed_x(1, kDLFloat), 1)); /* the first one goes */
  CHECK(released == 1);
  /* Errors release the tensor too, and say what is wrong. */
  released = 0;
  EXPECT_ERROR(api->executor_set_input_dlpack(ex, 0, managed_x(2, kDLFloat), 0), GEXEC_ERRC_UNSUPPORTED, "DLPack 2.1");
  EXPECT_ERROR(api->executor_set_input_dlpack(ex, 0, managed_x(1, 7), 0), GEXEC_ERRC_UNSUPPORTED, "DLPack type code 7");
  /* DLPack's bool (code 6) enters as bool, never as TVM's float8 e4m3 (its code 6). */
  EXPECT_ERROR(api->executor_set_input_dlpack(ex, 0, managed_x(1, 6), 0), GEXEC_ERRC_DTYPE_MISMATCH, "bool");
  EXPECT_ERROR(api->executor_set_input_dlpack(NULL, 0, managed_x(1, kDLFloat), 0), GEXEC_ERRC_INVALID_ARGUMENT, "executor is NULL");
  gexec_dlpack_tensor* none = view;
  EXPECT_ERROR(api->executor_get_output_dlpack(ex, 3, 0, &none), GEXEC_ERRC_INVALID_ARGUMENT, "output index 3");
  CHECK(none == NULL);
  CHECK(released == 4);
  released = 0;
  OK(api->executor_release(ex)); /* and with it the zero-copy input */
  CHECK(released == 1);
  /* The view's memory outlives the executor; both hold the MLP's outputs. */
  const float* v = (const float*)view->dl_tensor.data;
  const float* c = (const float*)copy->dl_tensor.data;
  for (int i = 0; i < 3; ++i) {
    CHECK(fabsf(v[i] - expected[i]) < 2e-6f);
    CHECK(c[i] == v[i]);
  }
  view->deleter(view);
  copy->deleter(copy);
}

/* Runs the model once on x and checks both outputs paths (view and copy). */
static void run_and_check(gexec_model* model, int zero_copy) {
  gexec_executor* ex = NULL;
  OK(api->executor_create(model, &ex));
  int x_index = -1;
  OK(api->executor_input_index(ex, "x", &x_index));
  CHECK(x_index == 0);
  int64_t shape[2] = {1, 4};
  /* 64-byte aligned for zero copy */
  float* x = aligned_alloc(64, 64);
  x[0] = 0.5f, x[1] = -1.0f, x[2] = 2.0f, x[3] = 0.25f;
  DLTensor xt = host_tensor(x, shape, 2, kDLFloat, 32);
  if (zero_copy)
    OK(api->executor_set_input_zero_copy(ex, x_index, &xt));
  else
    OK(api->executor_set_input(ex, x_index, &xt));
  OK(api->executor_run(ex));

  const DLTensor* view = NULL;
  OK(api->executor_get_output(ex, 0, &view));
  CHECK(view->ndim == 2 && view->shape[0] == 1 && view->shape[1] == 3);
  CHECK(view->dtype.code == kDLFloat && view->dtype.bits == 32);
  float copied[3] = {0, 0, 0};
  OK(api->executor_copy_output(ex, 0, copied, sizeof copied));
  const float* v = (const float*)((const char*)view->data + view->byte_offset);
  for (int i = 0; i < 3; ++i) {
    CHECK(fabsf(v[i] - expected[i]) < 2e-6f);
    CHECK(copied[i] == v[i]);
  }
  printf("  output (%s): %f %f %f\n", zero_copy ? "zero copy" : "copy", v[0], v[1], v[2]);
  OK(api->executor_release(ex));
  free(x);
}

int main(void) {
  const gexec_api_base* base = gexec_get_api_base();
  CHECK(base != NULL);
  printf("gexec %s\n", base->get_version_string());
  CHECK(base->get_api(0) == NULL);
  CHECK(base->get_api(GEXEC_C_API_VERSION + 1) == NULL);
  CHECK(base->get_api(1) != NULL);
  api = base->get_api(GEXEC_C_API_VERSION);
  if (!api) return 1;

  const char* graph_path = GEXEC_SOURCE_DIR "/examples/mlp/graph.json";
  const char* params_path = GEXEC_SOURCE_DIR "/examples/mlp/params.bin";
  const char* lib_path = GEXEC_TEST_KERNELS;

  /* ---- the three files, with a runtime of its own ---- */
  gexec_runtime* rt = NULL;
  OK(api->runtime_create(2, &rt));
  gexec_model* model = NULL;
  OK(api->model_load_files(rt, graph_path, lib_path, params_path, &model));
  OK(api->runtime_release(rt)); /* the model keeps the runtime alive */

  gexec_executor* ex = NULL;
  OK(api->executor_create(model, &ex));
  int n_in = 0, n_out = 0;
  OK(api->executor_num_inputs(ex, &n_in));
  OK(api->executor_num_outputs(ex, &n_out));
  CHECK(n_in == 3 && n_out == 1);
  const char* name = NULL;
  OK(api->executor_input_name(ex, 1, &name));
  CHECK(strcmp(name, "w1") == 0);
  OK(api->executor_output_name(ex, 0, &name));
  int out_index = -2;
  OK(api->executor_output_index(ex, name, &out_index));
  CHECK(out_index == 0);
  OK(api->executor_input_index(ex, "nope", &out_index));
  CHECK(out_index == -1);
  DLDataType dtype;
  int ndim = 0;
  const int64_t* shape = NULL;
  OK(api->executor_input_info(ex, 1, &dtype, &ndim, &shape));
  CHECK(dtype.code == kDLFloat && dtype.bits == 32 && dtype.lanes == 1 && ndim == 2 && shape[0] == 8 && shape[1] == 4);
  OK(api->executor_output_info(ex, 0, &dtype, &ndim, &shape));
  CHECK(ndim == 2 && shape[0] == 1 && shape[1] == 3);
  uint64_t param_bytes = 0;
  OK(api->model_param_bytes(model, &param_bytes));
  CHECK(param_bytes == (8 * 4 + 3 * 8) * 4);

  run_and_check(model, 0);
  run_and_check(model, 1);

  /* ---- from memory, parameters loaded into an executor afterwards ---- */
  size_t graph_len = 0, params_len = 0;
  char* graph = read_file(graph_path, &graph_len);
  char* params = read_file(params_path, &params_len);
  CHECK(graph && params);
  gexec_model* bare = NULL;
  OK(api->model_load_memory(NULL, graph, graph_len, NULL, 0, lib_path, &bare));
  gexec_executor* ex2 = NULL;
  OK(api->executor_create(bare, &ex2));
  OK(api->model_release(bare)); /* the executor keeps the model alive */
  OK(api->executor_load_params(ex2, params, params_len));
  OK(api->executor_load_params_file(ex2, params_path));
  {
    int64_t xs[2] = {1, 4};
    float x[4] = {0.5f, -1.0f, 2.0f, 0.25f};
    DLTensor xt = host_tensor(x, xs, 2, kDLFloat, 32);
    OK(api->executor_set_input(ex2, 0, &xt));
    OK(api->executor_run(ex2));
    float y[3];
    OK(api->executor_copy_output(ex2, 0, y, sizeof y));
    for (int i = 0; i < 3; ++i) CHECK(fabsf(y[i] - expected[i]) < 2e-6f);
  }
  OK(api->executor_release(ex2));
  gexec_model* with_params = NULL;
  OK(api->model_load_memory(NULL, graph, graph_len, params, params_len, lib_path, &with_params));
  run_and_check(with_params, 0);
  OK(api->model_release(with_params));

  /* ---- a single-file library: the graph and parameters embedded beside the kernels ---- */
  printf("single-file library:\n");
  {
    gexec_runtime* own = NULL;
    OK(api->runtime_create(1, &own));
    gexec_model* single = NULL;
    OK(api->model_load_library(own, GEXEC_TEST_FACTORY, &single));
    OK(api->runtime_release(own)); /* the model keeps the runtime alive */
    uint64_t embedded_bytes = 0;
    OK(api->model_param_bytes(single, &embedded_bytes));
    CHECK(embedded_bytes == (8 * 4 + 3 * 8) * 4); /* w1 [8, 4] and w2 [3, 8], float32 */
    gexec_executor* sex = NULL;
    OK(api->executor_create(single, &sex));
    int n_single = 0;
    OK(api->executor_num_inputs(sex, &n_single));
    CHECK(n_single == 3);
    OK(api->executor_input_name(sex, 2, &name));
    CHECK(strcmp(name, "w2") == 0);
    OK(api->executor_release(sex));
    run_and_check(single, 0); /* the embedded parameters, nothing loaded */
    run_and_check(single, 1);
    OK(api->model_release(single));
    gexec_model* none = NULL;
    /* A kernel library with nothing embedded, and a library that is not there. */
    EXPECT_ERROR(api->model_load_library(NULL, lib_path, &none), GEXEC_ERRC_INVALID_MODULE, "__tvm_dev_mblob");
    CHECK(none == NULL);
    EXPECT_ERROR(api->model_load_library(NULL, "/nonexistent/model.so", &none), GEXEC_ERRC_IO, "/nonexistent/model.so");
    EXPECT_ERROR(api->model_load_library(NULL, NULL, &none), GEXEC_ERRC_INVALID_ARGUMENT, "library_path is NULL");
  }

  dlpack_border(model);

  /* ---- errors ---- */
  printf("errors:\n");
  gexec_model* bad = NULL;
  EXPECT_ERROR(api->model_load_memory(NULL, "{\"nodes\": [", 11, NULL, 0, lib_path, &bad), GEXEC_ERRC_INVALID_JSON, "");
  CHECK(bad == NULL);
  EXPECT_ERROR(api->model_load_memory(NULL, "{\"nodes\": 3}", 12, NULL, 0, lib_path, &bad), GEXEC_ERRC_INVALID_GRAPH, "nodes");
  EXPECT_ERROR(api->model_load_files(NULL, graph_path, "/nonexistent/libkernels.so", params_path, &bad), GEXEC_ERRC_IO,
               "/nonexistent/libkernels.so");
  EXPECT_ERROR(api->model_load_files(NULL, "/nonexistent/graph.json", lib_path, params_path, &bad), GEXEC_ERRC_IO,
               "/nonexistent/graph.json");
  EXPECT_ERROR(api->model_load_memory(NULL, graph, graph_len, "garbage", 7, lib_path, &bad), GEXEC_ERRC_INVALID_PARAMS, "");
  {
    int64_t good_shape[2] = {1, 4}, bad_shape[2] = {1, 5};
    int32_t ints[5] = {0};
    float floats[5] = {0};
    DLTensor wrong_dtype = host_tensor(ints, good_shape, 2, kDLInt, 32);
    DLTensor wrong_shape = host_tensor(floats, bad_shape, 2, kDLFloat, 32);
    EXPECT_ERROR(api->executor_set_input(ex, 0, &wrong_dtype), GEXEC_ERRC_DTYPE_MISMATCH, "\"x\"");
    EXPECT_ERROR(api->executor_set_input(ex, 0, &wrong_shape), GEXEC_ERRC_SHAPE_MISMATCH, "\"x\"");
    EXPECT_ERROR(api->executor_set_input(ex, 7, &wrong_shape), GEXEC_ERRC_INVALID_ARGUMENT, "input");
    EXPECT_ERROR(api->executor_set_input(ex, 0, NULL), GEXEC_ERRC_INVALID_ARGUMENT, "tensor is NULL");
    float small[2];
    EXPECT_ERROR(api->executor_copy_output(ex, 0, small, sizeof small), GEXEC_ERRC_INVALID_ARGUMENT, "too small");
    EXPECT_ERROR(api->executor_output_info(ex, 1, NULL, NULL, NULL), GEXEC_ERRC_INVALID_ARGUMENT, "output index 1");
  }
  /* An unset input: run refuses it, naming it. */
  EXPECT_ERROR(api->executor_run(ex), GEXEC_ERRC_INVALID_ARGUMENT, "\"x\"");
  EXPECT_ERROR(api->executor_run(NULL), GEXEC_ERRC_INVALID_ARGUMENT, "executor is NULL");
  OK(api->executor_release(ex));
  EXPECT_ERROR(api->executor_run(ex), GEXEC_ERRC_INVALID_ARGUMENT, "not a live handle");
  EXPECT_ERROR(api->executor_release(ex), GEXEC_ERRC_INVALID_ARGUMENT, "not a live handle");
  OK(api->model_release(model));
  EXPECT_ERROR(api->executor_create(model, &ex), GEXEC_ERRC_INVALID_ARGUMENT, "not a live handle");
  EXPECT_ERROR(api->model_release(model), GEXEC_ERRC_INVALID_ARGUMENT, "not a live handle");
  EXPECT_ERROR(api->runtime_release(rt), GEXEC_ERRC_INVALID_ARGUMENT, "not a live handle");
  EXPECT_ERROR(api->runtime_create(-1, &rt), GEXEC_ERRC_INVALID_ARGUMENT, "negative");
  CHECK(api->status_code(NULL) == 0 && strcmp(api->status_message(NULL), "") == 0);
  api->status_release(NULL);

  free(graph);
  free(params);
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("all checks passed\n");
  return 0;
}
