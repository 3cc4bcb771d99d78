#pragma once
// gexec-run on a Relax VM executable (TVM >= 0.20: relax.build(...).export_library): one
// function called with the inputs given, its results printed, written and compared.
//
//   gexec-run model.so --function main -i x=@x.npy --output out.npz
//   gexec-run model.so --params weights.safetensors -i x=@x.npy --expected 0=@want.npy
//   gexec-run model.so --info
//   gexec-run model.so -i x=@x.npy --dump-dir nodes/         # every node's outputs
//   gexec-run model.so --compare-dump nodes/ --atol 1e-5     # against such a dump
//
// Per-node dumps are for a function gexec runs as a graph (--info says which): its nodes
// are the arguments, the constants and the kernel calls of the translated function, and
// the files are those of a graph model's dump (io.hpp). TVM's VM writes no per-node dump,
// so the reference for --compare-dump is a dump gexec-run wrote (on another machine, or
// by another build). An interpreted function is refused both: its kernel calls are not
// fixed nodes (a branch or a loop decides which run), so nothing would name them alike
// from one dump to another.
//
// What a graph model's run does not share with a function call (the split form, bundles,
// traces, other devices and planners) is refused with the reason.
#include <gexec/relax.hpp>

#include "checks.hpp"

namespace gexec_run {

/// Whether the single-file library `path` carries a Relax VM executable.
inline bool is_relax_library(const std::string& path) { return gexec::relax::carries_executable(gexec::load_module(path)); }

namespace relax_run {

/// The options a Relax function call cannot honour, each with the reason.
inline void refuse_graph_options(const options& o) {
  auto no = [](bool given, const char* flag, const char* why) {
    if (given) fail(std::string(flag) + ": " + why + " (the model is a Relax VM executable)");
  };
  no(!o.make_bundle.empty() || !o.verify.empty(), "--make-bundle/--verify", "bundles hold graph models");
  no(!o.trace.empty(), "--trace", "traces record graph runs; use --profile for a function that runs as a graph");
  no(!o.dot.empty(), "--dot", "write the graph of a graph function with --info instead");
  no(o.device != "cpu", "--device", "gexec runs Relax executables on the host");
  no(o.policy != "sequential" || o.cuda_graph, "--policy/--cuda-graph", "a function runs its steps in order");
  no(o.planner != "as_compiled", "--planner", "graph functions are planned by liveness");
  no(o.zero_missing, "--zero-missing", "every argument of a function is given");
}

/// What is known of each argument the caller passes: its name, and for a function run as
/// a graph its dtype and shape (interpreted functions learn them at the call).
inline std::vector<gexec::tensor_info> argument_infos(const gexec::relax::executable& exe, const std::string& function) {
  std::vector<gexec::tensor_info> infos;
  const auto names = exe.input_names(function);
  const gexec::relax::graph_program* g = exe.graph_of(function);
  for (std::size_t i = 0; i < names.size(); ++i) {
    gexec::tensor_info t;
    t.name = names[i];
    if (g) {
      t.dtype = gexec::relax::from_vm_dtype(g->function.input_dtypes[i]);
      t.shape = g->function.input_shapes[i];
    }
    infos.push_back(std::move(t));
  }
  return infos;
}

/// The arguments the command line gives; with --compare-dump, those it does not come from
/// the dump's values of the graph's input nodes (`dump` and `g`, else null).
inline std::vector<gexec::ndarray> read_arguments(const options& o, const std::vector<gexec::tensor_info>& infos, bool typed,
                                                  const gexec::param_dict* dump = nullptr, const gexec::graph* g = nullptr) {
  std::vector<std::optional<gexec::ndarray>> args(infos.size());
  auto place = [&](int index, gexec::ndarray a, const std::string& from) {
    auto& slot = args[static_cast<std::size_t>(index)];
    if (slot) fail("--input: argument " + infos[static_cast<std::size_t>(index)].name + " given twice (again by " + from + ")");
    slot = std::move(a);
  };
  for (const std::string& spec : o.inputs) {
    if (spec.size() > 5 && spec.front() == '@' && spec.ends_with(".npz")) {
      for (auto& [name, a] : gexec::load_npz_file(spec.substr(1))) place(find_named(infos, name, "--input " + spec, "argument"), std::move(a), spec);
      continue;
    }
    const auto [name, value] = split_spec(spec, "--input");
    const int index = find_named(infos, name, "--input", "argument");
    const std::string what = "--input " + infos[static_cast<std::size_t>(index)].name;
    if (typed) place(index, read_tensor(value, infos[static_cast<std::size_t>(index)], what), spec);
    else if (!value.empty() && value.front() == '@' && value.ends_with(".npy")) place(index, gexec::load_npy_file(value.substr(1)), spec);
    else fail(what + ": this function is interpreted, so its arguments' shapes are known only at the call: give NAME=@FILE.npy");
  }
  for (std::size_t i = 0; i < args.size() && dump && g; ++i)
    for (std::uint32_t nid = 0; nid < g->nodes.size() && !args[i]; ++nid)
      if (!g->nodes[nid].is_op() && g->nodes[nid].name == infos[i].name)
        if (const gexec::ndarray* v = dump->find(gexec::dump_key(infos[i].name, nid, 0))) args[i] = retyped(*v, &gexec::relax::from_vm_dtype);
  std::vector<gexec::ndarray> out;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (!args[i]) fail("argument " + infos[i].name + " (" + std::to_string(i) + ") was not given (--input " + infos[i].name + "=@FILE.npy)");
    out.push_back(std::move(*args[i]));
  }
  return out;
}

inline void print_info(const gexec::relax::executable& exe) {
  std::cout << exe.source() << "\nfunctions:\n";
  for (const std::string& f : exe.function_names()) {
    std::cout << "  " << f << "(";
    const auto infos = argument_infos(exe, f);
    for (std::size_t i = 0; i < infos.size(); ++i) {
      std::cout << (i ? ", " : "") << infos[i].name;
      if (exe.graph_of(f)) std::cout << ": " << gexec::to_string(infos[i].dtype) << gexec::detail::shape_to_string(infos[i].shape);
    }
    std::cout << ")";
    if (const auto* g = exe.graph_of(f)) {
      std::size_t kernels = 0;
      const gexec::compact_graph& c = g->model.compact();
      for (std::uint32_t n = 0; n < c.num_nodes(); ++n) kernels += c.is_op(n) && c.func_name(n) != "__nop";
      std::cout << ": a graph of " << kernels << " kernel calls, " << g->model.storage().planned << " bytes of activations\n";
    } else {
      std::cout << ": interpreted (" << exe.interpreted_because(f) << ")\n";
    }
  }
}

}  // namespace relax_run

/// Runs `o.function` of the Relax executable `o.model`; the exit status as run() gives it.
inline int run_relax(const options& o) {
  relax_run::refuse_graph_options(o);
  std::shared_ptr<gexec::runtime> rt;
  if (o.threads > 0) rt = gexec::runtime::create({.num_threads = o.threads});
  gexec::relax::executable_options eo;
  eo.model.runtime = rt;
  const auto t0 = stopwatch::now();
  const gexec::relax::executable exe =
      o.params.empty() ? gexec::relax::load_executable(o.model, std::move(eo)) : gexec::relax::load_executable(o.model, o.params, std::move(eo));
  const double load_seconds = seconds_since(t0);
  if (o.info) {
    relax_run::print_info(exe);
    return 0;
  }
  std::string function = o.function;
  if (function.empty()) {
    const auto names = exe.function_names();
    if (names.size() != 1 && std::find(names.begin(), names.end(), "main") == names.end()) {
      std::string all;
      for (const auto& n : names) all += (all.empty() ? "" : ", ") + n;
      fail("the executable has several functions and none is \"main\": name one with --function (" + all + ")");
    }
    function = names.size() == 1 ? names.front() : "main";
  }
  (void)exe.function(function);  // errc::not_found, naming the functions there are
  const auto infos = relax_run::argument_infos(exe, function);
  gexec::relax::virtual_machine vm(exe);
  const bool per_node = !o.dump_dir.empty() || !o.compare_dump.empty();
  if (per_node && !exe.graph_of(function))
    fail(std::string(o.dump_dir.empty() ? "--compare-dump" : "--dump-dir") + ": function \"" + function + "\" is interpreted (" +
         exe.interpreted_because(function) + "); per-node dumps are written and compared for a function gexec runs as a graph, whose "
         "nodes are its kernel calls, and an interpreted function's calls are not fixed nodes (--info says which functions are graphs)");
  std::optional<gexec::param_dict> dump;
  fs::path dump_file;
  if (!o.compare_dump.empty())  // in the executable's dtypes, as the graph's nodes hold them
    dump = read_reference_dump(o.compare_dump, vm.graph_executor(function).get_graph(), dump_file, &gexec::relax::to_vm_dtype);
  const std::vector<gexec::ndarray> args = relax_run::read_arguments(o, infos, exe.graph_of(function) != nullptr, dump ? &*dump : nullptr,
                                                                     dump ? &vm.graph_executor(function).get_graph() : nullptr);
  const auto first_start = stopwatch::now();
  const std::vector<gexec::ndarray> outputs = vm.run(function, args);
  const double first_run = seconds_since(first_start);
  std::vector<gexec::tensor_info> out_infos;
  for (std::size_t i = 0; i < outputs.size(); ++i)
    out_infos.push_back({"output_" + std::to_string(i), {outputs[i].shape().begin(), outputs[i].shape().end()}, outputs[i].dtype()});
  for (std::size_t i = 0; i < outputs.size(); ++i) print_tensor(out_infos[i].name, outputs[i], o.print_limit);
  const gexec::npy_names names = o.npy_names == "ml_dtypes" ? gexec::npy_names::ml_dtypes : gexec::npy_names::bits;
  if (!o.output_dir.empty()) {
    make_dir(o.output_dir, "--output-dir");
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      const fs::path file = fs::path(o.output_dir) / (out_infos[i].name + ".npy");
      gexec::save_npy_file(file, outputs[i], names);
      std::cout << "wrote " << out_infos[i].name << " to " << file.string() << '\n';
    }
  }
  if (!o.output_file.empty()) {
    std::vector<std::pair<std::string, gexec::ndarray>> arrays;
    for (std::size_t i = 0; i < outputs.size(); ++i) arrays.emplace_back(out_infos[i].name, outputs[i]);
    write_text(o.output_file, gexec::save_npz(arrays, names), "--output");
    std::cout << "wrote " << arrays.size() << " outputs to " << o.output_file << '\n';
  }
  bool matched = true;
  for (const std::string& spec : o.expected) {
    const auto [name, value] = split_spec(spec, "--expected");
    const int index = find_named(out_infos, name, "--expected", "output");
    if (value.empty() || value.front() != '@') fail("--expected " + spec + ": expected NAME=@FILE.npy");
    const gexec::ndarray want = read_npy_as(value.substr(1), outputs[static_cast<std::size_t>(index)].dtype());
    matched = compare_arrays(out_infos[static_cast<std::size_t>(index)].name, outputs[static_cast<std::size_t>(index)], want, o) && matched;
  }
  if (!o.dump_dir.empty()) {  // the run again, node by node, with the same arguments
    make_dir(o.dump_dir, "--dump-dir");
    gexec::model::executor& ex = vm.graph_executor(function);
    const std::size_t files = write_node_dump(o.dump_dir, ex.get_graph(), gexec::debug_get_outputs(ex), &gexec::relax::from_vm_dtype);
    std::cout << "wrote " << files << " node outputs of " << function << "() to " << o.dump_dir << '\n';
  }
  if (dump) matched = compare_with_dump(o, vm.graph_executor(function), *dump, dump_file) && matched;
  if (o.profile) {
    const gexec::profile_report r = gexec::profile(vm.graph_executor(function), {.warmup = 3, .repeat = o.repeat, .number = o.number});
    std::cout << r.table();
  }
  if (o.bench) {
    gexec::benchmark_options b{.repeat = o.repeat, .number = o.number, .min_repeat_ms = o.min_repeat_ms,
                               .cooldown_interval_ms = o.cooldown_ms, .repeats_to_cooldown = o.repeats_to_cooldown};
    const gexec::benchmark_result r = gexec::benchmark([&] { (void)vm.run(function, args); }, b);
    std::printf("%s(): %zu repeats; per call in us: mean %.3f, median %.3f, std %.3f, min %.3f, max %.3f (%s)\n", function.c_str(),
                r.results.size(), r.mean * 1e6, r.median * 1e6, r.std * 1e6, r.min * 1e6, r.max * 1e6,
                exe.graph_of(function) ? "a gexec graph" : "interpreted");
    std::printf("start-up in ms: load executable %.3f; first call %.3f\n", load_seconds * 1e3, first_run * 1e3);
    std::printf("peak resident memory: %.1f MiB\n", static_cast<double>(r.peak_rss_bytes) / (1024.0 * 1024.0));
  }
  return matched ? 0 : 2;
}

}  // namespace gexec_run
