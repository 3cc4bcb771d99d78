// gexec-run: runs a TVM graph-executor model, or a function of a Relax VM executable
// (TVM >= 0.20), from the command line.
//
//   gexec-run model.so --input data=@image.npy --output-dir out/
//   gexec-run --graph graph.json --lib lib.so --params params.bin --input x=0.5,-1,2,0.25
//   gexec-run model.so --zero-missing --benchmark --repeat 20 --min-repeat-ms 100
//   gexec-run model.so -i @inputs.npz --output outputs.npz
//   gexec-run model.so --input data=@x.npy --profile --trace trace.json --dump-dir nodes/
//   gexec-run model.so --info --dot graph.dot
//   gexec-run --convert-params params.bin params.safetensors
//   gexec-run --write-library model.so --graph graph.json --params params.bin --kernel-objects kernels.tar
//   gexec-run model.so -i @inputs.npz --atol 1e-5 --make-bundle bundle/ && gexec-run --verify bundle/
//   gexec-run --graph graph.json --lib lib.so --params params.bin --compare-dump tvmdbg/ --atol 1e-5
//   gexec-run relax_model.so --function main -i x=@x.npy --params weights.safetensors --output out.npz
//
// Exit status: 0 on success, 1 for any error (bad arguments, bad files, a failing
// kernel), 2 when an output differs from --expected or a bundle's (--verify), or a node
// from --compare-dump's dump.

#include <gexec/all_backends.hpp>
#include <gexec/contrib/sort.hpp>
#include <gexec/debug.hpp>
#include <gexec/executor.hpp>
#include <gexec/npy.hpp>
#include <gexec/npz.hpp>

#include <CLI/CLI.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "checks.hpp"
#include "library.hpp"
#include "relax.hpp"

namespace {

/// Where the model's weights live: read where they lie (mapped) or copied, and why.
std::string weights_line(const gexec::any_device_model& m) {
  const gexec::weights_report& w = m.weights();
  std::string line = "weights: " + std::to_string(w.in_place) + " tensors (" + std::to_string(w.in_place_bytes) + " bytes) read where they lie, " +
                     std::to_string(w.copied) + " (" + std::to_string(w.copied_bytes) + " bytes) copied";
  if (!w.why_copied.empty()) line += " (first: " + w.why_copied + ")";
  return line;
}


using namespace gexec_run;
namespace fs = std::filesystem;

void print_info(const options& o, const loaded& l) {
  const gexec::graph& g = l.ex().get_graph();
  std::cout << "inputs:\n";
  for (const auto& i : l.ex().get_input_info())
    std::cout << "  " << i.name << ": " << gexec::to_string(i.dtype) << gexec::detail::shape_to_string(i.shape) << '\n';
  std::cout << "outputs:\n";
  for (const auto& i : l.ex().get_output_info())
    std::cout << "  " << i.name << ": " << gexec::to_string(i.dtype) << gexec::detail::shape_to_string(i.shape) << '\n';
  std::set<std::string> functions;
  std::size_t ops = 0;
  for (const auto& n : g.nodes)
    if (n.is_op()) {
      ++ops;
      functions.insert(n.func_name);
    }
  std::cout << "parameters: " << l.param_names.size() << " (" << l.param_bytes << " bytes)\n"
            << weights_line(*l.model) << '\n'
            << "nodes: " << g.nodes.size() << " (" << ops << " kernel calls, " << functions.size() << " functions)\n"
            << "functions:";
  for (const auto& f : functions) std::cout << ' ' << f;
  std::cout << "\nactivation storage: " << l.ex().storage_bytes() << " bytes per executor\n";
  const gexec::storage_figures& f = l.ex().get_plan().figures;
  std::cout << "storage planner " << o.planner << ": " << f.planned << " bytes of activations (the graph's storage ids: " << f.as_compiled
            << ", lower bound: " << f.lower_bound << ")\n";
}

template <class F>
void run_with_policy(const options& o, executor_type& ex, F&& observer) {
  if (o.cuda_graph) return ex.run(gexec::cuda_graph{}, observer);
  gexec::with_policy(o.policy, [&](auto policy) { ex.run(policy, observer); });
}

void benchmark(const options& o, loaded& l) {
  executor_type& ex = l.ex();
  gexec::benchmark_options b{.repeat = o.repeat, .number = o.number, .min_repeat_ms = o.min_repeat_ms,
                             .cooldown_interval_ms = o.cooldown_ms, .repeats_to_cooldown = o.repeats_to_cooldown};
  // Each run waits for its device work (a no-op on the host): a run's time is its latency.
  const gexec::benchmark_result r = o.cuda_graph ? gexec::benchmark(
                                                       [&] {
                                                         ex.run(gexec::cuda_graph{});
                                                         ex.synchronize();
                                                       },
                                                       b)
                                                 : gexec::with_policy(o.policy, [&](auto policy) {
                                                     return gexec::benchmark(
                                                         [&] {
                                                           ex.run(policy);
                                                           ex.synchronize();
                                                         },
                                                         b);
                                                   });
  std::vector<double> sorted = r.results;
  std::sort(sorted.begin(), sorted.end());
  auto percentile = [&sorted](double p) {  // linear between closest ranks, as numpy.percentile
    const double rank = p / 100 * static_cast<double>(sorted.size() - 1);
    const auto lo = static_cast<std::size_t>(rank);
    const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - static_cast<double>(lo));
  };
  std::printf("run(): %zu repeats of %s; per run in us: mean %.3f, median %.3f, std %.3f, min %.3f, max %.3f, p90 %.3f, p99 %.3f\n",
              r.results.size(), o.min_repeat_ms > 0 ? ("at least " + std::to_string(o.min_repeat_ms) + " ms").c_str()
                                                    : (std::to_string(o.number) + " runs").c_str(),
              r.mean * 1e6, r.median * 1e6, r.std * 1e6, r.min * 1e6, r.max * 1e6, percentile(90) * 1e6, percentile(99) * 1e6);
  std::printf("run(): CPU time per run in us: %.3f (the process's threads together; wall mean %.3f)\n", r.cpu_mean * 1e6, r.mean * 1e6);
  double total = 0;
  std::printf("start-up in ms:");
  for (const auto& [step, seconds] : l.startup) {
    std::printf(" %s %.3f;", step.c_str(), seconds * 1e3);
    total += seconds;
  }
  std::printf(" total %.3f\n", total * 1e3);
  std::printf("first run in ms: %.3f (%.1fx the mean)\n", l.first_run * 1e3, r.mean > 0 ? l.first_run / r.mean : 0.0);
  std::printf("%s\n", weights_line(*l.model).c_str());
  std::printf("peak resident memory: %.1f MiB\n", static_cast<double>(r.peak_rss_bytes) / (1024.0 * 1024.0));
}

/// --convert-params IN OUT: TVM's blob to .safetensors or back (by OUT's extension), the
/// tensors' names, order, dtypes, shapes and bytes kept; a TVM blob is written with its
/// tensors --align-params aligned (64 by default: read in place by model::load).
int convert_params(const options& o) {
  const fs::path in = o.convert_params.at(0), out = o.convert_params.at(1);
  const gexec::param_dict params = gexec::load_param_dict_file(in);
  std::error_code ec;
  if (fs::equivalent(in, out, ec)) fail("--convert-params: the output " + out.string() + " is the input");
  const bool safetensors = out.extension() == ".safetensors";
  if (safetensors) gexec::save_safetensors_file(params, out);
  else gexec::save_param_dict_file(params, out, gexec::save_options{o.align_params});
  std::uint64_t bytes = 0;
  for (const auto& [name, value] : params) bytes += value.byte_size();
  std::cout << "wrote " << params.size() << " tensors (" << bytes << " bytes) to " << out.string() << " as "
            << (safetensors ? std::string(".safetensors")
                : o.align_params ? "TVM's parameter blob, every tensor's data " + std::to_string(o.align_params) + "-byte aligned (read in place)"
                                 : std::string("TVM's parameter blob, unpadded as TVM writes it"))
            << '\n';
  return 0;
}

/// Every file this run reads: the model's, the inputs', the expected outputs', the dump's.
std::vector<fs::path> files_read(const options& o) {
  std::vector<fs::path> files{o.model, o.graph, o.lib, o.params, o.bundle_expected, o.compare_dump};
  for (const std::string& spec : o.inputs) {
    const auto at = spec.find('@');
    if (at != std::string::npos) files.emplace_back(spec.substr(at + 1));
  }
  for (const std::string& spec : o.expected) {
    const auto at = spec.find('@');
    if (at != std::string::npos) files.emplace_back(spec.substr(at + 1));
  }
  return files;
}

/// Refuses to write `out` (for `flag`) over a file this run reads.
void refuse_overwriting_inputs(const options& o, const fs::path& out, const std::string& flag) {
  std::error_code ec;
  for (const fs::path& in : files_read(o))
    if (!in.empty() && fs::equivalent(in, out, ec))
      fail(flag + " " + out.string() + ": is a file this run reads (" + in.string() + "); name another file");
}

int run(options o) {
  if (!o.verify.empty()) {
    if (!o.model.empty() || !o.graph.empty() || !o.lib.empty() || !o.params.empty() || !o.inputs.empty() || !o.make_bundle.empty())
      fail("--verify runs the bundle's model on its inputs: give no model, --input or --make-bundle with it");
    o = read_bundle(std::move(o));
    if (!o.bundle_intact) {
      std::cout << "FAILED: the bundle " << o.verify << " holds files that changed since it was made; nothing was run\n";
      return 2;
    }
  }
  if (!o.bundle_expected.empty() && o.make_bundle.empty() && o.verify.empty()) fail("--bundle-expected goes with --make-bundle");
  if (!o.write_library.empty()) return write_library(o);
  if (!o.kernel_objects.empty()) fail("--kernel-objects goes with --write-library");
  if (!o.convert_params.empty()) {
    if (!o.model.empty() || !o.graph.empty() || !o.lib.empty() || !o.params.empty())
      fail("--convert-params converts a parameter file and runs nothing: give it alone");
    return convert_params(o);
  }
  if (!o.model.empty() && o.graph.empty() && o.lib.empty() && (!o.function.empty() || is_relax_library(o.model))) return run_relax(o);
  if (!o.function.empty()) fail("--function calls a function of a Relax VM executable; " + (o.model.empty() ? std::string("give its library") : o.model + " carries none"));
  const bool split = !o.graph.empty() || !o.lib.empty() || !o.params.empty();
  if (o.model.empty() == !split) fail("give either a single-file MODEL.so, or --graph and --lib (and --params), not both");
  if (split && (o.graph.empty() || o.lib.empty())) fail("--graph and --lib go together (with --params when the model has parameters)");
  if (o.repeat < 1 || o.number < 1 || o.min_repeat_ms < 0 || o.cooldown_ms < 0 || o.repeats_to_cooldown < 1)
    fail("--repeat, --number and --repeats-to-cooldown must be >= 1, --min-repeat-ms and --cooldown-ms >= 0");
  try {
    gexec::detail::check_tolerance({.atol = o.atol, .rtol = o.rtol}, "--atol " + std::to_string(o.atol) + " --rtol " + std::to_string(o.rtol));
  } catch (const gexec::error&) {
    fail("--atol and --rtol must be finite and >= 0, --rtol below 1 (an rtol of 1 accepts zero for anything)");
  }
  if (o.threads < 0) fail("--threads must be >= 0 (0: the cores this process may use)");
  if (o.print_limit < -1) fail("--print-limit must be >= -1 (-1: every element)");
  if (!o.output_file.empty() && !o.output_file.ends_with(".npz")) fail("--output " + o.output_file + ": writes an .npz archive: name it FILE.npz");

  if (!o.output_file.empty()) refuse_overwriting_inputs(o, o.output_file, "--output");
  if (!o.dot.empty()) refuse_overwriting_inputs(o, o.dot, "--dot");
  if (!o.trace.empty()) refuse_overwriting_inputs(o, o.trace, "--trace");
  loaded l = load(o);
  if (!o.output_dir.empty())
    for (int i = 0; i < l.ex().get_num_outputs(); ++i)
      refuse_overwriting_inputs(o, fs::path(o.output_dir) / ("output_" + std::to_string(i) + ".npy"), "--output-dir");
  if (!o.dot.empty()) {
    write_text(o.dot, gexec::to_dot(l.ex().get_graph(), l.param_names), "--dot");
    std::cout << "wrote the graph to " << o.dot << '\n';
  }
  if (o.info) {
    print_info(o, l);
    return 0;
  }
  check_expected_specs(o, l);
  std::optional<gexec::param_dict> dump;
  fs::path dump_file;
  if (!o.compare_dump.empty()) {
    dump = read_reference_dump(o.compare_dump, l.ex().get_graph(), dump_file);
  }
  set_inputs(o, l, dump ? &*dump : nullptr);
  bool matched = true;
  if (dump) matched = compare_with_dump(o, l.ex(), *dump, dump_file);
  gexec::no_observer none;
  const auto first_start = stopwatch::now();
  run_with_policy(o, l.ex(), none);
  l.first_run = seconds_since(first_start);
  const auto outputs = l.ex().get_output_info();
  for (int i = 0; i < l.ex().get_num_outputs(); ++i) print_tensor(outputs[static_cast<std::size_t>(i)].name, l.output(i), o.print_limit);
  const gexec::npy_names names = o.npy_names == "ml_dtypes" ? gexec::npy_names::ml_dtypes : gexec::npy_names::bits;
  if (!o.output_dir.empty()) {
    make_dir(o.output_dir, "--output-dir");
    for (int i = 0; i < l.ex().get_num_outputs(); ++i) {
      const fs::path file = fs::path(o.output_dir) / ("output_" + std::to_string(i) + ".npy");
      gexec::save_npy_file(file, l.output(i), names);
      std::cout << "wrote output " << i << " (" << outputs[static_cast<std::size_t>(i)].name << ") to " << file.string() << '\n';
    }
  }
  if (!o.output_file.empty()) {
    std::vector<std::pair<std::string, gexec::ndarray>> arrays;
    for (int i = 0; i < l.ex().get_num_outputs(); ++i) arrays.emplace_back(output_name(outputs, static_cast<std::size_t>(i)), l.output(i));
    write_text(o.output_file, gexec::save_npz(arrays, names), "--output");
    std::cout << "wrote " << arrays.size() << " outputs to " << o.output_file << " (";
    for (std::size_t i = 0; i < arrays.size(); ++i) std::cout << (i ? ", " : "") << arrays[i].first;
    std::cout << ")\n";
  }
  for (const std::string& spec : o.expected) matched = check_expected(spec, l, o) && matched;
  if (!o.verify.empty()) matched = verify_outputs(o, l) && matched;
  if (!o.make_bundle.empty()) make_bundle(o, l);

  if (!o.dump_dir.empty()) {
    make_dir(o.dump_dir, "--dump-dir");
    const std::size_t files = write_node_dump(o.dump_dir, l.ex().get_graph(), gexec::debug_get_outputs(l.ex()));
    std::cout << "wrote " << files << " node outputs to " << o.dump_dir << '\n';
  }
  if (o.profile) {
    const gexec::profile_report r = gexec::profile(l.ex(), {.warmup = 3, .repeat = o.repeat, .number = o.number});
    std::cout << r.table();
  }
  if (!o.trace.empty()) {
    gexec::trace_recorder trace(l.ex());
    for (int i = 0; i < o.repeat; ++i) {
      run_with_policy(o, l.ex(), trace);
      trace.end_run();
    }
    write_text(o.trace, trace.chrome_trace(), "--trace");
    std::cout << "wrote a trace of " << trace.runs() << " runs to " << o.trace << " (open it in https://ui.perfetto.dev)\n";
  }
  if (o.bench) benchmark(o, l);
  return matched ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  CLI::App app{"gexec-run " GEXEC_VERSION_STRING ": run a TVM graph-executor model (a single-file library, or graph JSON + kernel library + parameters), "
               "or a function of a Relax VM executable (TVM >= 0.20)"};
  app.set_version_flag("--version", GEXEC_VERSION_STRING);
  app.add_option("model", o.model, "single-file model library (TVM's export_library)");
  auto* model_group = "Model (split form)";
  app.add_option("-g,--graph", o.graph, "graph JSON")->group(model_group);
  app.add_option("-l,--lib", o.lib, "kernel library (.so)")->group(model_group);
  app.add_option("-p,--params", o.params,
                 "parameters: TVM's blob (tvm.runtime.save_param_dict), a .safetensors file or an .npz archive; for a Relax executable, "
                 "weights bound to the arguments of their names")
      ->group(model_group);
  app.add_option("-f,--function", o.function, "the function of a Relax VM executable (TVM >= 0.20) to call (default: main, or its only one)")
      ->group(model_group);
  app.add_option("--convert-params", o.convert_params,
                 "IN OUT: convert parameters between TVM's blob and .safetensors (OUT's extension decides), the tensors bit for bit, "
                 "and exit; a TVM blob is written aligned (--align-params), so that gexec reads its weights in place")
      ->expected(2)
      ->group(model_group);
  app.add_option("--write-library", o.write_library,
                 "OUT.so: link --kernel-objects with --graph and --params into a single-file library as TVM's export_library does, "
                 "every weight aligned (--align-params) so that gexec reads them where they lie in the library; calls tar and $CC (else cc), and exits")
      ->group(model_group);
  app.add_option("--kernel-objects", o.kernel_objects,
                 "with --write-library: the kernels as export_library leaves objects (lib.get_lib().export_library(\"kernels.tar\")), "
                 "or .o files")
      ->group(model_group);
  app.add_option("--align-params", o.align_params,
                 "with --convert-params and --write-library: the alignment of each tensor's data in a TVM blob written (a power of two; default 64, what "
                 "compiled kernels assume; 0: no padding, byte for byte as TVM writes)")
      ->check(CLI::Validator(
          [](std::string& v) {
            unsigned long long n = 0;
            const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
            return ec == std::errc{} && end == v.data() + v.size() && (n & (n - 1)) == 0 ? std::string() : v + " is not a power of two (or 0)";
          },
          "POWER OF 2"))
      ->group(model_group);
  app.add_option("-i,--input", o.inputs, "input NAME=v1,v2,... (by the input's dtype; one value fills the tensor), NAME=@file.npy, NAME=@raw.bin (little-endian, the model's dtype and shape), or @all.npz (arrays named by input)")
      ->group("Inputs and outputs");
  app.add_flag("--zero-missing", o.zero_missing, "run inputs that were not given as zeros (otherwise they are an error); never the weights: a split model needs --params for it")->group("Inputs and outputs");
  app.add_option("-o,--output-dir", o.output_dir, "write each output as DIR/output_<i>.npy")->group("Inputs and outputs");
  app.add_option("--output", o.output_file, "write every output to FILE.npz, named by the graph's output names")->group("Inputs and outputs");
  app.add_option("--npy-names", o.npy_names,
                 "how --output and --output-dir write bfloat16 and float8: bits (uint16/uint8, as TVM's NDArray.numpy() gives them; "
                 "the default) or ml_dtypes (raw bytes ml_dtypes reads as its types)")
      ->check(CLI::IsMember({"bits", "ml_dtypes"}))->group("Inputs and outputs");
  app.add_option("--make-bundle", o.make_bundle,
                 "write a reference bundle to DIR: the model, this run's inputs, its outputs (or --bundle-expected's) and --atol/--rtol")
      ->group("Bundles");
  app.add_option("--bundle-expected", o.bundle_expected, "FILE.npz: the expected outputs for --make-bundle (TVM's), by output name or index")
      ->group("Bundles");
  app.add_option("--verify", o.verify, "run a reference bundle DIR and compare every output; exit 2 on a mismatch")->group("Bundles");
  app.add_option("--expected", o.expected, "NAME=@file.npy: compare output NAME (\"softmax:0\", plain \"softmax\", or an index) with the file; exit 2 on mismatch")->group("Inputs and outputs");
  app.add_option("--atol", o.atol, "absolute tolerance for --expected, --compare-dump and --verify (default 0: exact)")->group("Inputs and outputs");
  app.add_option("--rtol", o.rtol, "relative tolerance for --expected and --compare-dump (default 0)")->group("Inputs and outputs");
  app.add_option("--print-limit", o.print_limit, "elements of each output printed (default 16; -1 for all)")->group("Inputs and outputs");
  app.add_flag("--info", o.info, "print the model's inputs, outputs, parameters and functions, and exit")->group("Inspect");
  app.add_option("--dot", o.dot, "write the graph for Graphviz to FILE")->group("Inspect");
  app.add_flag("--benchmark", o.bench, "time run() as TVM's time evaluator does, with CPU time, the start-up steps, the first run and peak resident memory")->group("Measure");
  app.add_option("--repeat", o.repeat, "measurements (default 5)")->group("Measure");
  app.add_option("--number", o.number, "runs per measurement (default 1)")->group("Measure");
  app.add_option("--min-repeat-ms", o.min_repeat_ms, "grow --number until a measurement lasts this long (default 0)")->group("Measure");
  app.add_option("--cooldown-ms", o.cooldown_ms, "pause after measurement i when i % repeats-to-cooldown == 0, as TVM (default 0)")->group("Measure");
  app.add_option("--repeats-to-cooldown", o.repeats_to_cooldown, "pause after every Nth measurement, the first included (default 1)")->group("Measure");
  app.add_flag("--profile", o.profile, "per-node table as TVM's debug executor printed it, with per-function totals")->group("Measure");
  app.add_option("--trace", o.trace, "write a Chrome trace (Perfetto) of --repeat runs to FILE")->group("Measure");
  app.add_option("--compare-dump", o.compare_dump,
                 "compare every node's outputs with TVM's debug executor's dump (its dump_root, or the _tvmdbg_device_* folder in it) "
                 "or a folder --dump-dir wrote (a Relax function's: TVM's VM writes none) within --atol/--rtol; "
                 "inputs not given come from the dump; exit 2 at a divergence")
      ->group("Measure");
  app.add_flag("--allow-missing", o.allow_missing, "with --compare-dump: a dump that lacks some node outputs may still match (they are counted)")
      ->group("Measure");
  app.add_option("--dump-dir", o.dump_dir, "write every node's outputs as DIR/<node>_<name>_<i>.npy, <node> zero-padded so that names sort in graph order "
                 "(a graph model, or a Relax function run as a graph)")->group("Measure");
  app.add_option("--threads", o.threads, "threads of the kernels' thread pool (default: the cores this process may use)")->group("Execution");
  app.add_option("--device", o.device, "device to run on: cpu[:N] or cuda[:N] (default cpu); a graph that places entries on the host runs them there")->group("Execution");
  app.add_option("--policy", o.policy, "execution policy: sequential or parallel (independent branches at once)")
      ->check(CLI::IsMember(std::vector<std::string>(gexec::policy_names.begin(), gexec::policy_names.end())))->group("Execution");
  app.add_flag("--cuda-graph", o.cuda_graph, "replay each run as one CUDA Graph (captured on the first runs; a model on one CUDA device)")
      ->group("Execution");
  app.add_option("--planner", o.planner, "storage planner: as_compiled (the graph's storage ids) or liveness (one arena per device)")
      ->check(CLI::IsMember(std::vector<std::string>(gexec::planner_names.begin(), gexec::planner_names.end())))->group("Execution");
  app.add_option("--progress", o.progress, "progress bar on stderr for large files: auto (when stderr is a terminal), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}))->group("Execution");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 1;
  }
  o.tolerance_given = app.count("--atol") > 0 || app.count("--rtol") > 0;
  try {
    return run(o);
  } catch (const gexec::error& e) {
    std::cerr << "gexec-run: " << e.what() << '\n';
  } catch (const std::exception& e) {
    std::cerr << "gexec-run: " << e.what() << '\n';
  }
  return 1;
}
