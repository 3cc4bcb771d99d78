// gexec's C API (include/gexec/c_api.h) over the C++ library: handles wrap a runtime,
// a model and an executor; every entry catches everything and answers a status.
#include "gexec/c_api.h"

#include <gexec/executor.hpp>

#include <atomic>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <vector>

namespace {

using gexec::errc;

static_assert(static_cast<int>(errc::invalid_json) == GEXEC_ERRC_INVALID_JSON && static_cast<int>(errc::invalid_argument) == GEXEC_ERRC_INVALID_ARGUMENT &&
              static_cast<int>(errc::busy) == GEXEC_ERRC_BUSY && static_cast<int>(errc::device_error) == GEXEC_ERRC_DEVICE_ERROR,
              "gexec_errc must keep gexec::errc's values");

}  // namespace

struct gexec_status {
  int code;
  std::string message;
};

namespace {

// Returned when a status itself cannot be allocated; status_release leaves it alone.
gexec_status out_of_memory_status{GEXEC_ERRC_OUT_OF_MEMORY, "gexec: out of memory"};

gexec_status* make_status(int code, const char* message) noexcept {
  try {
    return new gexec_status{code, message};
  } catch (...) {
    return &out_of_memory_status;
  }
}

gexec_status* make_status(errc code, const std::string& message) noexcept {
  return make_status(static_cast<int>(code), message.c_str());
}

/// The current exception as a status (called inside a catch block).
gexec_status* current_status() noexcept {
  try {
    throw;
  } catch (const gexec::error& e) {
    return make_status(static_cast<int>(e.code()), e.what());
  } catch (const std::bad_alloc&) {
    return make_status(GEXEC_ERRC_OUT_OF_MEMORY, "gexec: out of memory");
  } catch (const std::exception& e) {
    return make_status(GEXEC_ERRC_UNKNOWN, e.what());
  } catch (...) {
    return make_status(GEXEC_ERRC_UNKNOWN, "gexec: unknown exception");
  }
}

// Handles are shells that hold their object; a released shell keeps a dead magic value
// and goes to a free list, so a released handle is recognised (its memory stays mapped)
// until a new handle of its kind reuses the shell.
constexpr std::uint32_t dead_magic = 0xdeadbeefu;

template <class Shell>
struct shell_pool {
  std::mutex mutex;
  std::vector<Shell*> free;

  Shell* take() {
    {
      std::lock_guard lock(mutex);
      if (!free.empty()) {
        Shell* s = free.back();
        free.pop_back();
        return s;
      }
    }
    return new Shell;
  }
  void give_back(Shell* s) noexcept {
    std::lock_guard lock(mutex);
    try {
      free.push_back(s);
    } catch (...) {
      // Not recycled: the shell stays allocated, dead, and is never reused.
    }
  }
};

struct model_impl {
  gexec::model model;
  std::vector<std::string> input_names, output_names;
  std::vector<std::vector<std::int64_t>> input_shapes, output_shapes;
  std::vector<DLDataType> input_dtypes, output_dtypes;

  explicit model_impl(gexec::model m) : model(std::move(m)) {
    const gexec::compact_graph& g = model.compact();
    for (std::uint32_t nid : g.arg_nodes) {
      const std::uint32_t eid = g.entry_id(nid, 0);
      input_names.emplace_back(g.name(nid));
      const auto shape = g.shape(eid);
      input_shapes.emplace_back(shape.begin(), shape.end());
      input_dtypes.push_back(g.dltype[eid]);
    }
    for (std::size_t i = 0; i < g.heads.size(); ++i) {
      const std::uint32_t eid = g.entry_id(g.heads[i]);
      output_names.push_back(std::string(g.name(g.heads[i].node_id)) + ":" + std::to_string(i));
      const auto shape = g.shape(eid);
      output_shapes.emplace_back(shape.begin(), shape.end());
      output_dtypes.push_back(g.dltype[eid]);
    }
  }
};

struct executor_impl {
  std::shared_ptr<const model_impl> model;
  gexec::model::executor ex;
  std::vector<gexec::ndarray> outputs;  // the views get_output handed out

  explicit executor_impl(std::shared_ptr<const model_impl> m)
      : model(std::move(m)), ex(model->model.instantiate()), outputs(model->output_names.size()) {}
};

}  // namespace

struct gexec_runtime {
  std::atomic<std::uint32_t> magic{dead_magic};
  std::shared_ptr<gexec::runtime> rt;
  static constexpr std::uint32_t live = 0x47525430u;  // "GRT0"
};
struct gexec_model {
  std::atomic<std::uint32_t> magic{dead_magic};
  std::shared_ptr<const model_impl> impl;
  static constexpr std::uint32_t live = 0x474d4430u;  // "GMD0"
};
struct gexec_executor {
  std::atomic<std::uint32_t> magic{dead_magic};
  executor_impl* impl = nullptr;
  static constexpr std::uint32_t live = 0x47455830u;  // "GEX0"
};

namespace {

shell_pool<gexec_runtime>& runtime_pool() {
  static auto* p = new shell_pool<gexec_runtime>;  // never destroyed: handles may outlive statics
  return *p;
}
shell_pool<gexec_model>& model_pool() {
  static auto* p = new shell_pool<gexec_model>;
  return *p;
}
shell_pool<gexec_executor>& executor_pool() {
  static auto* p = new shell_pool<gexec_executor>;
  return *p;
}

template <class Handle>
gexec_status* check_handle(const Handle* h, const char* function, const char* kind) noexcept try {
  if (!h) return make_status(errc::invalid_argument, std::string("gexec: invalid_argument: ") + function + ": " + kind + " is NULL");
  if (h->magic.load(std::memory_order_relaxed) != Handle::live)
    return make_status(errc::invalid_argument, std::string("gexec: invalid_argument: ") + function + ": " + kind +
                                                   " is not a live handle (released, or not made by gexec)");
  return nullptr;
} catch (...) {
  return &out_of_memory_status;
}

gexec_status* null_argument(const char* function, const char* what) noexcept try {
  return make_status(errc::invalid_argument, std::string("gexec: invalid_argument: ") + function + ": " + what + " is NULL");
} catch (...) {
  return &out_of_memory_status;
}

#define GEXEC_C_CHECK(h, kind)                                           \
  if (gexec_status* bad = check_handle(h, __func__ + 2, kind)) return bad
#define GEXEC_C_NOT_NULL(p)                                             \
  if (!(p)) return null_argument(__func__ + 2, #p)

int c_status_code(const gexec_status* s) { return s ? s->code : 0; }
const char* c_status_message(const gexec_status* s) { return s ? s->message.c_str() : ""; }
void c_status_release(gexec_status* s) {
  if (s != &out_of_memory_status) delete s;
}

gexec_status* c_runtime_create(int num_threads, gexec_runtime** out) noexcept try {
  GEXEC_C_NOT_NULL(out);
  *out = nullptr;
  if (num_threads < 0) return make_status(errc::invalid_argument, "gexec: invalid_argument: runtime_create: num_threads " + std::to_string(num_threads) + " is negative");
  auto rt = gexec::runtime::create({.num_threads = num_threads});
  gexec_runtime* h = runtime_pool().take();
  h->rt = std::move(rt);
  h->magic.store(gexec_runtime::live, std::memory_order_release);
  *out = h;
  return nullptr;
} catch (...) {
  return current_status();
}

gexec_status* c_runtime_release(gexec_runtime* h) noexcept try {
  GEXEC_C_CHECK(h, "runtime");
  h->magic.store(dead_magic, std::memory_order_release);
  h->rt.reset();
  runtime_pool().give_back(h);
  return nullptr;
} catch (...) {
  return current_status();
}

gexec::model_options options_for(gexec_runtime* rt) {
  gexec::model_options o;
  if (rt) o.runtime = rt->rt;
  return o;
}

gexec_status* publish_model(gexec::model m, gexec_model** out) {
  auto impl = std::make_shared<const model_impl>(std::move(m));
  gexec_model* h = model_pool().take();
  h->impl = std::move(impl);
  h->magic.store(gexec_model::live, std::memory_order_release);
  *out = h;
  return nullptr;
}

gexec_status* c_model_load_files(gexec_runtime* rt, const char* graph_path, const char* library_path, const char* params_path,
                                 gexec_model** out) noexcept try {
  GEXEC_C_NOT_NULL(out);
  *out = nullptr;
  if (rt) GEXEC_C_CHECK(rt, "runtime");
  GEXEC_C_NOT_NULL(graph_path);
  GEXEC_C_NOT_NULL(library_path);
  if (params_path) return publish_model(gexec::model::load(graph_path, library_path, params_path, options_for(rt)), out);
  gexec::validated_graph g = gexec::load_graph_file(std::filesystem::path(graph_path));
  gexec::module lib = rt ? rt->rt->load_module(library_path) : gexec::load_module(library_path);
  return publish_model(gexec::model(std::move(g), gexec::packed_c_abi(std::move(lib)), options_for(rt)), out);
} catch (...) {
  return current_status();
}

gexec_status* c_model_load_library(gexec_runtime* rt, const char* library_path, gexec_model** out) noexcept try {
  GEXEC_C_NOT_NULL(out);
  *out = nullptr;
  if (rt) GEXEC_C_CHECK(rt, "runtime");
  GEXEC_C_NOT_NULL(library_path);
  return publish_model(gexec::model::load(library_path, options_for(rt)), out);
} catch (...) {
  return current_status();
}

gexec_status* c_model_load_memory(gexec_runtime* rt, const char* graph_json, size_t graph_len, const void* params, size_t params_len,
                                  const char* library_path, gexec_model** out) noexcept try {
  GEXEC_C_NOT_NULL(out);
  *out = nullptr;
  if (rt) GEXEC_C_CHECK(rt, "runtime");
  GEXEC_C_NOT_NULL(graph_json);
  GEXEC_C_NOT_NULL(library_path);
  if (!params && params_len) return null_argument(__func__ + 2, "params (with params_len > 0)");
  gexec::validated_graph g = gexec::parse_graph(std::string_view(graph_json, graph_len));
  gexec::module lib = rt ? rt->rt->load_module(library_path) : gexec::load_module(library_path);
  gexec::param_dict dict;
  if (params_len) dict = gexec::load_param_dict(std::span<const std::byte>(static_cast<const std::byte*>(params), params_len));
  return publish_model(gexec::model(std::move(g), gexec::packed_c_abi(std::move(lib)), dict, options_for(rt)), out);
} catch (...) {
  return current_status();
}

gexec_status* c_model_release(gexec_model* h) noexcept try {
  GEXEC_C_CHECK(h, "model");
  h->magic.store(dead_magic, std::memory_order_release);
  h->impl.reset();
  model_pool().give_back(h);
  return nullptr;
} catch (...) {
  return current_status();
}

gexec_status* c_model_param_bytes(const gexec_model* h, uint64_t* out) noexcept try {
  GEXEC_C_CHECK(h, "model");
  GEXEC_C_NOT_NULL(out);
  *out = h->impl->model.param_bytes();
  return nullptr;
} catch (...) {
  return current_status();
}

gexec_status* c_executor_create(const gexec_model* m, gexec_executor** out) noexcept try {
  GEXEC_C_NOT_NULL(out);
  *out = nullptr;
  GEXEC_C_CHECK(m, "model");
  auto* impl = new executor_impl(m->impl);
  gexec_executor* h;
  try {
    h = executor_pool().take();
  } catch (...) {
    delete impl;
    throw;
  }
  h->impl = impl;
  h->magic.store(gexec_executor::live, std::memory_order_release);
  *out = h;
  return nullptr;
} catch (...) {
  return current_status();
}

gexec_status* c_executor_release(gexec_executor* h) noexcept try {
  GEXEC_C_CHECK(h, "executor");
  h->magic.store(dead_magic, std::memory_order_release);
  delete h->impl;
  h->impl = nullptr;
  executor_pool().give_back(h);
  return nullptr;
} catch (...) {
  return current_status();
}

gexec_status* c_executor_num_inputs(const gexec_executor* h, int* out) noexcept {
  GEXEC_C_CHECK(h, "executor");
  GEXEC_C_NOT_NULL(out);
  *out = static_cast<int>(h->impl->model->input_names.size());
  return nullptr;
}

gexec_status* c_executor_num_outputs(const gexec_executor* h, int* out) noexcept {
  GEXEC_C_CHECK(h, "executor");
  GEXEC_C_NOT_NULL(out);
  *out = static_cast<int>(h->impl->model->output_names.size());
  return nullptr;
}

gexec_status* bad_index(const char* function, const char* kind, int index, std::size_t count) noexcept {
  try {
    return make_status(errc::invalid_argument, std::string("gexec: invalid_argument: ") + function + ": " + kind + " index " + std::to_string(index) +
                                                   " is out of range (the model has " + std::to_string(count) + ")");
  } catch (...) {
    return &out_of_memory_status;
  }
}

#define GEXEC_C_INDEX(index, vec, kind) \
  if ((index) < 0 || static_cast<std::size_t>(index) >= (vec).size()) return bad_index(__func__ + 2, kind, index, (vec).size())

gexec_status* c_executor_input_name(const gexec_executor* h, int index, const char** out) noexcept {
  GEXEC_C_CHECK(h, "executor");
  GEXEC_C_NOT_NULL(out);
  GEXEC_C_INDEX(index, h->impl->model->input_names, "input");
  *out = h->impl->model->input_names[static_cast<std::size_t>(index)].c_str();
  return nullptr;
}

gexec_status* c_executor_output_name(const gexec_executor* h, int index, const char** out) noexcept {
  GEXEC_C_CHECK(h, "executor");
  GEXEC_C_NOT_NULL(out);
  GEXEC_C_INDEX(index, h->impl->model->output_names, "output");
  *out = h->impl->model->output_names[static_cast<std::size_t>(index)].c_str();
  return nullptr;
}

gexec_status* c_executor_input_index(const gexec_executor* h, const char* name, int* out) noexcept try {
  GEXEC_C_CHECK(h, "executor");
  GEXEC_C_NOT_NULL(name);
  GEXEC_C_NOT_NULL(out);
  *out = h->impl->ex.get_input_index(name);
  return nullptr;
} catch (...) {
  return current_status();
}

gexec_status* c_executor_output_index(const gexec_executor* h, const char* name, int* out) noexcept try {
  GEXEC_C_CHECK(h, "executor");
  GEXEC_C_NOT_NULL(name);
  GEXEC_C_NOT_NULL(out);
  *out = h->impl->ex.get_output_index(name);
  return nullptr;
} catch (...) {
  return current_status();
}

void fill_info(DLDataType dtype_in, const std::vector<std::int64_t>& shape_in, DLDataType* dtype, int* ndim, const int64_t** shape) noexcept {
  if (dtype) *dtype = dtype_in;
  if (ndim) *ndim = static_cast<int>(shape_in.size());
  if (shape) *shape = shape_in.data();
}

gexec_status* c_executor_input_info(const gexec_executor* h, int index, DLDataType* dtype, int* ndim, const int64_t** shape) noexcept {
  GEXEC_C_CHECK(h, "executor");
  const model_impl& m = *h->impl->model;
  GEXEC_C_INDEX(index, m.input_names, "input");
  const auto i = static_cast<std::size_t>(index);
  fill_info(m.input_dtypes[i], m.input_shapes[i], dtype, ndim, shape);
  return nullptr;
}

gexec_status* c_executor_output_info(const gexec_executor* h, int index, DLDataType* dtype, int* ndim, const int64_t** shape) noexcept {
  GEXEC_C_CHECK(h, "executor");
  const model_impl& m = *h->impl->model;
  GEXEC_C_INDEX(index, m.output_names, "output");
  const auto i = static_cast<std::size_t>(index);
  fill_info(m.output_dtypes[i], m.output_shapes[i], dtype, ndim, shape);
  return nullptr;
}

gexec_status* c_executor_set_input(gexec_executor* h, int index, const DLTensor* tensor) noexcept try {
  GEXEC_C_CHECK(h, "executor");
  GEXEC_C_NOT_NULL(tensor);
  h->impl->ex.set_input(index, gexec::ndarray::view(*tensor, nullptr));
  return nullptr;
} catch (...) {
  return current_status();
}

gexec_status* c_executor_set_input_zero_copy(gexec_executor* h, int index, const DLTensor* tensor) noexcept try {
  GEXEC_C_CHECK(h, "executor");
  GEXEC_C_NOT_NULL(tensor);
  h->impl->ex.set_input_zero_copy(index, gexec::ndarray::view(*tensor, nullptr));
  return nullptr;
} catch (...) {
  return current_status();
}

gexec_status* c_executor_run(gexec_executor* h) noexcept try {
  GEXEC_C_CHECK(h, "executor");
  h->impl->ex.run();
  return nullptr;
} catch (...) {
  return current_status();
}

gexec_status* c_executor_get_output(gexec_executor* h, int index, const DLTensor** out) noexcept try {
  GEXEC_C_CHECK(h, "executor");
  GEXEC_C_NOT_NULL(out);
  *out = nullptr;
  GEXEC_C_INDEX(index, h->impl->outputs, "output");
  gexec::ndarray& slot = h->impl->outputs[static_cast<std::size_t>(index)];
  slot = h->impl->ex.get_output(index);
  *out = &slot.dltensor();
  return nullptr;
} catch (...) {
  return current_status();
}

gexec_status* c_executor_copy_output(gexec_executor* h, int index, void* buffer, size_t buffer_size) noexcept try {
  GEXEC_C_CHECK(h, "executor");
  GEXEC_C_NOT_NULL(buffer);
  const model_impl& m = *h->impl->model;
  GEXEC_C_INDEX(index, m.output_names, "output");
  const auto i = static_cast<std::size_t>(index);
  std::vector<std::int64_t> shape = m.output_shapes[i];
  DLTensor t{};
  t.data = buffer;
  t.device = gexec::cpu();
  t.ndim = static_cast<int32_t>(shape.size());
  t.dtype = m.output_dtypes[i];
  t.shape = shape.data();
  const std::uint64_t need = gexec::ndarray::view(t, nullptr).byte_size();
  if (buffer_size < need)
    return make_status(errc::invalid_argument, "gexec: invalid_argument: executor_copy_output: a buffer of " + std::to_string(buffer_size) +
                                                   " bytes is too small for output \"" + m.output_names[i] + "\" (" + std::to_string(need) + " bytes)");
  h->impl->ex.copy_output_to(index, gexec::ndarray::view(t, nullptr));
  return nullptr;
} catch (...) {
  return current_status();
}

gexec_status* c_executor_load_params(gexec_executor* h, const void* bytes, size_t size) noexcept try {
  GEXEC_C_CHECK(h, "executor");
  if (!bytes && size) return null_argument(__func__ + 2, "bytes (with size > 0)");
  h->impl->ex.load_params(std::span<const std::byte>(static_cast<const std::byte*>(bytes), size));
  return nullptr;
} catch (...) {
  return current_status();
}

gexec_status* c_executor_load_params_file(gexec_executor* h, const char* path) noexcept try {
  GEXEC_C_CHECK(h, "executor");
  GEXEC_C_NOT_NULL(path);
  h->impl->ex.load_params_file(path);
  return nullptr;
} catch (...) {
  return current_status();
}

// ---- DLPack 1.x at the border ------------------------------------------------------

// DLPack 1.x's type codes where they differ from TVM's (which gexec keeps inside).
constexpr std::uint8_t dlpack1_bool = 6, dlpack1_float8_e4m3fn = 10, dlpack1_float8_e5m2 = 12;

/// A DLPack 1.x dtype as gexec (TVM v0.19) names it.
DLDataType from_dlpack1(DLDataType t) {
  auto eight_bits = [&](const char* what) {
    if (t.bits != 8)
      throw gexec::error(errc::invalid_dtype, std::string("DLPack ") + what + " of " + std::to_string(t.bits) + " bits (it is 8 bits an element)");
  };
  switch (t.code) {
    case dlpack1_bool: eight_bits("bool"); return {kDLUInt, 1, t.lanes};  // TVM's bool: uint1, a byte an element
    case dlpack1_float8_e4m3fn: eight_bits("float8_e4m3fn"); return {gexec::tvm_float8_e4m3_code, 8, t.lanes};
    case dlpack1_float8_e5m2: eight_bits("float8_e5m2"); return {gexec::tvm_float8_e5m2_code, 8, t.lanes};
    default:
      if (t.code > kDLComplex)
        throw gexec::error(errc::unsupported, "DLPack type code " + std::to_string(t.code) +
                                                  ": a float8 (other than e4m3fn and e5m2), float6 or float4 type TVM v0.19 has no dtype for");
      return t;
  }
}
/// A gexec dtype as DLPack 1.x names it.
DLDataType to_dlpack1(DLDataType t) {
  if (t.code == kDLUInt && t.bits == 1) return {dlpack1_bool, 8, t.lanes};
  if (t.code == gexec::tvm_float8_e4m3_code && t.bits == 8) return {dlpack1_float8_e4m3fn, 8, t.lanes};
  if (t.code == gexec::tvm_float8_e5m2_code && t.bits == 8) return {dlpack1_float8_e5m2, 8, t.lanes};
  return t;
}

/// A managed tensor gexec hands out: the struct, the shape it points to, and the ndarray
/// that keeps the memory alive, freed together by the deleter.
struct exported_tensor {
  gexec_dlpack_tensor t{};
  std::vector<std::int64_t> shape;
  gexec::ndarray keep;
};

gexec_dlpack_tensor* export_dlpack1(gexec::ndarray a, std::uint64_t flags) {
  auto* e = new exported_tensor;
  e->shape.assign(a.shape().begin(), a.shape().end());
  e->keep = std::move(a);
  e->t.version = {1, 1};
  e->t.manager_ctx = e;
  e->t.deleter = [](gexec_dlpack_tensor* self) { delete static_cast<exported_tensor*>(self->manager_ctx); };
  e->t.flags = flags;
  e->t.dl_tensor = e->keep.dltensor();
  e->t.dl_tensor.dtype = to_dlpack1(e->t.dl_tensor.dtype);
  e->t.dl_tensor.shape = e->shape.data();
  e->t.dl_tensor.strides = nullptr;  // compact
  return &e->t;
}

gexec_status* c_executor_set_input_dlpack(gexec_executor* h, int index, gexec_dlpack_tensor* tensor, int zero_copy) noexcept {
  // Taken in every case: released once, here or by the executor.
  struct releaser {
    gexec_dlpack_tensor* t;
    void operator()(const void*) const noexcept {
      if (t && t->deleter) t->deleter(t);
    }
  };
  std::shared_ptr<const void> owner;
  try {
    owner = std::shared_ptr<const void>(tensor, releaser{tensor});
  } catch (...) {
    return current_status();  // the shared_ptr's constructor has called the releaser
  }
  GEXEC_C_CHECK(h, "executor");
  GEXEC_C_NOT_NULL(tensor);
  try {
    if (tensor->version.major != 1)
      return make_status(errc::unsupported, "gexec: unsupported: executor_set_input_dlpack: DLPack " + std::to_string(tensor->version.major) + "." +
                                                std::to_string(tensor->version.minor) + " (gexec reads DLPack 1.x)");
    DLTensor t = tensor->dl_tensor;
    t.dtype = from_dlpack1(t.dtype);
    if (zero_copy) h->impl->ex.set_input_zero_copy(index, gexec::ndarray::view(t, std::move(owner)));
    else h->impl->ex.set_input(index, gexec::ndarray::view(t, nullptr));
    return nullptr;
  } catch (...) {
    return current_status();
  }
}

gexec_status* c_executor_get_output_dlpack(gexec_executor* h, int index, int copied, gexec_dlpack_tensor** out) noexcept try {
  GEXEC_C_CHECK(h, "executor");
  GEXEC_C_NOT_NULL(out);
  *out = nullptr;
  GEXEC_C_INDEX(index, h->impl->outputs, "output");
  if (!copied) {
    *out = export_dlpack1(h->impl->ex.get_output(index), GEXEC_DLPACK_FLAG_READ_ONLY);
    return nullptr;
  }
  const model_impl& m = *h->impl->model;
  const auto i = static_cast<std::size_t>(index);
  gexec::ndarray copy = gexec::ndarray::empty(m.output_shapes[i], m.output_dtypes[i], gexec::cpu());
  h->impl->ex.copy_output_to(index, copy);
  *out = export_dlpack1(std::move(copy), GEXEC_DLPACK_FLAG_IS_COPIED);
  return nullptr;
} catch (...) {
  return current_status();
}

constexpr gexec_api api_table = {
    c_status_code,
    c_status_message,
    c_status_release,
    c_runtime_create,
    c_runtime_release,
    c_model_load_files,
    c_model_load_library,
    c_model_load_memory,
    c_model_release,
    c_executor_create,
    c_executor_release,
    c_executor_num_inputs,
    c_executor_num_outputs,
    c_executor_input_name,
    c_executor_output_name,
    c_executor_input_index,
    c_executor_output_index,
    c_executor_input_info,
    c_executor_output_info,
    c_executor_set_input,
    c_executor_set_input_zero_copy,
    c_executor_run,
    c_executor_get_output,
    c_executor_copy_output,
    c_executor_load_params,
    c_executor_load_params_file,
    // version 2
    c_model_param_bytes,
    // version 3
    c_executor_set_input_dlpack,
    c_executor_get_output_dlpack,
};

const gexec_api* get_api(uint32_t version) noexcept { return version >= 1 && version <= GEXEC_C_API_VERSION ? &api_table : nullptr; }
const char* get_version_string() noexcept { return GEXEC_VERSION_STRING; }

constexpr gexec_api_base api_base = {get_api, get_version_string};

}  // namespace

extern "C" GEXEC_C_EXPORT const gexec_api_base* gexec_get_api_base(void) { return &api_base; }
