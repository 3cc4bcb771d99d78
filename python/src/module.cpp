// gexec._gexec: the compiled half of the Python package. It exposes gexec's public C++
// API almost as is; the TVM-named Python API (gexec.runtime, gexec.contrib, gexec.nd) is
// written in Python over it. Arrays cross as DLPack (nanobind's ndarray): numpy, PyTorch
// or anything with __dlpack__ in; NDArray (a gexec::ndarray) out. Models run on every
// device gexec has a wing for (all_backends.hpp): the host, and CUDA devices through the
// driver loaded when one is first used.

#include "common.hpp"

using namespace gexec_python;

NB_MODULE(_gexec, m) {
  m.doc() = "gexec's compiled core; use the gexec package";
  m.attr("__version__") = GEXEC_PYTHON_VERSION;
  m.attr("version") = GEXEC_VERSION_STRING;

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const gexec::error& e) {
      raise_gexec_error(e);
    }
  });
  m.def("_at_exit", &at_exit, "Called by gexec's atexit hook, before the interpreter finalizes.");
  m.def("_set_error_factory", [](nb::object f) {
    Py_XDECREF(error_factory);
    error_factory = f.release().ptr();
  });
  m.def("_errc_names", [] {
    std::vector<std::pair<int, std::string>> out;
    for (int c = 1; c <= static_cast<int>(gexec::errc::device_error); ++c)
      out.emplace_back(c, std::string(gexec::to_string(static_cast<gexec::errc>(c))));
    return out;
  });

  // A daemon thread still inside run() when the interpreter exits holds its objects for
  // ever; nanobind would report them as leaks. GEXEC_PYTHON_LEAK_WARNINGS=1 turns the
  // report on (for hunting reference-counting bugs in this file).
  const char* leaks = std::getenv("GEXEC_PYTHON_LEAK_WARNINGS");
  nb::set_leak_warnings(leaks != nullptr && std::string_view(leaks) == "1");

  // TVM's runtime registered tvm.contrib.sort.* in every process; so does gexec's package.
  gexec::contrib::register_sort_functions();

  nb::class_<gexec::ndarray>(m, "NDArrayBase")
      .def_prop_ro("shape", [](const gexec::ndarray& a) {
        nb::list l;
        for (auto d : a.shape()) l.append(d);
        return nb::tuple(l);
      })
      .def_prop_ro("dtype", [](const gexec::ndarray& a) { return gexec::to_string(a.dtype()); })
      .def_prop_ro("_device", [](const gexec::ndarray& a) { return std::pair<int, int>(a.device().device_type, a.device().device_id); })
      .def_prop_ro("ndim", &gexec::ndarray::ndim)
      .def_prop_ro("defined", &gexec::ndarray::defined)
      .def_prop_ro("nbytes", &gexec::ndarray::byte_size)
      .def_prop_ro("_data_ptr", [](const gexec::ndarray& a) { return reinterpret_cast<std::uintptr_t>(a.data()); })
      .def_prop_ro("is_contiguous", &gexec::ndarray::is_contiguous)
      .def("numpy", &numpy_copy, "A numpy array holding a copy of the elements (bfloat16 as uint16 bits).")
      .def("numpy_view", &numpy_view,
           "A numpy array sharing this NDArray's memory (no copy); it keeps that memory alive. An executor's "
           "output view changes at the executor's next run().")
      .def("_copyfrom_array", [](const gexec::ndarray& self, const in_array& src) { copy_elements(view_of(src, self.dtype()), self, "copyfrom"); })
      .def("_copyfrom_ndarray", [](const gexec::ndarray& self, const gexec::ndarray& src) { copy_elements(src, self, "copyfrom"); })
      .def("_copy", [](const gexec::ndarray& a) { return ndarray_copy(a, a.device()); })
      .def("_copy_to", [](const gexec::ndarray& a, std::pair<int, int> device) { return ndarray_copy(a, to_device(device)); })
      .def("__dlpack__", [](const gexec::ndarray& a, nb::kwargs) { return dlpack_capsule(a); })
      .def("__dlpack_device__", [](const gexec::ndarray& a) {
        return std::pair<int, int>(a.device().device_type, a.device().device_id);
      });

  m.def("_empty", [](const std::vector<std::int64_t>& shape, std::string_view dtype, std::pair<int, int> device) {
    return empty_on(shape, gexec::parse_dtype(dtype), to_device(device), "nd.empty");
  });
  m.def("_array", [](const in_array& src, std::pair<int, int> device) { return array_copy(src, to_device(device)); });
  m.def("_device_sync", [](std::pair<int, int> device) {
    if (on_cuda(to_device(device))) device_memory::get().synchronize(to_device(device));
  });
  m.def("_from_dlpack", [](const out_array& a) { return view_of(a); },
        "A view of a writable array given by DLPack (its memory, kept alive), as tvm.nd.from_dlpack.");
  m.def("_parse_dtype", [](std::string_view s) { return gexec::to_string(gexec::parse_dtype(s)); });
  m.def("_numpy_dtype_of", [](std::string_view s) {
    auto d = to_python_dtype(gexec::parse_dtype(s));
    return std::tuple<int, int, int>(d.code, d.bits, d.lanes);
  });

  // ---- parameters -------------------------------------------------------------------
  m.def("_load_param_dict", [](nb::bytes b) {
    return param_dict_to_python(gexec::load_param_dict(std::string_view(b.c_str(), b.size())));
  });
  m.def("_load_param_dict_file", [](const std::string& path, bool mmap) {
    return param_dict_to_python(gexec::load_param_dict_file(path, mmap ? gexec::load_mode::mmap : gexec::load_mode::copy));
  });
  m.def("_save_param_dict", [](const std::vector<std::pair<std::string, gexec::ndarray>>& items) {
    return to_bytes(gexec::save_param_dict(param_dict_from_python(items)));
  });
  m.def("_save_param_dict_file", [](const std::vector<std::pair<std::string, gexec::ndarray>>& items, const std::string& path) {
    gexec::save_param_dict_file(param_dict_from_python(items), path);
  });

  bind_executor(m);
  bind_models(m);
  bind_relax(m);
}
