// Creating an executor from graph JSON text: gexec::create(json, lib) on a chain of N
// kernel calls, as TVM writes its graph JSON, against two baselines over the same text
// in the same run: Boost.JSON's streaming parser with a handler that does nothing (the
// least any reader must do), and boost::json::parse building a document (the DOM
// parse alone, without reading anything out of it).
//
//   gexec_bench_load_graph [N...]          (default: 10000 100000)
//   gexec_bench_load_graph --callgrind N   (one creation, in create_executor(), between
//                                           CALLGRIND_START/STOP_INSTRUMENTATION)
//   gexec_bench_load_graph --callgrind-stream N   (the streaming baseline, bracketed alike)
//   gexec_bench_load_graph --callgrind-parse N    (parse_graph alone, in parse_only(), bracketed alike)
//   gexec_bench_load_graph --callgrind-times K N  (K creations and one run, bracketed alike: the
//                                                  difference of K = 3 and 1 is two creations
//                                                  without what the first one sets up once)
//
// Under valgrind, either of these counts creation only (callgrind.sh runs the first):
//   valgrind --tool=callgrind --instr-atstart=no gexec_bench_load_graph --callgrind 10000
//   valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*create_executor*' ...
//
// Memory is measured in a child process forked before the parent has done anything
// that leaves freed memory in its heap: the child makes the JSON text, resets the
// kernel's peak-RSS counter (/proc/self/clear_refs), then reads VmRSS, creates the
// executor, and reads VmHWM (peak during creation) and VmRSS (resident after). The
// figures are those differences per node: what creation costs in resident pages,
// including what the allocator keeps after frees, and excluding the JSON text.

#include <gexec/executor.hpp>

#include <malloc.h>
#include <sys/wait.h>
#include <unistd.h>
#include <valgrind/callgrind.h>

#include <boost/json/basic_parser_impl.hpp>
#include <boost/json/parse.hpp>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "../machine.hpp"

namespace {

// The chain x -> n0 -> n1 -> ... as TVM's graph JSON: the node attributes as strings,
// two storage ids used in turn; one node per line (about 200 bytes of JSON per node).
std::string chain_json(int n) {
  std::string s;
  s.reserve(static_cast<std::size_t>(n) * 256 + 4096);
  char buf[32];
  auto num = [&](long long v) {
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    s.append(buf, r.ptr);
  };
  s += "{\"nodes\": [\n{\"op\": \"null\", \"name\": \"x\", \"inputs\": []}";
  for (int i = 0; i < n; ++i) {
    s += ",\n{\"op\": \"tvm_op\", \"name\": \"tvmgen_default_fused_add_";
    num(i);
    s += "\", \"attrs\": {\"num_outputs\": \"1\", \"num_inputs\": \"1\", \"flatten_data\": \"0\", "
         "\"func_name\": \"test_add_one_16\"}, \"inputs\": [[";
    num(i);
    s += ", 0, 0]]}";
  }
  s += "],\n\"arg_nodes\": [0],\n\"heads\": [[";
  num(n);
  s += ", 0, 0]],\n\"attrs\": {\"dltype\": [\"list_str\", [";
  for (int i = 0; i <= n; ++i) s += i ? ", \"float32\"" : "\"float32\"";
  s += "]],\n\"storage_id\": [\"list_int\", [";
  for (int i = 0; i <= n; ++i) {
    if (i) s += ", ";
    num(i == 0 ? 0 : 1 + i % 2);
  }
  s += "]],\n\"shape\": [\"list_shape\", [";
  for (int i = 0; i <= n; ++i) s += i ? ", [16]" : "[16]";
  s += "]]},\n\"node_row_ptr\": [";
  for (int i = 0; i <= n + 1; ++i) {
    if (i) s += ", ";
    num(i);
  }
  s += "]}\n";
  return s;
}

// A handler that accepts everything and keeps nothing: the parser's own cost.
struct null_handler {
  static constexpr std::size_t max_object_size = std::size_t(-1);
  static constexpr std::size_t max_array_size = std::size_t(-1);
  static constexpr std::size_t max_key_size = std::size_t(-1);
  static constexpr std::size_t max_string_size = std::size_t(-1);
  using ec = boost::system::error_code;
  using sv = boost::json::string_view;
  bool on_document_begin(ec&) { return true; }
  bool on_document_end(ec&) { return true; }
  bool on_object_begin(ec&) { return true; }
  bool on_object_end(std::size_t, ec&) { return true; }
  bool on_array_begin(ec&) { return true; }
  bool on_array_end(std::size_t, ec&) { return true; }
  bool on_key_part(sv, std::size_t, ec&) { return true; }
  bool on_key(sv, std::size_t, ec&) { return true; }
  bool on_string_part(sv, std::size_t, ec&) { return true; }
  bool on_string(sv, std::size_t, ec&) { return true; }
  bool on_number_part(sv, ec&) { return true; }
  bool on_int64(std::int64_t, sv, ec&) { return true; }
  bool on_uint64(std::uint64_t, sv, ec&) { return true; }
  bool on_double(double, sv, ec&) { return true; }
  bool on_bool(bool, ec&) { return true; }
  bool on_null(ec&) { return true; }
  bool on_comment_part(sv, ec&) { return true; }
  bool on_comment(sv, ec&) { return true; }
};

[[gnu::noinline]] void stream_parse(std::string_view text) {
  boost::json::basic_parser<null_handler> p(boost::json::parse_options{});
  boost::system::error_code ec;
  p.write_some(false, text.data(), text.size(), ec);
  if (ec) {
    std::fprintf(stderr, "streaming parse failed: %s\n", ec.message().c_str());
    std::exit(1);
  }
}

// Best of `repeat` timings of f(), in seconds; what f returns is destroyed untimed.
template <class F>
double best_seconds(int repeat, F&& f) {
  double best = 1e9;
  for (int r = 0; r < repeat; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    [[maybe_unused]] auto kept = f();
    auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double>(t1 - t0).count());
  }
  return best;
}

long status_kb(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::size_t len = std::strlen(key);
  while (std::getline(in, line))
    if (line.compare(0, len, key) == 0 && line.size() > len && line[len] == ':') return std::atol(line.c_str() + len + 1);
  return -1;
}

struct memory {
  double peak = 0, resident = 0;  // bytes per node above the JSON text
};

// Runs `what` in a forked child after making the text there; returns per-node figures.
template <class F>
memory measure_memory(int n, F&& what) {
  int fds[2];
  if (pipe(fds) != 0) std::abort();
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    const std::string text = chain_json(n);
    std::ofstream("/proc/self/clear_refs") << "5";  // VmHWM := VmRSS
    const long before = status_kb("VmRSS");
    [[maybe_unused]] auto kept = what(text);
    const long peak = status_kb("VmHWM"), after = status_kb("VmRSS");
    memory m{(peak - before) * 1024.0 / n, (after - before) * 1024.0 / n};
    if (write(fds[1], &m, sizeof m) != static_cast<ssize_t>(sizeof m)) _exit(1);
    _exit(0);
  }
  close(fds[1]);
  memory m{};
  const bool ok = read(fds[0], &m, sizeof m) == static_cast<ssize_t>(sizeof m);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!ok || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "memory measurement failed for %d nodes\n", n);
    std::exit(1);
  }
  return m;
}

// What --callgrind counts: a function of its own, so that --toggle-collect can name it.
[[gnu::noinline]] gexec::graph_executor<> create_executor(const std::string& text, const gexec::module& lib) {
  return gexec::create(text, lib);
}

// What --callgrind-parse counts: reading and validating the graph, nothing after.
[[gnu::noinline]] gexec::validated_graph parse_only(const std::string& text) { return gexec::parse_graph(text); }

constexpr double goal_ns_100k = 100e6;  // < 100 ms for 100,000 nodes
constexpr double goal_peak = 400, goal_resident = 250;

}  // namespace

int main(int argc, char** argv) {
  const auto lib = gexec::load_module(GEXEC_TEST_KERNELS);
  if (argc == 3 && std::string_view(argv[1]) == "--callgrind") {
    const int n = std::atoi(argv[2]);
    const std::string text = chain_json(n);
    CALLGRIND_START_INSTRUMENTATION;
    auto ex = create_executor(text, lib);
    CALLGRIND_STOP_INSTRUMENTATION;
    std::printf("%d nodes, %zu bytes of JSON, %d outputs\n", n, text.size(), ex.get_num_outputs());
    return 0;
  }
  if (argc == 4 && std::string_view(argv[1]) == "--callgrind-times") {  // K creations, one after another, each run once
    const int k = std::atoi(argv[2]), n = std::atoi(argv[3]);
    const std::string text = chain_json(n);
    CALLGRIND_START_INSTRUMENTATION;
    for (int i = 0; i < k; ++i) {
      auto ex = create_executor(text, lib);
      if (i != 0) continue;
      for (const gexec::tensor_info& in : ex.get_input_info()) {
        gexec::ndarray zeros = gexec::ndarray::empty(in.shape, in.dtype);
        std::memset(zeros.data(), 0, static_cast<std::size_t>(zeros.byte_size()));
        ex.set_input(in.name, zeros);
      }
      ex.run();
    }
    CALLGRIND_STOP_INSTRUMENTATION;
    return 0;
  }
  if (argc == 3 && std::string_view(argv[1]) == "--callgrind-stream") {  // the baseline, counted the same way
    const int n = std::atoi(argv[2]);
    const std::string text = chain_json(n);
    CALLGRIND_START_INSTRUMENTATION;
    stream_parse(text);
    CALLGRIND_STOP_INSTRUMENTATION;
    return 0;
  }
  if (argc == 3 && std::string_view(argv[1]) == "--callgrind-parse") {
    const int n = std::atoi(argv[2]);
    const std::string text = chain_json(n);
    CALLGRIND_START_INSTRUMENTATION;
    auto g = parse_only(text);
    CALLGRIND_STOP_INSTRUMENTATION;
    std::printf("%d nodes, %zu bytes of JSON, %zu graph nodes\n", n, text.size(), g.compact().num_nodes());
    return 0;
  }
  std::vector<int> sizes;
  for (int i = 1; i < argc; ++i) sizes.push_back(std::atoi(argv[i]));
  if (sizes.empty()) sizes = {10000, 100000};

  // Memory first, in children of a parent whose heap nothing has used yet.
  struct mem_row {
    memory create, dom;
  };
  std::vector<mem_row> mem;
  for (int n : sizes)
    mem.push_back({measure_memory(n, [&](const std::string& t) { return gexec::create(t, lib); }),
                   measure_memory(n, [&](const std::string& t) { return boost::json::parse(t); })});

  std::printf("graph creation, chain of N kernel calls (%d usable cores, load %s)\n\n", bench::usable_cores(),
              bench::load_average().c_str());
  std::printf("%8s %8s %11s %11s %11s %9s %9s\n", "nodes", "JSON MB", "create ms", "stream ms", "DOM ms", "/stream", "/DOM");
  for (int n : sizes) {
    const std::string text = chain_json(n);
    const int repeat = n >= 100000 ? 7 : 25;
    const double create = best_seconds(repeat, [&] { return gexec::create(text, lib); });
    const double stream = best_seconds(repeat, [&] { stream_parse(text); return 0; });
    const double dom = best_seconds(repeat, [&] { return boost::json::parse(text); });
    std::printf("%8d %8.1f %11.2f %11.2f %11.2f %8.2fx %8.2fx\n", n, static_cast<double>(text.size()) / 1e6, create * 1e3, stream * 1e3,
                dom * 1e3, create / stream, create / dom);
    if (n == 100000)
      std::printf("%8s goal < %.0f ms: %s\n", "", goal_ns_100k / 1e6, create * 1e9 < goal_ns_100k ? "met" : "NOT met");
  }

  std::printf("\nbytes per node above the JSON text (VmHWM / VmRSS of a forked child)\n\n");
  std::printf("%8s %10s %10s %10s %10s %12s %12s\n", "nodes", "peak", "goal", "/goal", "DOM peak", "resident", "/goal 250");
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const mem_row& r = mem[i];
    std::printf("%8d %10.0f %10.0f %9.2fx %10.0f %12.0f %11.2fx\n", sizes[i], r.create.peak, goal_peak, r.create.peak / goal_peak,
                r.dom.peak, r.create.resident, r.create.resident / goal_resident);
  }
  std::printf("\n(DOM peak: boost::json::parse's document alone, the old parse's first step; ratio peak/DOM peak: ");
  for (std::size_t i = 0; i < sizes.size(); ++i) std::printf("%s%.2fx", i ? ", " : "", mem[i].create.peak / mem[i].dom.peak);
  std::printf(")\n");
}
