/* JNI glue of gexec's Java binding (package org.gexec, class Native): each native method
 * calls one function of gexec's C table (<gexec/c_api.h>) and turns a failing status into
 * a GexecException(code, message). Handles cross as jlong; the Java classes never pass a
 * closed (0) handle. Links libgexec_c only; C11. */
#include <gexec/c_api.h>
#include <jni.h>

#include <stdint.h>
#include <string.h>

#include "org_gexec_Native.h"

static const gexec_api* api;
static jclass exception_class;      /* org/gexec/GexecException */
static jmethodID exception_init;    /* (ILjava/lang/String;)V */
static jclass string_class;         /* java/lang/String */
static jmethodID string_from_bytes; /* (([BLjava/lang/String;)V */

JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM* vm, void* reserved) {
  (void)reserved;
  JNIEnv* env = NULL;
  if ((*vm)->GetEnv(vm, (void**)&env, JNI_VERSION_1_8) != JNI_OK) return JNI_ERR;
  api = gexec_get_api_base()->get_api(GEXEC_C_API_VERSION);
  if (!api) return JNI_ERR; /* libgexec_c is older than the header the glue was built with */
  jclass c = (*env)->FindClass(env, "org/gexec/GexecException");
  if (!c) return JNI_ERR;
  exception_class = (*env)->NewGlobalRef(env, c);
  exception_init = (*env)->GetMethodID(env, c, "<init>", "(ILjava/lang/String;)V");
  jclass s = (*env)->FindClass(env, "java/lang/String");
  if (!s || !exception_init) return JNI_ERR;
  string_class = (*env)->NewGlobalRef(env, s);
  string_from_bytes = (*env)->GetMethodID(env, s, "<init>", "([BLjava/lang/String;)V");
  if (!exception_class || !string_class || !string_from_bytes) return JNI_ERR;
  return JNI_VERSION_1_8;
}

/* A Java string of UTF-8 text (NewStringUTF takes modified UTF-8: used for ASCII only). */
static jstring to_jstring(JNIEnv* env, const char* s) {
  size_t n = strlen(s);
  int ascii = 1;
  for (size_t i = 0; i < n; ++i)
    if ((unsigned char)s[i] >= 0x80) ascii = 0;
  if (ascii) return (*env)->NewStringUTF(env, s);
  jbyteArray bytes = (*env)->NewByteArray(env, (jsize)n);
  if (!bytes) return NULL;
  (*env)->SetByteArrayRegion(env, bytes, 0, (jsize)n, (const jbyte*)s);
  jstring charset = (*env)->NewStringUTF(env, "UTF-8");
  if (!charset) return NULL;
  return (jstring)(*env)->NewObject(env, string_class, string_from_bytes, bytes, charset);
}

static void throw_gexec(JNIEnv* env, int code, const char* message) {
  jstring msg = to_jstring(env, message);
  if (!msg) return; /* an OutOfMemoryError is pending */
  jobject e = (*env)->NewObject(env, exception_class, exception_init, (jint)code, msg);
  if (e) (*env)->Throw(env, (jthrowable)e);
}

/* Releases a status; throws GexecException when it is not NULL. Returns 1 on failure. */
static int failed(JNIEnv* env, gexec_status* s) {
  if (!s) return 0;
  throw_gexec(env, api->status_code(s), api->status_message(s));
  api->status_release(s);
  return 1;
}

static void throw_java(JNIEnv* env, const char* cls, const char* message) {
  jclass c = (*env)->FindClass(env, cls);
  if (c) (*env)->ThrowNew(env, c, message);
}

#define RUNTIME(h) ((gexec_runtime*)(intptr_t)(h))
#define MODEL(h) ((gexec_model*)(intptr_t)(h))
#define EXECUTOR(h) ((gexec_executor*)(intptr_t)(h))

/* A NUL-terminated byte[] (Native.cstr) pinned as const char*; NULL for a null array. */
typedef struct {
  jbyteArray array;
  jbyte* bytes;
} cstr;

static int cstr_get(JNIEnv* env, jbyteArray a, cstr* out) {
  out->array = a;
  out->bytes = NULL;
  if (!a) return 1;
  out->bytes = (*env)->GetByteArrayElements(env, a, NULL);
  return out->bytes != NULL;
}

static void cstr_release(JNIEnv* env, cstr* c) {
  if (c->bytes) (*env)->ReleaseByteArrayElements(env, c->array, c->bytes, JNI_ABORT);
}

static DLDataType unpack_dtype(jint packed) {
  DLDataType t;
  t.code = (uint8_t)(packed & 0xff);
  t.bits = (uint8_t)((packed >> 8) & 0xff);
  t.lanes = (uint16_t)((unsigned)packed >> 16);
  return t;
}

/* ---- version ---- */

JNIEXPORT jstring JNICALL Java_org_gexec_Native_versionString(JNIEnv* env, jclass cls) {
  (void)cls;
  return to_jstring(env, gexec_get_api_base()->get_version_string());
}

JNIEXPORT jint JNICALL Java_org_gexec_Native_apiVersion(JNIEnv* env, jclass cls) {
  (void)env, (void)cls;
  return GEXEC_C_API_VERSION;
}

/* ---- runtime ---- */

JNIEXPORT jlong JNICALL Java_org_gexec_Native_runtimeCreate(JNIEnv* env, jclass cls, jint num_threads) {
  (void)cls;
  gexec_runtime* rt = NULL;
  if (failed(env, api->runtime_create(num_threads, &rt))) return 0;
  return (jlong)(intptr_t)rt;
}

JNIEXPORT void JNICALL Java_org_gexec_Native_runtimeRelease(JNIEnv* env, jclass cls, jlong rt) {
  (void)cls;
  failed(env, api->runtime_release(RUNTIME(rt)));
}

/* ---- model ---- */

JNIEXPORT jlong JNICALL Java_org_gexec_Native_modelLoadFiles(JNIEnv* env, jclass cls, jlong rt, jbyteArray graph,
                                                             jbyteArray library, jbyteArray params) {
  (void)cls;
  cstr g = {0}, l = {0}, p = {0};
  gexec_model* model = NULL;
  if (cstr_get(env, graph, &g) && cstr_get(env, library, &l) && cstr_get(env, params, &p))
    failed(env, api->model_load_files(RUNTIME(rt), (const char*)g.bytes, (const char*)l.bytes, (const char*)p.bytes,
                                      &model));
  cstr_release(env, &p);
  cstr_release(env, &l);
  cstr_release(env, &g);
  return (jlong)(intptr_t)model;
}

JNIEXPORT jlong JNICALL Java_org_gexec_Native_modelLoadLibrary(JNIEnv* env, jclass cls, jlong rt, jbyteArray library) {
  (void)cls;
  cstr l;
  gexec_model* model = NULL;
  if (!cstr_get(env, library, &l)) return 0;
  failed(env, api->model_load_library(RUNTIME(rt), (const char*)l.bytes, &model));
  cstr_release(env, &l);
  return (jlong)(intptr_t)model;
}

JNIEXPORT jlong JNICALL Java_org_gexec_Native_modelLoadMemory(JNIEnv* env, jclass cls, jlong rt, jbyteArray graph,
                                                              jbyteArray params, jbyteArray library) {
  (void)cls;
  cstr g = {0}, p = {0}, l = {0};
  gexec_model* model = NULL;
  if (cstr_get(env, graph, &g) && cstr_get(env, params, &p) && cstr_get(env, library, &l)) {
    size_t graph_len = (size_t)(*env)->GetArrayLength(env, graph);
    size_t params_len = params ? (size_t)(*env)->GetArrayLength(env, params) : 0;
    failed(env, api->model_load_memory(RUNTIME(rt), (const char*)g.bytes, graph_len, p.bytes, params_len,
                                       (const char*)l.bytes, &model));
  }
  cstr_release(env, &l);
  cstr_release(env, &p);
  cstr_release(env, &g);
  return (jlong)(intptr_t)model;
}

JNIEXPORT void JNICALL Java_org_gexec_Native_modelRelease(JNIEnv* env, jclass cls, jlong model) {
  (void)cls;
  failed(env, api->model_release(MODEL(model)));
}

JNIEXPORT jlong JNICALL Java_org_gexec_Native_modelParamBytes(JNIEnv* env, jclass cls, jlong model) {
  (void)cls;
  uint64_t n = 0;
  failed(env, api->model_param_bytes(MODEL(model), &n));
  return (jlong)n;
}

/* ---- executor ---- */

JNIEXPORT jlong JNICALL Java_org_gexec_Native_executorCreate(JNIEnv* env, jclass cls, jlong model) {
  (void)cls;
  gexec_executor* ex = NULL;
  if (failed(env, api->executor_create(MODEL(model), &ex))) return 0;
  return (jlong)(intptr_t)ex;
}

JNIEXPORT void JNICALL Java_org_gexec_Native_executorRelease(JNIEnv* env, jclass cls, jlong ex) {
  (void)cls;
  failed(env, api->executor_release(EXECUTOR(ex)));
}

JNIEXPORT jint JNICALL Java_org_gexec_Native_ioCount(JNIEnv* env, jclass cls, jlong ex, jboolean output) {
  (void)cls;
  int n = 0;
  failed(env, output ? api->executor_num_outputs(EXECUTOR(ex), &n) : api->executor_num_inputs(EXECUTOR(ex), &n));
  return n;
}

JNIEXPORT jstring JNICALL Java_org_gexec_Native_ioName(JNIEnv* env, jclass cls, jlong ex, jboolean output, jint index) {
  (void)cls;
  const char* name = NULL;
  if (failed(env, output ? api->executor_output_name(EXECUTOR(ex), index, &name)
                         : api->executor_input_name(EXECUTOR(ex), index, &name)))
    return NULL;
  return to_jstring(env, name);
}

JNIEXPORT jint JNICALL Java_org_gexec_Native_ioIndex(JNIEnv* env, jclass cls, jlong ex, jboolean output,
                                                     jbyteArray name) {
  (void)cls;
  cstr n;
  int index = -1;
  if (!name) {
    throw_java(env, "java/lang/NullPointerException", "name");
    return -1;
  }
  if (!cstr_get(env, name, &n)) return -1;
  failed(env, output ? api->executor_output_index(EXECUTOR(ex), (const char*)n.bytes, &index)
                     : api->executor_input_index(EXECUTOR(ex), (const char*)n.bytes, &index));
  cstr_release(env, &n);
  return index;
}

JNIEXPORT jint JNICALL Java_org_gexec_Native_ioDType(JNIEnv* env, jclass cls, jlong ex, jboolean output, jint index) {
  (void)cls;
  DLDataType t = {0, 0, 0};
  if (failed(env, output ? api->executor_output_info(EXECUTOR(ex), index, &t, NULL, NULL)
                         : api->executor_input_info(EXECUTOR(ex), index, &t, NULL, NULL)))
    return 0;
  return (jint)t.code | ((jint)t.bits << 8) | ((jint)t.lanes << 16);
}

JNIEXPORT jlongArray JNICALL Java_org_gexec_Native_ioShape(JNIEnv* env, jclass cls, jlong ex, jboolean output,
                                                           jint index) {
  (void)cls;
  int ndim = 0;
  const int64_t* shape = NULL;
  if (failed(env, output ? api->executor_output_info(EXECUTOR(ex), index, NULL, &ndim, &shape)
                         : api->executor_input_info(EXECUTOR(ex), index, NULL, &ndim, &shape)))
    return NULL;
  jlongArray r = (*env)->NewLongArray(env, ndim);
  if (r && ndim > 0) {
    jlong tmp[32];
    if (ndim <= 32) {
      for (int i = 0; i < ndim; ++i) tmp[i] = (jlong)shape[i];
      (*env)->SetLongArrayRegion(env, r, 0, ndim, tmp);
    } else {
      for (int i = 0; i < ndim; ++i) {
        jlong d = (jlong)shape[i];
        (*env)->SetLongArrayRegion(env, r, i, 1, &d);
      }
    }
  }
  return r;
}

/* Copies shape (a long[]) into dims (at most 32 dimensions). Returns ndim, or -1 with an
 * exception pending. */
static int get_shape(JNIEnv* env, jlongArray shape, int64_t dims[32]) {
  jsize ndim = (*env)->GetArrayLength(env, shape);
  if (ndim > 32) {
    throw_gexec(env, GEXEC_ERRC_INVALID_ARGUMENT, "a shape of more than 32 dimensions");
    return -1;
  }
  jlong tmp[32];
  (*env)->GetLongArrayRegion(env, shape, 0, ndim, tmp);
  for (jsize i = 0; i < ndim; ++i) dims[i] = (int64_t)tmp[i];
  return (int)ndim;
}

static DLTensor host_tensor(void* data, int64_t* shape, int ndim, jint dtype) {
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.device.device_type = kDLCPU;
  t.ndim = ndim;
  t.dtype = unpack_dtype(dtype);
  t.shape = shape;
  return t;
}

JNIEXPORT void JNICALL Java_org_gexec_Native_setInputArray(JNIEnv* env, jclass cls, jlong ex, jint index, jobject array,
                                                           jint dtype, jlongArray shape) {
  (void)cls;
  int64_t dims[32];
  int ndim = get_shape(env, shape, dims);
  if (ndim < 0) return;
  /* The copy is a memcpy inside gexec: short enough for a critical section. */
  void* data = (*env)->GetPrimitiveArrayCritical(env, (jarray)array, NULL);
  if (!data) return;
  DLTensor t = host_tensor(data, dims, ndim, dtype);
  gexec_status* s = api->executor_set_input(EXECUTOR(ex), index, &t);
  (*env)->ReleasePrimitiveArrayCritical(env, (jarray)array, data, JNI_ABORT);
  failed(env, s);
}

JNIEXPORT void JNICALL Java_org_gexec_Native_setInputBuffer(JNIEnv* env, jclass cls, jlong ex, jint index,
                                                            jobject buffer, jlong offset, jint dtype, jlongArray shape,
                                                            jboolean zero_copy) {
  (void)cls;
  char* base = (char*)(*env)->GetDirectBufferAddress(env, buffer);
  if (!base) {
    throw_java(env, "java/lang/IllegalArgumentException", "not a direct buffer");
    return;
  }
  int64_t dims[32];
  int ndim = get_shape(env, shape, dims);
  if (ndim < 0) return;
  DLTensor t = host_tensor(base + offset, dims, ndim, dtype);
  failed(env, zero_copy ? api->executor_set_input_zero_copy(EXECUTOR(ex), index, &t)
                        : api->executor_set_input(EXECUTOR(ex), index, &t));
}

JNIEXPORT void JNICALL Java_org_gexec_Native_run(JNIEnv* env, jclass cls, jlong ex) {
  (void)cls;
  failed(env, api->executor_run(EXECUTOR(ex)));
}

JNIEXPORT void JNICALL Java_org_gexec_Native_copyOutputArray(JNIEnv* env, jclass cls, jlong ex, jint index,
                                                             jobject array, jlong bytes) {
  (void)cls;
  void* data = (*env)->GetPrimitiveArrayCritical(env, (jarray)array, NULL);
  if (!data) return;
  gexec_status* s = api->executor_copy_output(EXECUTOR(ex), index, data, (size_t)bytes);
  (*env)->ReleasePrimitiveArrayCritical(env, (jarray)array, data, 0);
  failed(env, s);
}

JNIEXPORT void JNICALL Java_org_gexec_Native_copyOutputBuffer(JNIEnv* env, jclass cls, jlong ex, jint index,
                                                              jobject buffer, jlong offset, jlong bytes) {
  (void)cls;
  char* base = (char*)(*env)->GetDirectBufferAddress(env, buffer);
  if (!base) {
    throw_java(env, "java/lang/IllegalArgumentException", "not a direct buffer");
    return;
  }
  failed(env, api->executor_copy_output(EXECUTOR(ex), index, base + offset, (size_t)bytes));
}

JNIEXPORT jobject JNICALL Java_org_gexec_Native_outputView(JNIEnv* env, jclass cls, jlong ex, jint index) {
  (void)cls;
  const DLTensor* t = NULL;
  if (failed(env, api->executor_get_output(EXECUTOR(ex), index, &t))) return NULL;
  int64_t n = 1;
  for (int i = 0; i < t->ndim; ++i) n *= t->shape[i];
  int64_t bytes = n * (((int64_t)t->dtype.bits * t->dtype.lanes + 7) / 8);
  return (*env)->NewDirectByteBuffer(env, (char*)t->data + t->byte_offset, (jlong)bytes);
}

JNIEXPORT void JNICALL Java_org_gexec_Native_loadParams(JNIEnv* env, jclass cls, jlong ex, jbyteArray bytes) {
  (void)cls;
  if (!bytes) {
    throw_java(env, "java/lang/NullPointerException", "bytes");
    return;
  }
  jsize n = (*env)->GetArrayLength(env, bytes);
  jbyte* data = (*env)->GetByteArrayElements(env, bytes, NULL);
  if (!data) return;
  gexec_status* s = api->executor_load_params(EXECUTOR(ex), data, (size_t)n);
  (*env)->ReleaseByteArrayElements(env, bytes, data, JNI_ABORT);
  failed(env, s);
}

JNIEXPORT void JNICALL Java_org_gexec_Native_loadParamsFile(JNIEnv* env, jclass cls, jlong ex, jbyteArray path) {
  (void)cls;
  cstr p;
  if (!path) {
    throw_java(env, "java/lang/NullPointerException", "path");
    return;
  }
  if (!cstr_get(env, path, &p)) return;
  failed(env, api->executor_load_params_file(EXECUTOR(ex), (const char*)p.bytes));
  cstr_release(env, &p);
}
