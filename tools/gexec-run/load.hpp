#pragma once
// gexec-run: loading a model (single file or split), with a progress bar on long reads
// and the start-up steps timed.
#include "options.hpp"

namespace gexec_run {

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
using executor_type = gexec::any_device_executor;

using stopwatch = std::chrono::steady_clock;
inline double seconds_since(stopwatch::time_point t0) { return std::chrono::duration<double>(stopwatch::now() - t0).count(); }

struct loaded {
  /// Start-up, step by step: (step, seconds), in order.
  std::vector<std::pair<std::string, double>> startup;
  double first_run = 0;  ///< seconds of the first run()
  std::optional<gexec::factory> factory;  // a single-file model: its embedded parameters
  std::optional<gexec::any_device_model> model;
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

inline DLDevice parse_device(const std::string& text) {
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

inline loaded load_on_device(const options& o);

/// The model, its executor and the start-up steps. A graph that places entries on a device
/// the command line did not name is refused by the planner; the message then says which
/// option gives it.
inline loaded load(const options& o) {
  try {
    return load_on_device(o);
  } catch (const gexec::error& e) {
    if (e.code() != gexec::errc::device_mismatch || e.message().find(" device was given") == std::string_view::npos) throw;
    throw gexec::error(e.code(), std::string(e.message()) + " (--device cuda[:N] runs the graph's device entries on a GPU)");
  }
}

inline loaded load_on_device(const options& o) {
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
      l.model.emplace(gexec::any_device_model::load(o.model, std::move(first)));
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
    params = gexec::map_param_dict_file(o.params, bar.callback);
  }
  step("map parameters");
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

}  // namespace gexec_run
