/* gexec's C API: TVM graph-executor models from C and from every language that binds C.
 *
 * One symbol is exported, gexec_get_api_base(). It returns a base from which a client
 * asks for the function table of the version it was compiled against:
 *
 *   const gexec_api* api = gexec_get_api_base()->get_api(GEXEC_C_API_VERSION);
 *   if (!api) ... the library is older than this header ...
 *
 * Versioning rule (never to be broken): a version's table is the previous version's
 * table with functions appended at its end. Nothing is ever removed, reordered or
 * changed in meaning or signature, so a client built against version N reads only the
 * first N versions' members, and any library of version >= N serves it. get_api(v)
 * returns NULL for v == 0 and for v newer than the library.
 *
 * Errors: every function of the table but the status accessors returns a gexec_status*:
 * NULL on success, else a status the caller owns and frees with status_release. Its
 * code is one of gexec_errc (gexec::errc's values) and its message names what failed.
 * No C++ exception crosses this border. A NULL handle, or one already released, is
 * refused with GEXEC_ERRC_INVALID_ARGUMENT (released handles are recognised until their
 * memory is reused by a handle of the same kind created later).
 *
 * Ownership: every handle made by a *_create or model_* loader is released by its
 * *_release. Strings and shapes returned are owned by the library (see each function).
 *
 * Thread safety: runtimes and models may be used from any number of threads at once;
 * an executor by one thread at a time (a second thread inside it is GEXEC_ERRC_BUSY
 * where gexec detects it). Make one executor per thread from one shared model.
 *
 * Compiles as C99 and as C++; see docs/c.md. */
#ifndef GEXEC_C_API_H_
#define GEXEC_C_API_H_

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define GEXEC_C_EXPORT __declspec(dllexport)
#else
#define GEXEC_C_EXPORT __attribute__((visibility("default")))
#endif

/** The version of the table this header describes. */
#define GEXEC_C_API_VERSION 3

/** gexec::errc's values, and one for failures that are not gexec's own. */
typedef enum gexec_errc {
  GEXEC_ERRC_INVALID_JSON = 1,
  GEXEC_ERRC_INVALID_GRAPH = 2,
  GEXEC_ERRC_INVALID_DTYPE = 3,
  GEXEC_ERRC_INVALID_PARAMS = 4,
  GEXEC_ERRC_INVALID_MODULE = 5,
  GEXEC_ERRC_INVALID_ARGUMENT = 6,
  GEXEC_ERRC_SHAPE_MISMATCH = 7,
  GEXEC_ERRC_DTYPE_MISMATCH = 8,
  GEXEC_ERRC_DEVICE_MISMATCH = 9,
  GEXEC_ERRC_MISALIGNED = 10,
  GEXEC_ERRC_NOT_FOUND = 11,
  GEXEC_ERRC_SYMBOL_NOT_FOUND = 12,
  GEXEC_ERRC_KERNEL_FAILED = 13,
  GEXEC_ERRC_IO = 14,
  GEXEC_ERRC_UNSUPPORTED = 15,
  GEXEC_ERRC_OUT_OF_MEMORY = 16,
  GEXEC_ERRC_BUSY = 17,
  GEXEC_ERRC_INVALID_NPY = 18,
  GEXEC_ERRC_NO_DEVICE = 19,
  GEXEC_ERRC_DEVICE_ERROR = 20,
  GEXEC_ERRC_UNKNOWN = 1000 /**< an exception that is not a gexec::error */
} gexec_errc;

/** DLPack 1.x's managed tensor, as version 3's functions exchange it: its version, the
 *  owner's context, the deleter (called once by whoever holds the tensor when done; it
 *  frees the struct too), flags and the DLTensor. With a DLPack >= 1.0 header this is
 *  its DLManagedTensorVersioned; with an older one (Debian 12 ships 0.6) gexec declares
 *  the same layout. Type codes are DLPack 1.x's: bool is code 6 (8 bits), TVM's float8
 *  e4m3 and e5m2 (its codes 6 and 7) cross as float8_e4m3fn (10) and float8_e5m2 (12). */
#if defined(DLPACK_MAJOR_VERSION) && DLPACK_MAJOR_VERSION >= 1
typedef DLManagedTensorVersioned gexec_dlpack_tensor;
#else
typedef struct gexec_dlpack_version {
  uint32_t major;
  uint32_t minor;
} gexec_dlpack_version;
typedef struct gexec_dlpack_tensor {
  gexec_dlpack_version version;
  void* manager_ctx;
  void (*deleter)(struct gexec_dlpack_tensor* self);
  uint64_t flags;
  DLTensor dl_tensor;
} gexec_dlpack_tensor;
#endif
/** DLPack 1.x's flags: the consumer must not write the data; the data is a copy the
 *  consumer alone holds. */
#define GEXEC_DLPACK_FLAG_READ_ONLY ((uint64_t)1 << 0)
#define GEXEC_DLPACK_FLAG_IS_COPIED ((uint64_t)1 << 1)

typedef struct gexec_status gexec_status;
typedef struct gexec_runtime gexec_runtime;
typedef struct gexec_model gexec_model;
typedef struct gexec_executor gexec_executor;

/** The function table. Version 1 ends at executor_load_params_file. */
typedef struct gexec_api {
  /* ---- version 1 ---- */

  /** The code of a non-NULL status (a gexec_errc); 0 for NULL. Thread-safe. */
  int (*status_code)(const gexec_status* status);
  /** Its message, owned by the status; "" for NULL. Thread-safe. */
  const char* (*status_message)(const gexec_status* status);
  /** Frees a status; NULL is ignored. */
  void (*status_release)(gexec_status* status);

  /** A runtime with its own thread pool of num_threads threads (0: one per core). */
  gexec_status* (*runtime_create)(int num_threads, gexec_runtime** out);
  /** Releases the handle; models loaded through it keep the runtime alive. */
  gexec_status* (*runtime_release)(gexec_runtime* runtime);

  /** TVM's three files: graph JSON, kernel library, parameter blob (params_path may be
   *  NULL: no parameters). runtime may be NULL: the process default. Thread-safe. */
  gexec_status* (*model_load_files)(gexec_runtime* runtime, const char* graph_path, const char* library_path,
                                    const char* params_path, gexec_model** out);
  /** A single-file library made by TVM's export_library (graph and parameters embedded). */
  gexec_status* (*model_load_library)(gexec_runtime* runtime, const char* library_path, gexec_model** out);
  /** From memory: the graph JSON text (graph_len bytes), the parameter blob (params may be
   *  NULL when params_len is 0) and the path of the kernel library. The bytes are copied
   *  or parsed before it returns. */
  gexec_status* (*model_load_memory)(gexec_runtime* runtime, const char* graph_json, size_t graph_len, const void* params,
                                     size_t params_len, const char* library_path, gexec_model** out);
  /** Releases the handle; executors made from it keep what they need alive. */
  gexec_status* (*model_release)(gexec_model* model);

  /** A new executor of the model: its own activations, the model's parameters shared.
   *  Thread-safe on one model from many threads. */
  gexec_status* (*executor_create)(const gexec_model* model, gexec_executor** out);
  gexec_status* (*executor_release)(gexec_executor* executor);

  /** Inputs count parameters too, as in TVM. */
  gexec_status* (*executor_num_inputs)(const gexec_executor* executor, int* out);
  gexec_status* (*executor_num_outputs)(const gexec_executor* executor, int* out);
  /** Names, owned by the model: valid while the model or one of its executors lives.
   *  Outputs are named "<node>:<index>". */
  gexec_status* (*executor_input_name)(const gexec_executor* executor, int index, const char** out);
  gexec_status* (*executor_output_name)(const gexec_executor* executor, int index, const char** out);
  /** The index of a name, or -1 when there is none (not an error). */
  gexec_status* (*executor_input_index)(const gexec_executor* executor, const char* name, int* out);
  gexec_status* (*executor_output_index)(const gexec_executor* executor, const char* name, int* out);
  /** dtype, ndim and shape (ndim values, owned by the model, valid as names are). Any of
   *  the out pointers may be NULL. */
  gexec_status* (*executor_input_info)(const gexec_executor* executor, int index, DLDataType* dtype, int* ndim,
                                       const int64_t** shape);
  gexec_status* (*executor_output_info)(const gexec_executor* executor, int index, DLDataType* dtype, int* ndim,
                                        const int64_t** shape);

  /** Copies tensor into input index; shape and dtype must match the input's. */
  gexec_status* (*executor_set_input)(gexec_executor* executor, int index, const DLTensor* tensor);
  /** Makes input index read tensor's memory (not copied, 64-byte aligned, compact) until
   *  set again; the caller keeps the memory alive and unchanged across runs. */
  gexec_status* (*executor_set_input_zero_copy)(gexec_executor* executor, int index, const DLTensor* tensor);
  /** Runs the graph. */
  gexec_status* (*executor_run)(gexec_executor* executor);
  /** A view of output index, owned by the executor: valid until the next run, the next
   *  get_output of that index, or the executor's release. */
  gexec_status* (*executor_get_output)(gexec_executor* executor, int index, const DLTensor** out);
  /** Copies output index into buffer, a host buffer of buffer_size bytes (at least the
   *  output's size, else GEXEC_ERRC_INVALID_ARGUMENT naming both sizes). */
  gexec_status* (*executor_copy_output)(gexec_executor* executor, int index, void* buffer, size_t buffer_size);
  /** Parameters into this executor's own memory (the model and its other executors are
   *  unaffected): a blob of tvm.runtime.save_param_dict, or a file (blob, .safetensors,
   *  .npz). A failed load leaves the old parameters. */
  gexec_status* (*executor_load_params)(gexec_executor* executor, const void* bytes, size_t size);
  gexec_status* (*executor_load_params_file)(gexec_executor* executor, const char* path);

  /* ---- version 2 (appended; never move anything above) ---- */

  /** Bytes of parameters the model holds, once for all its executors. Thread-safe. */
  gexec_status* (*model_param_bytes)(const gexec_model* model, uint64_t* out);

  /* ---- version 3: DLPack 1.x (gexec_dlpack_tensor) at the border ---- */

  /** Sets input index from a managed tensor, which gexec takes in every case, failure
   *  included: its deleter is called exactly once, by gexec. zero_copy 0: the data is
   *  copied and the tensor released before return. zero_copy 1: the executor reads the
   *  tensor's memory in place (as executor_set_input_zero_copy) and releases it when it
   *  stops (another set_input of that index, or the executor's release); a READ_ONLY
   *  tensor is accepted, as gexec never writes an input. Codes as DLPack 1.x names them;
   *  float8 types TVM has no code for (e3m4, e4m3, ...fnuz, e8m0) and sub-byte floats are
   *  GEXEC_ERRC_UNSUPPORTED. */
  gexec_status* (*executor_set_input_dlpack)(gexec_executor* executor, int index, gexec_dlpack_tensor* tensor, int zero_copy);
  /** Output index as a managed tensor the caller owns (call its deleter): copied = 0, a
   *  view of the executor's memory, READ_ONLY, whose bytes the next run changes (the
   *  memory itself stays valid until the deleter, even after the executor's release);
   *  copied = 1, a host copy of its own, IS_COPIED. */
  gexec_status* (*executor_get_output_dlpack)(gexec_executor* executor, int index, int copied, gexec_dlpack_tensor** out);
} gexec_api;

typedef struct gexec_api_base {
  /** The table of `version` (1 .. GEXEC_C_API_VERSION of the library), or NULL. */
  const gexec_api* (*get_api)(uint32_t version);
  /** gexec's version, "major.minor.patch". */
  const char* (*get_version_string)(void);
} gexec_api_base;

/** The only exported symbol. Never NULL; thread-safe. */
GEXEC_C_EXPORT const gexec_api_base* gexec_get_api_base(void);

#ifdef __cplusplus
}
#endif

#endif /* GEXEC_C_API_H_ */
