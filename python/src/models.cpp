// gexec._gexec.ModelBase and Library: models loaded once and instantiated many times, kernel
// libraries (their factories, their kernels called from Python), executors made from a
// graph and a library, and the process's thread count.

#include "common.hpp"

namespace gexec_python {

void bind_models(nb::module_& m) {
  m.def(
      "_benchmark_callable",
      [](nb::callable f, int repeat, int number, int min_repeat_ms, int limit_zero_time_iterations, int cooldown_interval_ms,
         int repeats_to_cooldown) {
        gexec::benchmark_options o{repeat, number, min_repeat_ms, limit_zero_time_iterations, cooldown_interval_ms, repeats_to_cooldown};
        return gexec::benchmark([&f] { f(); }, o).results;
      });

  nb::class_<model_box>(m, "ModelBase")
      .def_static(
          "load_single",
          [](const std::string& path, const std::vector<std::pair<int, int>>& devices, std::optional<int> num_threads,
             std::optional<std::string> planner, std::optional<std::string> policy, bool zero_unset_inputs, bool donate_inputs) {
            auto o = make_options(devices, num_threads, planner, zero_unset_inputs, donate_inputs);
            auto p = checked_policy(policy);
            return model_box{model_type::load(path, std::move(o)), p, true};
          },
          "path"_a, "devices"_a, "num_threads"_a.none(), "planner"_a.none(), "policy"_a.none(), "zero_unset_inputs"_a, "donate_inputs"_a)
      .def_static(
          "load_three",
          [](const std::string& graph, const std::string& lib, const std::string& params, const std::vector<std::pair<int, int>>& devices,
             std::optional<int> num_threads, std::optional<std::string> planner, std::optional<std::string> policy, bool zero_unset_inputs, bool donate_inputs) {
            auto o = make_options(devices, num_threads, planner, zero_unset_inputs, donate_inputs);
            auto p = checked_policy(policy);
            return model_box{model_type::load(graph, lib, params, std::move(o)), p};
          },
          "graph"_a, "lib"_a, "params"_a, "devices"_a, "num_threads"_a.none(), "planner"_a.none(), "policy"_a.none(), "zero_unset_inputs"_a, "donate_inputs"_a)
      .def("instantiate", [](const model_box& b) { return executor_box{b.m.instantiate(), b.policy, b.params_are_inputs}; })
      .def_prop_ro("param_bytes", [](const model_box& b) { return b.m.param_bytes(); })
      .def_prop_ro("policy", [](const model_box& b) { return b.policy; });

  nb::class_<library_box>(m, "Library")
      .def_static("load", [](const std::string& path) {
        library_box b{gexec::load_module(path), std::nullopt, {}};
        if (b.lib.has_symbol("__tvm_dev_mblob")) {
          try {
            b.fac.emplace(b.lib);
          } catch (const gexec::error&) {
            // a blob of imported modules and no graph: a kernel library, as TVM loads it
            if (embeds_graph_factory(b.lib)) throw;
          }
        }
        return b;
      })
      .def_prop_ro("is_factory", [](const library_box& b) { return b.fac.has_value(); })
      .def_prop_ro("path", [](const library_box& b) { return b.lib.path().string(); })
      .def("has_function", [](const library_box& b, std::string_view name) { return static_cast<bool>(b.lib.get_function(name)); })
      .def("call", [](const library_box& b, const std::string& name, nb::args args) { return call_kernel(b.lib, name, args); })
      .def("module_name", [](const library_box& b) { return b.fac ? b.fac->module_name() : std::string(); })
      .def("graph_json", [](const library_box& b) { return b.fac ? b.fac->graph_json() : std::string(); })
      .def("graph_params", [](const library_box& b) { return b.fac ? param_dict_to_python(b.fac->params()) : nb::dict(); })
      .def("factory_create", [](library_box& b, const std::vector<std::pair<int, int>>& devices, bool zero_unset_inputs) {
        return executor_box{b.create(to_devices(devices), zero_unset_inputs), {}, true};
      });

  m.def("_create", [](std::string_view graph_json, const library_box& lib, const std::vector<std::pair<int, int>>& devices,
                      bool zero_unset_inputs) {
    gexec::model_options o;
    o.devices = to_devices(devices);
    o.zero_unset_inputs = zero_unset_inputs;
    return executor_box{model_type(gexec::parse_graph(graph_json), gexec::packed_c_abi(lib.lib), std::move(o)).instantiate(), {}};
  });
  // The threads of the process's pool, which kernels' parallel loops use (tvm.runtime.num_threads).
  m.def("_num_threads", [] { return gexec::runtime::global().num_threads(); });
}

}  // namespace gexec_python
