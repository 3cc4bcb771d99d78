#pragma once
// What the extension's graph-model translation units share (module.cpp, executor.cpp,
// models.cpp): the includes, the conversions between Python's arrays and gexec's NDArrays,
// errors, the GIL's release around runs, and the boxes Python holds executors, models and
// libraries in. One module, split so that a change to one part recompiles that part alone.

#include <gexec/all_backends.hpp>
#include <gexec/contrib/sort.hpp>
#include <gexec/debug.hpp>
#include <gexec/executor.hpp>
#include <gexec/packed_c/module_blob.hpp>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <Python.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace nb = nanobind;
using namespace nb::literals;

namespace gexec_python {


using executor_type = gexec::any_device_executor;
using model_type = gexec::any_device_model;
using in_array = nb::ndarray<nb::ro>;   // any array, read-only allowed: set_input copies it or kernels only read it
using out_array = nb::ndarray<>;        // written by the executor

// ---- errors -------------------------------------------------------------------------

// gexec._errors.make_error(code, name, message) -> exception instance; set at import.
// Never released: it lives as long as the interpreter does.
inline PyObject* error_factory = nullptr;

inline void raise_gexec_error(const gexec::error& e) {
  if (!error_factory) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return;
  }
  const std::string_view code = gexec::to_string(e.code());
  const std::string_view message = e.message();
  // Messages quote file names and graph text: bytes that are not UTF-8 are replaced.
  PyObject* args = Py_BuildValue("(iNN)", static_cast<int>(e.code()),
                                 PyUnicode_DecodeUTF8(code.data(), static_cast<Py_ssize_t>(code.size()), "replace"),
                                 PyUnicode_DecodeUTF8(message.data(), static_cast<Py_ssize_t>(message.size()), "replace"));
  if (!args) return;
  PyObject* inst = PyObject_CallObject(error_factory, args);
  Py_DECREF(args);
  if (!inst) return;  // the factory's own exception stands
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(inst)), inst);
  Py_DECREF(inst);
}

// ---- dtypes -------------------------------------------------------------------------

static_assert(static_cast<std::uint8_t>(nb::dlpack::dtype_code::Bool) == gexec::dlpack_bool_code);

// A gexec dtype as DLPack names it (__dlpack__): float8 as uint8 bits (gexec::to_dlpack_dtype),
// bool (TVM's uint1) as DLPack's bool, which is what numpy and PyTorch read.
inline DLDataType to_dlpack_python(DLDataType t) {
  t = gexec::to_dlpack_dtype(t);
  if (t.code == kDLUInt && t.bits == 1) return {gexec::dlpack_bool_code, 8, t.lanes};
  return t;
}

// What numpy holds for a gexec dtype: bool (TVM's uint1) as numpy's bool, bfloat16 as its
// uint16 bit patterns (TVM 0.19's NDArray.numpy()), 4-bit and float8 types one byte each.
inline nb::dlpack::dtype to_python_dtype(DLDataType t) {
  t = to_dlpack_python(t);
  if (t.code == gexec::dlpack_bool_code) return {t.code, 8, 1};
  if (t.code == kDLBfloat) return {static_cast<std::uint8_t>(nb::dlpack::dtype_code::UInt), 16, t.lanes};
  if (t.bits == 4) return {t.code, 8, t.lanes};
  return {t.code, t.bits, t.lanes};
}

// A Python array's dtype as gexec names it (gexec::from_dlpack_dtype): DLPack's bool (code 6,
// which TVM's float8 e4m3 also uses) is TVM's uint1.
inline DLDataType from_python_dtype(nb::dlpack::dtype d) { return gexec::from_dlpack_dtype({d.code, d.bits, d.lanes}); }

// The given dtype read as `expected` where TVM's Python users hold `expected` in another
// type of the same width: bfloat16 as uint16 bits, float8 as uint8, int4/uint4 as a byte.
inline DLDataType adapt_dtype(DLDataType given, DLDataType expected) {
  if (gexec::same_dtype(given, expected) || given.lanes != expected.lanes) return given;
  const bool given_uint = given.code == kDLUInt;
  if (expected.code == kDLBfloat && given_uint && given.bits == 16) return expected;
  if ((expected.code == gexec::tvm_float8_e4m3_code || expected.code == gexec::tvm_float8_e5m2_code) && given.bits == 8 &&
      (given_uint || given.code == kDLInt))
    return expected;
  if (expected.bits == 4 && given.bits == 8 && given.code == expected.code) return expected;
  return given;
}

// ---- arrays in and out --------------------------------------------------------------

// Keeps a Python array alive from a gexec::ndarray; released with the GIL held, whichever
// thread drops the last reference.
template <class Array>
inline std::shared_ptr<const void> keep(const Array& a) {
  return std::shared_ptr<const void>(new Array(a), [](const void* p) {
    nb::gil_scoped_acquire gil;
    delete static_cast<const Array*>(p);
  });
}

// A gexec view of a Python array (no copy); `expected` adapts its dtype (adapt_dtype).
template <class Array>
inline gexec::ndarray view_of(const Array& a, std::optional<DLDataType> expected = std::nullopt) {
  std::vector<std::int64_t> shape(a.ndim()), strides(a.ndim());
  bool compact = true;
  std::int64_t want = 1;
  for (std::size_t i = a.ndim(); i-- > 0;) {
    shape[i] = static_cast<std::int64_t>(a.shape(i));
    strides[i] = a.stride(i);
    if (shape[i] != 1 && strides[i] != want) compact = false;
    want *= shape[i];
  }
  if (want == 0) compact = true;  // no element: any strides describe it (numpy's for a (0, 3) array need not be row-major)
  DLTensor t{};
  t.data = const_cast<void*>(static_cast<const void*>(a.data()));
  t.device = {static_cast<DLDeviceType>(a.device_type()), a.device_id()};
  t.ndim = static_cast<int>(a.ndim());
  t.dtype = from_python_dtype(a.dtype());
  if (expected) t.dtype = adapt_dtype(t.dtype, *expected);
  t.shape = shape.data();
  t.strides = compact ? nullptr : strides.data();
  return gexec::ndarray::view(t, keep(a));
}

inline std::vector<std::size_t> size_shape(const gexec::ndarray& a) {
  return {a.shape().begin(), a.shape().end()};
}

// ---- device memory ------------------------------------------------------------------

inline bool on_cuda(DLDevice d) { return d.device_type == kDLCUDA; }

// NDArrays on CUDA devices (nd.empty and nd.array with gexec.cuda(n)) are allocated and
// zeroed by one cuda_backend of the process, and every copy to, from or between them is
// made on one stream per device and waited for before the call returns: an array is
// never seen half-written. The driver is loaded when first used (GEXEC_CUDA_DRIVER, else
// NVIDIA's libcuda.so.1; errc::no_device where there is neither). Executors' device
// outputs are waited for by get_output before they are seen here.
class device_memory {
 public:
  static device_memory& get() {
    static auto* d = new device_memory;  // never destroyed: NDArrays may outlive the module's teardown
    return *d;
  }
  gexec::ndarray empty(const std::vector<std::int64_t>& shape, DLDataType dtype, DLDevice d) {
    std::lock_guard g(mu_);
    gexec::ndarray a = backend_.empty(shape, dtype, d);
    backend_.fill_zero(d, a.data(), a.byte_size());
    return a;
  }
  void copy(const DLTensor& from, DLTensor& to) {
    std::lock_guard g(mu_);
    auto& s = stream_for(on_cuda(to.device) ? to.device : from.device);
    backend_.copy_async(from, to, s);
    backend_.synchronize(s);
  }
  /// Waits for everything queued on device `d` (Device.sync()).
  void synchronize(DLDevice d) {
    std::lock_guard g(mu_);
    gexec::cuda_driver& drv = backend_.driver();
    drv.make_current(d.device_id);
    drv.check(drv.cuCtxSynchronize(), "Device.sync (cuCtxSynchronize)", d.device_id);
  }

 private:
  gexec::cuda_backend::stream_type& stream_for(DLDevice d) {
    for (auto& [id, s] : streams_)
      if (id == d.device_id) return s;
    auto s = backend_.create_stream(d);
    return streams_.emplace_back(d.device_id, s).second;
  }
  gexec::cuda_backend backend_;
  std::mutex mu_;
  std::vector<std::pair<int, gexec::cuda_backend::stream_type>> streams_;  // kept for the process, as the backend
};

inline void require_defined_compact(const gexec::ndarray& a, const char* what) {
  if (!a.defined()) throw gexec::error(gexec::errc::invalid_argument, std::string(what) + ": undefined NDArray");
  if (!a.is_contiguous()) throw gexec::error(gexec::errc::invalid_argument, std::string(what) + ": the NDArray is strided");
}

inline void require_host_compact(const gexec::ndarray& a, const char* what) {
  require_defined_compact(a, what);
  if (a.device().device_type != kDLCPU)
    throw gexec::error(gexec::errc::device_mismatch, std::string(what) + ": the NDArray is on " + gexec::to_string(a.device()) +
                                                         " (numpy() copies it to the host)");
}

inline void require_served(DLDevice d, const char* what) {
  if (d.device_type != kDLCPU && !on_cuda(d))
    throw gexec::error(gexec::errc::unsupported, std::string(what) + ": " + gexec::to_string(d) +
                                                     " is not served by this build (the host and CUDA devices are)");
}

// A zero-filled NDArray on `device` (the host or a CUDA device).
inline gexec::ndarray empty_on(const std::vector<std::int64_t>& shape, DLDataType dtype, DLDevice device, const char* what) {
  require_served(device, what);
  if (on_cuda(device)) return device_memory::get().empty(shape, dtype, device);
  return gexec::ndarray::empty(shape, dtype);
}

// Copies the elements of `from` into `to`: same dtype and shape, both compact, each on
// the host or a CUDA device.
inline void copy_elements(const gexec::ndarray& from, const gexec::ndarray& to, const char* what) {
  require_defined_compact(from, what);
  require_defined_compact(to, what);
  if (!gexec::same_dtype(from.dtype(), to.dtype()))
    throw gexec::error(gexec::errc::dtype_mismatch, std::string(what) + ": " + gexec::to_string(from.dtype()) + " into " +
                                                        gexec::to_string(to.dtype()));
  if (!std::equal(from.shape().begin(), from.shape().end(), to.shape().begin(), to.shape().end()))
    throw gexec::error(gexec::errc::shape_mismatch, std::string(what) + ": shape " + gexec::detail::shape_to_string(from.shape()) +
                                                        " into " + gexec::detail::shape_to_string(to.shape()));
  require_served(from.device(), what);
  require_served(to.device(), what);
  if (from.byte_size() == 0) return;
  if (on_cuda(from.device()) || on_cuda(to.device()))
    device_memory::get().copy(from.dltensor(), const_cast<DLTensor&>(to.dltensor()));
  else
    std::memmove(to.data(), from.data(), static_cast<std::size_t>(from.byte_size()));
}

// A numpy array holding a copy of `a`'s elements (copied back from a device).
inline nb::object numpy_copy(const gexec::ndarray& a) {
  require_defined_compact(a, "numpy");
  const std::size_t bytes = static_cast<std::size_t>(a.byte_size());
  auto* buffer = new std::byte[bytes == 0 ? 1 : bytes];
  nb::capsule owner(buffer, [](void* p) noexcept { delete[] static_cast<std::byte*>(p); });
  const auto shape = size_shape(a);
  if (a.device().device_type == kDLCPU) {
    if (bytes) std::memcpy(buffer, a.data(), bytes);
  } else {
    std::vector<std::int64_t> dims(a.shape().begin(), a.shape().end());
    copy_elements(a, gexec::ndarray::view(DLTensor{buffer, gexec::cpu(), a.ndim(), a.dtype(), dims.data(), nullptr, 0}, nullptr),
                  "numpy");
  }
  return nb::ndarray<nb::numpy>(buffer, shape.size(), shape.data(), owner, nullptr, to_python_dtype(a.dtype())).cast();
}

// A numpy array sharing `a`'s memory; it keeps that memory alive.
inline nb::object numpy_view(const gexec::ndarray& a) {
  require_host_compact(a, "numpy_view");
  auto* held = new gexec::ndarray(a);
  nb::capsule owner(held, [](void* p) noexcept { delete static_cast<gexec::ndarray*>(p); });
  const auto shape = size_shape(a);
  return nb::ndarray<nb::numpy>(a.data(), shape.size(), shape.data(), owner, nullptr, to_python_dtype(a.dtype())).cast();
}

inline void dlpack_capsule_destructor(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, "dltensor")) return;  // a consumer took it ("used_dltensor")
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
  if (managed && managed->deleter) managed->deleter(managed);
}

// The DLPack capsule of `a` (the array API's __dlpack__); bool leaves as DLPack's bool,
// float8 as uint8 bits (to_dlpack_python).
inline nb::object dlpack_capsule(const gexec::ndarray& a) {
  DLManagedTensor* managed = a.to_dlpack();
  managed->dl_tensor.dtype = to_dlpack_python(a.dtype());
  PyObject* capsule = PyCapsule_New(managed, "dltensor", dlpack_capsule_destructor);
  if (!capsule) {
    managed->deleter(managed);
    throw nb::python_error();
  }
  return nb::steal(capsule);
}

inline DLDevice to_device(std::pair<int, int> d) { return {static_cast<DLDeviceType>(d.first), d.second}; }
inline std::vector<DLDevice> to_devices(const std::vector<std::pair<int, int>>& ds) {
  std::vector<DLDevice> out;
  for (auto d : ds) out.push_back(to_device(d));
  return out;
}

// A copy of `src` in a fresh NDArray on `device` (nd.array): 64-byte aligned on the host.
inline gexec::ndarray array_copy(const in_array& src, DLDevice device) {
  const gexec::ndarray view = view_of(src);
  // numpy arrays reach here compact (gexec.nd makes them so); other strided arrays are refused
  if (!view.is_contiguous()) throw gexec::error(gexec::errc::invalid_argument, "nd.array: a strided array (make it contiguous first)");
  gexec::ndarray out = empty_on(std::vector<std::int64_t>(view.shape().begin(), view.shape().end()), view.dtype(), device, "nd.array");
  copy_elements(view, out, "nd.array");
  return out;
}

// A copy of `a` on `device` (NDArray.copyto, nd.array of an NDArray).
inline gexec::ndarray ndarray_copy(const gexec::ndarray& a, DLDevice device) {
  require_defined_compact(a, "copy");
  gexec::ndarray out = empty_on(std::vector<std::int64_t>(a.shape().begin(), a.shape().end()), a.dtype(), device, "copy");
  copy_elements(a, out, "copy");
  return out;
}

// ---- the GIL ------------------------------------------------------------------------

// Python < 3.14 ends a daemon thread that takes the GIL back after the interpreter began
// exiting with pthread_exit, which unwinds through noexcept frames and aborts the whole
// process. So a thread leaving run() after gexec's atexit hook (_at_exit) parks until
// the process ends instead, and the hook lets threads already on their way back take
// the GIL first, before the interpreter starts to finalize.
inline std::mutex exit_mu;
inline std::condition_variable exit_cv;
inline bool exiting = false;  // guarded by exit_mu
inline int restoring = 0;     // guarded by exit_mu: threads between leaving C++ and holding the GIL

[[noreturn]] inline void park_until_exit() noexcept {
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

/// Releases the GIL for a run, as nb::gil_scoped_release, but parks instead of taking it
/// back once the interpreter is exiting (see above).
class gil_released {
 public:
  gil_released() noexcept : state_(PyEval_SaveThread()) {}
  gil_released(const gil_released&) = delete;
  gil_released& operator=(const gil_released&) = delete;
  ~gil_released() {
    {
      std::unique_lock lock(exit_mu);
      if (exiting) {
        lock.unlock();
        park_until_exit();
      }
      ++restoring;
    }
    PyEval_RestoreThread(state_);
    std::lock_guard lock(exit_mu);
    --restoring;
    exit_cv.notify_all();
  }

 private:
  PyThreadState* state_;
};

inline void at_exit() {
  {
    std::lock_guard lock(exit_mu);
    exiting = true;
  }
  nb::gil_scoped_release nogil;  // threads on their way back take the GIL and go on
  std::unique_lock lock(exit_mu);
  exit_cv.wait(lock, [] { return restoring == 0; });
}

// ---- executors and models -----------------------------------------------------------

struct executor_box {
  executor_type ex;
  std::string policy;  // empty: run()'s default (the flat loop)
  // Whether get_input_info lists the model's own parameters, as TVM's does for an
  // executor made by a library's factory (lib["default"]: its parameters are set as
  // inputs, not loaded), and not for graph + library + load_params (TVM's param_names_).
  bool params_are_inputs = false;

  void check_input(int index) const {
    if (index < 0 || index >= ex.get_num_inputs())
      throw nb::index_error(("input index " + std::to_string(index) + " out of range (" + std::to_string(ex.get_num_inputs()) +
                             " inputs)").c_str());
  }
  void check_output(int index) const {
    if (index < 0 || index >= ex.get_num_outputs())
      throw nb::index_error(("output index " + std::to_string(index) + " out of range (" + std::to_string(ex.get_num_outputs()) +
                             " outputs)").c_str());
  }
  DLDataType input_dtype(int index) const {
    const auto& m = *ex.get_model_state();
    return m.compact().dltype[m.input_entry(static_cast<std::size_t>(index))];
  }
  DLDataType output_dtype(int index) const { return ex.get_output_info()[static_cast<std::size_t>(index)].dtype; }
  int index_of(std::string_view name) const {
    const int i = ex.get_input_index(name);
    if (i < 0) throw gexec::error(gexec::errc::not_found, "no input named \"" + std::string(name) + "\"");
    return i;
  }
  // Returns when the outputs are written, on a device too: what the caller reads next
  // (an output zero-copy array, a DLPack consumer on its own stream) sees them.
  void run() {
    if (policy.empty())
      ex.run();
    else
      gexec::with_policy(policy, [&](auto p) { ex.run(p); });
    ex.synchronize();
  }
};

struct model_box {
  model_type m;
  std::string policy;
  bool params_are_inputs = false;  // a single-file model: see executor_box
};

inline gexec::model_options make_options(const std::vector<std::pair<int, int>>& devices, std::optional<int> num_threads,
                                  std::optional<std::string> planner, bool zero_unset_inputs, bool donate_inputs = false) {
  gexec::model_options o;
  o.devices = to_devices(devices);
  o.zero_unset_inputs = zero_unset_inputs;
  o.donate_inputs = donate_inputs;
  if (num_threads) {
    if (*num_threads < 1) throw nb::value_error("num_threads must be at least 1");
    o.runtime = gexec::runtime::create({.num_threads = *num_threads});
    gexec::contrib::register_sort_functions(*o.runtime);
  }
  if (planner) o.planner = gexec::planner_named(*planner);
  return o;
}

inline std::string checked_policy(std::optional<std::string> policy) {
  if (!policy) return {};
  gexec::with_policy(*policy, [](auto) {});  // an unknown name fails here, naming the choices
  return *policy;
}

/// Calls kernel `name` of `lib` from Python, as TVM's PackedFunc does (lib["add"](a, b, c)):
/// NDArrays pass as DLTensor*, bool and int as int64, float as double, None as null, str
/// as a string; anything else is a TypeError naming the argument. A kernel's failure is a
/// gexec error with the message it set; an int or float it returns is returned.
inline nb::object call_kernel(const gexec::module& lib, const std::string& name, nb::args args) {
  std::string why;
  const gexec::packed_function f = lib.get_function(name, &why);
  if (!f) throw gexec::error(gexec::errc::symbol_not_found, lib.path().string() + " has no function \"" + name + "\"" + (why.empty() ? "" : ": " + why));
  const std::size_t n = args.size();
  std::vector<TVMValue> values(n);
  std::vector<int> codes(n);
  std::vector<std::string> strings;
  strings.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    nb::handle a = args[i];
    if (nb::isinstance<gexec::ndarray>(a)) {
      values[i].v_handle = const_cast<DLTensor*>(&nb::cast<gexec::ndarray&>(a).dltensor());
      codes[i] = gexec::tc_dltensor;
    } else if (nb::isinstance<nb::bool_>(a) || nb::isinstance<nb::int_>(a)) {
      values[i].v_int64 = nb::cast<std::int64_t>(a);
      codes[i] = gexec::tc_int;
    } else if (nb::isinstance<nb::float_>(a)) {
      values[i].v_float64 = nb::cast<double>(a);
      codes[i] = gexec::tc_float;
    } else if (a.is_none()) {
      values[i].v_handle = nullptr;
      codes[i] = gexec::tc_null;
    } else if (nb::isinstance<nb::str>(a)) {
      strings.push_back(nb::cast<std::string>(a));
      values[i].v_str = strings.back().c_str();
      codes[i] = gexec::tc_str;
    } else {
      throw nb::type_error(("kernel \"" + name + "\": argument " + std::to_string(i) + " is a " +
                            nb::cast<std::string>(nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(a.ptr()))).attr("__name__")) +
                            "; pass NDArrays (gexec.nd.array), numbers or strings")
                               .c_str());
    }
  }
  TVMValue ret{};
  int ret_code = gexec::tc_null;
  int rc = 0;
  {
    gil_released unlocked;
    rc = f.fn(values.data(), codes.data(), static_cast<int>(n), &ret, &ret_code, f.resource_handle);
  }
  if (rc != 0) throw gexec::error(gexec::errc::kernel_failed, "kernel \"" + name + "\" failed: " + gexec::detail::take_last_error());
  switch (ret_code) {
    case gexec::tc_int: return nb::int_(ret.v_int64);
    case gexec::tc_float: return nb::float_(ret.v_float64);
    default: return nb::none();
  }
}

// Whether a library's __tvm_dev_mblob holds a graph executor factory (export_library of
// relay.build's module) and not only the modules a kernel module imports (tvm.build's
// module with imported modules, exported into one library). Parameters are skipped.
inline bool embeds_graph_factory(const gexec::module& lib) {
  return gexec::parse_module_blob(lib.data_symbol("__tvm_dev_mblob"), "__tvm_dev_mblob of " + lib.path().string(),
                                  gexec::blob_parts::device_modules)
      .factory.has_value();
}

struct library_box {
  gexec::module lib;
  std::optional<gexec::factory> fac;  // when the library embeds a graph (export_library's single file)
  // The embedded graph's models, one per device list and way of running unset inputs,
  // as the factory keeps its own (gexec::factory::get_model): one plan and one copy of
  // the weights (the library's, read once per loaded library) for every executor made
  // for those devices.
  struct keyed_model {
    std::vector<DLDevice> devices;
    bool zero_unset_inputs;
    model_type m;
  };
  std::vector<keyed_model> models;

  executor_type create(const std::vector<DLDevice>& devices, bool zero_unset_inputs) {
    if (!fac)
      throw gexec::error(gexec::errc::invalid_module, lib.path().string() + " embeds no graph: it is a kernel library "
                                                      "(pass it to graph_executor.create with the graph JSON)");
    for (const auto& k : models)
      if (k.zero_unset_inputs == zero_unset_inputs && std::equal(k.devices.begin(), k.devices.end(), devices.begin(), devices.end(), gexec::same_device))
        return k.m.instantiate();
    gexec::model_options o;
    o.devices = devices;
    o.zero_unset_inputs = zero_unset_inputs;
    model_type m = model_type::load(lib.path(), std::move(o));  // the library loaded already: its parsed blob is shared
    models.push_back({devices, zero_unset_inputs, m});
    return m.instantiate();
  }
};

inline nb::dict param_dict_to_python(const gexec::param_dict& d) {
  nb::dict out;
  for (const auto& [name, value] : d) out[nb::str(name.data(), name.size())] = nb::cast(value);
  return out;
}

inline gexec::param_dict param_dict_from_python(const std::vector<std::pair<std::string, gexec::ndarray>>& items) {
  gexec::param_dict d;
  for (const auto& [name, value] : items) d.set(name, value);
  return d;
}

inline nb::bytes to_bytes(const std::vector<std::byte>& v) { return nb::bytes(reinterpret_cast<const char*>(v.data()), v.size()); }


void bind_executor(nb::module_& m);  // executor.cpp
void bind_models(nb::module_& m);    // models.cpp

}  // namespace gexec_python

void bind_relax(nb::module_& m);  // relax.cpp
