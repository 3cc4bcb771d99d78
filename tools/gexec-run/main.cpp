// gexec-run: runs a TVM graph-executor model from the command line.
//
//   gexec-run model.so --input data=@image.npy --output-dir out/
//   gexec-run --graph graph.json --lib lib.so --params params.bin --input x=0.5,-1,2,0.25
//   gexec-run model.so --zero-missing --benchmark --repeat 20 --min-repeat-ms 100
//   gexec-run model.so -i @inputs.npz --output outputs.npz
//   gexec-run model.so --input data=@x.npy --profile --trace trace.json --dump-dir nodes/
//   gexec-run model.so --info --dot graph.dot
//   gexec-run --convert-params params.bin params.safetensors
//   gexec-run model.so -i @inputs.npz --atol 1e-5 --make-bundle bundle/ && gexec-run --verify bundle/
//   gexec-run --graph graph.json --lib lib.so --params params.bin --compare-dump tvmdbg/ --atol 1e-5
//
// Exit status: 0 on success, 1 for any error (bad arguments, bad files, a failing
// kernel), 2 when an output differs from --expected or a bundle's (--verify), or a node
// from --compare-dump's dump.

#include <gexec/contrib/sort.hpp>
#include <gexec/cuda.hpp>
#include <gexec/debug.hpp>
#include <gexec/executor.hpp>
#include <gexec/npy.hpp>
#include <gexec/npz.hpp>

#include <CLI/CLI.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
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

#include "bundle.hpp"
#include "values.hpp"

namespace {

namespace fs = std::filesystem;

struct options {
  std::string model, graph, lib, params;
  std::vector<std::string> inputs, expected;
  bool zero_missing = false;
  std::string output_dir, output_file, dump_dir, trace, dot, compare_dump;
  std::vector<std::string> convert_params;
  std::string make_bundle, bundle_expected, verify;
  std::vector<std::string> bundle_outputs;  ///< --verify: the output names the bundle lists (its "output" lines)
  bool allow_missing = false;               ///< --compare-dump: a dump that lacks node outputs may still match
  bool tolerance_given = false;  ///< --atol or --rtol on the command line (else a bundle's own)
  bool info = false, bench = false, profile = false;
  int repeat = 5, number = 1, min_repeat_ms = 0, cooldown_ms = 0, repeats_to_cooldown = 1;
  int threads = 0;
  std::string device = "cpu";
  std::string policy = "sequential";
  bool cuda_graph = false;
  std::string planner = "as_compiled";
  double atol = 1e-4, rtol = 0;
  int print_limit = 16;
  std::string progress = "auto";
};

[[noreturn]] void fail(const std::string& message) { throw gexec::error(gexec::errc::invalid_argument, message); }

// ---- loading, with a progress bar on long reads ---------------------------------------

/// Draws "label [#####     ]  52%" on stderr, redrawn in place, for reads of large files:
/// never mixed into the results on stdout.
class progress_bar {
 public:
  progress_bar(std::string label, std::uint64_t total, bool shown) : label_(std::move(label)), total_(total), shown_(shown) {}
  /// `total`: of how many bytes, when the load says (else the file's size).
  void update(std::uint64_t done, std::uint64_t total = 0) {
    if (total == 0) total = total_;
    if (!shown_ || total == 0) return;
    const int percent = static_cast<int>(std::min(done, total) * 100 / total);
    if (percent == last_) return;
    last_ = percent;
    const int filled = percent * 30 / 100;
    std::fprintf(stderr, "\r%s [%s%s] %3d%%", label_.c_str(), std::string(static_cast<std::size_t>(filled), '#').c_str(),
                std::string(static_cast<std::size_t>(30 - filled), ' ').c_str(), percent);
    std::fflush(stderr);
  }
  void finish() {
    if (shown_ && last_ >= 0) std::fprintf(stderr, "\r%s\r", std::string(label_.size() + 38, ' ').c_str());
    std::fflush(stderr);
  }

 private:
  std::string label_;
  std::uint64_t total_;
  bool shown_;
  int last_ = -1;
};

/// A load_progress that draws a bar for `path` when `progress` says so ("auto": when
/// stderr is a terminal, for files of 32 MiB or more); the bar is cleared when the load ends.
struct file_progress {
  progress_bar bar;
  gexec::load_progress callback;
  file_progress(const fs::path& path, const std::string& progress)
      : bar("loading " + path.filename().string(), file_size_or_zero(path), shown(path, progress)) {
    if (shown(path, progress)) callback = [this](std::uint64_t done, std::uint64_t total) { bar.update(done, total); };
  }
  file_progress(const file_progress&) = delete;
  file_progress& operator=(const file_progress&) = delete;
  ~file_progress() { bar.finish(); }

 private:
  static std::uint64_t file_size_or_zero(const fs::path& path) {
    std::error_code ec;
    const auto size = fs::file_size(path, ec);
    return ec ? 0 : size;
  }
  static bool shown(const fs::path& path, const std::string& progress) {
    return progress == "always" || (progress == "auto" && ::isatty(STDERR_FILENO) && file_size_or_zero(path) >= (std::uint64_t{32} << 20));
  }
};

// Models run on the host and, with --device cuda, on a GPU (the driver is loaded then).
using executor_type = gexec::cuda_executor;

using stopwatch = std::chrono::steady_clock;
double seconds_since(stopwatch::time_point t0) { return std::chrono::duration<double>(stopwatch::now() - t0).count(); }

struct loaded {
  /// Start-up, step by step: (step, seconds), in order.
  std::vector<std::pair<std::string, double>> startup;
  double first_run = 0;  ///< seconds of the first run()
  std::optional<gexec::factory> factory;  // a single-file model: its embedded parameters
  std::optional<gexec::cuda_model> model;
  std::vector<std::string> param_names;
  std::uint64_t param_bytes = 0;
  std::optional<executor_type> executor;
  executor_type& ex() { return *executor; }
  const executor_type& ex() const { return *executor; }
  /// Output `index` on the host (copied back from a device).
  gexec::ndarray output(int index) {
    gexec::ndarray out = ex().get_output(index);
    if (out.device().device_type == kDLCPU) return out;
    gexec::ndarray host = gexec::ndarray::empty({out.shape().begin(), out.shape().end()}, out.dtype());
    ex().copy_output_to(index, host);
    return host;
  }
};

DLDevice parse_device(const std::string& text) {
  const auto colon = text.find(':');
  const std::string type = text.substr(0, colon);
  int id = 0;
  if (colon != std::string::npos) {
    const std::string digits = text.substr(colon + 1);
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), id);
    if (digits.empty() || ec != std::errc{} || end != digits.data() + digits.size() || id < 0)
      fail("--device " + text + ": the device id must be a number >= 0");
  }
  if (type == "cpu" || type == "llvm") return gexec::cpu(id);
  if (type == "cuda" || type == "gpu") return gexec::cuda(id);
  fail("--device " + text + ": unknown device type \"" + type + "\" (known: cpu, cuda)");
}

loaded load(const options& o) {
  std::shared_ptr<gexec::runtime> rt;
  if (o.threads > 0) rt = gexec::runtime::create({.num_threads = o.threads});
  gexec::contrib::register_sort_functions(rt ? *rt : gexec::runtime::global());
  const DLDevice device = parse_device(o.device);
  // Entries the graph does not place run on --device; those it places on the host (a
  // heterogeneous graph's device_index) on the host.
  gexec::model_options mo;
  mo.devices = {device};
  if (device.device_type != kDLCPU) mo.devices.push_back(gexec::cpu());
  mo.runtime = rt;
  mo.planner = gexec::planner_named(o.planner);
  loaded l;
  auto t0 = stopwatch::now();
  auto step = [&](const char* name) {
    l.startup.emplace_back(name, seconds_since(t0));
    t0 = stopwatch::now();
  };
  if (!o.model.empty()) {
    {  // the embedded blob is read here, once; the factory below shares it
      file_progress bar(o.model, o.progress);
      gexec::model_options first = mo;
      first.progress = bar.callback;
      l.model.emplace(gexec::cuda_model::load(o.model, std::move(first)));
    }
    step("load library, read its graph and parameters, plan");
    l.factory = gexec::load_factory(o.model, rt);
    for (const auto& [name, value] : l.factory->params()) {
      l.param_names.push_back(name);
      l.param_bytes += value.byte_size();
    }
    t0 = stopwatch::now();  // the factory is gexec-run's own bookkeeping
    l.executor.emplace(l.model->instantiate());
    step("create the executor");
    return l;
  }
  const gexec::validated_graph g = [&] {
    file_progress bar(o.graph, o.progress);
    return gexec::load_graph_file(o.graph, bar.callback);
  }();
  step("read graph");
  gexec::param_dict params;
  if (!o.params.empty()) {
    file_progress bar(o.params, o.progress);
    params = gexec::load_param_dict_file(o.params, gexec::load_mode::copy, bar.callback);
  }
  step("read parameters");
  for (const auto& [name, value] : params) {
    l.param_names.push_back(name);
    l.param_bytes += value.byte_size();
  }
  t0 = stopwatch::now();
  gexec::module lib = rt ? rt->load_module(o.lib) : gexec::load_module(o.lib);
  step("load library");
  l.model.emplace(g, gexec::packed_c_abi(std::move(lib)), params, mo);
  step("plan (bind kernels, place storage)");
  l.executor.emplace(l.model->instantiate());
  step("create the executor");
  return l;
}

// ---- inputs, outputs, checks -------------------------------------------------------------

/// "name=..." split at the first '='; the name may also be an index.
std::pair<std::string, std::string> split_spec(const std::string& spec, const std::string& flag) {
  const auto eq = spec.find('=');
  if (eq == std::string::npos || eq == 0) fail(flag + " " + spec + ": expected NAME=VALUES, NAME=@FILE.npy, NAME=@FILE.bin or @FILE.npz");
  return {spec.substr(0, eq), spec.substr(eq + 1)};
}

/// The input or output `name` names: its full name ("softmax:0"), its plain name as TVM's
/// users write it ("softmax", when one output has it), or its index.
int find_named(const std::vector<gexec::tensor_info>& infos, const std::string& name, const std::string& flag, const std::string& kind) {
  for (std::size_t i = 0; i < infos.size(); ++i)
    if (infos[i].name == name) return static_cast<int>(i);
  int plain = -1, plain_count = 0;
  for (std::size_t i = 0; i < infos.size(); ++i) {
    const auto colon = infos[i].name.rfind(':');
    if (colon != std::string::npos && infos[i].name.compare(0, colon, name) == 0 && colon == name.size()) {
      plain = static_cast<int>(i);
      ++plain_count;
    }
  }
  if (plain_count == 1) return plain;
  int index = -1;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), index);
  if (ec == std::errc{} && end == name.data() + name.size() && index >= 0 && static_cast<std::size_t>(index) < infos.size()) return index;
  std::string known;
  for (const auto& i : infos) known += (known.empty() ? "" : ", ") + i.name;
  fail(flag + " " + name + ": the model has no " + kind + " of that name or index (" + kind + "s: " + known + ")");
}

/// A .npy file read as `dtype`. A bfloat16 or float8 tensor may also come as the uint16 or
/// uint8 bit patterns TVM 0.19's NDArray.numpy() gives its Python users: read bit for bit.
gexec::ndarray read_npy_as(const std::string& path, DLDataType dtype) {
  const bool float8 = dtype.code == gexec::tvm_float8_e4m3_code || dtype.code == gexec::tvm_float8_e5m2_code;
  if (dtype.code != kDLBfloat && !float8) return gexec::load_npy_file(path, dtype);
  try {
    return gexec::load_npy_file(path, dtype);
  } catch (const gexec::error& e) {
    if (e.code() != gexec::errc::dtype_mismatch) throw;
    gexec::ndarray bits = gexec::load_npy_file(path);
    if (!gexec::same_dtype(bits.dtype(), DLDataType{kDLUInt, dtype.bits, dtype.lanes})) throw;
    DLTensor t = bits.dltensor();
    t.dtype = dtype;
    return gexec::ndarray::view(t, bits.storage_owner());
  }
}

/// A raw little-endian file holding exactly the tensor's bytes in the model's dtype and shape.
gexec::ndarray read_raw(const std::string& path, const gexec::tensor_info& info, const std::string& what) {
  gexec::ndarray a = gexec::ndarray::empty(info.shape, info.dtype);
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) throw gexec::error(gexec::errc::io, what + ": cannot read " + path + " (" + ec.message() + ")");
  if (size != a.byte_size())
    throw gexec::error(gexec::errc::shape_mismatch, what + ": " + path + " holds " + std::to_string(size) + " bytes; the model's " +
                                                        gexec::to_string(info.dtype) + gexec::detail::shape_to_string(info.shape) +
                                                        " takes " + std::to_string(a.byte_size()));
  std::ifstream f(path, std::ios::binary);
  if (!f.read(static_cast<char*>(a.data()), static_cast<std::streamsize>(size)))
    throw gexec::error(gexec::errc::io, what + ": cannot read " + path);
  return a;
}

gexec::ndarray read_tensor(const std::string& value, const gexec::tensor_info& info, const std::string& what) {
  if (value.size() > 5 && value.front() == '@' && value.ends_with(".bin")) return read_raw(value.substr(1), info, what);
  if (!value.empty() && value.front() == '@') {
    gexec::ndarray a = read_npy_as(value.substr(1), info.dtype);
    if (!gexec::same_dtype(a.dtype(), info.dtype))
      throw gexec::error(gexec::errc::dtype_mismatch, what + ": " + value.substr(1) + " holds " + gexec::to_string(a.dtype()) + ", the model wants " +
                                                          gexec::to_string(info.dtype));
    if (!std::equal(a.shape().begin(), a.shape().end(), info.shape.begin(), info.shape.end()))
      throw gexec::error(gexec::errc::shape_mismatch, what + ": " + value.substr(1) + " has shape " + gexec::detail::shape_to_string(a.shape()) +
                                                          ", the model wants " + gexec::detail::shape_to_string(info.shape));
    return a;
  }
  return gexec_run::parse_values(value, info.shape, info.dtype, what);
}

/// Sets the inputs given with --input; those not given come from `dump` (TVM's dump of the
/// run compared with) where it holds them, else are zeros with --zero-missing, else an error.
void set_inputs(const options& o, loaded& l, const gexec::param_dict* dump = nullptr) {
  const auto infos = l.ex().get_input_info();  // the inputs that are not parameters
  std::vector<bool> given(infos.size(), false);
  for (const std::string& spec : o.inputs) {
    if (spec.starts_with("@") && spec.ends_with(".npz")) {  // every array of the archive, by input name
      for (auto& [name, value] : gexec::load_npz_file(spec.substr(1))) {
        const auto i = static_cast<std::size_t>(find_named(infos, name, "--input " + spec + ":", "input"));
        if (given[i]) fail("--input " + spec + ": input " + infos[i].name + " is given twice; give each input once");
        const std::string what = "--input " + spec + ": " + name;
        if (!gexec::same_dtype(value.dtype(), infos[i].dtype))
          throw gexec::error(gexec::errc::dtype_mismatch, what + " holds " + gexec::to_string(value.dtype()) + ", the model wants " +
                                                              gexec::to_string(infos[i].dtype));
        if (!std::equal(value.shape().begin(), value.shape().end(), infos[i].shape.begin(), infos[i].shape.end()))
          throw gexec::error(gexec::errc::shape_mismatch, what + " has shape " + gexec::detail::shape_to_string(value.shape()) +
                                                              ", the model wants " + gexec::detail::shape_to_string(infos[i].shape));
        l.ex().set_input(infos[i].name, value);
        given[i] = true;
      }
      continue;
    }
    const auto [name, value] = split_spec(spec, "--input");
    const auto i = static_cast<std::size_t>(find_named(infos, name, "--input", "input"));
    if (given[i]) fail("--input " + name + ": input " + infos[i].name + " is given twice; give each input once");
    l.ex().set_input(infos[i].name, read_tensor(value, infos[i], "--input " + name));
    given[i] = true;
  }
  if (dump != nullptr) {
    std::vector<std::string> skip;
    for (std::size_t i = 0; i < infos.size(); ++i)
      if (given[i]) skip.push_back(infos[i].name);
    for (const std::string& name : gexec::set_inputs_from_dump(l.ex(), *dump, skip)) {
      given[static_cast<std::size_t>(find_named(infos, name, "--compare-dump", "input"))] = true;
      std::cout << "input " << name << ": from the dump\n";
    }
  }
  // Without --params a split model's weights look like inputs: never zero-filled.
  const bool weights_unknown = !o.graph.empty() && o.params.empty();
  std::string missing;
  for (std::size_t i = 0; i < infos.size(); ++i)
    if (!given[i]) {
      if (o.zero_missing && !weights_unknown) {
        auto zeros = gexec::ndarray::empty(infos[i].shape, infos[i].dtype);
        if (zeros.byte_size()) std::memset(zeros.data(), 0, static_cast<std::size_t>(zeros.byte_size()));
        l.ex().set_input(infos[i].name, zeros);
      } else {
        missing += (missing.empty() ? "" : ", ") + infos[i].name + " (" + gexec::to_string(infos[i].dtype) +
                   gexec::detail::shape_to_string(infos[i].shape) + ")";
      }
    }
  if (missing.empty()) return;
  if (weights_unknown)
    fail("no value given for input " + missing + ": without --params these may be the model's weights; give them with --params FILE " +
         "(TVM's params blob or .safetensors), and the inputs with --input NAME=... (--zero-missing never fills weights)");
  fail("no value given for input " + missing + "; give each with --input NAME=..., or pass --zero-missing");
}

void print_tensor(const std::string& name, const gexec::ndarray& a, int limit) {
  std::cout << name << ": " << gexec::to_string(a.dtype()) << gexec::detail::shape_to_string(a.shape()) << " =";
  const std::uint64_t count = a.numel() * a.dtype().lanes;
  const std::uint64_t shown = limit < 0 ? count : std::min<std::uint64_t>(count, static_cast<std::uint64_t>(limit));
  for (std::uint64_t i = 0; i < shown; ++i) std::cout << ' ' << gexec_run::format_element(a, i);
  std::cout << (count > shown ? " ...\n" : "\n");
}

/// A file name from a tensor name: letters, digits, '.', '-' and '_' kept, others '_'.
std::string file_stem(const std::string& name) {
  std::string s;
  for (char c : name) s += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_') ? c : '_';
  return s.empty() || s[0] == '.' ? "_" + s : s;
}

void make_dir(const std::string& dir, const std::string& flag) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) throw gexec::error(gexec::errc::io, flag + " " + dir + ": cannot create the directory (" + ec.message() + ")");
}

/// Checks every --expected before anything runs: a name or index the model has no output
/// of, or a file that cannot be read, is an error now, not after a long run.
void check_expected_specs(const options& o, const loaded& l) {
  const auto infos = l.ex().get_output_info();
  for (const std::string& spec : o.expected) {
    const auto [name, value] = split_spec(spec, "--expected");
    if (value.empty() || value.front() != '@') fail("--expected " + spec + ": expected NAME=@FILE.npy");
    (void)find_named(infos, name, "--expected", "output");
    std::error_code ec;
    if (!fs::is_regular_file(value.substr(1), ec)) fail("--expected " + spec + ": " + value.substr(1) + " is not a readable file");
  }
}

/// Compares `got` with `want` element by element within --atol/--rtol (as compare_dump
/// does: integers as integers, floats with their ULPs); prints the verdict on one line;
/// true when they match.
bool compare_arrays(const std::string& label, const gexec::ndarray& got, const gexec::ndarray& want, const options& o) {
  if (!gexec::same_dtype(want.dtype(), got.dtype()) || !std::equal(want.shape().begin(), want.shape().end(), got.shape().begin(), got.shape().end())) {
    std::cout << "MISMATCH " << label << ": got " << gexec::to_string(got.dtype()) << gexec::detail::shape_to_string(got.shape()) << ", expected "
              << gexec::to_string(want.dtype()) << gexec::detail::shape_to_string(want.shape()) << '\n';
    return false;
  }
  gexec::node_comparison c;
  gexec::detail::compare_tensors(got, want, {.atol = o.atol, .rtol = o.rtol}, c);
  const std::string ulps = c.is_float ? ", max ulps " + std::to_string(c.max_ulps) : "";
  if (c.mismatched == 0) {
    std::cout << "MATCH " << label << " (max abs diff " << c.max_abs << ulps << ")\n";
    return true;
  }
  std::cout << "MISMATCH " << label << ": " << c.mismatched << " of " << c.count << " elements differ beyond atol " << o.atol << " rtol " << o.rtol
            << "; first at element " << c.first_mismatch << ": got " << gexec_run::format_element(got, c.first_mismatch) << ", expected "
            << gexec_run::format_element(want, c.first_mismatch) << " (max abs diff " << c.max_abs << ulps << ")\n";
  return false;
}

/// Compares output `index` with the .npy file; prints the verdict; true when it matches.
bool check_expected(const std::string& spec, loaded& l, const options& o) {
  const auto infos = l.ex().get_output_info();
  const auto [name, value] = split_spec(spec, "--expected");
  const int index = find_named(infos, name, "--expected", "output");
  const gexec::tensor_info& info = infos[static_cast<std::size_t>(index)];
  const gexec::ndarray want = read_npy_as(value.substr(1), info.dtype);
  return compare_arrays("output " + std::to_string(index) + " (" + info.name + ")", l.output(index), want, o);
}

// ---- modes ------------------------------------------------------------------------------

/// --compare-dump: every node's outputs against TVM's dump, as a table in graph order, then
/// the first node beyond the tolerance in detail; false when there is one.
bool compare_with_dump(const options& o, loaded& l, const gexec::param_dict& dump, const fs::path& file) {
  gexec::dump_comparison c = gexec::compare_dump(l.ex(), dump, {.atol = o.atol, .rtol = o.rtol});
  c.file = file;
  std::cout << "every node's outputs against " << file.string() << " (atol " << o.atol << ", rtol " << o.rtol << "):\n" << c.table();
  std::size_t within = 0;
  for (const auto& n : c.nodes) within += n.within() ? 1 : 0;
  std::cout << within << " of " << c.nodes.size() << " node outputs within the tolerance";
  if (c.missing) std::cout << ", " << c.missing << " not in the dump";
  std::cout << '\n';
  if (const gexec::node_comparison* first = c.first_divergence()) {
    std::cout << "FIRST DIVERGENCE at " << c.describe(*first);
    return false;
  }
  const std::size_t compared = c.nodes.size() - c.missing;
  if (!c.complete() && !o.allow_missing) {
    std::cout << "INCOMPLETE: the dump holds " << compared << " of the graph's " << c.nodes.size()
              << " node outputs; the others were not compared (--allow-missing accepts that)\n";
    return false;
  }
  std::cout << "MATCH: " << compared << " of " << c.nodes.size() << " node outputs compared, all agree\n";
  return true;
}

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
            << "nodes: " << g.nodes.size() << " (" << ops << " kernel calls, " << functions.size() << " functions)\n"
            << "functions:";
  for (const auto& f : functions) std::cout << ' ' << f;
  std::cout << "\nactivation storage: " << l.ex().storage_bytes() << " bytes per executor\n";
  const gexec::storage_figures& f = l.ex().get_plan().figures;
  std::cout << "storage planner " << o.planner << ": " << f.planned << " bytes of activations (the graph's storage ids: " << f.as_compiled
            << ", lower bound: " << f.lower_bound << ")\n";
}

/// Output i's name in an .npz: the graph's name for it without a ":0" its node's only
/// output needs not ("softmax"), unless another output would then have the same name.
std::string output_name(const std::vector<gexec::tensor_info>& infos, std::size_t i) {
  const std::string& full = infos[i].name;
  if (!full.ends_with(":0")) return full;
  const std::string plain = full.substr(0, full.size() - 2);
  for (std::size_t k = 0; k < infos.size(); ++k)
    if (k != i && (infos[k].name == plain || infos[k].name.starts_with(plain + ":"))) return full;
  return plain;
}

void write_text(const std::string& path, const std::string& text, const std::string& flag) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  f.close();
  if (!f) throw gexec::error(gexec::errc::io, flag + " " + path + ": cannot write the file");
}

// ---- reference bundles ---------------------------------------------------------------
//
// A bundle is a folder: the model (model.so, or graph.json + lib.so + params.bin or
// params.safetensors), inputs.npz, expected.npz (one array per output, by the graph's
// output names) and bundle.txt, "key value" lines:
//
//   gexec-bundle 1
//   model model.so                (or: graph graph.json / lib lib.so / params params.bin)
//   inputs inputs.npz
//   expected expected.npz
//   atol 1e-05
//   rtol 0

/// --make-bundle OUT: the model's files, the inputs of this run, and as expected outputs
/// this run's (or --bundle-expected's, TVM's outputs as .npz), with the tolerances.
void make_bundle(const options& o, loaded& l) {
  const fs::path out = o.make_bundle;
  make_dir(out.string(), "--make-bundle");
  std::string manifest = "gexec-bundle 1\n";
  auto copy = [&](const std::string& from, const std::string& key, std::string name) {
    if (key == "params" && fs::path(from).extension() == ".safetensors") name = "params.safetensors";
    std::error_code ec;
    fs::copy_file(from, out / name, fs::copy_options::overwrite_existing, ec);
    if (ec) throw gexec::error(gexec::errc::io, "--make-bundle: cannot copy " + from + " to " + (out / name).string() + " (" + ec.message() + ")");
    manifest += key + " " + name + "\n";
  };
  if (!o.model.empty()) {
    copy(o.model, "model", "model.so");
  } else {
    copy(o.graph, "graph", "graph.json");
    copy(o.lib, "lib", "lib.so");
    if (!o.params.empty()) copy(o.params, "params", "params.bin");
  }
  std::vector<std::pair<std::string, gexec::ndarray>> inputs;
  for (const auto& info : l.ex().get_input_info()) {
    const gexec::ndarray v = l.ex().get_input(l.ex().get_input_index(info.name));
    if (v.device().device_type != kDLCPU) fail("--make-bundle: input " + info.name + " lives on a device; make bundles from runs on the host");
    gexec::ndarray host = gexec::ndarray::empty(info.shape, info.dtype);
    host.copy_from(v);
    inputs.emplace_back(info.name, host);
  }
  write_text((out / "inputs.npz").string(), gexec::save_npz(inputs), "--make-bundle");
  const auto infos = l.ex().get_output_info();
  std::vector<std::pair<std::string, gexec::ndarray>> expected;
  if (!o.bundle_expected.empty()) {  // TVM's outputs: every output of this model once, with its dtype and shape
    const std::string where = "--bundle-expected " + o.bundle_expected + ":";
    std::vector<std::optional<gexec::ndarray>> given(infos.size());
    for (auto& [name, value] : gexec::load_npz_file(o.bundle_expected)) {
      const auto i = static_cast<std::size_t>(find_named(infos, name, where, "output"));
      if (!gexec::same_dtype(value.dtype(), infos[i].dtype) ||
          !std::equal(value.shape().begin(), value.shape().end(), infos[i].shape.begin(), infos[i].shape.end()))
        fail(where + " " + name + " is " + gexec::to_string(value.dtype()) + gexec::detail::shape_to_string(value.shape()) + ", output " +
             infos[i].name + " is " + gexec::to_string(infos[i].dtype) + gexec::detail::shape_to_string(infos[i].shape));
      if (given[i]) fail(where + " output " + std::to_string(i) + " (" + infos[i].name + ") is held twice");
      given[i] = value;
    }
    for (std::size_t i = 0; i < infos.size(); ++i) {
      if (!given[i]) fail(where + " holds no output " + std::to_string(i) + " (" + infos[i].name + "): a bundle holds every output");
      expected.emplace_back(output_name(infos, i), *given[i]);
    }
  } else {
    for (int i = 0; i < l.ex().get_num_outputs(); ++i) expected.emplace_back(output_name(infos, static_cast<std::size_t>(i)), l.output(i));
  }
  write_text((out / "expected.npz").string(), gexec::save_npz(expected), "--make-bundle");
  char tol[96];
  std::snprintf(tol, sizeof tol, "atol %.10g\nrtol %.10g\n", o.atol, o.rtol);
  manifest += "inputs inputs.npz\nexpected expected.npz\n";
  for (const auto& [name, value] : expected) manifest += "output " + name + "\n";
  manifest += tol;
  write_text((out / "bundle.txt").string(), manifest, "--make-bundle");
  std::cout << "wrote a bundle to " << out.string() << ": the model, " << inputs.size() << " inputs, " << expected.size() << " expected outputs ("
            << (o.bundle_expected.empty() ? "this run's" : "from " + o.bundle_expected) << "), atol " << o.atol << " rtol " << o.rtol << '\n';
}

/// --verify BUNDLE: the options that run it (model, inputs; the bundle's tolerances unless
/// --atol/--rtol are given). Every file it names must be a regular file inside it.
options read_bundle(options o) {
  const fs::path dir = o.verify;
  const fs::path manifest = dir / "bundle.txt";
  std::error_code ec;
  if (!fs::is_regular_file(manifest, ec))
    throw gexec::error(gexec::errc::io, "--verify " + o.verify + ": no bundle.txt in it (a folder gexec-run --make-bundle wrote)");
  std::ifstream f(manifest, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (!f && !f.eof()) throw gexec::error(gexec::errc::io, "--verify " + manifest.string() + ": cannot read it");
  const gexec_run::bundle_manifest m = gexec_run::parse_bundle_manifest(text, manifest.string());
  auto in_bundle = [&](const std::string& name) -> std::string {
    if (name.empty()) return {};
    const fs::path p = dir / name;
    if (fs::is_symlink(p, ec)) fail("--verify " + o.verify + ": " + name + " is a symbolic link; a bundle holds its files itself");
    if (!fs::is_regular_file(p, ec)) fail("--verify " + o.verify + ": " + name + ", which bundle.txt names, is not a file in it");
    return p.string();
  };
  o.model = in_bundle(m.model);
  o.graph = in_bundle(m.graph);
  o.lib = in_bundle(m.lib);
  o.params = in_bundle(m.params);
  if (!m.inputs.empty()) o.inputs.push_back("@" + in_bundle(m.inputs));
  o.bundle_expected = in_bundle(m.expected);
  o.bundle_outputs = m.outputs;
  if (!o.tolerance_given) {
    o.atol = m.atol.value_or(o.atol);
    o.rtol = m.rtol.value_or(o.rtol);
  }
  return o;
}

/// Compares the bundle's expected.npz with the outputs: it must hold every output of the
/// model, each once (by name or index), and the ones bundle.txt lists, no fewer.
bool verify_outputs(const options& o, loaded& l) {
  const auto infos = l.ex().get_output_info();
  const std::string where = "--verify: " + o.bundle_expected + ":";
  if (!o.bundle_outputs.empty()) {
    std::vector<std::string> names;
    for (std::size_t i = 0; i < infos.size(); ++i) names.push_back(output_name(infos, i));
    if (o.bundle_outputs != names) {
      std::string listed, have;
      for (const auto& n : o.bundle_outputs) listed += (listed.empty() ? "" : ", ") + n;
      for (const auto& n : names) have += (have.empty() ? "" : ", ") + n;
      std::cout << "FAILED: the bundle " << o.verify << " lists the outputs " << listed << "; the model's are " << have << '\n';
      return false;
    }
  }
  std::vector<int> seen(infos.size(), 0);
  bool all = true;
  for (auto& [name, want] : gexec::load_npz_file(o.bundle_expected)) {
    const int i = find_named(infos, name, where, "output");
    if (seen[static_cast<std::size_t>(i)]++) fail(where + " output " + std::to_string(i) + " (" + infos[static_cast<std::size_t>(i)].name + ") is held twice");
    all = compare_arrays("output " + std::to_string(i) + " (" + infos[static_cast<std::size_t>(i)].name + ")", l.output(i), want, o) && all;
  }
  std::size_t held = 0;
  for (std::size_t i = 0; i < infos.size(); ++i) {
    if (seen[i]) {
      ++held;
      continue;
    }
    std::cout << "MISSING output " << i << " (" << infos[i].name << "): expected.npz does not hold it\n";
    all = false;
  }
  std::cout << (all ? "VERIFIED: " : "FAILED: ") << "the bundle " << o.verify << ", " << held << " of " << infos.size()
            << " outputs against expected.npz (atol " << o.atol << ", rtol " << o.rtol << ")\n";
  return all;
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
  std::printf("peak resident memory: %.1f MiB\n", static_cast<double>(r.peak_rss_bytes) / (1024.0 * 1024.0));
}

/// --convert-params IN OUT: TVM's blob to .safetensors or back (by OUT's extension), the
/// tensors' names, order, dtypes, shapes and bytes kept.
int convert_params(const options& o) {
  const fs::path in = o.convert_params.at(0), out = o.convert_params.at(1);
  const gexec::param_dict params = gexec::load_param_dict_file(in);
  std::error_code ec;
  if (fs::equivalent(in, out, ec)) fail("--convert-params: the output " + out.string() + " is the input");
  const bool safetensors = out.extension() == ".safetensors";
  if (safetensors) gexec::save_safetensors_file(params, out);
  else gexec::save_param_dict_file(params, out);
  std::uint64_t bytes = 0;
  for (const auto& [name, value] : params) bytes += value.byte_size();
  std::cout << "wrote " << params.size() << " tensors (" << bytes << " bytes) to " << out.string() << " as "
            << (safetensors ? ".safetensors" : "TVM's parameter blob") << '\n';
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
  }
  if (!o.bundle_expected.empty() && o.make_bundle.empty() && o.verify.empty()) fail("--bundle-expected goes with --make-bundle");
  if (!o.convert_params.empty()) {
    if (!o.model.empty() || !o.graph.empty() || !o.lib.empty() || !o.params.empty())
      fail("--convert-params converts a parameter file and runs nothing: give it alone");
    return convert_params(o);
  }
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
    dump_file = gexec::find_dump_file(o.compare_dump);
    dump = gexec::load_param_dict_file(dump_file);
  }
  set_inputs(o, l, dump ? &*dump : nullptr);
  bool matched = true;
  if (dump) matched = compare_with_dump(o, l, *dump, dump_file);
  gexec::no_observer none;
  const auto first_start = stopwatch::now();
  run_with_policy(o, l.ex(), none);
  l.first_run = seconds_since(first_start);
  const auto outputs = l.ex().get_output_info();
  for (int i = 0; i < l.ex().get_num_outputs(); ++i) print_tensor(outputs[static_cast<std::size_t>(i)].name, l.output(i), o.print_limit);
  if (!o.output_dir.empty()) {
    make_dir(o.output_dir, "--output-dir");
    for (int i = 0; i < l.ex().get_num_outputs(); ++i) {
      const fs::path file = fs::path(o.output_dir) / ("output_" + std::to_string(i) + ".npy");
      gexec::save_npy_file(file, l.output(i));
      std::cout << "wrote output " << i << " (" << outputs[static_cast<std::size_t>(i)].name << ") to " << file.string() << '\n';
    }
  }
  if (!o.output_file.empty()) {
    std::vector<std::pair<std::string, gexec::ndarray>> arrays;
    for (int i = 0; i < l.ex().get_num_outputs(); ++i) arrays.emplace_back(output_name(outputs, static_cast<std::size_t>(i)), l.output(i));
    write_text(o.output_file, gexec::save_npz(arrays), "--output");
    std::cout << "wrote " << arrays.size() << " outputs to " << o.output_file << " (";
    for (std::size_t i = 0; i < arrays.size(); ++i) std::cout << (i ? ", " : "") << arrays[i].first;
    std::cout << ")\n";
  }
  for (const std::string& spec : o.expected) matched = check_expected(spec, l, o) && matched;
  if (!o.verify.empty()) matched = verify_outputs(o, l) && matched;
  if (!o.make_bundle.empty()) make_bundle(o, l);

  if (!o.dump_dir.empty()) {
    make_dir(o.dump_dir, "--dump-dir");
    const gexec::graph& g = l.ex().get_graph();
    std::size_t files = 0;
    const std::size_t width = std::to_string(g.nodes.empty() ? 0 : g.nodes.size() - 1).size();
    for (const gexec::node_output& out : gexec::debug_get_outputs(l.ex())) {
      std::string id = std::to_string(out.node_id);
      id.insert(0, width - std::min(width, id.size()), '0');  // zero-padded: names sort in graph order
      const std::string stem = id + "_" + file_stem(g.nodes[out.node_id].name) + "_" + std::to_string(out.index);
      gexec::save_npy_file(fs::path(o.dump_dir) / (stem + ".npy"), out.value);
      ++files;
    }
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
  CLI::App app{"gexec-run " GEXEC_VERSION_STRING ": run a TVM graph-executor model (a single-file library, or graph JSON + kernel library + parameters)"};
  app.set_version_flag("--version", GEXEC_VERSION_STRING);
  app.add_option("model", o.model, "single-file model library (TVM's export_library)");
  auto* model_group = "Model (split form)";
  app.add_option("-g,--graph", o.graph, "graph JSON")->group(model_group);
  app.add_option("-l,--lib", o.lib, "kernel library (.so)")->group(model_group);
  app.add_option("-p,--params", o.params, "parameters: TVM's blob (tvm.runtime.save_param_dict) or a .safetensors file")->group(model_group);
  app.add_option("--convert-params", o.convert_params,
                 "IN OUT: convert parameters between TVM's blob and .safetensors (OUT's extension decides), bit for bit, and exit")
      ->expected(2)
      ->group(model_group);
  app.add_option("-i,--input", o.inputs, "input NAME=v1,v2,... (by the input's dtype; one value fills the tensor), NAME=@file.npy, NAME=@raw.bin (little-endian, the model's dtype and shape), or @all.npz (arrays named by input)")
      ->group("Inputs and outputs");
  app.add_flag("--zero-missing", o.zero_missing, "run inputs that were not given as zeros (otherwise they are an error); never the weights: a split model needs --params for it")->group("Inputs and outputs");
  app.add_option("-o,--output-dir", o.output_dir, "write each output as DIR/output_<i>.npy")->group("Inputs and outputs");
  app.add_option("--output", o.output_file, "write every output to FILE.npz, named by the graph's output names")->group("Inputs and outputs");
  app.add_option("--make-bundle", o.make_bundle,
                 "write a reference bundle to DIR: the model, this run's inputs, its outputs (or --bundle-expected's) and --atol/--rtol")
      ->group("Bundles");
  app.add_option("--bundle-expected", o.bundle_expected, "FILE.npz: the expected outputs for --make-bundle (TVM's), by output name or index")
      ->group("Bundles");
  app.add_option("--verify", o.verify, "run a reference bundle DIR and compare every output; exit 2 on a mismatch")->group("Bundles");
  app.add_option("--expected", o.expected, "NAME=@file.npy: compare output NAME (\"softmax:0\", plain \"softmax\", or an index) with the file; exit 2 on mismatch")->group("Inputs and outputs");
  app.add_option("--atol", o.atol, "absolute tolerance for --expected and --compare-dump (default 1e-4)")->group("Inputs and outputs");
  app.add_option("--rtol", o.rtol, "relative tolerance for --expected and --compare-dump (default 0)")->group("Inputs and outputs");
  app.add_option("--print-limit", o.print_limit, "elements of each output printed (default 16; -1 for all)")->group("Inputs and outputs");
  app.add_flag("--info", o.info, "print the model's inputs, outputs, parameters and functions, and exit")->group("Inspect");
  app.add_option("--dot", o.dot, "write the graph for Graphviz to FILE")->group("Inspect");
  app.add_flag("--benchmark", o.bench, "time run() as TVM's time evaluator does, with CPU time, the start-up steps, the first run and peak resident memory")->group("Measure");
  app.add_option("--repeat", o.repeat, "measurements (default 5)")->group("Measure");
  app.add_option("--number", o.number, "runs per measurement (default 1)")->group("Measure");
  app.add_option("--min-repeat-ms", o.min_repeat_ms, "grow --number until a measurement lasts this long (default 0)")->group("Measure");
  app.add_option("--cooldown-ms", o.cooldown_ms, "pause between measurements (default 0)")->group("Measure");
  app.add_option("--repeats-to-cooldown", o.repeats_to_cooldown, "measurements between pauses (default 1)")->group("Measure");
  app.add_flag("--profile", o.profile, "per-node table as TVM's debug executor printed it, with per-function totals")->group("Measure");
  app.add_option("--trace", o.trace, "write a Chrome trace (Perfetto) of --repeat runs to FILE")->group("Measure");
  app.add_option("--compare-dump", o.compare_dump,
                 "compare every node's outputs with TVM's debug executor's dump (its dump_root, or the _tvmdbg_device_* folder in it) "
                 "within --atol/--rtol; inputs not given come from the dump; exit 2 at a divergence")
      ->group("Measure");
  app.add_flag("--allow-missing", o.allow_missing, "with --compare-dump: a dump that lacks some node outputs may still match (they are counted)")
      ->group("Measure");
  app.add_option("--dump-dir", o.dump_dir, "write every node's outputs as DIR/<node>_<name>_<i>.npy, <node> zero-padded so that names sort in graph order")->group("Measure");
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
