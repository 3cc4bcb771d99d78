// Conformance with TVM: models compiled by a real TVM (tests/conformance/make_models.sh)
// run through gexec in both deployment forms, and their outputs are compared with the
// outputs TVM's own graph executor produced for the same inputs.
//
//   split form:   graph.json + load_module(lib.so) + load_params_file(params.bin)
//   single file:  load_factory(model.so).create()
//
// A set built for ARM (make_models.sh OUT --target aarch64, run under qemu-user) is
// compared with TVM's outputs for the same graph compiled for x86-64, within the
// tolerance its info.json states per model ("tolerance": exact, or rtol and atol).
//
// The models live in GEXEC_CONFORMANCE_DIR (the environment variable of that name
// overrides the compiled-in path). When the generator could not install TVM it leaves
// a SKIPPED file there, and this program exits with 77, which CTest reports as skipped.

#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <boost/json.hpp>

#include <gexec/executor.hpp>
#include <gexec/load.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <numeric>
#include <set>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <gexec/contrib/sort.hpp>

#ifndef GEXEC_CONFORMANCE_DIR
#error "GEXEC_CONFORMANCE_DIR must name the folder make_models.sh writes"
#endif

namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

/// The functions TVM's sort kernels look up through the environment (gexec/contrib/sort.hpp).
constexpr std::string_view sort_functions[] = {"tvm.contrib.sort.argsort", "tvm.contrib.sort.sort", "tvm.contrib.sort.topk"};

fs::path conformance_dir() {
  if (const char* dir = std::getenv("GEXEC_CONFORMANCE_DIR"); dir && *dir) return dir;
  return GEXEC_CONFORMANCE_DIR;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw std::runtime_error("cannot read " + path.string());
  return text;
}

json::value read_json(const fs::path& path) {
  boost::system::error_code ec;
  json::value v = json::parse(read_text(path), ec);
  if (ec) throw std::runtime_error(path.string() + ": not JSON: " + ec.message());
  return v;
}

std::string shape_string(std::span<const std::int64_t> shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::vector<std::int64_t> json_shape(const json::value& v) {
  std::vector<std::int64_t> shape;
  for (const json::value& d : v.as_array()) shape.push_back(d.to_number<std::int64_t>());
  return shape;
}

/// One model of the manifest: its folder, info.json, and TVM's inputs and outputs.
struct model_case {
  std::string name;
  fs::path dir;
  json::object info;
  gexec::param_dict inputs;
  gexec::param_dict outputs;

  [[nodiscard]] bool needs(std::string_view function) const {
    if (const json::value* funcs = info.if_contains("env_funcs"))
      for (const json::value& f : funcs->as_array())
        if (f.as_string() == json::string_view(function.data(), function.size())) return true;
    return false;
  }
  /// Whether its kernels call TVM's sort functions, whose outputs are copies of input
  /// values and positions: gexec's must then be TVM's byte for byte.
  [[nodiscard]] bool needs_sort() const {
    return std::ranges::any_of(sort_functions, [&](std::string_view f) { return needs(f); });
  }
};

std::vector<std::string> manifest_models() {
  json::value manifest = read_json(conformance_dir() / "manifest.json");
  std::vector<std::string> names;
  for (const json::value& m : manifest.at("models").as_array()) names.push_back(json::value_to<std::string>(m));
  return names;
}

model_case load_model(const std::string& name) {
  model_case m;
  m.name = name;
  m.dir = conformance_dir() / name;
  m.info = read_json(m.dir / "info.json").as_object();
  m.inputs = gexec::load_param_dict_file(m.dir / "inputs.bin");
  m.outputs = gexec::load_param_dict_file(m.dir / "outputs.bin");
  return m;
}

void register_environment_functions() { gexec::contrib::register_sort_functions(); }

bool any_sort_function_registered() {
  return std::ranges::any_of(sort_functions, [](std::string_view f) { return gexec::find_global_function(f) != nullptr; });
}

/// float16 bits as a double.
double half_value(std::uint16_t h) {
  const int exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (exponent == 0x1f) return mantissa ? std::numeric_limits<double>::quiet_NaN() : sign * std::numeric_limits<double>::infinity();
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  return sign * std::ldexp(mantissa + 1024, exponent - 25);
}

// ---- comparing with TVM -------------------------------------------------------------

/// Element i of a host tensor as a double (integers and floats of 8 to 64 bits).
double element(const gexec::ndarray& a, std::uint64_t i) {
  const DLDataType t = a.dtype();
  const auto* p = static_cast<const char*>(a.data()) + i * gexec::element_bytes(t);
  auto load = [p]<class T>(T) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return static_cast<double>(v);
  };
  switch (t.code) {
    case kDLFloat:
      if (t.bits == 16) return half_value(static_cast<std::uint16_t>(load(std::uint16_t{})));
      if (t.bits == 32) return load(float{});
      if (t.bits == 64) return load(double{});
      break;
    case kDLInt:
      if (t.bits == 8) return load(std::int8_t{});
      if (t.bits == 16) return load(std::int16_t{});
      if (t.bits == 32) return load(std::int32_t{});
      if (t.bits == 64) return load(std::int64_t{});
      break;
    case kDLUInt:
      if (t.bits == 1 || t.bits == 8) return load(std::uint8_t{});
      if (t.bits == 16) return load(std::uint16_t{});
      if (t.bits == 32) return load(std::uint32_t{});
      if (t.bits == 64) return load(std::uint64_t{});
      break;
    default:
      break;
  }
  throw std::runtime_error("the conformance test does not compare " + gexec::to_string(t) + " tensors");
}

struct comparison {
  double max_abs_diff = 0;
  bool identical = false;  ///< the same bytes
  std::string failure;     ///< empty when the tensors agree
};

/// How close a float output must be: within atol + rtol * |expected|, or the same bytes.
struct tolerance {
  double rtol = 1e-5, atol = 1e-5;
  bool exact = false;
};

/// The model's stated tolerance (info.json "tolerance", sets built for another machine),
/// else the default.
tolerance tolerance_of(const json::object& info) {
  tolerance t;
  if (const json::value* v = info.if_contains("tolerance")) {
    const json::object& o = v->as_object();
    t.exact = o.at("exact").as_bool();
    t.rtol = o.at("rtol").to_number<double>();
    t.atol = o.at("atol").to_number<double>();
  }
  return t;
}

/// Integers must be equal; floats within the tolerance (default 1e-5 + 1e-5 * |expected|).
comparison compare(const gexec::ndarray& got, const gexec::ndarray& want, const tolerance& tol = {}) {
  comparison c;
  if (!gexec::same_dtype(got.dtype(), want.dtype())) {
    c.failure = "dtype is " + gexec::to_string(got.dtype()) + ", TVM's is " + gexec::to_string(want.dtype());
    return c;
  }
  if (!std::ranges::equal(got.shape(), want.shape())) {
    c.failure = "shape is " + shape_string(got.shape()) + ", TVM's is " + shape_string(want.shape());
    return c;
  }
  const bool is_float = want.dtype().code == kDLFloat;
  const std::uint64_t bytes = gexec::element_bytes(want.dtype());
  c.identical = got.byte_size() == want.byte_size() && std::memcmp(got.data(), want.data(), want.byte_size()) == 0;
  std::uint64_t bad = 0, worst = 0, first_bad = 0;
  for (std::uint64_t i = 0; i < want.numel(); ++i) {
    const double a = element(got, i), b = element(want, i);
    bool ok;
    double diff;
    if (is_float) {
      if (std::isnan(a) || std::isnan(b)) {
        ok = std::isnan(a) && std::isnan(b);
        diff = ok ? 0 : std::numeric_limits<double>::infinity();
      } else {
        diff = a == b ? 0 : std::fabs(a - b);  // equal infinities differ by 0
        ok = tol.exact ? std::memcmp(static_cast<const char*>(got.data()) + i * bytes, static_cast<const char*>(want.data()) + i * bytes, bytes) == 0
                       : diff <= tol.atol + tol.rtol * std::fabs(b);
      }
    } else {
      ok = std::memcmp(static_cast<const char*>(got.data()) + i * bytes, static_cast<const char*>(want.data()) + i * bytes, bytes) == 0;
      diff = std::fabs(a - b);
    }
    if (diff > c.max_abs_diff) {
      c.max_abs_diff = diff;
      worst = i;
    }
    if (!ok && bad++ == 0) first_bad = i;
  }
  if (bad) {
    std::ostringstream s;
    s << bad << " of " << want.numel() << " elements differ ("
      << (is_float && !tol.exact ? "tolerance " + std::to_string(tol.atol) + " + " + std::to_string(tol.rtol) + "*|tvm|" : std::string("exact"))
      << "); max |diff| = " << c.max_abs_diff << " at element " << worst << " (gexec " << element(got, worst) << ", tvm "
      << element(want, worst) << "); first differing element " << first_bad << " (gexec " << element(got, first_bad)
      << ", tvm " << element(want, first_bad) << ")";
    c.failure = s.str();
  }
  return c;
}

std::string label(const model_case& m, std::string_view form) { return "conformance " + m.name + " " + std::string(form); }

/// Checks the executor's metadata against info.json, runs it on TVM's inputs and
/// compares every output with TVM's; prints the summary line.
void check_against_tvm(const model_case& m, std::string_view form, gexec::graph_executor<>& ex) {
  const std::string at = label(m, form);
  const json::object& info = m.info;

  const auto num_outputs = info.at("num_outputs").to_number<int>();
  CHECK_MESSAGE(ex.get_num_outputs() == num_outputs,
                at << ": get_num_outputs() = " << ex.get_num_outputs() << ", info.json says " << num_outputs);

  std::vector<gexec::tensor_info> inputs = ex.get_input_info();
  const json::array& names = info.at("input_names").as_array();
  CHECK_MESSAGE(inputs.size() == names.size(),
                at << ": get_input_info() lists " << inputs.size() << " inputs, info.json " << names.size());
  for (std::size_t i = 0; i < std::min(inputs.size(), names.size()); ++i) {
    const std::string want_name = json::value_to<std::string>(names[i]);
    const json::value& want = info.at("inputs").at(want_name);
    CHECK_MESSAGE(inputs[i].name == want_name, at << ": input " << i << " is \"" << inputs[i].name << "\", info.json says \"" << want_name << "\"");
    CHECK_MESSAGE(inputs[i].shape == json_shape(want.at("shape")),
                  at << ": input \"" << want_name << "\" has shape " << shape_string(inputs[i].shape) << ", info.json "
                     << shape_string(json_shape(want.at("shape"))));
    CHECK_MESSAGE(gexec::to_string(inputs[i].dtype) == want.at("dtype").as_string(),
                  at << ": input \"" << want_name << "\" is " << gexec::to_string(inputs[i].dtype) << ", info.json says "
                     << json::value_to<std::string>(want.at("dtype")));
  }

  std::vector<gexec::tensor_info> outputs = ex.get_output_info();
  const json::array& want_outputs = info.at("outputs").as_array();
  CHECK_MESSAGE(outputs.size() == want_outputs.size(),
                at << ": get_output_info() lists " << outputs.size() << " outputs, info.json " << want_outputs.size());
  for (std::size_t i = 0; i < std::min(outputs.size(), want_outputs.size()); ++i) {
    CHECK_MESSAGE(outputs[i].shape == json_shape(want_outputs[i].at("shape")),
                  at << ": output " << i << " has shape " << shape_string(outputs[i].shape) << ", info.json "
                     << shape_string(json_shape(want_outputs[i].at("shape"))));
    CHECK_MESSAGE(gexec::to_string(outputs[i].dtype) == want_outputs[i].at("dtype").as_string(),
                  at << ": output " << i << " is " << gexec::to_string(outputs[i].dtype) << ", info.json says "
                     << json::value_to<std::string>(want_outputs[i].at("dtype")));
  }

  for (const json::value& name : names) {
    const std::string input = json::value_to<std::string>(name);
    ex.set_input(input, m.inputs.at(input));
  }
  ex.run();

  double max_abs_diff = 0;
  int compared = 0, identical = 0;
  for (int i = 0; i < ex.get_num_outputs(); ++i) {
    const gexec::ndarray* want = m.outputs.find(std::to_string(i));
    if (!want) {
      FAIL_CHECK(at << ": outputs.bin has no output \"" << i << "\"");
      continue;
    }
    comparison c = compare(ex.get_output(i), *want, tolerance_of(info));
    max_abs_diff = std::max(max_abs_diff, c.max_abs_diff);
    ++compared;
    identical += c.identical;
    if (!c.failure.empty()) FAIL_CHECK(at << ": output " << i << ": " << c.failure);
    else if (!c.identical && m.needs_sort()) FAIL_CHECK(at << ": output " << i << " is within tolerance but not TVM's bytes");
  }
  CHECK_MESSAGE(m.outputs.size() == static_cast<std::size_t>(ex.get_num_outputs()),
                at << ": outputs.bin holds " << m.outputs.size() << " outputs, the executor " << ex.get_num_outputs());
  std::printf("%s: max |diff| = %.3g over %d outputs, %d bit-identical\n", at.c_str(), max_abs_diff, compared, identical);
  std::fflush(stdout);
}

gexec::graph_executor<> create_split(const model_case& m) {
  gexec::module lib = gexec::load_module(m.dir / "lib.so");
  auto ex = gexec::create(read_text(m.dir / "graph.json"), lib, {gexec::cpu()});
  ex.load_params_file(m.dir / "params.bin");
  return ex;
}

/// Runs `body` and turns an escaping exception into a failure naming model and form.
template <class F>
void guarded(const model_case& m, std::string_view form, F&& body) {
  try {
    body();
  } catch (const std::exception& e) {
    FAIL_CHECK(label(m, form) << ": " << std::string(e.what()));
  }
}

/// Every model of the manifest; a model whose files cannot be read fails on its own.
template <class F>
void for_each_model(F&& body) {
  std::vector<std::string> names = manifest_models();
  REQUIRE_MESSAGE(!names.empty(), "manifest.json in " << conformance_dir().string() << " lists no models");
  for (const std::string& name : names) {
    model_case m;
    try {
      m = load_model(name);
    } catch (const std::exception& e) {
      FAIL_CHECK("conformance " << name << ": cannot read its files: " << std::string(e.what()));
      continue;
    }
    body(m);
  }
}

}  // namespace

TEST_CASE("an environment function that is not registered fails the kernel cleanly, registering it later works") {
  if (any_sort_function_registered()) {
    MESSAGE("TVM's sort functions are already registered in this process; nothing to check");
    return;
  }
  struct failed_once {
    std::size_t model;  ///< index into models
    std::string form;
    gexec::graph_executor<> ex;
  };
  std::vector<model_case> models;
  std::vector<failed_once> executors;
  for_each_model([&](const model_case& m) {
    if (!m.needs_sort()) return;
    models.push_back(m);
    for (std::string_view form : {"split", "single"}) {
      guarded(m, form, [&] {
        auto ex = form == "split" ? create_split(m) : gexec::load_factory(m.dir / "model.so").create();
        for (const json::value& name : m.info.at("input_names").as_array()) {
          const std::string input = json::value_to<std::string>(name);
          ex.set_input(input, m.inputs.at(input));
        }
        try {
          ex.run();
          FAIL_CHECK(label(m, form) << ": run() succeeded without TVM's sort functions registered");
        } catch (const gexec::error& e) {
          CHECK_MESSAGE(e.code() == gexec::errc::kernel_failed,
                        label(m, form) << ": expected errc::kernel_failed, got " << std::string(gexec::to_string(e.code())) << ": " << std::string(e.what()));
          const std::string_view what = e.what();
          const bool named = std::ranges::any_of(sort_functions, [&](std::string_view f) { return m.needs(f) && what.find(f) != what.npos; });
          CHECK_MESSAGE(named, label(m, form) << ": the error does not name a sort function the model calls: " << std::string(what));
          MESSAGE(label(m, form) << " without the sort functions: " << std::string(what));
        }
        executors.push_back({models.size() - 1, std::string(form), std::move(ex)});
      });
    }
  });
  if (models.empty()) {
    MESSAGE("no model of the manifest calls TVM's sort functions");
    return;
  }

  // The failed look-up cached nothing in the libraries: the same executors now succeed.
  register_environment_functions();
  for (failed_once& f : executors) {
    const model_case& m = models[f.model];
    const std::string form = f.form + " after registering";
    guarded(m, form, [&] { check_against_tvm(m, form, f.ex); });
  }
}

TEST_CASE("split form (graph.json + lib.so + params.bin) matches TVM") {
  register_environment_functions();
  for_each_model([](const model_case& m) {
    guarded(m, "split", [&] {
      auto ex = create_split(m);
      check_against_tvm(m, "split", ex);
    });
  });
}

TEST_CASE("single file (load_factory(model.so).create()) matches TVM") {
  register_environment_functions();
  for_each_model([](const model_case& m) {
    guarded(m, "single", [&] {
      const std::string at = label(m, "single");
      gexec::factory f = gexec::load_factory(m.dir / "model.so");

      // The embedded graph is graph.json's graph.
      const std::string on_disk = gexec::to_json(gexec::parse_graph(read_text(m.dir / "graph.json")));
      try {
        CHECK_MESSAGE(gexec::to_json(gexec::parse_graph(f.graph_json())) == on_disk, at << ": the embedded graph differs from graph.json");
      } catch (const std::exception& e) {
        FAIL_CHECK(at << ": the embedded graph JSON does not parse: " << std::string(e.what()));
      }

      const json::value* module_name = nullptr;
      if (const json::value* mblob = m.info.if_contains("model_so_mblob"))
        if (const json::value* factory = mblob->as_object().if_contains("factory"))
          module_name = factory->as_object().if_contains("module_name");
      if (module_name)
        CHECK_MESSAGE(f.module_name() == module_name->as_string(), at << ": module name is \"" << f.module_name() << "\", info.json says \""
                                                                      << json::value_to<std::string>(*module_name) << "\"");

      // The embedded parameters are params.bin's.
      gexec::param_dict params = gexec::load_param_dict_file(m.dir / "params.bin");
      std::set<std::string> embedded_names, file_names;
      for (const auto& [name, value] : f.params()) embedded_names.insert(name);
      for (const auto& [name, value] : params) file_names.insert(name);
      CHECK_MESSAGE(embedded_names == file_names, at << ": the embedded parameters are not params.bin's (" << embedded_names.size()
                                                     << " embedded, " << file_names.size() << " in params.bin)");
      for (const auto& item : params) {
        const std::string& name = item.first;  // named, not bound: clang 14 cannot capture bindings
        const gexec::ndarray& want = item.second;
        const gexec::ndarray* got = f.params().find(name);
        if (!got) continue;
        CHECK_MESSAGE(gexec::same_dtype(got->dtype(), want.dtype()),
                      at << ": parameter " << name << " is " << gexec::to_string(got->dtype()) << ", params.bin has " << gexec::to_string(want.dtype()));
        CHECK_MESSAGE(std::ranges::equal(got->shape(), want.shape()),
                      at << ": parameter " << name << " has shape " << shape_string(got->shape()) << ", params.bin " << shape_string(want.shape()));
        const bool same_bytes = got->byte_size() == want.byte_size() && std::memcmp(got->data(), want.data(), want.byte_size()) == 0;
        CHECK_MESSAGE(same_bytes, at << ": parameter " << name << " differs in its bytes from params.bin");
      }

      auto ex = f.create();
      check_against_tvm(m, "single", ex);
    });
  });
}

#ifdef GEXEC_RUN
TEST_CASE("a single-file library linked from TVM's kernel objects with the weights aligned (gexec-run --write-library) matches TVM, read in place") {
  register_environment_functions();
  const fs::path scratch = fs::path(GEXEC_CONFORMANCE_SCRATCH) / "write_library";
  fs::remove_all(scratch);
  fs::create_directories(scratch);
  int linked = 0;
  for_each_model([&](const model_case& m) {
    if (!fs::exists(m.dir / "kernels.tar")) return;  // a set made before models came with their objects
    guarded(m, "aligned single file", [&] {
      const std::string at = label(m, "aligned single file");
      const fs::path out = scratch / (m.name + ".so"), said = scratch / (m.name + ".txt");
      const std::string cmd = std::string(GEXEC_RUN) + " --write-library " + out.string() + " --graph " + (m.dir / "graph.json").string() + " --params " +
                              (m.dir / "params.bin").string() + " --kernel-objects " + (m.dir / "kernels.tar").string() + " > " + said.string() + " 2>&1";
      REQUIRE_MESSAGE(std::system(cmd.c_str()) == 0, at << ": " << cmd << ": " << read_text(said));
      // Every weight read where it lies in the library, none copied.
      const gexec::model model = gexec::model::load(out);
      CHECK_MESSAGE(model.weights().copied == 0, at << ": " << model.weights().copied << " weights copied (" << model.weights().why_copied << ")");
      CHECK(model.weights().in_place == gexec::load_param_dict_file(m.dir / "params.bin").size());
      auto ex = gexec::load_factory(out).create();
      check_against_tvm(m, "aligned single file", ex);
      ++linked;
    });
  });
  if (linked == 0) MESSAGE("no model of the manifest comes with kernels.tar: nothing linked");
}
#endif

int main(int argc, char** argv) {
  const fs::path dir = conformance_dir();
  if (fs::exists(dir / "SKIPPED")) {
    std::string reason;
    try {
      reason = read_text(dir / "SKIPPED");
    } catch (const std::exception& e) {
      reason = e.what();
    }
    while (!reason.empty() && (reason.back() == '\n' || reason.back() == '\r')) reason.pop_back();
    std::printf("SKIPPED: %s\n", reason.c_str());
    return 77;
  }
  if (!fs::exists(dir / "manifest.json")) {
    std::fprintf(stderr,
                 "test_conformance: %s has no manifest.json and no SKIPPED: the models were not generated "
                 "(run: bash tests/conformance/make_models.sh %s)\n",
                 dir.string().c_str(), dir.string().c_str());
    return 1;
  }
  std::printf("conformance models: %s\n", dir.string().c_str());
  doctest::Context context(argc, argv);
  int result = context.run();
  if (context.shouldExit()) return result;
  return result;
}
