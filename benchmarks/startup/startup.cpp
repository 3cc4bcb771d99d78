// Start-up as a path of its own: from a fresh process to the first output, step by step,
// for each form a model comes in, and the memory of processes that load one model.
//
//   gexec_bench_startup CONFORMANCE_DIR [--model NAME] [--relax SUITE_DIR] [--tvm-python PYTHON] [--runs N]
//
// CONFORMANCE_DIR/NAME (default resnet) holds graph.json, lib.so, params.bin, model.so and
// inputs.bin. Every start-up below runs in a fresh process (this program, spawned with a
// mode argument); a figure is the median over N runs (default 9) of that step, after one
// run left out, with the page cache warm (every file read once first):
//
//  - split files step by step (load_graph_file, load_param_dict_file with load_mode::copy
//    and map_param_dict_file (what model::load reads with), load_module, basic_model,
//    instantiate + set_input, run),
//    and model::load(graph, lib, params) in one call; beside each step, the plain system
//    call over the same file in a fresh process (read(), mmap and a touch of every page,
//    dlopen with RTLD_NOW): ratio = baseline / gexec, 1.00 is the limit;
//  - the single-file library model.so step by step (load_module, factory: the embedded
//    graph and weights, get_model, instantiate) and model::load(model.so);
//  - a Relax executable of SUITE_DIR (convnet_constants.so), where one is given;
//  - TVM's own loader in the same run (time_tvm_startup.py under PYTHON, the conformance
//    venv's hhb-tvm): load_module + GraphModule(lib["default"](dev)), and create +
//    load_params, to its first run; the interpreter's start and `import tvm` apart.
//
// "To first output" counts from main() to the end of the first run(); the process's own
// start (spawn to main) is printed apart. The goal: to first output <= the first run + 5 ms.
//
// Then N = 1, 2, 4 processes of one model (gexec_bench_share_child, share_child.cpp) each
// load it, run it twice and wait; their proportional set sizes (/proc/PID/smaps_rollup)
// summed against N times one process's, planned by liveness with the inputs donated to
// runs (each process copies these weights: the form TVM writes them in).
// Last, the same model with its params.bin written aligned (save_options{64}, what
// `gexec-run --convert-params` writes) and, where the model comes with its kernels'
// objects (kernels.tar), its single-file library linked with the weights aligned
// (`gexec-run --write-library`): model::load in one call, and the processes' PSS again,
// with activations as compiled, planned by liveness, and by liveness with inputs donated.
// Goals: to first output <= the first run + 5 ms; summed PSS of 4 <= 1.3x one.
// MB = 10^6 bytes.

#include <gexec/executor.hpp>
#include <gexec/load.hpp>
#include <gexec/npz.hpp>
#include <gexec/relax.hpp>

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "../machine.hpp"

extern char** environ;

namespace fs = std::filesystem;

namespace {

std::int64_t now_ns() {
  timespec t{};
  ::clock_gettime(CLOCK_MONOTONIC, &t);  // Python's time.monotonic_ns() reads the same clock
  return static_cast<std::int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

const std::int64_t main_start_ns = now_ns();  // set before main() runs, after the loader

double ms_between(std::int64_t a, std::int64_t b) { return static_cast<double>(b - a) / 1e6; }

using figures = std::map<std::string, double>;

// ---- in a child: one start-up, its steps printed as "key value ..." on one line ----

/// Times the steps of one start-up: each lap() is the time since the one before.
class stopwatch {
 public:
  explicit stopwatch(figures& out) : out_(out), last_(now_ns()) {}
  void lap(const char* step) {
    const std::int64_t t = now_ns();
    out_[step] = ms_between(last_, t);
    last_ = t;
  }
  [[nodiscard]] std::int64_t last() const { return last_; }

 private:
  figures& out_;
  std::int64_t last_;
};

std::vector<std::pair<std::string, gexec::ndarray>> model_inputs(const fs::path& dir) {
  std::vector<std::pair<std::string, gexec::ndarray>> in;
  for (const auto& [name, a] : gexec::load_param_dict_file(dir / "inputs.bin")) in.emplace_back(name, a);
  return in;
}

template <class Executor>
void set_inputs(Executor& ex, const std::vector<std::pair<std::string, gexec::ndarray>>& inputs) {
  for (const auto& [name, a] : inputs) ex.set_input(name, a);
}

/// Reads the whole file with read() into a buffer of its size.
std::size_t read_whole(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open " + path.string());
  const auto size = static_cast<std::size_t>(fs::file_size(path));
  std::unique_ptr<std::byte[]> buffer(new std::byte[size]);
  std::size_t done = 0;
  while (done < size) {
    const ssize_t got = ::read(fd, buffer.get() + done, size - done);
    if (got <= 0) break;
    done += static_cast<std::size_t>(got);
  }
  ::close(fd);
  return done;
}

/// Maps the file read-only and reads one byte of every page.
unsigned map_and_touch(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open " + path.string());
  const auto size = static_cast<std::size_t>(fs::file_size(path));
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) throw std::runtime_error("cannot map " + path.string());
  unsigned sum = 0;
  const auto* bytes = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < size; i += 4096) sum += bytes[i];
  ::munmap(p, size);
  return sum;
}

int child(const std::string& mode, const fs::path& dir, std::int64_t spawned_ns, const fs::path& relax_dir) {
  figures f;
  f["exec"] = ms_between(spawned_ns, main_start_ns);
  std::int64_t first_output = 0;
  auto two_runs = [&](auto& ex, stopwatch& w) {
    ex.run();
    w.lap("first");
    first_output = w.last();
    ex.run();
    w.lap("second");
  };
  if (mode == "split_copy" || mode == "split_mmap") {
    const auto inputs = model_inputs(dir);
    stopwatch w(f);
    gexec::validated_graph g = gexec::load_graph_file(dir / "graph.json");
    w.lap("graph");
    std::optional<gexec::param_dict> params =
        mode == "split_mmap" ? gexec::map_param_dict_file(dir / "params.bin") : gexec::load_param_dict_file(dir / "params.bin", gexec::load_mode::copy);
    w.lap("weights");
    gexec::module lib = gexec::load_module(dir / "lib.so");
    w.lap("library");
    gexec::basic_model m(std::move(g), std::move(lib), *params);
    double views = 0, tensors = 0;
    for (const auto& [name, a] : *params) {
      views += params->is_mapped(a) ? 1 : 0;
      tensors += 1;
    }
    params.reset();  // the model holds what it needs, as model::load leaves it
    w.lap("plan");
    f["views"] = views;
    f["tensors"] = tensors;
    auto ex = m.instantiate();
    set_inputs(ex, inputs);
    w.lap("create");
    two_runs(ex, w);
  } else if (mode == "split_load" || mode == "single_load") {
    const auto inputs = model_inputs(dir);
    stopwatch w(f);
    auto m = mode == "split_load" ? gexec::model::load(dir / "graph.json", dir / "lib.so", dir / "params.bin") : gexec::model::load(dir / "model.so");
    w.lap("load");
    auto ex = m.instantiate();
    set_inputs(ex, inputs);
    w.lap("create");
    two_runs(ex, w);
  } else if (mode == "single_steps") {
    const auto inputs = model_inputs(dir);
    stopwatch w(f);
    gexec::module lib = gexec::load_module(dir / "model.so");
    w.lap("library");
    gexec::factory fac(std::move(lib));
    w.lap("embedded");
    gexec::model m = fac.get_model();
    w.lap("plan");
    auto ex = m.instantiate();
    set_inputs(ex, inputs);
    w.lap("create");
    two_runs(ex, w);
  } else if (mode == "relax") {
    std::vector<gexec::ndarray> inputs;
    for (auto& [name, a] : gexec::load_npz_file(relax_dir / "convnet_constants.npz"))
      if (name == "in0") inputs.push_back(a);
    stopwatch w(f);
    gexec::relax::executable exe = gexec::relax::load_executable(relax_dir / "convnet_constants.so");
    w.lap("load");
    gexec::relax::virtual_machine vm(exe);
    w.lap("create");
    (void)vm.run("main", inputs);
    w.lap("first");
    first_output = w.last();
    (void)vm.run("main", inputs);
    w.lap("second");
  } else if (mode == "raw") {
    stopwatch w(f);
    (void)read_whole(dir / "graph.json");
    w.lap("graph");
    (void)read_whole(dir / "params.bin");
    w.lap("weights");
    (void)map_and_touch(dir / "params.bin");
    w.lap("weights_map");
    void* h = ::dlopen((dir / "lib.so").c_str(), RTLD_NOW | RTLD_LOCAL);
    w.lap("library");
    void* single = ::dlopen((dir / "model.so").c_str(), RTLD_NOW | RTLD_LOCAL);
    w.lap("single_library");
    if (!h || !single) throw std::runtime_error(std::string("dlopen: ") + ::dlerror());
  } else {
    throw std::runtime_error("unknown mode " + mode);
  }
  if (first_output) f["total"] = ms_between(main_start_ns, first_output);
  f["hwm_mb"] = static_cast<double>(bench::status_kib("VmHWM:")) * 1024 / 1e6;
  for (const auto& [k, v] : f) std::printf("%s %.4f ", k.c_str(), v);
  std::printf("\n");
  return 0;
}

// ---- in the parent: children spawned with pipes on their stdin and stdout ----

fs::path self_exe() { return fs::read_symlink("/proc/self/exe"); }

/// A spawned process; the destructor kills and reaps one still running.
class process {
 public:
  explicit process(const std::vector<std::string>& args) {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
    if (::pipe2(out, O_CLOEXEC) != 0) {
      ::close(in[0]);
      ::close(in[1]);
      throw std::runtime_error("pipe2 failed");
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const int rc = ::posix_spawn(&pid_, args[0].c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(in[0]);
    ::close(out[1]);
    to_ = in[1];
    from_ = out[0];
    if (rc != 0) {
      pid_ = -1;
      throw std::runtime_error("cannot spawn " + args[0] + ": " + std::strerror(rc));
    }
  }
  process(const process&) = delete;
  process& operator=(const process&) = delete;
  ~process() {
    close_stdin();
    if (from_ >= 0) ::close(from_);
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  [[nodiscard]] pid_t pid() const { return pid_; }
  void close_stdin() {
    if (to_ >= 0) ::close(to_);
    to_ = -1;
  }

  /// The child's output up to a newline (or its end); throws once `timeout_ms` pass.
  std::string read_line(int timeout_ms) {
    std::string line;
    const std::int64_t deadline = now_ns() + std::int64_t{timeout_ms} * 1'000'000;
    char buffer[1];
    for (;;) {
      pollfd p{from_, POLLIN, 0};
      const int left = static_cast<int>((deadline - now_ns()) / 1'000'000);
      if (left <= 0 || ::poll(&p, 1, left) <= 0) throw std::runtime_error("child " + std::to_string(pid_) + " did not answer in time");
      const ssize_t got = ::read(from_, buffer, 1);
      if (got <= 0 || buffer[0] == '\n') return line;
      line += buffer[0];
    }
  }

  /// Waits for the child to end; true when it exited with 0.
  bool wait() {
    close_stdin();
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return r > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }

 private:
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
};

figures parse(const std::string& line) {
  figures f;
  std::istringstream in(line);
  std::string key;
  double value = 0;
  while (in >> key >> value) f[key] = value;
  return f;
}

/// One start-up in a fresh process: `args` followed by the spawn time; its figures, or none.
figures one_startup(std::vector<std::string> args) {
  const std::int64_t spawned = now_ns();
  args.push_back(std::to_string(spawned));
  process p(args);
  p.close_stdin();
  const std::string line = p.read_line(300'000);
  if (!p.wait()) return {};
  return parse(line);
}

/// CPU ticks of this process and of its children that ended and were waited for.
long long own_and_children_ticks() {
  std::ifstream self("/proc/self/stat");
  std::string field;
  std::getline(self, field, ')');  // the name may hold spaces
  long long t = 0;
  for (int i = 3; i <= 17 && self >> field; ++i)
    if (i >= 14) t += std::stoll(field);
  return t;
}

/// The median of each figure over `runs` start-ups, after one left out; empty if one
/// failed. "others": the cores other processes kept busy meanwhile, on average.
figures median_startup(const std::vector<std::string>& args, int runs) {
  if (one_startup(args).empty()) return {};
  const long long machine0 = bench::read_ticks().machine, ours0 = own_and_children_ticks();
  const std::int64_t wall0 = now_ns();
  std::map<std::string, std::vector<double>> all;
  for (int i = 0; i < runs; ++i) {
    const figures f = one_startup(args);
    if (f.empty()) return {};
    for (const auto& [k, v] : f) all[k].push_back(v);
  }
  const double wall_ticks = static_cast<double>(now_ns() - wall0) / 1e9 * static_cast<double>(::sysconf(_SC_CLK_TCK));
  figures m;
  for (const auto& [k, v] : all) m[k] = bench::median(v);
  m["others"] = static_cast<double>((bench::read_ticks().machine - machine0) - (own_and_children_ticks() - ours0)) / wall_ticks;
  return m;
}

double get(const figures& f, const char* key) {
  const auto it = f.find(key);
  return it == f.end() ? 0 : it->second;
}

void header(const char* title) {
  std::printf("\n%s\n  %-52s %9s   %-34s %9s  %6s\n", title, "step", "ms", "baseline (fresh process, same run)", "ms", "ratio");
}

void step(const char* what, double ms, const char* baseline = nullptr, double base_ms = 0) {
  if (baseline)
    std::printf("  %-52s %9.3f   %-34s %9.3f  %6.2f\n", what, ms, baseline, base_ms, base_ms / ms);
  else
    std::printf("  %-52s %9.3f\n", what, ms);
}

/// The runs, the total to the first output against the goal, the process start and peak.
void tail(const figures& f, const figures& raw, bool goal) {
  step("first run()", get(f, "first"), "second run()", get(f, "second"));
  const double total = get(f, "total"), limit = get(f, "first") + 5;
  if (goal)
    std::printf("  %-52s %9.3f   %-34s %9.3f  %6.2f  %s\n", "to first output (main() to first run's end)", total, "goal: first run() + 5 ms", limit,
                limit / total, total <= limit ? "met" : "NOT met");
  else
    step("to first output (main() to first run's end)", total);
  step("process start (spawn to main())", get(f, "exec"), "the baseline process's start", get(raw, "exec"));
  std::printf("  %-52s %9.1f MB %-34s %9.1f MB\n", "peak resident (VmHWM)", get(f, "hwm_mb"), "the baseline process (reads, dlopens)", get(raw, "hwm_mb"));
  std::printf("  other processes kept %.2f of %ld cores busy during these start-ups\n", get(f, "others"), ::sysconf(_SC_NPROCESSORS_ONLN));
}

/// model::load in one call: its step against plain reads of the same files (the split
/// files, or the single-file library), creation, and the runs against the goal.
void one_call(const char* title, const figures& f, const figures& raw, bool single) {
  header(title);
  if (f.empty()) {
    std::printf("  (failed)\n");
    return;
  }
  if (single)
    step("model::load(model.so)", get(f, "load"), "dlopen + read() of graph, params", get(raw, "single_library") + get(raw, "graph") + get(raw, "weights"));
  else
    step("model::load(graph, lib, params)", get(f, "load"), "read() of the 3 files + dlopen", get(raw, "graph") + get(raw, "weights") + get(raw, "library"));
  step("create: instantiate() + set_input", get(f, "create"));
  tail(f, raw, true);
}

// ---- processes sharing one copy ----

struct rollup {
  double pss_mb = 0, rss_mb = 0, pss_anon_mb = 0, pss_file_mb = 0;
  double own_mb = 0;  ///< what the process said it must hold of its own (share_child.cpp)
};

rollup read_rollup(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/smaps_rollup");
  if (!in) throw std::runtime_error("cannot read /proc/" + std::to_string(pid) + "/smaps_rollup");
  rollup r;
  std::string key;
  double kib = 0;
  std::string unit;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream l(line);
    if (!(l >> key >> kib)) continue;
    const double mb = kib * 1024 / 1e6;
    if (key == "Pss:") r.pss_mb = mb;
    else if (key == "Rss:") r.rss_mb = mb;
    else if (key == "Pss_Anon:") r.pss_anon_mb = mb;
    else if (key == "Pss_File:") r.pss_file_mb = mb;
  }
  return r;
}

/// N processes of `form` (the program `child`), all loaded and run once: their rollups,
/// read while all wait.
std::vector<rollup> sharing(const char* child, const std::string& form, const fs::path& dir, const std::string& planner, int n) {
  std::vector<std::unique_ptr<process>> children;  // killed and reaped if anything throws
  for (int i = 0; i < n; ++i) children.push_back(std::make_unique<process>(std::vector<std::string>{child, form, dir.string(), planner}));
  std::vector<double> own;
  for (auto& c : children) {
    const std::string line = c->read_line(300'000);
    if (line.rfind("ready ", 0) != 0) throw std::runtime_error("a " + form + " process failed to load");
    own.push_back(std::stod(line.substr(6)) / 1e6);
  }
  std::vector<rollup> r;
  for (std::size_t i = 0; i < children.size(); ++i) {
    r.push_back(read_rollup(children[i]->pid()));
    r.back().own_mb = own[i];
  }
  for (auto& c : children)
    if (!c->wait()) throw std::runtime_error("a " + form + " process ended with an error");
  return r;
}

// With `shared_runtime`, the planners' rows are followed by the same program linked to
// the shared C++ runtime (gexec_bench_share_child_shared), with the inputs donated. With
// `every_planner` false, the rows of liveness with donated inputs alone: a model whose
// weights each process copies (as TVM writes them) shows that copy whatever the planner.
void sharing_figures(const fs::path& dir, std::vector<const char*> forms, bool shared_runtime, bool every_planner) {
  std::printf("\nprocesses sharing one copy: N processes each load the model, run it twice and wait; PSS and RSS from smaps_rollup\n");
  std::printf("  (each a gexec_bench_share_child: libstdc++ and Boost.JSON linked in, position-dependent, where their archives are there)\n");
  std::printf("  %-64s %2s %12s %12s %7s %12s %12s %12s\n", "form, storage planner", "N", "sum PSS MB", "N x one MB", "ratio", "sum RSS MB", "anon PSS MB",
              "file PSS MB");
  struct row {
    const char* planner;
    const char* child;
    const char* note;
  };
  std::vector<row> rows;
  if (every_planner) {
    rows.push_back({"as_compiled", GEXEC_SHARE_CHILD_EXECUTABLE, ""});
    rows.push_back({"liveness", GEXEC_SHARE_CHILD_EXECUTABLE, ""});
  }
  rows.push_back({"liveness+donated", GEXEC_SHARE_CHILD_EXECUTABLE, ""});
  if (shared_runtime) rows.push_back({"liveness+donated", GEXEC_SHARE_CHILD_SHARED_EXECUTABLE, ", libstdc++.so"});
  for (const char* form : forms) {
    for (const row& w : rows) {
      const char* planner = w.planner;
      char label[96];
      std::snprintf(label, sizeof label, "%s, %s%s", std::string(form) == "split" ? "model::load(graph, lib, params)" : "model::load(model.so)", planner,
                    w.note);
      double one = 0, sum4 = 0, own = 0;
      for (int n : {1, 2, 4}) {
        const std::vector<rollup> r = sharing(w.child, form, dir, planner, n);
        rollup s;
        for (const rollup& x : r) {
          s.pss_mb += x.pss_mb;
          s.rss_mb += x.rss_mb;
          s.pss_anon_mb += x.pss_anon_mb;
          s.pss_file_mb += x.pss_file_mb;
        }
        if (n == 1) {
          one = s.pss_mb;
          own = r[0].own_mb;
        }
        if (n == 4) sum4 = s.pss_mb;
        std::printf("  %-64s %2d %12.1f %12.1f %7.2f %12.1f %12.1f %12.1f\n", label, n, s.pss_mb, n * one, s.pss_mb / one, s.rss_mb, s.pss_anon_mb,
                    s.pss_file_mb);
      }
      std::printf("  %-64s goal: summed PSS of 4 <= 1.3x one process's: %.3fx, %s\n", label, sum4 / one, sum4 <= 1.3 * one ? "met" : "NOT met");
      // The least 4 processes can take: one process's PSS, and 3 more times what each must
      // hold of its own (its executor's storage and its kernels' workspace) where all else
      // (weights, code) were shared.
      std::printf("  %-64s floor: one process's PSS + 3 x its own %.1f MB (storage and workspace): %.2fx\n", label, own, (one + 3 * own) / one);
    }
  }
}

/// A folder beside `dir`'s model holding it written aligned: graph.json, lib.so and
/// inputs.bin linked, params.bin rewritten with 64-byte aligned tensors, and where the
/// model comes with its kernels' objects (kernels.tar), model.so linked from them with
/// the weights aligned (gexec-run --write-library): what that said, or why there is no
/// model.so.
fs::path write_aligned(const fs::path& dir, std::string& linked, std::string& no_single) {
  std::string pattern = (fs::temp_directory_path() / "gexec_startup_aligned_XXXXXX").string();
  if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
  const fs::path out = pattern;
  for (const char* file : {"graph.json", "lib.so", "inputs.bin"}) fs::create_symlink(fs::absolute(dir / file), out / file);
  const gexec::param_dict params = gexec::load_param_dict_file(dir / "params.bin");
  gexec::save_param_dict_file(params, out / "params.bin", gexec::save_options{64});
#ifdef GEXEC_RUN_EXECUTABLE
  if (!fs::exists(dir / "kernels.tar")) {
    no_single = "no kernels.tar (the kernels' objects) in " + dir.string();
    return out;
  }
  process link({GEXEC_RUN_EXECUTABLE, "--write-library", (out / "model.so").string(), "--graph", (dir / "graph.json").string(), "--params",
                (dir / "params.bin").string(), "--kernel-objects", (dir / "kernels.tar").string()});
  link.close_stdin();
  linked = link.read_line(300'000);
  if (!link.wait() || !fs::exists(out / "model.so")) no_single = "gexec-run --write-library failed";
#else
  no_single = "built without gexec-run, whose --write-library links it";
#endif
  return out;
}

int parent(const fs::path& conformance, const std::string& model, const fs::path& relax_dir, const std::string& tvm_python, int runs) {
  const fs::path dir = conformance / model;
  for (const char* file : {"graph.json", "lib.so", "params.bin", "model.so", "inputs.bin"})
    if (!fs::exists(dir / file)) {
      std::printf("gexec_bench_startup: SKIPPED (no %s in %s)\n", file, dir.c_str());
      return 0;
    }
  for (const char* file : {"graph.json", "lib.so", "params.bin", "model.so", "inputs.bin"}) (void)read_whole(dir / file);  // page cache warm
  const std::string exe = self_exe().string();
  auto mode = [&](const char* m) { return std::vector<std::string>{exe, "--child", m, dir.string(), relax_dir.string()}; };

  std::printf("start-up, %s: graph.json %.3f MB, lib.so %.3f MB, params.bin %.1f MB, model.so %.1f MB; %d usable cores, load %s;\n", model.c_str(),
              static_cast<double>(fs::file_size(dir / "graph.json")) / 1e6, static_cast<double>(fs::file_size(dir / "lib.so")) / 1e6,
              static_cast<double>(fs::file_size(dir / "params.bin")) / 1e6, static_cast<double>(fs::file_size(dir / "model.so")) / 1e6,
              bench::usable_cores(), bench::load_average().c_str());
  std::printf("each start-up in a fresh process, page cache warm, median of %d runs (one more left out first)\n", runs);

  const figures raw = median_startup(mode("raw"), runs);
  if (raw.empty()) throw std::runtime_error("the baseline process failed");

  for (const char* how : {"split_copy", "split_mmap"}) {
    const bool mapped = std::string(how) == "split_mmap";
    const figures f = median_startup(mode(how), runs);
    header(mapped ? "split files, step by step, weights mapped (map_param_dict_file, as model::load reads them):"
                  : "split files, step by step, weights with load_mode::copy:");
    if (f.empty()) {
      std::printf("  (failed)\n");
      continue;
    }
    step("read graph: load_graph_file", get(f, "graph"), "read() of graph.json", get(raw, "graph"));
    char label[96];
    std::snprintf(label, sizeof label, "%s (%.0f/%.0f mapped)", mapped ? "map weights: map_param_dict_file" : "read weights: load_param_dict_file",
                  get(f, "views"), get(f, "tensors"));
    if (mapped) step(label, get(f, "weights"), "mmap + a touch of every page", get(raw, "weights_map"));
    else step(label, get(f, "weights"), "read() of params.bin", get(raw, "weights"));
    step("load library: load_module(lib.so)", get(f, "library"), "dlopen(lib.so, RTLD_NOW)", get(raw, "library"));
    step("plan + bind: basic_model(graph, lib, params)", get(f, "plan"));
    step("create: instantiate() + set_input", get(f, "create"));
    tail(f, raw, false);
  }

  const figures split = median_startup(mode("split_load"), runs);
  one_call("split files, one call: model::load(graph.json, lib.so, params.bin):", split, raw, false);

  const figures steps = median_startup(mode("single_steps"), runs);
  header("single-file library, step by step:");
  if (!steps.empty()) {
    step("load library: load_module(model.so)", get(steps, "library"), "dlopen(model.so, RTLD_NOW)", get(raw, "single_library"));
    step("embedded graph + weights: factory(lib)", get(steps, "embedded"), "read() of graph.json + params.bin", get(raw, "graph") + get(raw, "weights"));
    step("plan + bind: factory::get_model()", get(steps, "plan"));
    step("create: instantiate() + set_input", get(steps, "create"));
    tail(steps, raw, false);
  } else {
    std::printf("  (failed)\n");
  }

  const figures single = median_startup(mode("single_load"), runs);
  one_call("single-file library, one call: model::load(model.so):", single, raw, true);

  if (relax_dir.empty() || !fs::exists(relax_dir / "convnet_constants.so")) {
    std::printf("\nRelax executable: SKIPPED (no convnet_constants.so; give the Relax suite with --relax DIR)\n");
  } else {
    (void)read_whole(relax_dir / "convnet_constants.so");
    const figures rx = median_startup(mode("relax"), runs);
    header("Relax executable convnet_constants.so (weights inside the library):");
    if (!rx.empty()) {
      step("load_executable", get(rx, "load"));
      step("create: virtual_machine(exe)", get(rx, "create"));
      tail(rx, raw, false);
    } else {
      std::printf("  (failed)\n");
    }
  }

  if (tvm_python.empty()) {
    std::printf("\nTVM's loader: SKIPPED (give its Python with --tvm-python)\n");
  } else {
    std::printf("\nTVM's own loader (time_tvm_startup.py under %s), same model, fresh interpreter each, median of %d:\n", tvm_python.c_str(), runs);
    std::printf("  %-52s %9s %9s   %-22s %9s %9s\n", "", "TVM ms", "gexec ms", "gexec's step", "ratio", "");
    for (const char* form : {"single", "split"}) {
      const bool is_single = std::string(form) == "single";
      const figures t = median_startup({tvm_python, GEXEC_TVM_STARTUP_SCRIPT, form, dir.string()}, runs);
      if (t.empty()) {
        std::printf("  %s: TVM's loader failed\n", form);
        continue;
      }
      const figures& g = is_single ? single : split;
      std::printf(" %s\n", is_single ? "single file: load_module(model.so) + GraphModule(lib[\"default\"](dev))" : "split files: graph_executor.create + load_params");
      auto trow = [&](const char* what, double tvm_ms, const char* gexec_step, double gexec_ms) {
        if (gexec_step)
          std::printf("  %-52s %9.3f %9.3f   %-22s %9.2f\n", what, tvm_ms, gexec_ms, gexec_step, tvm_ms / gexec_ms);
        else
          std::printf("  %-52s %9.3f\n", what, tvm_ms);
      };
      trow("interpreter start (spawn to script)", get(t, "interp"), "process start", get(g, "exec"));
      trow("import tvm", get(t, "import"), nullptr, 0);
      if (is_single) {
        trow("load_module(model.so)", get(t, "library"), nullptr, 0);
        trow("GraphModule(lib[\"default\"](dev))", get(t, "create"), nullptr, 0);
        trow("  load + create together", get(t, "library") + get(t, "create"), "model::load + create", get(g, "load") + get(g, "create"));
      } else {
        trow("read graph.json", get(t, "graph"), nullptr, 0);
        trow("load_module(lib.so)", get(t, "library"), nullptr, 0);
        trow("graph_executor.create", get(t, "create"), nullptr, 0);
        trow("load_params(read params.bin)", get(t, "weights"), nullptr, 0);
        trow("  all four together", get(t, "graph") + get(t, "library") + get(t, "create") + get(t, "weights"), "model::load + create",
             get(g, "load") + get(g, "create"));
      }
      trow("set_input", get(t, "inputs"), nullptr, 0);
      trow("first run()", get(t, "first"), "first run()", get(g, "first"));
      trow("second run()", get(t, "second"), "second run()", get(g, "second"));
      trow("to first output (after import tvm)", get(t, "total"), "to first output", get(g, "total"));
      std::printf("  %-52s %9.1f %9.1f   %-22s (MB)\n", "peak resident (VmHWM)", get(t, "hwm_mb"), get(g, "hwm_mb"), "peak resident");
      std::printf("  other processes kept %.2f of %ld cores busy during TVM's start-ups\n", get(t, "others"), ::sysconf(_SC_NPROCESSORS_ONLN));
    }
    std::printf("  ratio: TVM / gexec (above 1.00: gexec is faster)\n");
  }

  sharing_figures(dir, {"split", "single"}, false, false);

  // The same model written aligned: what model::load reads without a copy.
  std::string linked, no_single;
  const fs::path aligned = write_aligned(dir, linked, no_single);
  std::printf("\nthe same model written aligned (%s): params.bin by save_param_dict_file with save_options{64} (gexec-run --convert-params)\n",
              aligned.c_str());
  if (!linked.empty()) std::printf("model.so: %s\n", linked.c_str());
  auto aligned_mode = [&](const char* m) { return std::vector<std::string>{exe, "--child", m, aligned.string(), relax_dir.string()}; };
  one_call("split files written aligned, one call: model::load(graph.json, lib.so, params.bin):", median_startup(aligned_mode("split_load"), runs), raw,
           false);
  if (no_single.empty()) {
    one_call("single-file library written aligned (gexec-run --write-library), one call: model::load(model.so):",
             median_startup(aligned_mode("single_load"), runs), raw, true);
    sharing_figures(aligned, {"split", "single"}, true, true);
  } else {
    std::printf("\nsingle-file library written aligned: SKIPPED (%s)\n", no_single.c_str());
    sharing_figures(aligned, {"split"}, true, true);
  }
  std::error_code ec;
  fs::remove_all(aligned, ec);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 6 && std::string(argv[1]) == "--child") return child(argv[2], argv[3], std::stoll(argv[5]), argv[4]);
    fs::path conformance, relax_dir;
    std::string model = "resnet", tvm_python;
    int runs = 9;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      const bool has_value = i + 1 < argc;
      if (a == "--model" && has_value) model = argv[++i];
      else if (a == "--relax" && has_value) relax_dir = argv[++i];
      else if (a == "--tvm-python" && has_value) tvm_python = argv[++i];
      else if (a == "--runs" && has_value) runs = std::max(1, std::atoi(argv[++i]));
      else if (a.rfind("--", 0) != 0 && conformance.empty()) conformance = a;
      else {
        std::fprintf(stderr, "usage: gexec_bench_startup CONFORMANCE_DIR [--model NAME] [--relax SUITE_DIR] [--tvm-python PYTHON] [--runs N]\n");
        return 2;
      }
    }
    if (conformance.empty()) {
      std::printf("gexec_bench_startup: SKIPPED (no conformance directory given)\n");
      return 0;
    }
    return parent(conformance, model, relax_dir, tvm_python, runs);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gexec_bench_startup: %s\n", e.what());
    return 1;
  }
}
