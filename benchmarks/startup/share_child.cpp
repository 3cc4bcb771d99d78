// One of the processes gexec_bench_startup counts the memory of: a program of its own, as a
// served model's would be, so that the pages of its code are shared among the processes
// measured and with no one else (had the benchmark spawned itself, its own copy of the same
// code would have taken half of one process's share).
//
//   gexec_bench_share_child split|single MODEL_DIR as_compiled|liveness|liveness+donated
//
// Loads the model in MODEL_DIR (graph.json, lib.so and params.bin, or model.so), its
// activations planned as_compiled or by liveness (liveness+donated: the inputs donated to
// runs, model_options::donate_inputs), runs it twice (the steady state: a thread's
// workspace settles when its first run ends), prints "ready OWN" (the bytes it must hold
// of its own: its executor's storage and the workspace this thread kept) and waits for its
// stdin to close.

#include <gexec/executor.hpp>
#include <gexec/load.hpp>

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  try {
    if (argc != 4) {
      std::fprintf(stderr, "usage: gexec_bench_share_child split|single MODEL_DIR as_compiled|liveness|liveness+donated\n");
      return 2;
    }
    const std::string form = argv[1], planner = argv[3];
    const fs::path dir = argv[2];
    gexec::model_options o;
    if (planner == "liveness" || planner == "liveness+donated") o.planner = gexec::liveness{};
    else if (planner != "as_compiled") throw std::runtime_error("unknown planner " + planner);
    o.donate_inputs = planner == "liveness+donated";
    if (form != "split" && form != "single") throw std::runtime_error("unknown form " + form);
    auto m = form == "split" ? gexec::model::load(dir / "graph.json", dir / "lib.so", dir / "params.bin", o) : gexec::model::load(dir / "model.so", o);
    auto ex = m.instantiate();
    {
      // Set before each run (donated inputs are used up), then dropped, as a server's
      // request buffer would be. Read once: the C library maps a buffer this large and
      // unmaps it when freed, but would keep a second one in its heap.
      const gexec::param_dict inputs = gexec::load_param_dict_file(dir / "inputs.bin");
      for (int run = 0; run < 2; ++run) {
        for (const auto& [name, a] : inputs) ex.set_input(name, a);
        ex.run();
      }
    }
    const std::uint64_t own = ex.storage_bytes() + gexec::detail::workspace_arena::this_thread().reserved();
    std::printf("ready %llu\n", static_cast<unsigned long long>(own));
    std::fflush(stdout);
    char c;
    while (::read(0, &c, 1) > 0) {
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gexec_bench_share_child: %s\n", e.what());
    return 1;
  }
}
