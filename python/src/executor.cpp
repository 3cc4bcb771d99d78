// gexec._gexec.Executor: an executor of a graph model as Python drives it (inputs, runs,
// outputs, parameters, the debug executor, compare_dump, benchmarks).

#include "common.hpp"

namespace gexec_python {

namespace {

/// An input setter's four overloads: by index or by name, of a gexec NDArray or of an
/// array Python hands over (viewed in the input's dtype); `set(ex, index, tensor)` sets it.
template <class Set>
void def_input_setter(nb::class_<executor_box>& c, const char* name, Set set) {
  c.def(name, [set](executor_box& b, int i, const gexec::ndarray& v) {
     b.check_input(i);
     set(b.ex, i, v);
   })
      .def(name, [set](executor_box& b, int i, const in_array& v) {
        b.check_input(i);
        set(b.ex, i, view_of(v, b.input_dtype(i)));
      })
      .def(name, [set](executor_box& b, std::string_view n, const gexec::ndarray& v) { set(b.ex, b.index_of(n), v); })
      .def(name, [set](executor_box& b, std::string_view n, const in_array& v) {
        const int i = b.index_of(n);
        set(b.ex, i, view_of(v, b.input_dtype(i)));
      });
}

}  // namespace

void bind_executor(nb::module_& m) {
  // ---- executors --------------------------------------------------------------------
  nb::class_<executor_box> executor(m, "Executor");
  executor
      .def_prop_ro("num_inputs", [](const executor_box& b) { return b.ex.get_num_inputs(); })
      .def_prop_ro("num_outputs", [](const executor_box& b) { return b.ex.get_num_outputs(); })
      .def("get_num_inputs", [](const executor_box& b) { return b.ex.get_num_inputs(); })
      .def("get_num_outputs", [](const executor_box& b) { return b.ex.get_num_outputs(); })
      .def("get_input_index", [](const executor_box& b, std::string_view name) { return b.ex.get_input_index(name); })
      .def("get_output_index", [](const executor_box& b, std::string_view name) { return b.ex.get_output_index(name); });
  def_input_setter(executor, "set_input", [](auto& ex, int i, const gexec::ndarray& v) { ex.set_input(i, v); });
  def_input_setter(executor, "set_input_zero_copy", [](auto& ex, int i, const gexec::ndarray& v) { ex.set_input_zero_copy(i, v); });
  executor
      .def("set_output_zero_copy", [](executor_box& b, int i, const gexec::ndarray& v) { b.check_output(i); b.ex.set_output_zero_copy(i, v); })
      .def("set_output_zero_copy", [](executor_box& b, int i, const out_array& v) {
        b.check_output(i);
        b.ex.set_output_zero_copy(i, view_of(v, b.output_dtype(i)));
      })
      .def("run", &executor_box::run, nb::call_guard<gil_released>(),
           "Runs the graph once, without the GIL: other Python threads run meanwhile.")
      .def("get_output", [](const executor_box& b, int i) { b.check_output(i); return b.ex.get_output(i); })
      .def("copy_output_to", [](executor_box& b, int i, const gexec::ndarray& dst) { b.check_output(i); b.ex.copy_output_to(i, dst); })
      .def("copy_output_to", [](executor_box& b, int i, const out_array& dst) {
        b.check_output(i);
        b.ex.copy_output_to(i, view_of(dst, b.output_dtype(i)));
      })
      .def("output_numpy", [](const executor_box& b, int i) { b.check_output(i); return numpy_copy(b.ex.get_output(i)); })
      .def("get_input", [](const executor_box& b, int i) { b.check_input(i); return b.ex.get_input(i); })
      .def("get_input", [](const executor_box& b, std::string_view n) { return b.ex.get_input(b.index_of(n)); })
      .def("get_input_info", [](const executor_box& b) {
        std::vector<std::tuple<std::string, std::vector<std::int64_t>, std::string>> out;
        for (auto& t : b.ex.get_input_info()) out.emplace_back(t.name, t.shape, gexec::to_string(t.dtype));
        return out;
      })
      // TVM's GetInputInfo: every input but the parameters loaded into this executor
      // (load_params, share_params); the model's own parameters too where they came from
      // the library's factory (params_are_inputs).
      .def("tvm_input_info", [](const executor_box& b) {
        std::vector<std::tuple<std::string, std::vector<std::int64_t>, std::string>> out;
        const auto& m = *b.ex.get_model_state();
        const auto& g = m.compact();
        std::vector<std::string> not_params;
        for (auto& t : b.ex.get_input_info()) not_params.push_back(t.name);
        for (std::size_t i = 0; i < g.arg_nodes.size(); ++i) {
          std::string name(g.name(g.arg_nodes[i]));
          const bool listed = std::find(not_params.begin(), not_params.end(), name) != not_params.end() ||
                              (b.params_are_inputs && m.params[i].defined());
          if (!listed) continue;
          const std::uint32_t eid = m.input_entry(i);
          const auto shape = g.shape(eid);
          out.emplace_back(std::move(name), std::vector<std::int64_t>(shape.begin(), shape.end()), gexec::to_string(g.dltype[eid]));
        }
        return out;
      })
      .def("get_output_info", [](const executor_box& b) {
        std::vector<std::tuple<std::string, std::vector<std::int64_t>, std::string>> out;
        for (auto& t : b.ex.get_output_info()) out.emplace_back(t.name, t.shape, gexec::to_string(t.dtype));
        return out;
      })
      .def("load_params", [](executor_box& b, nb::bytes blob) { b.ex.load_params(std::string_view(blob.c_str(), blob.size())); })
      .def("load_params_file", [](executor_box& b, const std::string& path) { b.ex.load_params_file(path); })
      .def("share_params", [](executor_box& b, const executor_box& other, nb::bytes blob) {
        b.ex.share_params(other.ex, std::string_view(blob.c_str(), blob.size()));
      })
      .def("debug_get_output", [](executor_box& b, std::string_view node, std::uint32_t index) { return b.ex.debug_get_output(node, index); })
      .def("debug_get_output_node", [](executor_box& b, int nid) {
        const auto& g = b.ex.get_model_state()->compact();
        if (nid < 0 || static_cast<std::uint32_t>(nid) >= g.num_nodes())
          throw nb::index_error(("node index " + std::to_string(nid) + " out of range (" + std::to_string(g.num_nodes()) + " nodes)").c_str());
        return b.ex.debug_get_output(g.entry_id(static_cast<std::uint32_t>(nid), 0));
      })
      .def("num_nodes", [](const executor_box& b) { return b.ex.get_model_state()->compact().num_nodes(); })
      .def("node_name", [](const executor_box& b, std::uint32_t nid) { return std::string(b.ex.get_model_state()->compact().name(nid)); })
      .def("node_num_outputs", [](const executor_box& b, std::uint32_t nid) { return b.ex.get_model_state()->compact().num_outputs(nid); })
      .def("storage_bytes", [](const executor_box& b) { return b.ex.storage_bytes(); })
      // TVM's debug executor (gexec/debug.hpp): every node's outputs from one run, each
      // node timed alone, and the profile table.
      .def("debug_get_outputs", [](executor_box& b) {
        std::vector<std::tuple<std::uint32_t, std::uint32_t, gexec::ndarray>> out;
        for (auto& o : gexec::debug_get_outputs(b.ex)) out.emplace_back(o.node_id, o.index, std::move(o.value));
        return out;
      })
      // Every node's outputs against TVM's debug executor's dump (gexec/debug/compare_dump.hpp):
      // (file, inputs taken from the dump, rows in graph order, index of the first divergence
      // or -1, the table, the first divergence described).
      .def("compare_dump", [](executor_box& b, const std::string& dir, double atol, double rtol, bool inputs_from_dump) {
        const std::filesystem::path file = gexec::find_dump_file(dir);
        const gexec::param_dict dump = gexec::load_param_dict_file(file);
        std::vector<std::string> taken;
        if (inputs_from_dump) taken = gexec::set_inputs_from_dump(b.ex, dump);
        gexec::dump_comparison c;
        {
          gil_released nogil;
          c = gexec::compare_dump(b.ex, dump, {.atol = atol, .rtol = rtol});
        }
        c.file = file;
        nb::list rows;
        int first = -1;
        const gexec::node_comparison* divergence = c.first_divergence();
        for (std::size_t i = 0; i < c.nodes.size(); ++i) {
          const gexec::node_comparison& n = c.nodes[i];
          if (&n == divergence) first = static_cast<int>(i);
          nb::dict row;
          row["node_id"] = n.node_id;
          row["index"] = n.index;
          row["name"] = n.name;
          row["func_name"] = n.func_name;
          row["key"] = n.key;
          row["dtype"] = gexec::to_string(n.dtype);
          row["shape"] = nb::cast(n.shape);
          row["inputs"] = nb::cast(n.inputs);
          row["found"] = n.found;
          row["problem"] = n.problem;
          row["count"] = n.count;
          row["mismatched"] = n.mismatched;
          row["first_mismatch"] = n.first_mismatch;
          row["max_abs"] = n.max_abs;
          row["max_rel"] = n.max_rel;
          row["max_ulps"] = n.is_float ? nb::cast(n.max_ulps) : nb::none();
          row["within"] = n.within();
          rows.append(row);
        }
        return nb::make_tuple(file.string(), taken, rows, first, c.table(), divergence ? c.describe(*divergence) : std::string());
      })
      .def("run_individual", [](executor_box& b, int repeat, int number, int min_repeat_ms, int limit_zero_time_iterations,
                                int cooldown_interval_ms, int repeats_to_cooldown) {
        gexec::benchmark_options o{repeat, number, min_repeat_ms, limit_zero_time_iterations, cooldown_interval_ms, repeats_to_cooldown};
        gil_released nogil;
        return gexec::run_individual(b.ex, o);
      })
      .def("run_individual_node", [](executor_box& b, int nid, int repeat, int number, int min_repeat_ms, int limit_zero_time_iterations,
                                     int cooldown_interval_ms, int repeats_to_cooldown) {
        if (nid < 0 || static_cast<std::uint32_t>(nid) >= b.ex.get_model_state()->compact().num_nodes())
          throw nb::index_error(("node index " + std::to_string(nid) + " out of range").c_str());
        gexec::benchmark_options o{repeat, number, min_repeat_ms, limit_zero_time_iterations, cooldown_interval_ms, repeats_to_cooldown};
        gil_released nogil;
        return gexec::run_individual_node(b.ex, static_cast<std::uint32_t>(nid), o);
      })
      .def("profile_table", [](executor_box& b, int warmup, int repeat, int number) {
        gexec::profile_options o;
        o.warmup = warmup;
        o.repeat = repeat;
        o.number = number;
        gexec::profile_report r;
        {
          gil_released nogil;
          r = gexec::profile(b.ex, o);
        }
        return std::pair<std::string, double>(r.table(), r.run_time);
      })
      .def_rw("policy", &executor_box::policy)
      .def(
          "benchmark",
          [](executor_box& b, int repeat, int number, int min_repeat_ms, int limit_zero_time_iterations, int cooldown_interval_ms,
             int repeats_to_cooldown) {
            gexec::benchmark_options o{repeat, number, min_repeat_ms, limit_zero_time_iterations, cooldown_interval_ms, repeats_to_cooldown};
            gil_released nogil;
            return gexec::benchmark([&b] { b.run(); }, o).results;
          },
          "repeat"_a, "number"_a, "min_repeat_ms"_a, "limit_zero_time_iterations"_a, "cooldown_interval_ms"_a, "repeats_to_cooldown"_a);

}

}  // namespace gexec_python
