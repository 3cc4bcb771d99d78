// Relax VM executables built by today's TVM (apache-tvm from PyPI: relax.build, then
// export_library) run by gexec, every output compared with TVM's own VM bit for bit:
// tests/relax/make_models.sh builds an MLP and a conv net with batch norm and pooling
// (weights as arguments and as constants), an attention block, int8 and float16
// models, tuple outputs, two functions in one module, an If on a tensor's value and a
// dynamic batch dimension, runs each with relax.VirtualMachine and writes what it
// returned; cases gexec must refuse carry the error instead.
//
// A cross build (the arm stage) runs the same suite compiled by TVM for its machine
// (make_models.sh --target aarch64) under qemu-user; its outputs are TVM's VM's on x86-64
// for the same module and inputs, and a case whose ARM kernels round otherwise says how
// close it must come ("close ATOL RTOL" in the manifest); every other case is bit for bit.
//
// The cases live in GEXEC_RELAX_DIR (the environment variable of that name overrides
// the compiled-in path). When TVM could not be installed there is a SKIPPED file there
// instead, and this program exits with 77, which CTest reports as skipped.

#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <gexec/debug/compare_dump.hpp>
#include <gexec/debug/profile.hpp>
#include <gexec/npz.hpp>
#include <gexec/relax.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace fs = std::filesystem;

namespace {

fs::path suite_dir() {
  const char* env = std::getenv("GEXEC_RELAX_DIR");
  return env && *env ? fs::path(env) : fs::path(GEXEC_RELAX_DIR);
}

struct suite_case {
  std::string name, library, function, data, params;
  int inputs = 0, outputs = 0;
  std::string error_code;
  std::vector<std::string> error_parts;
};

/// How close a library's outputs must come to TVM's where not bit for bit (cross builds).
struct closeness {
  double atol = 0, rtol = 0;
};
std::map<std::string, closeness>& tolerances() {
  static std::map<std::string, closeness> by_library;
  return by_library;
}

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
      words >> cases.back().name >> cases.back().library >> cases.back().function;
      continue;
    }
    REQUIRE_MESSAGE(!cases.empty(), "manifest line before any case: " << line);
    suite_case& c = cases.back();
    if (key == "data") words >> c.data >> c.inputs >> c.outputs;
    else if (key == "params") words >> c.params;
    else if (key == "close") words >> tolerances()[c.library].atol >> tolerances()[c.library].rtol;
    else if (key == "error") words >> c.error_code;
    else if (key == "contains") c.error_parts.push_back(line.substr(std::string("contains ").size()));
  }
  return cases;
}

struct case_data {
  std::vector<gexec::ndarray> inputs, outputs;
};

case_data read_data(const fs::path& npz, const suite_case& c) {
  std::map<std::string, gexec::ndarray> arrays;
  for (auto& [name, a] : gexec::load_npz_file(npz)) arrays.emplace(name, a);
  case_data d;
  for (int i = 0; i < c.inputs; ++i) d.inputs.push_back(arrays.at("in" + std::to_string(i)));
  for (int i = 0; i < c.outputs; ++i) d.outputs.push_back(arrays.at("out" + std::to_string(i)));
  return d;
}

/// Bit for bit: dtype, shape and every byte as TVM's VM returned them.
void check_identical(const std::string& at, const gexec::ndarray& got, const gexec::ndarray& want) {
  REQUIRE_MESSAGE(gexec::same_dtype(got.dtype(), want.dtype()), at << ": dtype " << gexec::to_string(got.dtype()) << ", TVM " << gexec::to_string(want.dtype()));
  REQUIRE_MESSAGE(std::vector<std::int64_t>(got.shape().begin(), got.shape().end()) == std::vector<std::int64_t>(want.shape().begin(), want.shape().end()),
                  at << ": shape differs from TVM's");
  const auto* g = static_cast<const unsigned char*>(got.data());
  const auto* w = static_cast<const unsigned char*>(want.data());
  std::size_t first = want.byte_size();
  for (std::size_t i = 0; i < want.byte_size(); ++i)
    if (g[i] != w[i]) {
      first = i;
      break;
    }
  CHECK_MESSAGE(first == want.byte_size(), at << ": differs from TVM's VM from byte " << first << " of " << want.byte_size());
}

/// As TVM's VM returned them: bit for bit, or, where the case's library says how close
/// (kernels compiled for another machine), within |got - want| <= atol + rtol * |want|
/// (dtype and shape still exact); the largest difference is printed.
bool check_output(const std::string& library, const std::string& at, const gexec::ndarray& got, const gexec::ndarray& want) {
  const auto it = tolerances().find(library);
  if (it == tolerances().end()) {
    check_identical(at, got, want);
    return std::memcmp(got.data(), want.data(), want.byte_size()) == 0;
  }
  REQUIRE_MESSAGE(gexec::same_dtype(got.dtype(), want.dtype()), at << ": dtype " << gexec::to_string(got.dtype()) << ", TVM " << gexec::to_string(want.dtype()));
  REQUIRE(got.numel() == want.numel());
  REQUIRE_MESSAGE(want.dtype().code == kDLFloat, at << ": a tolerance for " << gexec::to_string(want.dtype()) << " (integers compare exactly)");
  double worst = 0;
  std::size_t bad = 0;
  for (std::size_t i = 0; i < static_cast<std::size_t>(want.numel()); ++i) {
    const double g = gexec::detail::dump_element(got, i), w = gexec::detail::dump_element(want, i), d = std::fabs(g - w);
    worst = std::max(worst, d);
    bad += !(d <= it->second.atol + it->second.rtol * std::fabs(w));
  }
  MESSAGE(at << ": largest difference from TVM's x86-64 VM " << worst << " (atol " << it->second.atol << ", rtol " << it->second.rtol << ")");
  CHECK_MESSAGE(bad == 0, at << ": " << bad << " elements beyond the tolerance");
  return bad == 0;
}

}  // namespace

TEST_CASE("Relax executables from today's TVM: every output bit-identical to TVM's VM, refusals with their messages") {
  const fs::path dir = suite_dir();
  const auto cases = read_manifest(dir / "manifest.txt");
  REQUIRE(cases.size() >= 18);
  std::map<std::string, gexec::relax::executable> loaded;
  for (const suite_case& c : cases) {
    CAPTURE(c.name);
    if (!c.error_code.empty()) {
      try {
        (void)gexec::relax::load_executable(dir / c.library);
        FAIL_CHECK(c.name << ": loaded, where " << c.error_code << " was expected");
      } catch (const gexec::error& e) {
        MESSAGE(c.name << ": " << std::string(e.what()));
        CHECK(gexec::to_string(e.code()) == c.error_code);
        for (const std::string& part : c.error_parts) CHECK_MESSAGE(std::string(e.what()).find(part) != std::string::npos, "missing: " << part);
      }
      continue;
    }
    const std::string key = c.library + " " + c.params;
    auto it = loaded.find(key);
    if (it == loaded.end())
      it = loaded.emplace(key, c.params.empty() ? gexec::relax::load_executable(dir / c.library) : gexec::relax::load_executable(dir / c.library, dir / c.params)).first;
    const case_data d = read_data(dir / c.data, c);
    gexec::relax::virtual_machine vm(it->second);
    // Twice: the second run reuses the storage of the first.
    for (int round = 0; round < 2; ++round) {
      const std::vector<gexec::ndarray> out = vm.run(c.function, d.inputs);
      REQUIRE(out.size() == d.outputs.size());
      for (std::size_t i = 0; i < out.size(); ++i) check_output(c.library, c.name + " output " + std::to_string(i), out[i], d.outputs[i]);
    }
  }
}

TEST_CASE("outputs a caller keeps are not overwritten by the next run") {
  const fs::path dir = suite_dir();
  const auto exe = gexec::relax::load_executable(dir / "dynamic_batch.so");
  suite_case c{"dynamic_batch", "", "main", "", "", 2, 1, {}, {}};
  const case_data a = read_data(dir / "dynamic_batch.npz", c);
  const case_data b = read_data(dir / "dynamic_batch_1.npz", c);
  gexec::relax::virtual_machine vm(exe);
  const auto first = vm.run("main", a.inputs);
  const auto second = vm.run("main", b.inputs);
  check_output("dynamic_batch.so", "first output, after a second run", first.at(0), a.outputs[0]);
  check_output("dynamic_batch.so", "second output", second.at(0), b.outputs[0]);
}

TEST_CASE("one executable, a virtual machine per thread") {
  const fs::path dir = suite_dir();
  const auto exe = gexec::relax::load_executable(dir / "convnet.so");
  suite_case c{"convnet", "", "main", "", "", 8, 1, {}, {}};
  const case_data d = read_data(dir / "convnet.npz", c);
  // Each thread's runs as the first run on this one (itself checked against TVM's).
  gexec::ndarray reference;
  {
    gexec::relax::virtual_machine vm(exe);
    reference = vm.run("main", d.inputs).at(0);
    check_output("convnet.so", "convnet", reference, d.outputs[0]);
  }
  std::vector<int> same(2, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      gexec::relax::virtual_machine vm(exe);
      for (int i = 0; i < 20; ++i) {
        const auto out = vm.run("main", d.inputs);
        same[static_cast<std::size_t>(t)] += std::memcmp(out[0].data(), reference.data(), reference.byte_size()) == 0;
      }
    });
  for (auto& t : threads) t.join();
  CHECK(same[0] == 20);
  CHECK(same[1] == 20);
}

TEST_CASE("what a run refuses: a wrong shape or dtype, a missing function, the wrong argument count; the VM stays usable") {
  const fs::path dir = suite_dir();
  const auto exe = gexec::relax::load_executable(dir / "mlp.so");
  suite_case c{"mlp", "", "main", "", "", 5, 1, {}, {}};
  const case_data d = read_data(dir / "mlp.npz", c);
  gexec::relax::virtual_machine vm(exe);
  auto fails = [&](std::vector<gexec::ndarray> inputs, const char* function, gexec::errc code, const char* part) {
    try {
      (void)vm.run(function, inputs);
      FAIL_CHECK("no error; expected " << gexec::to_string(code));
    } catch (const gexec::error& e) {
      MESSAGE(std::string(e.what()));
      CHECK(e.code() == code);
      CHECK_MESSAGE(std::string(e.what()).find(part) != std::string::npos, "missing: " << part);
    }
  };
  auto wrong_shape = d.inputs;
  wrong_shape[0] = gexec::ndarray::empty({4, 15}, gexec::dtypes::float32);
  fails(wrong_shape, "main", gexec::errc::shape_mismatch, "argument 0 (\"x\"): expect Tensor with shape [4, 16] but get [4, 15]");
  auto wrong_dtype = d.inputs;
  wrong_dtype[0] = gexec::ndarray::empty({4, 16}, gexec::dtypes::float64);
  fails(wrong_dtype, "main", gexec::errc::dtype_mismatch, "expect Tensor with dtype float32 but get float64");
  fails({d.inputs[0]}, "main", gexec::errc::invalid_argument, "takes 5 arguments (x, w1, b1, w2, b2), got 1");
  fails(d.inputs, "nope", gexec::errc::not_found, "has no function \"nope\" (it has: main)");
  const auto out = vm.run("main", d.inputs);
  check_output("mlp.so", "after the refusals", out.at(0), d.outputs[0]);
}

TEST_CASE("static functions run as gexec graphs (the profiler lists their kernels); If, dynamic shapes and unbound weights are interpreted") {
  const fs::path dir = suite_dir();
  for (const char* lib : {"mlp.so", "mlp_constants.so", "convnet.so", "convnet_constants.so", "attention.so", "int8.so", "float16.so", "tuple_out.so"}) {
    CAPTURE(lib);
    const auto exe = gexec::relax::load_executable(dir / lib);
    CHECK_MESSAGE(exe.graph_of("main") != nullptr, exe.interpreted_because("main"));
  }
  const auto ifs = gexec::relax::load_executable(dir / "if_else.so");
  CHECK(ifs.interpreted_because("main").find("control flow") != std::string::npos);
  const auto dynamic = gexec::relax::load_executable(dir / "dynamic_batch.so");
  CHECK(dynamic.interpreted_because("main") == "argument \"x\" has no static shape and dtype (no check fixes them)");
  // nn.Module's weights are unchecked arguments: bound from a file, the function is a graph.
  CHECK(gexec::relax::load_executable(dir / "nn_mlp.so").graph_of("forward") == nullptr);
  const auto bound = gexec::relax::load_executable(dir / "nn_mlp.so", dir / "nn_mlp.safetensors");
  CHECK(bound.graph_of("forward") != nullptr);
  CHECK(bound.input_names("forward") == std::vector<std::string>{"x"});

  const auto exe = gexec::relax::load_executable(dir / "convnet_constants.so");
  gexec::relax::virtual_machine vm(exe);
  suite_case c{"convnet_constants", "", "main", "", "", 1, 1, {}, {}};
  const case_data d = read_data(dir / "convnet_constants.npz", c);
  (void)vm.run("main", d.inputs);
  auto& ex = vm.graph_executor("main");
  const gexec::profile_report report = gexec::profile(ex);
  const std::string table = report.table();
  MESSAGE(table);
  for (const char* kernel : {"conv2d", "max_pool2d"}) CHECK_MESSAGE(table.find(kernel) != std::string::npos, "missing: " << kernel);
}

TEST_CASE("float8 constants (e4m3fn, e5m2): read with TVM >= 0.21's dtype codes, their bits as ml_dtypes wrote them") {
  const fs::path dir = suite_dir();
  const auto exe = gexec::relax::load_executable(dir / "float8_constants.so");
  std::map<std::string, gexec::ndarray> bits;
  for (auto& [name, a] : gexec::load_npz_file(dir / "float8_constants_bits.npz")) bits.emplace(name, a);
  int found = 0;
  for (const gexec::relax::vm_constant& c : exe.code().constants) {
    const auto* a = std::get_if<gexec::ndarray>(&c);
    if (!a || a->dtype().bits != 8 || (a->dtype().code != 10 && a->dtype().code != 12)) continue;
    const bool e4m3 = a->dtype().code == 10;  // DLPack's float8_e4m3fn; 12 is float8_e5m2
    const gexec::ndarray& want = bits.at(e4m3 ? "e4m3fn" : "e5m2");
    CHECK(gexec::relax::describe(c) == (e4m3 ? "tensor e4m3_float8[2, 4]" : "tensor e5m2_float8[2, 4]"));
    REQUIRE(a->byte_size() == want.byte_size());
    CHECK_MESSAGE(std::memcmp(a->data(), want.data(), want.byte_size()) == 0, (e4m3 ? "e4m3fn" : "e5m2") << " constant's bits differ");
    ++found;
  }
  CHECK(found == 2);
  // Kernels convert them; the function runs (interpreted: a gexec graph holds no float8 of
  // DLPack's codes) with TVM's results, checked with the suite above.
  CHECK(exe.graph_of("main") == nullptr);
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
    std::fprintf(stderr, "test_relax_suite: %s has no manifest.txt and no SKIPPED (run: bash tests/relax/make_models.sh %s)\n", dir.string().c_str(),
                 dir.string().c_str());
    return 1;
  }
  std::printf("Relax suite: %s\n", dir.string().c_str());
  doctest::Context context(argc, argv);
  return context.run();
}
