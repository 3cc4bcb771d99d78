// gexec-run, run as a user runs it: every option, checked by its output, and every bad
// argument a clear error with a non-zero exit. Expected values are computed here from
// the model's parameters with plain loops.

#include <gexec/executor.hpp>
#include <gexec/npy.hpp>
#include <gexec/npz.hpp>

#include "../tools/gexec-run/values.hpp"
#include "test_support.hpp"
#include "../tools/gexec-run/sha256.hpp"

#include <doctest/doctest.h>

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include <dlfcn.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace test;

namespace {

const std::string src = GEXEC_SOURCE_DIR;
const std::string graph_file = src + "/examples/mlp/graph.json";
const std::string params_file = src + "/examples/mlp/params.bin";
const std::string split = " -g " + graph_file + " -l " + GEXEC_TEST_KERNELS + " -p " + params_file;
const std::string single = std::string(" ") + GEXEC_TEST_FACTORY;

struct result {
  int status;
  std::string out;
};

/// Runs gexec-run with `args` (shell words), stdout and stderr together; `env`: variable
/// assignments before the command.
result run_cli(const std::string& args, const std::string& env = "") {
  const std::string cmd = env + std::string(GEXEC_RUN) + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int status = ::pclose(p);
  INFO("gexec-run" << args << "\n" << out);
  REQUIRE(WIFEXITED(status));
  return {WEXITSTATUS(status), out};
}

bool has(const result& r, const std::string& s) { return r.out.find(s) != std::string::npos; }

/// A fresh directory for one test's files.
fs::path scratch(const std::string& name) {
  const fs::path dir = fs::path(GEXEC_CLI_SCRATCH) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

/// The bundled MLP computed with plain loops: softmax(w2 . relu(w1 . x)).
std::vector<float> mlp(const std::vector<float>& x) {
  const auto params = gexec::load_param_dict_file(params_file);
  const auto w1 = values_of(params.at("w1")), w2 = values_of(params.at("w2"));
  std::vector<float> h(8), y(3);
  for (int i = 0; i < 8; ++i) {
    float s = 0;
    for (int k = 0; k < 4; ++k) s += w1[static_cast<std::size_t>(i * 4 + k)] * x[static_cast<std::size_t>(k)];
    h[static_cast<std::size_t>(i)] = std::max(s, 0.0f);
  }
  float z = 0;
  for (int j = 0; j < 3; ++j) {
    float s = 0;
    for (int k = 0; k < 8; ++k) s += w2[static_cast<std::size_t>(j * 8 + k)] * h[static_cast<std::size_t>(k)];
    y[static_cast<std::size_t>(j)] = s;
  }
  const float m = std::max({y[0], y[1], y[2]});
  for (float& v : y) z += (v = std::exp(v - m));
  for (float& v : y) v /= z;
  return y;
}

/// The printed values of output `name` ("softmax:0: float32[1, 3] = a b c").
std::vector<double> printed(const result& r, const std::string& name) {
  const auto at = r.out.find(name + ": ");
  REQUIRE(at != std::string::npos);
  const auto eq = r.out.find(" = ", at);
  const auto end = r.out.find('\n', eq);
  std::vector<double> v;
  std::string line = r.out.substr(eq + 3, end - eq - 3);
  for (std::size_t s = 0; s < line.size();) {
    const auto sp = line.find(' ', s);
    v.push_back(std::stod(line.substr(s, sp - s)));
    if (sp == std::string::npos) break;
    s = sp + 1;
  }
  return v;
}

void check_close(const std::vector<double>& got, const std::vector<float>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-5));
}

/// A graph whose output is its input: gexec-run reads and prints any dtype through it.
std::string identity_graph(const fs::path& dir, DLDataType dtype, std::vector<std::int64_t> shape) {
  gexec::graph_builder b;
  b.output(b.input("v", std::move(shape), dtype));
  const fs::path file = dir / "identity.json";
  std::ofstream(file) << gexec::to_json(b.build());
  return " -g " + file.string() + " -l " + GEXEC_TEST_KERNELS;
}

}  // namespace

TEST_CASE("both model forms give the MLP's answer; the graph's parameters come from the library or --params") {
  const std::vector<float> x = {0.5f, -1, 2, 0.25f};
  const auto want = mlp(x);
  const result a = run_cli(split + " -i x=0.5,-1,2,0.25");
  CHECK(a.status == 0);
  check_close(printed(a, "softmax:0"), want);
  const result b = run_cli(single + " --input x=0.5,-1,2,0.25");
  CHECK(b.status == 0);
  check_close(printed(b, "softmax:0"), want);
  // An input may be named by its index among the inputs that are not parameters.
  check_close(printed(run_cli(split + " -i 0=0.5,-1,2,0.25"), "softmax:0"), want);
  // A library given as --lib without --params: its weights are inputs no one gave.
  const result c = run_cli(std::string(" -g ") + graph_file + " -l " + GEXEC_TEST_FACTORY + " -i x=1");
  CHECK(c.status == 1);
  CHECK(has(c, "no value given for input w1"));
}

TEST_CASE("inputs not given are an error, or zeros with --zero-missing") {
  const result a = run_cli(split);
  CHECK(a.status == 1);
  CHECK(has(a, "no value given for input x (float32[1, 4])"));
  CHECK(has(a, "--zero-missing"));
  const result b = run_cli(split + " --zero-missing");
  CHECK(b.status == 0);
  check_close(printed(b, "softmax:0"), mlp({0, 0, 0, 0}));
  // One value fills the tensor.
  check_close(printed(run_cli(split + " -i x=0.5"), "softmax:0"), mlp({0.5f, 0.5f, 0.5f, 0.5f}));
}

TEST_CASE("an input given twice is an error naming it, by name or by index") {
  for (const std::string args : {" -i x=0.5 -i x=5", " -i x=0.5 -i 0=5", " --input 0=1 --input x=1"}) {
    const result r = run_cli(split + args);
    INFO(args << " -> " << r.out);
    CHECK(r.status == 1);
    CHECK(has(r, "input x is given twice"));
  }
}

TEST_CASE("bad --input values are errors naming the input and the value") {
  struct bad {
    std::string arg, message;
  };
  for (const bad& c : std::vector<bad>{{"x=abc", "--input x: value 0 \"abc\" is not a number"},
                                       {"x=1,2,3", "3 values for 4 elements of float32[1, 4]"},
                                       {"x=1,,2,3", "value 1 \"\" is not a number"},
                                       {"x=1e999,1,1,1", "value 0 \"1e999\" is out of range"},
                                       {"y=1", "--input y: the model has no input of that name or index (inputs: x)"},
                                       {"w1=1", "no input of that name"},
                                       {"x", "expected NAME=VALUES, NAME=@FILE.npy, NAME=@FILE.bin or @FILE.npz"},
                                       {"=1", "expected NAME=VALUES"},
                                       {"x=@/nonexistent.npy", "/nonexistent.npy"}}) {
    const result r = run_cli(split + " -i '" + c.arg + "'");
    INFO(c.arg << " -> " << r.out);
    CHECK(r.status == 1);
    CHECK(has(r, c.message));
    CHECK(has(r, "gexec-run: "));
  }
}

TEST_CASE("inputs from .npy files: values, and the file's dtype and shape checked against the model") {
  const fs::path dir = scratch("npy_inputs");
  const std::vector<float> x = {1.5f, -0.5f, 0.25f, 3};
  gexec::save_npy_file(dir / "x.npy", tensor({1, 4}, x));
  const result a = run_cli(split + " -i x=@" + (dir / "x.npy").string());
  CHECK(a.status == 0);
  check_close(printed(a, "softmax:0"), mlp(x));
  gexec::save_npy_file(dir / "wrong_shape.npy", tensor({4}, x));
  const result b = run_cli(split + " -i x=@" + (dir / "wrong_shape.npy").string());
  CHECK(b.status == 1);
  CHECK(has(b, "has shape [4], the model wants [1, 4]"));
  gexec::save_npy_file(dir / "wrong_dtype.npy", gexec::ndarray::from_values<double>({1, 4}, {1, 2, 3, 4}));
  const result c = run_cli(split + " -i x=@" + (dir / "wrong_dtype.npy").string());
  CHECK(c.status == 1);
  CHECK(has(c, "float64"));
  std::ofstream(dir / "garbage.npy") << "not a numpy file";
  const result d = run_cli(split + " -i x=@" + (dir / "garbage.npy").string());
  CHECK(d.status == 1);
  CHECK(has(d, "garbage.npy"));
}

TEST_CASE("a bfloat16 or float8 input from a .npy of uint16 or uint8 bit patterns, as TVM's Python users hold them") {
  const fs::path dir = scratch("bit_patterns");
  gexec::save_npy_file(dir / "bf16.npy", gexec::ndarray::from_values<std::uint16_t>({4}, {0x3F80, 0xC000, 0x7FC0, 0x3EAB}));
  const result b = run_cli(identity_graph(dir, gexec::dtypes::bfloat16, {4}) + " -i v=@" + (dir / "bf16.npy").string());
  INFO(b.out);
  CHECK(b.status == 0);
  CHECK(has(b, ": bfloat16[4] = 1 -2 nan 0.333984\n"));
  gexec::save_npy_file(dir / "f8.npy", gexec::ndarray::from_values<std::uint8_t>({2}, {0x7E, 0x38}));
  const result f = run_cli(identity_graph(dir, {gexec::tvm_float8_e4m3_code, 8, 1}, {2}) + " -i v=@" + (dir / "f8.npy").string());
  CHECK(f.status == 0);
  CHECK(has(f, "[2] = 448 1\n"));
  // Other widths are still refused.
  gexec::save_npy_file(dir / "u32.npy", gexec::ndarray::from_values<std::uint32_t>({4}, {1, 2, 3, 4}));
  const result w = run_cli(identity_graph(dir, gexec::dtypes::bfloat16, {4}) + " -i v=@" + (dir / "u32.npy").string());
  CHECK(w.status == 1);
}

TEST_CASE("every dtype can be given inline and is printed back") {
  const fs::path dir = scratch("dtypes");
  struct dtype_case {
    DLDataType dtype;
    std::string in, out;
  };
  for (const dtype_case& c : std::vector<dtype_case>{
           {gexec::dtypes::boolean, "true,0,1,false", "true false true false"},
           {gexec::dtypes::int4, "-8,7,0,-1", "-8 7 0 -1"},
           {gexec::dtypes::uint4, "0,15,3,9", "0 15 3 9"},
           {gexec::dtypes::int8, "-128,127,0,5", "-128 127 0 5"},
           {gexec::dtypes::int16, "-32768,32767,1,-2", "-32768 32767 1 -2"},
           {gexec::dtypes::int32, "-2147483648,2147483647,7,8", "-2147483648 2147483647 7 8"},
           {gexec::dtypes::int64, "-9223372036854775808,9223372036854775807,1,2", "-9223372036854775808 9223372036854775807 1 2"},
           {gexec::dtypes::uint8, "0,255,+3,4", "0 255 3 4"},
           {gexec::dtypes::uint16, "65535,0,1,2", "65535 0 1 2"},
           {gexec::dtypes::uint32, "4294967295,0,1,2", "4294967295 0 1 2"},
           {gexec::dtypes::uint64, "18446744073709551615,0,1,2", "18446744073709551615 0 1 2"},
           {gexec::dtypes::float16, "0.333333,65504,-2.5,inf", "0.333252 65504 -2.5 inf"},
           {gexec::dtypes::bfloat16, "0.333333,1e30,-2.5,nan", "0.333984 1.00026e+30 -2.5 nan"},
           {gexec::dtypes::float32, "0.1,-1e-30,3.5,-inf", "0.1 -1e-30 3.5 -inf"},
           {gexec::dtypes::float64, "0.1,1e300,3.5,-0", "0.1 1e+300 3.5 -0"},
           {{gexec::tvm_float8_e4m3_code, 8, 1}, "448,0.3,-1.75,1000", "448 0.3125 -1.75 nan"},
           {{gexec::tvm_float8_e5m2_code, 8, 1}, "57344,0.3,-1.75,1e6", "57344 0.3125 -1.75 inf"}}) {
    const result r = run_cli(identity_graph(dir, c.dtype, {4}) + " -i v=" + c.in);
    INFO(gexec::to_string(c.dtype) << ": " << r.out);
    CHECK(r.status == 0);
    CHECK(has(r, ": " + gexec::to_string(c.dtype) + "[4] = " + c.out + "\n"));
  }
  // Values beyond a dtype's range are refused, naming the range.
  const result r8 = run_cli(identity_graph(dir, gexec::dtypes::int8, {2}) + " -i v=1,128");
  CHECK(r8.status == 1);
  CHECK(has(r8, "value 1 \"128\" is out of range for int8 [-128, 127]"));
  const result ru = run_cli(identity_graph(dir, gexec::dtypes::uint16, {2}) + " -i v=-1,2");
  CHECK(ru.status == 1);
  CHECK(has(ru, "out of range for uint16"));
  const result rf = run_cli(identity_graph(dir, gexec::dtypes::int32, {2}) + " -i v=1.5,2");
  CHECK(rf.status == 1);
  CHECK(has(rf, "is not an integer (the input is int32)"));
  const result rb = run_cli(identity_graph(dir, gexec::dtypes::boolean, {1}) + " -i v=2");
  CHECK(rb.status == 1);
  CHECK(has(rb, "is not a bool"));
}

TEST_CASE("narrow floats round to nearest even, as numpy and ml_dtypes do") {
  using namespace gexec_run;
  CHECK(encode(1.0, float16_format) == 0x3c00);
  CHECK(encode(1.0 + std::ldexp(1.0, -11), float16_format) == 0x3c00);  // a tie rounds to even
  CHECK(encode(1.0 + 3 * std::ldexp(1.0, -11), float16_format) == 0x3c02);
  CHECK(encode(65520, float16_format) == 0x7c00);  // halfway to the next binade: infinity
  CHECK(encode(std::ldexp(1.0, -24), float16_format) == 0x0001);  // the smallest subnormal
  CHECK(encode(std::ldexp(1.0, -25), float16_format) == 0x0000);  // a tie with zero rounds to zero
  CHECK(encode(-0.0, float16_format) == 0x8000);
  CHECK(encode(1.0, bfloat16_format) == 0x3f80);
  CHECK(encode(3.0e38, bfloat16_format) == 0x7f62);
  CHECK(encode(448, e4m3_format) == 0x7e);
  CHECK(encode(464, e4m3_format) == 0x7e);  // a tie between 448 and 480 goes to the even 448
  CHECK(encode(470, e4m3_format) == 0x7f);  // nearer 480, beyond the largest finite value: e4m3's NaN
  CHECK(encode(std::ldexp(1.0, -9), e4m3_format) == 0x01);
  CHECK(encode(57344, e5m2_format) == 0x7b);
  CHECK(encode(61440, e5m2_format) == 0x7c);
  for (std::uint32_t bits = 0; bits < 0x10000; ++bits) {  // every float16 survives a round trip
    const double v = decode(bits, float16_format);
    if (!std::isnan(v)) CHECK(encode(v, float16_format) == bits);
  }
  for (std::uint32_t bits = 0; bits < 0x100; ++bits) {
    for (const minifloat* f : {&e4m3_format, &e5m2_format}) {
      const double v = decode(bits, *f);
      if (!std::isnan(v)) CHECK(encode(v, *f) == bits);
    }
  }
}

TEST_CASE("--output-dir writes each output as .npy; --expected compares with a tolerance and exits 2 on mismatch") {
  const fs::path dir = scratch("outputs");
  const result a = run_cli(split + " -i x=1,2,3,4 --output-dir " + (dir / "out").string());
  CHECK(a.status == 0);
  CHECK(has(a, "wrote output 0 (softmax:0) to " + (dir / "out" / "output_0.npy").string()));
  const auto out = gexec::load_npy_file(dir / "out" / "output_0.npy");
  CHECK(out.shape().size() == 2);
  const auto want = mlp({1, 2, 3, 4});
  const auto got = values_of(out);
  REQUIRE(got.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-6));

  const result same = run_cli(split + " -i x=1,2,3,4 --expected softmax:0=@" + (dir / "out" / "output_0.npy").string());
  CHECK(same.status == 0);
  CHECK(has(same, "MATCH output 0 (softmax:0)"));
  std::vector<float> off(want);
  off[1] += 0.01f;
  gexec::save_npy_file(dir / "off.npy", tensor({1, 3}, off));
  const result differ = run_cli(split + " -i x=1,2,3,4 --expected 0=@" + (dir / "off.npy").string());
  CHECK(differ.status == 2);
  CHECK(has(differ, "MISMATCH output 0 (softmax:0): 1 of 3 elements differ beyond atol 0 rtol 0"));  // exact by default
  CHECK(has(differ, "max ulps 671089"));
  std::vector<float> with_nan(want);
  with_nan[2] = std::numeric_limits<float>::quiet_NaN();
  gexec::save_npy_file(dir / "nan.npy", tensor({1, 3}, with_nan));
  const result nan = run_cli(split + " -i x=1,2,3,4 --atol 0.5 --expected 0=@" + (dir / "nan.npy").string());
  CHECK(nan.status == 2);
  CHECK(has(nan, "1 of 3 elements differ beyond atol 0.5 rtol 0; first at element 2"));
  CHECK(has(nan, "(max abs diff nan"));
  CHECK(has(nan, "1 of them NaN on one side only"));
  CHECK(has(differ, "first at element 1"));
  CHECK(run_cli(split + " -i x=1,2,3,4 --atol 0.02 --expected 0=@" + (dir / "off.npy").string()).status == 0);
  CHECK(run_cli(split + " -i x=1,2,3,4 --rtol 0.1 --atol 0 --expected 0=@" + (dir / "off.npy").string()).status == 0);
  gexec::save_npy_file(dir / "shape.npy", tensor({3}, off));
  const result shape = run_cli(split + " -i x=1,2,3,4 --expected 0=@" + (dir / "shape.npy").string());
  CHECK(shape.status == 2);
  CHECK(has(shape, "got float32[1, 3], expected float32[3]"));
  const result bad = run_cli(split + " -i x=1,2,3,4 --expected 0=" + (dir / "off.npy").string());
  CHECK(bad.status == 1);
  CHECK(has(bad, "expected NAME=@FILE.npy"));
  CHECK(run_cli(split + " -i x=1,2,3,4 --expected nope=@" + (dir / "off.npy").string()).status == 1);
  CHECK(has(run_cli(split + " -i x=1 --atol -1"), "--atol and --rtol must be finite and >= 0, --rtol below 1"));
  // tolerances that cannot fail are no check
  CHECK(has(run_cli(split + " -i x=1 --atol inf --expected 0=@" + (dir / "off.npy").string()), "--atol and --rtol must be finite"));
  CHECK(run_cli(split + " -i x=1 --rtol 1e300 --expected 0=@" + (dir / "off.npy").string()).status == 1);
}

TEST_CASE("--info and --dot describe the model without running it") {
  const fs::path dir = scratch("info");
  const result r = run_cli(single + " --info --dot " + (dir / "g.dot").string());
  CHECK(r.status == 0);
  CHECK(has(r, "inputs:\n  x: float32[1, 4]\noutputs:\n  softmax:0: float32[1, 3]\n"));
  CHECK(has(r, "parameters: 2 (224 bytes)"));
  // The bundled example's parameters are as TVM writes them: misaligned, copied once.
  CHECK(has(r, "weights: 0 tensors (0 bytes) read where they lie, 2 (224 bytes) copied (first: \""));
  CHECK(has(r, "nodes: 7 (4 kernel calls, 3 functions)"));
  CHECK(has(r, "functions: test_dense test_relu test_softmax"));
  CHECK(!has(r, " = "));  // nothing ran
  std::ifstream f(dir / "g.dot");
  const std::string dot((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  CHECK(dot.rfind("digraph gexec {", 0) == 0);
  CHECK(dot.find("label=\"dense1\\ntest_dense\"") != std::string::npos);
  CHECK(dot.find("n1 [shape=ellipse, label=\"w1\\nfloat32[8, 4]\", style=filled") != std::string::npos);  // a parameter
  CHECK(run_cli(single + " --info --dot /nonexistent/dir/g.dot").status == 1);
}

TEST_CASE("--benchmark prints TVM's statistics with percentiles, CPU time, start-up steps, the first run, peak memory; its options are checked") {
  const result r = run_cli(split + " -i x=1 --benchmark --repeat 7 --number 3 --cooldown-ms 1 --repeats-to-cooldown 2");
  CHECK(r.status == 0);
  CHECK(has(r, "run(): 7 repeats of 3 runs; per run in us: mean "));
  for (const char* s : {"median ", "std ", "min ", "max ", "p90 ", "p99 "}) CHECK(has(r, s));
  // CPU time, each start-up step, the first run and peak memory, each a positive figure
  auto figure_after = [&r](const std::string& label) {
    const auto at = r.out.find(label);
    REQUIRE_MESSAGE(at != std::string::npos, label);
    return std::stod(r.out.substr(at + label.size()));
  };
  CHECK(figure_after("run(): CPU time per run in us: ") > 0);
  double steps = 0;
  for (const char* step : {"read graph ", "map parameters ", "load library ", "plan (bind kernels, place storage) ", "create the executor "}) {
    const double ms = figure_after(step);
    CHECK(ms >= 0);
    steps += ms;
  }
  CHECK(figure_after("; total ") == doctest::Approx(steps).epsilon(0.01));
  CHECK(figure_after("first run in ms: ") > 0);
  CHECK(figure_after("peak resident memory: ") > 1);  // MiB: a process with libraries loaded
  const result single_bench = run_cli(single + " -i x=1 --benchmark --repeat 2");
  CHECK(has(single_bench, "start-up in ms: load library, read its graph and parameters, plan "));
  const result m = run_cli(split + " -i x=1 --benchmark --repeat 2 --min-repeat-ms 5");
  CHECK(m.status == 0);
  CHECK(has(m, "2 repeats of at least 5 ms"));
  CHECK(has(run_cli(split + " -i x=1 --benchmark --repeat 0"), "--repeat, --number and --repeats-to-cooldown must be >= 1"));
  const result n = run_cli(split + " -i x=1 --benchmark --number many");
  CHECK(n.status != 0);
  CHECK(has(n, "--number"));
}

TEST_CASE("--profile prints the per-node table and per-function totals; --trace writes a Chrome trace") {
  const fs::path dir = scratch("profile");
  const result r = run_cli(split + " -i x=1 --profile --repeat 2 --trace " + (dir / "t.json").string());
  CHECK(r.status == 0);
  CHECK(has(r, "Node Name"));
  CHECK(has(r, "Measurements(us)"));
  CHECK(has(r, "float32[1, 4], float32[8, 4] -> float32[1, 8]"));
  CHECK(has(r, "Total_time"));
  CHECK(has(r, "Function      Nodes  Time(us)  Time(%)"));
  CHECK(has(r, "wrote a trace of 2 runs"));
  std::ifstream f(dir / "t.json");
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const boost::json::value doc = boost::json::parse(text);
  int complete = 0;
  for (const auto& e : doc.at("traceEvents").as_array()) complete += e.at("ph").as_string() == "X";
  CHECK(complete == 8);  // 4 kernel calls, 2 runs
}

TEST_CASE("--dump-dir writes every node's output as the node left it") {
  const fs::path dir = scratch("dump");
  const std::vector<float> x = {0.5f, -1, 2, 0.25f};
  const result r = run_cli(split + " -i x=0.5,-1,2,0.25 --dump-dir " + (dir / "nodes").string());
  CHECK(r.status == 0);
  CHECK(has(r, "wrote 7 node outputs"));
  CHECK(values_of(gexec::load_npy_file(dir / "nodes" / "0_x_0.npy")) == x);
  const auto params = gexec::load_param_dict_file(params_file);
  CHECK(values_of(gexec::load_npy_file(dir / "nodes" / "1_w1_0.npy")) == values_of(params.at("w1")));
  const auto w1 = values_of(params.at("w1"));
  const auto dense1 = values_of(gexec::load_npy_file(dir / "nodes" / "3_dense1_0.npy"));
  REQUIRE(dense1.size() == 8);
  for (int i = 0; i < 8; ++i) {
    float s = 0;
    for (int k = 0; k < 4; ++k) s += w1[static_cast<std::size_t>(i * 4 + k)] * x[static_cast<std::size_t>(k)];
    CHECK(dense1[static_cast<std::size_t>(i)] == doctest::Approx(s));
  }
  const auto soft = values_of(gexec::load_npy_file(dir / "nodes" / "6_softmax_0.npy"));
  const auto want = mlp(x);
  for (std::size_t i = 0; i < 3; ++i) CHECK(soft[i] == doctest::Approx(want[i]));
}

TEST_CASE("--compare-dump reads a folder --dump-dir wrote: inputs from it, the node whose file changed named") {
  const fs::path dir = scratch("compare_own_dump");
  const std::vector<float> x = {0.5f, -1, 2, 0.25f};
  const result w = run_cli(split + " -i x=0.5,-1,2,0.25 --dump-dir " + (dir / "nodes").string());
  REQUIRE(w.status == 0);
  // Without -i: x comes from 0_x_0.npy, and every node agrees bit for bit.
  const result same = run_cli(split + " --compare-dump " + (dir / "nodes").string());
  CHECK(same.status == 0);
  CHECK(has(same, "input x: from the dump"));
  CHECK(has(same, "MATCH: 7 of 7 node outputs compared, all agree bit for bit (atol 0, rtol 0)"));
  check_close(printed(same, "softmax:0"), mlp(x));
  // dense1's file with one element changed (its value computed here, not by gexec).
  const auto params = gexec::load_param_dict_file(params_file);
  const auto w1 = values_of(params.at("w1"));
  std::vector<float> dense1(8);
  for (std::size_t i = 0; i < 8; ++i)
    for (std::size_t k = 0; k < 4; ++k) dense1[i] += w1[i * 4 + k] * x[k];
  const auto dumped = values_of(gexec::load_npy_file(dir / "nodes" / "3_dense1_0.npy"));
  REQUIRE(dumped.size() == 8);
  for (std::size_t i = 0; i < 8; ++i) CHECK(dumped[i] == doctest::Approx(dense1[i]));
  fs::copy(dir / "nodes", dir / "changed");
  auto changed = dumped;
  changed[6] += 0.5f;
  gexec::save_npy_file(dir / "changed" / "3_dense1_0.npy", tensor({1, 8}, changed));
  const result b = run_cli(split + " --compare-dump " + (dir / "changed").string());
  CHECK(b.status == 2);
  CHECK(has(b, "FIRST DIVERGENCE at node 3 (dense1), output 0: float32[1, 8]"));
  CHECK(has(b, "1 of 8 elements beyond atol 0 rtol 0, the first at flat index 6; max abs diff 0.5"));
  // A file missing is a node not compared; a folder of no such file is refused.
  fs::remove(dir / "changed" / "5_dense2_0.npy");
  fs::copy_file(dir / "nodes" / "3_dense1_0.npy", dir / "changed" / "3_dense1_0.npy", fs::copy_options::overwrite_existing);
  const result partial = run_cli(split + " --compare-dump " + (dir / "changed").string());
  CHECK(partial.status == 2);
  CHECK(has(partial, "INCOMPLETE: the dump holds 6 of the graph's 7 node outputs"));
  CHECK(run_cli(split + " --compare-dump " + (dir / "changed").string() + " --allow-missing").status == 0);
  fs::create_directories(dir / "empty");
  const result none = run_cli(split + " --compare-dump " + (dir / "empty").string());
  CHECK(none.status == 1);
  CHECK(has(none, "nor a file gexec-run --dump-dir writes for this graph (such as 0_x_0.npy)"));
}

TEST_CASE("--compare-dump: every node against a dump in TVM's layout, inputs from it, exit 2 at the first divergence") {
  const fs::path dir = scratch("compare_dump");
  const std::vector<float> x = {0.5f, -1, 2, 0.25f};
  const auto params = gexec::load_param_dict_file(params_file);
  const auto w1 = values_of(params.at("w1"));
  std::vector<float> dense1(8);
  for (std::size_t i = 0; i < 8; ++i)
    for (std::size_t k = 0; k < 4; ++k) dense1[i] += w1[i * 4 + k] * x[k];
  // TVM's debug executor keeps every node; this dump leaves relu1 and dense2 out.
  auto write = [&](const fs::path& root, const std::vector<float>& d1) {
    gexec::param_dict dump;
    dump.set("x____topo-index:0____output-num:0", tensor({1, 4}, x));
    dump.set("w1____topo-index:1____output-num:0", params.at("w1"));
    dump.set("w2____topo-index:2____output-num:0", params.at("w2"));
    dump.set("dense1____topo-index:3____output-num:0", tensor({1, 8}, d1));
    dump.set("softmax____topo-index:6____output-num:0", tensor({1, 3}, mlp(x)));
    fs::create_directories(root / "_tvmdbg_device_CPU_0");
    gexec::save_param_dict_file(dump, root / "_tvmdbg_device_CPU_0" / "output_tensors.params");
  };
  write(dir / "same", dense1);
  // Two node outputs the dump lacks were never compared: not a match unless asked for.
  const result partial = run_cli(split + " --compare-dump " + (dir / "same").string() + " --atol 1e-5");
  CHECK(partial.status == 2);
  CHECK(has(partial, "INCOMPLETE: the dump holds 5 of the graph's 7 node outputs"));
  const result a = run_cli(split + " --compare-dump " + (dir / "same").string() + " --atol 1e-5 --allow-missing");
  CHECK(a.status == 0);
  CHECK(has(a, "input x: from the dump"));
  CHECK(has(a, "5 of 7 node outputs within the tolerance, 2 not in the dump"));
  CHECK(has(a, "MATCH: 5 of 7 node outputs compared, all agree"));
  check_close(printed(a, "softmax:0"), mlp(x));
  // A dump of the input alone agrees with anything: never a match by default.
  gexec::param_dict input_only;
  input_only.set("x____topo-index:0____output-num:0", tensor({1, 4}, x));
  fs::create_directories(dir / "input_only");
  gexec::save_param_dict_file(input_only, dir / "input_only" / "output_tensors.params");
  const result only = run_cli(split + " --compare-dump " + (dir / "input_only").string());
  CHECK(only.status == 2);
  CHECK(has(only, "INCOMPLETE: the dump holds 1 of the graph's 7 node outputs"));

  auto changed = dense1;
  changed[5] += 0.25f;
  write(dir / "changed", changed);
  const result b = run_cli(split + " -i x=0.5,-1,2,0.25 --compare-dump " + (dir / "changed").string() + " --atol 1e-5");
  CHECK(b.status == 2);
  CHECK(!has(b, "from the dump"));
  CHECK(has(b, "FIRST DIVERGENCE at node 3 (dense1), output 0: float32[1, 8]"));
  CHECK(has(b, "function: test_dense"));
  CHECK(has(b, "input: x:0 float32[1, 4]"));
  CHECK(has(b, "input: w1:0 float32[8, 4]"));
  CHECK(has(b, "1 of 8 elements beyond atol 1e-05 rtol 0, the first at flat index 5; max abs diff 0.25"));
  CHECK(run_cli(split + " --compare-dump " + (dir / "changed").string() + " --atol 0.3 --allow-missing").status == 0);

  // One element one ULP off, as an edited kernel would leave it: the default is exact.
  auto ulp = dense1;
  ulp[2] = std::nextafter(ulp[2], 1e9f);
  write(dir / "ulp", ulp);
  const result one_ulp = run_cli(split + " --compare-dump " + (dir / "ulp").string() + " --allow-missing");
  CHECK(one_ulp.status == 2);
  CHECK(has(one_ulp, "FIRST DIVERGENCE at node 3 (dense1)"));
  CHECK(has(one_ulp, "1 of 8 elements beyond atol 0 rtol 0, the first at flat index 2"));
  CHECK(has(one_ulp, "max ulps 1"));
  const result same_exact = run_cli(split + " --compare-dump " + (dir / "same").string() + " --allow-missing");
  CHECK(same_exact.status == 0);
  CHECK(has(same_exact, "all agree bit for bit (atol 0, rtol 0)"));

  const result c = run_cli(split + " --compare-dump " + (dir / "none").string());
  CHECK(c.status == 1);
  CHECK(has(c, "no such file or directory"));
}

TEST_CASE("--convert-params: TVM's blob to .safetensors and back bit for bit; --params reads either") {
  const fs::path dir = scratch("convert");
  const std::string st = (dir / "mlp.safetensors").string(), back = (dir / "mlp.params").string();
  const result a = run_cli(" --convert-params " + params_file + " " + st);
  CHECK(a.status == 0);
  CHECK(has(a, "wrote 2 tensors (224 bytes) to " + st + " as .safetensors"));
  std::ifstream f(st, std::ios::binary);
  char first[9];
  f.read(first, 9);
  CHECK(first[8] == '{');  // the format's JSON header, not TVM's magic
  const result unpadded = run_cli(" --convert-params " + st + " " + back + " --align-params 0");
  CHECK(unpadded.status == 0);
  CHECK(has(unpadded, "unpadded as TVM writes it"));
  auto bytes = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  CHECK(bytes(back) == bytes(params_file));
  // By default a TVM blob is written aligned: every tensor maps, 64-byte aligned, the
  // same tensors (padding aside), and model::load reads them where they lie.
  const std::string aligned = (dir / "mlp.aligned.params").string();
  const result al = run_cli(" --convert-params " + params_file + " " + aligned);
  CHECK(al.status == 0);
  CHECK(has(al, "every tensor's data 64-byte aligned"));
  const gexec::param_dict original = gexec::load_param_dict_file(params_file);
  const gexec::param_dict mapped = gexec::load_param_dict_file(aligned, gexec::load_mode::mmap);
  for (const auto& item : original) {
    const std::string& name = item.first;
    const gexec::ndarray& value = item.second;
    CAPTURE(name);
    REQUIRE(mapped.contains(name));
    CHECK(mapped.is_mapped(mapped.at(name)));
    CHECK(mapped.at(name).is_aligned(64));
    CHECK(std::memcmp(mapped.at(name).data(), value.data(), value.byte_size()) == 0);
  }
  CHECK(gexec::model::load(graph_file, GEXEC_TEST_KERNELS, aligned).weights().copied == 0);
  CHECK(gexec::model::load(graph_file, GEXEC_TEST_KERNELS, params_file).weights().in_place == 0);
  CHECK(has(run_cli(" --convert-params " + params_file + " " + aligned + "2 --align-params 48"), "48 is not a power of two"));
  const std::vector<float> x = {0.5f, -1, 2, 0.25f};
  const result r = run_cli(" -g " + graph_file + " -l " + GEXEC_TEST_KERNELS + " -p " + st + " -i x=0.5,-1,2,0.25");
  CHECK(r.status == 0);
  check_close(printed(r, "softmax:0"), mlp(x));

  CHECK(has(run_cli(" --convert-params " + st), "--convert-params: At least 2 required but received 1"));
  const result same = run_cli(" --convert-params " + st + " " + st);
  CHECK(same.status == 1);
  CHECK(has(same, "is the input"));
  const result mixed = run_cli(split + " --convert-params " + st + " " + back);
  CHECK(mixed.status == 1);
  CHECK(has(mixed, "give it alone"));
  std::ofstream(dir / "bad.safetensors", std::ios::binary) << std::string("\x15\0\0\0\0\0\0\0{\"w\":{\"dtype\":\"C64\"}}", 29);
  const result bad = run_cli(" --convert-params " + (dir / "bad.safetensors").string() + " " + back);
  CHECK(bad.status == 1);
  CHECK(has(bad, "at byte 9: tensor \"w\""));
}

TEST_CASE("--write-library: kernel objects and the weights written aligned, one library that reads them in place") {
  const fs::path dir = scratch("write_library");
  const std::string objects = GEXEC_TEST_KERNEL_OBJECTS, out = (dir / "mlp.so").string();
  const std::string write = " --write-library " + out + " -g " + graph_file + " -p " + params_file;
  const result a = run_cli(write + " --kernel-objects " + objects);
  REQUIRE(a.status == 0);
  CHECK(has(a, "the graph and 2 parameters (224 bytes); loaded back: 2 read where they lie in the library, 0 copied"));
  // Its weights are the library's own pages: each lies inside the mapped library, 64-byte
  // aligned, and holds the parameter file's bytes.
  {
    const gexec::model m = gexec::model::load(out);
    CHECK(m.weights().copied == 0);
    for (const auto& item : gexec::load_param_dict_file(params_file)) {
      const std::string& name = item.first;  // named, not bound: clang 14 cannot capture bindings
      const gexec::ndarray& value = item.second;
      CAPTURE(name);
      const gexec::ndarray w = m.param(name);
      REQUIRE(w.defined());
      Dl_info info{};
      REQUIRE(::dladdr(w.data(), &info) != 0);
      CHECK(fs::equivalent(info.dli_fname, out));
      CHECK(w.is_aligned(64));
      CHECK(std::memcmp(w.data(), value.data(), value.byte_size()) == 0);
    }
  }
  const std::vector<float> x = {0.5f, -1, 2, 0.25f};
  const result r = run_cli(" " + out + " -i x=0.5,-1,2,0.25");
  CHECK(r.status == 0);
  check_close(printed(r, "softmax:0"), mlp(x));

  // From a .tar as export_library writes one; a devc.o in it (TVM's copy of the blob) is
  // left out, else its symbols would clash with the library's own.
  const fs::path pack = dir / "pack";
  fs::create_directories(pack);
  fs::copy_file(objects, pack / "lib0.o");
  fs::copy_file(objects, pack / "devc.o");
  REQUIRE(std::system(("tar -cf " + (dir / "kernels.tar").string() + " -C " + pack.string() + " lib0.o devc.o").c_str()) == 0);
  const std::string from_tar = (dir / "from_tar.so").string();
  const result t = run_cli(" --write-library " + from_tar + " -g " + graph_file + " -p " + params_file + " --kernel-objects " + (dir / "kernels.tar").string());
  CHECK(t.status == 0);
  CHECK(has(t, "the kernels of 1 object file"));
  check_close(printed(run_cli(" " + from_tar + " -i x=0.5,-1,2,0.25"), "softmax:0"), mlp(x));

  // Unpadded, as TVM writes its blob: the same library copies its weights once, and says so.
  const result unpadded = run_cli(" --write-library " + (dir / "unpadded.so").string() + " -g " + graph_file + " -p " + params_file +
                                  " --kernel-objects " + objects + " --align-params 0");
  CHECK(unpadded.status == 0);
  CHECK(has(unpadded, "0 read where they lie in the library, 2 copied"));

  // Bad arguments, each a clear error and no library.
  auto refused = [&](const std::string& args, const std::string& why) {
    const result b = run_cli(args);
    CHECK(b.status == 1);
    CHECK(has(b, why));
  };
  const std::string bad = (dir / "bad.so").string();
  refused(" --write-library " + bad + " -g " + graph_file + " -p " + params_file, "needs --kernel-objects");
  refused(" --write-library " + bad + " -p " + params_file + " --kernel-objects " + objects, "needs --graph");
  refused(" --write-library " + bad + " -g " + graph_file + " --kernel-objects " + (dir / "none.o").string(), "none.o: no such file");
  refused(" --write-library " + bad + " -g " + graph_file + " --kernel-objects " + graph_file, "give object files (.o) or a .tar of them");
  refused(" --write-library " + graph_file + " -g " + graph_file + " --kernel-objects " + objects, "is a file this run reads");
  refused(" --write-library " + (dir / "kernels.tar").string() + " -g " + graph_file + " --kernel-objects " + (dir / "kernels.tar").string(),
          "is a file this run reads");
  std::ofstream(dir / "not_a.tar") << "not a tar archive";
  refused(" --write-library " + bad + " -g " + graph_file + " --kernel-objects " + (dir / "not_a.tar").string(), "--write-library: unpack");
  refused(single + " --write-library " + bad + " -g " + graph_file + " --kernel-objects " + objects, "not a library");
  refused(" -g " + graph_file + " -l " + GEXEC_TEST_KERNELS + " --kernel-objects " + objects, "--kernel-objects goes with --write-library");
  std::ofstream(dir / "empty.txt") << "nothing";
  REQUIRE(std::system(("tar -cf " + (dir / "empty.tar").string() + " -C " + dir.string() + " empty.txt").c_str()) == 0);
  refused(" --write-library " + bad + " -g " + graph_file + " --kernel-objects " + (dir / "empty.tar").string(), "holds no object file");
  refused(" --write-library " + bad + " -g " + graph_file + " -p " + params_file + " --kernel-objects " + objects + " --align-params 48",
          "48 is not a power of two");
  // A linker that fails: named with its command line.
  const result no_linker = run_cli(" --write-library " + bad + " -g " + graph_file + " -p " + params_file + " --kernel-objects " + objects, "CC=false ");
  CHECK(no_linker.status == 1);
  CHECK(has(no_linker, "--write-library: link " + bad + " failed: false -shared"));
  CHECK_FALSE(fs::exists(bad));
  // Kernels missing from the objects: linked, then refused when loaded back, naming the kernel.
  std::string text;
  {
    std::ifstream in(graph_file);
    text.assign(std::istreambuf_iterator<char>(in), {});
    text.replace(text.find("test_relu"), 9, "no_such_kernel");
    std::ofstream(dir / "unknown_kernel.json") << text;
  }
  refused(" --write-library " + bad + " -g " + (dir / "unknown_kernel.json").string() + " -p " + params_file + " --kernel-objects " + objects,
          "no_such_kernel");
  CHECK_FALSE(fs::exists(bad));
  CHECK_FALSE(fs::exists(bad + ".partial"));
}

TEST_CASE("inputs from one .npz or raw .bin files, outputs to one .npz named by the graph") {
  const fs::path dir = scratch("npz");
  const std::vector<float> x = {0.5f, -1, 2, 0.25f};
  std::ofstream(dir / "x.bin", std::ios::binary).write(reinterpret_cast<const char*>(x.data()), 16);
  const result raw = run_cli(split + " -i x=@" + (dir / "x.bin").string() + " --output " + (dir / "out.npz").string());
  CHECK(raw.status == 0);
  check_close(printed(raw, "softmax:0"), mlp(x));
  CHECK(has(raw, "wrote 1 outputs to " + (dir / "out.npz").string() + " (softmax)"));
  const auto out = gexec::load_npz_file(dir / "out.npz");
  REQUIRE(out.size() == 1);
  CHECK(out[0].first == "softmax");
  const auto want = mlp(x);
  const auto got = values_of(out[0].second);
  REQUIRE(got.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-6));

  std::ofstream(dir / "in.npz", std::ios::binary) << gexec::save_npz({{"x", tensor({1, 4}, x)}});
  const result npz = run_cli(split + " -i @" + (dir / "in.npz").string());
  CHECK(npz.status == 0);
  check_close(printed(npz, "softmax:0"), mlp(x));
  std::ofstream(dir / "wrong.npz", std::ios::binary) << gexec::save_npz({{"y", tensor({1, 4}, x)}});
  CHECK(has(run_cli(split + " -i @" + (dir / "wrong.npz").string()), "no input of that name or index (inputs: x)"));
  std::ofstream(dir / "shape.npz", std::ios::binary) << gexec::save_npz({{"x", tensor({4}, x)}});
  CHECK(has(run_cli(split + " -i @" + (dir / "shape.npz").string()), "x has shape [4], the model wants [1, 4]"));
  std::ofstream(dir / "short.bin", std::ios::binary) << "abc";
  CHECK(has(run_cli(split + " -i x=@" + (dir / "short.bin").string()), "holds 3 bytes; the model's float32[1, 4] takes 16"));
  CHECK(has(run_cli(split + " -i x=1 --output " + (dir / "out.npy").string()), "name it FILE.npz"));
  // never written over a file the run reads: its input archive, its parameters
  const auto in_before = fs::file_size(dir / "in.npz");
  const result over_input = run_cli(split + " -i @" + (dir / "in.npz").string() + " --output " + (dir / "in.npz").string());
  CHECK(over_input.status == 1);
  CHECK(has(over_input, "--output " + (dir / "in.npz").string() + ": is a file this run reads"));
  CHECK(fs::file_size(dir / "in.npz") == in_before);
  const auto params_copy = dir / "params.npz";
  fs::copy_file(params_file, params_copy, fs::copy_options::overwrite_existing);
  const std::string split_copy = " -g " + graph_file + " -l " + GEXEC_TEST_KERNELS + " -p " + params_copy.string();
  CHECK(has(run_cli(split_copy + " -i x=1 --output " + params_copy.string()), "is a file this run reads"));
  CHECK(gexec::load_param_dict_file(params_copy).size() == 2);
}

TEST_CASE("--expected by plain name or index, checked before the run; --zero-missing never fills weights; the progress bar on stderr") {
  const fs::path dir = scratch("friction");
  const std::vector<float> x = {0.5f, -1, 2, 0.25f};
  gexec::save_npy_file(dir / "want.npy", tensor({1, 3}, mlp(x)));
  for (const std::string name : {"softmax", "softmax:0", "0"}) {
    const result r = run_cli(split + " -i x=0.5,-1,2,0.25 --atol 1e-6 --expected " + name + "=@" + (dir / "want.npy").string());
    CHECK(r.status == 0);
    CHECK(has(r, "MATCH output 0 (softmax:0)"));
  }
  const result unknown = run_cli(split + " -i x=0.5,-1,2,0.25 --expected soft=@" + (dir / "want.npy").string());
  CHECK(unknown.status == 1);
  CHECK(has(unknown, "--expected soft: the model has no output of that name or index (outputs: softmax:0)"));
  CHECK(!has(unknown, "softmax:0: float32"));  // refused before the run
  const result missing_file = run_cli(split + " -i x=1 --expected 0=@" + (dir / "none.npy").string());
  CHECK(missing_file.status == 1);
  CHECK(!has(missing_file, "softmax:0: float32"));

  // a split model without --params: its weights are not zero-filled, and the error names --params
  const std::string no_params = " -g " + graph_file + " -l " + GEXEC_TEST_KERNELS;
  for (const std::string extra : {"", " --zero-missing"}) {
    const result r = run_cli(no_params + " -i x=1" + extra);
    CHECK(r.status == 1);
    CHECK(has(r, "no value given for input w1"));
    CHECK(has(r, "--params FILE"));
    CHECK(!has(r, "softmax:0: float32"));
  }
  // with --params, --zero-missing fills the input
  check_close(printed(run_cli(split + " --zero-missing"), "softmax:0"), mlp({0, 0, 0, 0}));

  // the bar goes to stderr only
  const std::string cmd = std::string(GEXEC_RUN) + split + " -i x=1 --progress always 2>" + (dir / "err.txt").string();
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  CHECK(::pclose(p) == 0);
  CHECK(out.find("loading") == std::string::npos);
  CHECK(out.find("softmax:0: float32[1, 3]") != std::string::npos);
  std::ifstream err(dir / "err.txt");
  const std::string err_text((std::istreambuf_iterator<char>(err)), {});
  CHECK(err_text.find("loading params.bin [##############################] 100%") != std::string::npos);
}

TEST_CASE("--dump-dir names sort in graph order: indices zero-padded") {
  const fs::path dir = scratch("dump_order");
  gexec::graph_builder b;
  auto v = b.input("x", {2});
  for (int i = 0; i < 11; ++i) v = b.op("inc" + std::to_string(i), "test_add_one", {v}, {{{2}}});
  b.output(v);
  std::ofstream(dir / "chain.json") << gexec::to_json(b.build());
  const result r = run_cli(" -g " + (dir / "chain.json").string() + " -l " + GEXEC_TEST_KERNELS + " -i x=0.5 --dump-dir " + (dir / "nodes").string());
  CHECK(r.status == 0);
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir / "nodes")) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  REQUIRE(names.size() == 12);
  CHECK(names.front() == "00_x_0.npy");
  CHECK(names[1] == "01_inc0_0.npy");
  CHECK(names[10] == "10_inc9_0.npy");
  CHECK(names.back() == "11_inc10_0.npy");
  for (std::size_t i = 0; i < names.size(); ++i)  // node i holds 0.5 + i
    CHECK(values_of(gexec::load_npy_file(dir / "nodes" / names[i])) == std::vector<float>{0.5f + static_cast<float>(i), 0.5f + static_cast<float>(i)});
}

TEST_CASE("reference bundles: --make-bundle from a run or from given outputs, --verify exits 0 or 2 with a report per output") {
  const fs::path dir = scratch("bundle");
  const std::vector<float> x = {0.5f, -1, 2, 0.25f};
  // expected outputs computed here, as TVM's would be given
  std::ofstream(dir / "want.npz", std::ios::binary) << gexec::save_npz({{"softmax", tensor({1, 3}, mlp(x))}});
  const std::string b = (dir / "b").string();
  const result made = run_cli(split + " -i x=0.5,-1,2,0.25 --atol 1e-6 --make-bundle " + b + " --bundle-expected " + (dir / "want.npz").string());
  CHECK(made.status == 0);
  CHECK(has(made, "wrote a bundle to " + b + ": the model, 1 inputs, 1 expected outputs (from " + (dir / "want.npz").string() + "), atol 1e-06 rtol 0"));
  for (const char* f : {"bundle.txt", "graph.json", "lib.so", "params.bin", "inputs.npz", "expected.npz"}) CHECK_MESSAGE(fs::exists(fs::path(b) / f), f);
  const result ok = run_cli(" --verify " + b);
  CHECK(ok.status == 0);
  CHECK(has(ok, "MATCH output 0 (softmax:0)"));
  CHECK(has(ok, "VERIFIED: the bundle " + b + ", 1 of 1 outputs against expected.npz (atol 1e-06, rtol 0)"));
  {  // bundle.txt lists the outputs it holds, and CRLF line ends read as LF
    std::ifstream in(fs::path(b) / "bundle.txt");
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(text.find("\noutput softmax\n") != std::string::npos);
    std::string crlf;
    for (char ch : text) crlf += ch == '\n' ? std::string("\r\n") : std::string(1, ch);
    const std::string b2 = (dir / "crlf").string();
    fs::create_directories(b2);
    for (const auto& e : fs::directory_iterator(b)) fs::copy_file(e.path(), fs::path(b2) / e.path().filename());
    std::ofstream(fs::path(b2) / "bundle.txt", std::ios::binary) << crlf;
    CHECK(run_cli(" --verify " + b2).status == 0);
  }

  // wrong expected outputs: exit 2 and the element; a looser --atol on the command line wins
  auto off = mlp(x);
  off[1] += 0.01f;
  std::ofstream(dir / "off.npz", std::ios::binary) << gexec::save_npz({{"0", tensor({1, 3}, off)}});
  const std::string c = (dir / "c").string();
  CHECK(run_cli(split + " -i x=0.5,-1,2,0.25 --atol 1e-6 --make-bundle " + c + " --bundle-expected " + (dir / "off.npz").string()).status == 0);
  const result bad = run_cli(" --verify " + c);
  CHECK(bad.status == 2);
  CHECK(has(bad, "MISMATCH output 0 (softmax:0): 1 of 3 elements differ beyond atol 1e-06 rtol 0; first at element 1"));
  CHECK(has(bad, "FAILED: the bundle"));
  CHECK(run_cli(" --verify " + c + " --atol 0.02").status == 0);

  // from a run of a single-file model, this run's outputs
  const std::string s1 = (dir / "single").string();
  CHECK(run_cli(single + " -i x=0.5,-1,2,0.25 --make-bundle " + s1).status == 0);
  CHECK(fs::exists(fs::path(s1) / "model.so"));
  const result single_ok = run_cli(" --verify " + s1);
  CHECK(single_ok.status == 0);
  check_close(printed(single_ok, "softmax:0"), mlp(x));

  // bad bundles and command lines
  CHECK(has(run_cli(" --verify " + (dir / "none").string()), "no bundle.txt in it"));
  std::ofstream(fs::path(c) / "bundle.txt") << "gexec-bundle 1\nmodel ../../etc/passwd\n";
  CHECK(has(run_cli(" --verify " + c), "expected model FILE (a file in the bundle)"));
  // bundles that could not have been checked: no outputs, one of two, a second "expected"
  // line, a symbolic link, a tolerance that cannot fail
  // A copy of bundle b changed by `change`; `reseal` then records the changed files'
  // checksums in its bundle.txt, as a bundle edited by hand would, so that what is checked
  // after the checksums is reached.
  auto tampered = [&](const std::string& name, const std::function<void(const fs::path&)>& change, bool reseal = true) {
    const fs::path t = dir / name;
    fs::create_directories(t);
    for (const auto& e : fs::directory_iterator(b)) fs::copy_file(e.path(), t / e.path().filename(), fs::copy_options::overwrite_existing);
    change(t);
    if (reseal) {
      std::ifstream in(t / "bundle.txt");
      std::string line, text;
      while (std::getline(in, line)) {
        if (line.starts_with("sha256 ")) {
          const std::string file = line.substr(7, line.find(' ', 7) - 7);
          line = "sha256 " + file + " " + gexec_run::sha256_file(t / file);
        }
        text += line + "\n";
      }
      in.close();
      std::ofstream(t / "bundle.txt", std::ios::trunc) << text;
    }
    return run_cli(" --verify " + t.string());
  };
  // One byte of the kernel library, or the expected outputs changed: the checksums say
  // which file, before anything runs.
  const result lib_byte = tampered("lib_byte", [](const fs::path& t) {
    std::fstream f(t / "lib.so", std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(200);
    const char c = static_cast<char>(f.get());
    f.seekp(200);
    f.put(static_cast<char>(c ^ 1));
  }, false);
  CHECK(lib_byte.status == 2);
  CHECK(has(lib_byte, "MISMATCH file lib.so: its SHA-256 is "));
  CHECK(has(lib_byte, "holds files that changed since it was made; nothing was run"));
  const result archive = tampered("archive", [&](const fs::path& t) {
    std::ofstream(t / "expected.npz", std::ios::binary) << gexec::save_npz({{"softmax", tensor({1, 3}, {0.5f, 0.25f, 0.25f})}});
  }, false);
  CHECK(archive.status == 2);
  CHECK(has(archive, "MISMATCH file expected.npz"));
  const result unsealed = tampered("unsealed", [](const fs::path& t) {
    std::ifstream in(t / "bundle.txt");
    std::string line, text;
    while (std::getline(in, line))
      if (!line.starts_with("sha256 lib.so ")) text += line + "\n";
    in.close();
    std::ofstream(t / "bundle.txt", std::ios::trunc) << text;
  }, false);
  CHECK(unsealed.status == 1);
  CHECK(has(unsealed, "gives no sha256 of lib.so, a file it names"));
  {
    std::ifstream in(fs::path(b) / "bundle.txt");
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (const char* f : {"graph.json", "lib.so", "params.bin", "inputs.npz", "expected.npz"})
      CHECK(text.find(std::string("\nsha256 ") + f + " " + gexec_run::sha256_file(fs::path(b) / f) + "\n") != std::string::npos);
  }
  const result empty = tampered("empty", [](const fs::path& t) { std::ofstream(t / "expected.npz", std::ios::binary) << gexec::save_npz({}); });
  CHECK(empty.status == 2);
  CHECK(has(empty, "MISSING output 0 (softmax:0): expected.npz does not hold it"));
  CHECK(has(empty, "FAILED: the bundle " + (dir / "empty").string() + ", 0 of 1 outputs"));
  const result twice = tampered("twice", [&](const fs::path& t) {
    std::ofstream(t / "other.npz", std::ios::binary) << gexec::save_npz({});
    std::ofstream(t / "bundle.txt", std::ios::app) << "expected other.npz\n";
  });
  CHECK(twice.status == 1);
  CHECK(has(twice, "\"expected\" is given twice"));
  const result link = tampered("link", [&](const fs::path& t) {
    std::ofstream(dir / "elsewhere.npz", std::ios::binary) << gexec::save_npz({});
    fs::remove(t / "expected.npz");
    fs::create_symlink(dir / "elsewhere.npz", t / "expected.npz");
  });
  CHECK(link.status == 1);
  CHECK(has(link, "expected.npz is a symbolic link"));
  const result held_twice = tampered("held_twice", [&](const fs::path& t) {
    std::ofstream(t / "expected.npz", std::ios::binary) << gexec::save_npz({{"softmax", tensor({1, 3}, mlp(x))}, {"0", tensor({1, 3}, mlp(x))}});
  });
  CHECK(has(held_twice, "output 0 (softmax:0) is held twice"));
  const result wrong_list = tampered("wrong_list", [&](const fs::path& t) { std::ofstream(t / "bundle.txt", std::ios::app) << "output extra\n"; });
  CHECK(wrong_list.status == 2);
  CHECK(has(wrong_list, "lists the outputs softmax, extra; the model's are softmax"));
  const result loose = tampered("loose", [&](const fs::path& t) {
    std::ifstream in(t / "bundle.txt");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    text.replace(text.find("rtol 0"), 6, "rtol 1e300");
    std::ofstream(t / "bundle.txt", std::ios::trunc) << text;
  });
  CHECK(loose.status == 1);
  CHECK(has(loose, "rtol 1e300: not a finite tolerance >= 0 and below 1"));
  CHECK(has(run_cli(" --verify " + b + split), "give no model, --input or --make-bundle with it"));
  CHECK(has(run_cli(split + " -i x=1 --bundle-expected " + (dir / "want.npz").string()), "--bundle-expected goes with --make-bundle"));
  std::ofstream(dir / "shape.npz", std::ios::binary) << gexec::save_npz({{"softmax", tensor({3}, off)}});
  CHECK(has(run_cli(split + " -i x=1 --make-bundle " + (dir / "d").string() + " --bundle-expected " + (dir / "shape.npz").string()),
            "softmax is float32[3], output softmax:0 is float32[1, 3]"));
}

TEST_CASE("bfloat16 outputs are written as the uint16 bits TVM's Python users hold, or as ml_dtypes names them when asked") {
  const fs::path dir = scratch("bfloat16");
  // A graph whose output is its bfloat16 input: no kernel between them.
  std::ofstream(dir / "g.json") << R"({"nodes":[{"op":"null","name":"x","inputs":[]}],"arg_nodes":[0],"heads":[[0,0,0]],)"
                                   R"("node_row_ptr":[0,1],"attrs":{"shape":["list_shape",[[3]]],"dltype":["list_str",["bfloat16"]],)"
                                   R"("storage_id":["list_int",[0]]}})";
  const std::string model = " -g " + (dir / "g.json").string() + " -l " + GEXEC_TEST_KERNELS + " -i x=1.5,-2,0.25";
  REQUIRE(run_cli(model + " --output-dir " + (dir / "bits").string() + " --output " + (dir / "bits.npz").string()).status == 0);
  const std::vector<std::uint16_t> want = {0x3FC0, 0xC000, 0x3E80};
  for (const gexec::ndarray& a : {gexec::load_npy_file(dir / "bits" / "output_0.npy"), gexec::load_npz_file(dir / "bits.npz").at(0).second}) {
    REQUIRE(gexec::same_dtype(a.dtype(), gexec::dtypes::uint16));
    CHECK(std::vector<std::uint16_t>(static_cast<const std::uint16_t*>(a.data()), static_cast<const std::uint16_t*>(a.data()) + 3) == want);
  }
  REQUIRE(run_cli(model + " --npy-names ml_dtypes --output-dir " + (dir / "named").string()).status == 0);
  const gexec::ndarray named = gexec::load_npy_file(dir / "named" / "output_0.npy", gexec::dtypes::bfloat16);
  CHECK(std::memcmp(named.data(), want.data(), 6) == 0);
  CHECK(has(run_cli(model + " --npy-names fancy"), "--npy-names"));
}

TEST_CASE("--threads, --device, --policy and --progress") {
  const auto want = mlp({1, 1, 1, 1});
  check_close(printed(run_cli(split + " -i x=1 --threads 2"), "softmax:0"), want);
  check_close(printed(run_cli(split + " -i x=1 --policy parallel --benchmark --repeat 2"), "softmax:0"), want);
  check_close(printed(run_cli(split + " -i x=1 --device cpu:0"), "softmax:0"), want);
  // Without a driver (named here so that a machine with a GPU answers the same), a clear error.
  ::setenv("GEXEC_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
  const result cuda = run_cli(split + " -i x=1 --device cuda");
  ::unsetenv("GEXEC_CUDA_DRIVER");
  CHECK(cuda.status == 1);
  CHECK(has(cuda, "no CUDA driver: cannot load /nonexistent/libcuda.so.1"));
  {  // A graph that places its input on a GPU, run without --device: the error says which option places it.
    gexec::graph_builder b;
    b.output(b.input("v", {4}, gexec::dtypes::float32, kDLCUDA));
    const fs::path file = scratch("device_hint") / "on_gpu.json";
    std::ofstream(file) << gexec::to_json(b.build());
    const result no_device = run_cli(" -g " + file.string() + " -l " + GEXEC_TEST_KERNELS + " -i v=1");
    CHECK(no_device.status == 1);
    CHECK(has(no_device, "node \"v\" (nodes[0]): output is placed on cuda, but no cuda device was given (--device cuda[:N] runs"));
  }
  CHECK(has(run_cli(split + " -i x=1 --device tpu"), "unknown device type \"tpu\""));
  CHECK(has(run_cli(split + " -i x=1 --device cpu:x"), "the device id must be a number"));
  CHECK(run_cli(split + " -i x=1 --policy random").status != 0);
  // --planner: the same answer from either plan; --info names the planner and its figures.
  check_close(printed(run_cli(split + " -i x=1 --planner liveness"), "softmax:0"), want);
  check_close(printed(run_cli(single + " -i x=1 --planner liveness --policy parallel"), "softmax:0"), want);
  const result ids = run_cli(split + " --info"), live = run_cli(split + " --info --planner liveness");
  CHECK(has(ids, "storage planner as_compiled: "));
  CHECK(has(live, "storage planner liveness: "));
  const auto planned = [](const result& r) {
    const auto at = r.out.find("storage planner ");
    const auto colon = r.out.find(": ", at);
    return std::stoull(r.out.substr(colon + 2));
  };
  const auto ids_of = [](const result& r) { return std::stoull(r.out.substr(r.out.find("storage ids: ") + 13)); };
  CHECK(planned(ids) == ids_of(ids));    // as compiled: the plan is the graph's ids
  CHECK(planned(live) <= ids_of(live));  // liveness never needs more than the ids
  CHECK(ids_of(live) == ids_of(ids));
  const result bad_planner = run_cli(split + " -i x=1 --planner greedy");
  CHECK(bad_planner.status != 0);
  CHECK(has(bad_planner, "--planner"));
  CHECK(has(run_cli(split + " -i x=1 --threads -2"), "--threads must be >= 0"));
  const result bar = run_cli(split + " -i x=1 --progress always");
  CHECK(bar.status == 0);
  CHECK(has(bar, "loading params.bin [##############################] 100%"));
  CHECK(!has(run_cli(split + " -i x=1"), "loading"));  // not a terminal
  // A single-file model: the bar follows the embedded blob's bytes.
  const result single_bar = run_cli(single + " -i x=1 --progress always");
  CHECK(single_bar.status == 0);
  CHECK(has(single_bar, "loading " + std::filesystem::path(GEXEC_TEST_FACTORY).filename().string() + " [##############################] 100%"));
}

TEST_CASE("bad command lines: clear errors, non-zero exits, never an abort") {
  CHECK(has(run_cli(""), "give either a single-file MODEL.so, or --graph and --lib"));
  CHECK(has(run_cli(single + split), "not both"));
  CHECK(has(run_cli(" -g " + graph_file), "--graph and --lib go together"));
  const result unknown = run_cli(single + " --frobnicate");
  CHECK(unknown.status != 0);
  CHECK(has(unknown, "frobnicate"));
  const result missing = run_cli(" /nonexistent/model.so");
  CHECK(missing.status == 1);
  CHECK(has(missing, "/nonexistent/model.so"));
  const result text_lib = run_cli(" " + graph_file);
  CHECK(text_lib.status == 1);
  CHECK(has(text_lib, "graph.json"));
  const result dir_graph = run_cli(" -g " + src + " -l " + GEXEC_TEST_KERNELS);
  CHECK(dir_graph.status == 1);
  CHECK(has(dir_graph, "not a regular file"));
  const result bad_json = run_cli(" -g " + params_file + " -l " + GEXEC_TEST_KERNELS);
  CHECK(bad_json.status == 1);
  CHECK(has(bad_json, "gexec-run: gexec: invalid_json"));
  const result version = run_cli(" --version");
  CHECK(version.status == 0);
  CHECK(has(version, GEXEC_VERSION_STRING));
  const result help = run_cli(" --help");
  CHECK(help.status == 0);
  CHECK(has(help, "--zero-missing"));
  CHECK(has(run_cli(split + " -i x=1 --print-limit -5"), "--print-limit must be >= -1"));
  const result limited = run_cli(split + " -i x=1 --print-limit 2");
  CHECK(has(limited, "softmax:0: float32[1, 3] = "));
  CHECK(has(limited, " ...\n"));
}

TEST_CASE("a model over a TVM-FFI kernel library (TVM >= 0.21) runs; its kernel's failed argument check is reported") {
  const fs::path dir = scratch("tvm_ffi");
  auto write = [&](const char* name, std::int64_t out) {
    gexec::graph_builder b;
    auto x = b.input("x", {4});
    b.output(b.op("inc", "ffi_add_one", {x}, {{{out}}}));
    std::ofstream(dir / name) << gexec::to_json(b.build());
    return " -g " + (dir / name).string() + " -l " + GEXEC_TEST_FFI;
  };
  const result good = run_cli(write("good.json", 4) + " -i x=1,-2,3.5,0");
  CHECK(good.status == 0);
  check_close(printed(good, "inc:0"), {2, -1, 4.5f, 1});
  const result bad = run_cli(write("bad.json", 5) + " -i x=1,-2,3.5,0");
  CHECK(bad.status == 1);
  CHECK(has(bad, "kernel_failed: node \"inc\""));
  CHECK(has(bad, "ValueError: Invalid y.shape[0] when calling ffi_add_one"));
}
