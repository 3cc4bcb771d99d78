// Kernels compiled by today's TVM (apache-tvm from PyPI, the TVM-FFI ABI) run through
// gexec: tests/tvm_ffi/make_kernels.sh compiles TIR kernels (elementwise, a reduction,
// a parallel loop, one allocating workspace) into a plain library and a single-file
// one, and writes graphs calling them with numpy's answers, and graphs that must fail
// with the error named. Each case runs in this one process, beside a model over the
// packed C test kernels, so that both ABIs run side by side.
//
// The cases live in GEXEC_TVM_FFI_DIR (the environment variable of that name overrides
// the compiled-in path). When TVM could not be installed there is a SKIPPED file there
// instead, and this program exits with 77, which CTest reports as skipped.

#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <gexec/executor.hpp>
#include <gexec/load.hpp>
#include <gexec/npy.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace fs = std::filesystem;

namespace {

fs::path suite_dir() {
  const char* env = std::getenv("GEXEC_TVM_FFI_DIR");
  return env && *env ? fs::path(env) : fs::path(GEXEC_TVM_FFI_DIR);
}

struct suite_case {
  std::string name, graph, library;
  std::vector<std::pair<std::string, std::string>> inputs;
  std::vector<std::string> outputs;
  std::string error_code;
  std::vector<std::string> error_parts;
};

std::vector<suite_case> read_manifest(const fs::path& file) {
  std::ifstream in(file);
  std::vector<suite_case> cases;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string key;
    words >> key;
    if (key == "case") {
      cases.emplace_back();
      words >> cases.back().name >> cases.back().graph >> cases.back().library;
      continue;
    }
    REQUIRE_MESSAGE(!cases.empty(), "manifest line before any case: " << line);
    suite_case& c = cases.back();
    if (key == "input") {
      std::string name, npy;
      words >> name >> npy;
      c.inputs.emplace_back(name, npy);
    } else if (key == "output") {
      c.outputs.emplace_back();
      words >> c.outputs.back();
    } else if (key == "error") {
      words >> c.error_code;
    } else if (key == "contains") {
      c.error_parts.push_back(line.substr(std::string("contains ").size()));
    }
  }
  return cases;
}

/// Float32 outputs against numpy's: within a relative 1e-5 (sums may be added in
/// another order), the shape exactly.
void check_close(const std::string& at, const gexec::ndarray& got, const gexec::ndarray& want) {
  REQUIRE_MESSAGE(got.shape().size() == want.shape().size(), at << ": rank " << got.shape().size() << ", numpy " << want.shape().size());
  for (std::size_t d = 0; d < want.shape().size(); ++d) REQUIRE_MESSAGE(got.shape()[d] == want.shape()[d], at << ": dimension " << d);
  const auto g = got.values<float>();
  const auto w = want.values<float>();
  REQUIRE(g.size() == w.size());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < w.size(); ++i)
    if (!(std::fabs(g[i] - w[i]) <= 1e-5f * std::max(1.0f, std::fabs(w[i])))) {
      if (bad++ == 0) FAIL_CHECK(at << ": element " << i << " is " << g[i] << ", numpy " << w[i]);
    }
  CHECK_MESSAGE(bad == 0, at << ": " << bad << " of " << w.size() << " elements differ from numpy");
}

/// The packed C test kernels' model, run beside every TVM-FFI case.
struct old_abi_model {
  gexec::model model;
  gexec::graph_executor<> executor;
  explicit old_abi_model(const gexec::module& lib)
      : model([] {
          gexec::graph_builder b;
          auto x = b.input("x", {4});
          b.output(b.op("inc", "test_add_one", {x}, {{{4}}}));
          return b.build();
        }(), lib),
        executor(model.instantiate()) {}
  void run_and_check(float start) {
    executor.set_input("x", gexec::ndarray::from_values<float>({4}, std::vector<float>{start, start + 1, start + 2, start + 3}));
    executor.run();
    const auto v = executor.get_output(0).values<float>();
    for (int i = 0; i < 4; ++i) CHECK(v[static_cast<std::size_t>(i)] == start + static_cast<float>(i) + 1.0f);
  }
};

}  // namespace

TEST_CASE("TVM-FFI kernels from today's TVM: outputs against numpy, errors against their messages, beside packed C kernels") {
  const fs::path dir = suite_dir();
  const auto cases = read_manifest(dir / "manifest.txt");
  REQUIRE(cases.size() >= 10);
  old_abi_model old_abi(gexec::load_module(GEXEC_TEST_KERNELS));
  float round = 0;
  for (const suite_case& c : cases) {
    CAPTURE(c.name);
    const gexec::module lib = gexec::load_module(dir / c.library);
    CHECK(lib.tvm_ffi());
    auto run = [&] {
      auto ex = gexec::create(dir / fs::path(c.graph), lib);
      for (const auto& [name, npy] : c.inputs) ex.set_input(name, gexec::load_npy_file(dir / npy));
      ex.run();
      return ex;
    };
    if (c.error_code.empty()) {
      auto ex = run();
      REQUIRE(ex.get_num_outputs() == static_cast<int>(c.outputs.size()));
      for (std::size_t i = 0; i < c.outputs.size(); ++i)
        check_close(c.name + " output " + std::to_string(i), ex.get_output(static_cast<int>(i)), gexec::load_npy_file(dir / c.outputs[i]));
    } else {
      try {
        (void)run();
        FAIL_CHECK(c.name << ": no error, where " << c.error_code << " was expected");
      } catch (const gexec::error& e) {
        MESSAGE(c.name << ": " << std::string(e.what()));
        CHECK(gexec::to_string(e.code()) == c.error_code);
        for (const std::string& part : c.error_parts) CHECK_MESSAGE(std::string(e.what()).find(part) != std::string::npos, "missing: " << part);
      }
    }
    old_abi.run_and_check(round++);
  }
}

TEST_CASE("the workspace of TVM-FFI kernels comes from gexec, in both library forms, within the model's limit") {
  const fs::path dir = suite_dir();
  for (const char* library : {"kernels.so", "kernels_bin.so"}) {
    CAPTURE(library);
    // reverse_workspace allocates 8 KiB of workspace; a model allowing 4 KiB a thread
    // refuses it, through gexec's TVMBackendAllocWorkspace.
    gexec::model_options options;
    options.max_workspace_bytes = 4096;
    gexec::model m(gexec::load_graph_file(dir / "all_kernels.json"), gexec::load_module(dir / library), options);
    auto ex = m.instantiate();
    ex.set_input("x", gexec::load_npy_file(dir / "all_kernels_x.npy"));
    ex.set_input("y", gexec::load_npy_file(dir / "all_kernels_y.npy"));
    try {
      ex.run();
      FAIL_CHECK("no error with 4 KiB of workspace allowed");
    } catch (const gexec::error& e) {
      CHECK(e.code() == gexec::errc::kernel_failed);
      CHECK(std::string(e.what()).find("node \"reverse_workspace_0\"") != std::string::npos);
      CHECK(std::string(e.what()).find("would exceed the limit of 4096 bytes") != std::string::npos);
    }
  }
}

int main(int argc, char** argv) {
  const fs::path dir = suite_dir();
  if (fs::exists(dir / "SKIPPED")) {
    std::ifstream in(dir / "SKIPPED");
    std::string reason;
    std::getline(in, reason);
    std::printf("SKIPPED: %s\n", reason.c_str());
    return 77;
  }
  if (!fs::exists(dir / "manifest.txt")) {
    std::fprintf(stderr, "test_tvm_ffi_suite: %s has no manifest.txt and no SKIPPED (run: bash tests/tvm_ffi/make_kernels.sh %s)\n",
                 dir.string().c_str(), dir.string().c_str());
    return 1;
  }
  std::printf("TVM-FFI suite: %s\n", dir.string().c_str());
  doctest::Context context(argc, argv);
  return context.run();
}
