// The Relax VM in the extension: executables loaded from a single-file library (with
// weights bound from a file), virtual machines calling their functions, results as
// NDArrays and (nested) tuples. gexec.relax wraps these as TVM's relax.VirtualMachine.

#include <gexec/benchmark.hpp>
#include <gexec/relax.hpp>

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace nb = nanobind;
using namespace nb::literals;

namespace {

/// A function's result in Python's terms: an NDArray, a tuple of results, a number.
nb::object to_python(const gexec::relax::vm_value& v) {
  if (const auto* t = v.get_if<gexec::ndarray>()) return nb::cast(*t);
  if (const auto* tup = v.get_if<gexec::relax::vm_tuple>(); tup && *tup) {
    nb::list items;
    for (const gexec::relax::vm_value& x : **tup) items.append(to_python(x));
    return nb::tuple(items);
  }
  if (const auto* i = v.get_if<std::int64_t>()) return nb::int_(*i);
  if (const auto* d = v.get_if<double>()) return nb::float_(*d);
  if (const auto* b = v.get_if<bool>()) return nb::bool_(*b);
  if (const auto* s = v.get_if<gexec::relax::vm_shape>()) {
    nb::list dims;
    for (std::int64_t d : s->dims) dims.append(d);
    return nb::tuple(dims);
  }
  if (v.is_none()) return nb::none();
  throw gexec::error(gexec::errc::unsupported, std::string("a result that is a ") + gexec::relax::kind_name(v) + " has no Python form");
}

struct vm_box {
  gexec::relax::virtual_machine vm;
};

}  // namespace

void bind_relax(nb::module_& m) {
  nb::class_<gexec::relax::executable>(m, "RelaxExecutable")
      .def_static(
          "load",
          [](const std::string& path, std::optional<std::string> params, std::optional<int> num_threads) {
            gexec::relax::executable_options o;
            if (num_threads) o.model.runtime = gexec::runtime::create({.num_threads = *num_threads});
            return params ? gexec::relax::load_executable(path, *params, std::move(o)) : gexec::relax::load_executable(path, std::move(o));
          },
          "path"_a, "params"_a.none() = nb::none(), "num_threads"_a.none() = nb::none())
      .def("function_names", &gexec::relax::executable::function_names)
      .def("input_names", &gexec::relax::executable::input_names)
      .def("is_graph", [](const gexec::relax::executable& e, std::string_view name) { return e.graph_of(name) != nullptr; })
      .def("interpreted_because", [](const gexec::relax::executable& e, std::string_view name) { return e.interpreted_because(name); })
      .def_prop_ro("source", &gexec::relax::executable::source);

  nb::class_<vm_box>(m, "RelaxVM")
      .def("__init__", [](vm_box* self, const gexec::relax::executable& e) { new (self) vm_box{gexec::relax::virtual_machine(e)}; })
      .def("invoke",
           [](vm_box& b, const std::string& name, const std::vector<gexec::ndarray>& args) {
             gexec::relax::vm_value result;
             {
               nb::gil_scoped_release unlocked;
               std::vector<gexec::relax::vm_value> values(args.begin(), args.end());
               result = b.vm.invoke(name, values);
             }
             return to_python(result);
           })
      .def("time",
           [](vm_box& b, const std::string& name, const std::vector<gexec::ndarray>& args, int number, int repeat, int min_repeat_ms) {
             nb::gil_scoped_release unlocked;
             gexec::benchmark_options o;
             o.number = number;
             o.repeat = repeat;
             o.min_repeat_ms = min_repeat_ms;
             return gexec::benchmark([&] { (void)b.vm.run(name, args); }, o).results;
           });
}
