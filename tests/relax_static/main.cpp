// Relax models linked into one static program: each one's kernels (lib0.o) and
// executable (devc.o) linked in by gexec_add_relax_model, with the weights it takes as
// arguments if any (WEIGHTS), TVM's inputs and outputs for it embedded
// (gexec_embed_file). It reads no file: it runs each model's function as a gexec graph
// and in the interpreter and compares every output with TVM's VM, bit for bit (or within
// the case's tolerance, for a build for another machine than TVM ran on); a program with
// several models asks for each by name and expects the unnamed module refused; then it
// registers the first model's executable a second time, as a second devc.o would, and
// expects loading to be refused.
//
//   static_<model>, static_all_models      exit status 0 when all of that holds

#include <gexec/library/system_module.hpp>
#include <gexec/relax.hpp>

#include "relax_static_case.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace {

/// Whether `got` is TVM's `want`: bit for bit, or every float32 element within the tolerance.
bool matches(const relax_static_case& c, const gexec::ndarray& got, const gexec::ndarray& want, std::string& how) {
  if (!gexec::same_dtype(got.dtype(), want.dtype()) || got.numel() != want.numel()) {
    how = "not TVM's dtype or size";
    return false;
  }
  const bool identical = std::memcmp(got.data(), want.data(), want.byte_size()) == 0;
  how = identical ? "bit-identical" : "not bit-identical";
  if (identical || (c.atol == 0 && c.rtol == 0)) return identical;
  if (want.dtype().code != kDLFloat || want.dtype().bits != 32) return false;
  const auto* g = static_cast<const float*>(got.data());
  const auto* w = static_cast<const float*>(want.data());
  double worst = 0;
  bool ok = true;
  for (std::uint64_t i = 0; i < want.numel(); ++i) {
    const double diff = std::fabs(double(g[i]) - double(w[i]));
    worst = std::fmax(worst, diff);
    ok = ok && diff <= c.atol + c.rtol * std::fabs(double(w[i]));
  }
  how += ", max |diff| = " + std::to_string(worst);
  return ok;
}

/// Runs case `c` on `lib`: its function as a graph and in the interpreter, every output
/// against TVM's VM. The number of failures.
int run_case(const relax_static_case& c, const gexec::module& lib) {
  std::printf("model %s, linked in: %s\n", c.name, gexec::packed_c_abi(lib).describe().c_str());
  const gexec::param_dict data = gexec::load_param_dict(c.expected);
  std::vector<gexec::ndarray> inputs;
  for (int i = 0; i < c.inputs; ++i) inputs.push_back(data.at("in" + std::to_string(i)));
  int bad = 0;
  for (const bool graphs : {true, false}) {
    gexec::relax::executable_options options{.graphs = graphs};
    if (!c.weights.empty()) options.params = gexec::view_param_dict(c.weights);  // in the program's own data: views
    const gexec::relax::executable exe = gexec::relax::load_executable(lib, std::move(options));
    const bool as_graph = exe.graph_of(c.function) != nullptr;
    if (graphs && !as_graph) {
      std::printf("%s: interpreted (%s), not run as a graph\n", c.function, exe.interpreted_because(c.function).c_str());
      ++bad;
    }
    gexec::relax::virtual_machine vm(exe);
    const std::vector<gexec::ndarray> out = vm.run(c.function, inputs);
    if (static_cast<int>(out.size()) != c.outputs) {
      std::printf("%s: %zu outputs, TVM's VM returned %d\n", c.function, out.size(), c.outputs);
      ++bad;
      continue;
    }
    for (int i = 0; i < c.outputs; ++i) {
      std::string how;
      const bool ok = matches(c, out[static_cast<std::size_t>(i)], data.at("out" + std::to_string(i)), how);
      std::printf("%s %s, output %d: %s, %s\n", c.function, as_graph ? "as a graph" : "interpreted", i, ok ? "matches TVM's VM" : "DIFFERS from TVM's VM",
                  how.c_str());
      bad += !ok;
    }
  }
  return bad;
}

/// Whether `f` throws a gexec::error whose message holds `text`; says so.
template <class F>
bool refused(const char* what, F f, const char* text) {
  try {
    f();
    std::printf("%s: not refused\n", what);
    return false;
  } catch (const gexec::error& e) {
    const bool named = std::string(e.what()).find(text) != std::string::npos;
    std::printf("%s: refused%s: %s\n", what, named ? "" : " with the WRONG message", e.what());
    return named;
  }
}

}  // namespace

int main() {
  const char* name = "?";
  try {
    const std::span<const relax_static_case> cases = linked_cases();
    name = cases.size() == 1 ? cases[0].name : "all_models";
    int bad = 0;
    // One model: the program's system module; several: each by its name, and the unnamed
    // module refused, naming them.
    for (const relax_static_case& c : cases) bad += run_case(c, cases.size() == 1 ? gexec::system_module() : gexec::system_module(c.name));
    if (cases.size() > 1)
      bad += !refused("the unnamed module of a program with several models",
                      [] { (void)gexec::relax::load_executable(gexec::system_module()); }, "models' system-library objects are linked into the program");

    // A second devc.o's registration for the first model: which executable is meant is
    // not known any more.
    const gexec::module& first = gexec::system_module(cases[0].name);
    const std::span<const std::byte> bin = first.data_symbol("__tvm_ffi__library_bin");
    static std::vector<std::byte> second(bin.begin(), bin.end());
    gexec_register_system_lib_symbol_of(cases[0].name, "__tvm_ffi__library_bin", second.data());
    bad += !refused("two executables registered", [&] { (void)gexec::relax::load_executable(first); },
                    "2 library binaries (__tvm_ffi__library_bin) are registered");
    return bad == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "static_%s: %s\n", name, e.what());
    return 1;
  }
}
