#pragma once
// Running a Relax VM executable: relax::executable is the immutable, shared part (the
// parsed bytecode, its constants, every function-table entry resolved to a builtin, a
// kernel of the library or a function of the executable), checked when it is loaded;
// relax::virtual_machine is the cheap per-thread part (register files, the storage
// each allocation site keeps between runs) and interprets the four opcodes.
//
//   auto exe = gexec::relax::load_executable("model.so");    // relax.build(...).export_library
//   gexec::relax::virtual_machine vm(exe);
//   std::vector<gexec::ndarray> out = vm.run("main", {x});     // TVM: vm["main"](x)
//   vm.run("main", {x}, out);                                  // the same into a kept vector: a loop allocates nothing
//
// Refused when loading, with the name: a function-table entry that is no builtin gexec
// has and no kernel of the library, a VM-TIR function (relax.build(exec_mode="compiled")),
// storage on a device other than the host. What only a run can know (a shape the
// function's checks refuse, a kernel that fails) is an error of that run naming the
// function and the instruction; the virtual machine stays usable.

#include "../config.hpp"

#include <cstring>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "../detail/last_error.hpp"
#include "../error.hpp"
#include "../file_path.hpp"
#include "../model.hpp"
#include "../ndarray.hpp"
#include "../backends/cpu.hpp"
#include "../library/binding.hpp"
#include "../library/module.hpp"
#include "../planners/liveness.hpp"
#include "../runtime.hpp"
#include "../runtime/run_context.hpp"
#include "../tvm_ffi/call.hpp"
#include "../tvm_ffi/library_bin.hpp"
#include "../tvm_ffi_abi.hpp"
#include "builtins.hpp"
#include "executable.hpp"
#include "to_graph.hpp"
#include "value.hpp"

GEXEC_NAMESPACE_BEGIN

namespace relax {

/// What one function-table entry resolves to.
struct callee {
  enum class kind : std::uint8_t { builtin, kernel, function } what = kind::builtin;
  builtin_fn fn = nullptr;  ///< builtin
  void* kernel = nullptr;   ///< kernel: the TVM-FFI safe call __tvm_ffi_<name>
  std::int64_t index = -1;  ///< function: its index in the table
};

struct executable_options {
  /// Functions that are a straight line over static shapes run as gexec graphs
  /// (to_graph.hpp); off, every function is interpreted.
  bool graphs = true;
  /// Options of the graph models (devices are the host's; a planner left empty is liveness).
  /// Its runtime (the process default where null) also serves the kernels the interpreter
  /// calls: their thread pool and the functions they find by name.
  model_options model = {};
  /// Weights bound by argument name, once for every virtual machine: the functions of
  /// nn.Module.export_tvm take their parameters as arguments, which callers then no
  /// longer pass (load_executable(library, params_file) reads them from a file).
  param_dict params = {};
};

/// A function translated to a graph, and the model it runs on.
struct graph_program {
  graph_function function;
  gexec::model model;
};

/// A loaded executable: immutable, shared by every virtual_machine made from it.
class executable {
 public:
  executable() = default;

  /// Resolves `code` against `library` (its kernels); refuses, naming them, the entries
  /// it cannot run.
  static executable from(vm_executable code, module library, std::string source = "Relax VM executable", executable_options options = {}) {
    auto s = std::make_shared<state>();
    s->source = std::move(source);
    s->library = std::move(library);
    s->code = std::move(code);
    s->rt = options.model.runtime;
    s->context = s->rt ? s->rt->context() : runtime::global().context();
    const vm_executable& ex = s->code;
    std::vector<std::string> missing;
    for (std::size_t i = 0; i < ex.functions.size(); ++i) {
      const vm_function& f = ex.functions[i];
      callee c;
      switch (f.kind) {
        case function_kind::vm:
          c.what = callee::kind::function;
          c.index = static_cast<std::int64_t>(i);
          break;
        case function_kind::vm_tir:
          throw error(errc::unsupported, s->source + ": function \"" + f.name +
                                             "\" is a VM-TIR function (relax.build(exec_mode=\"compiled\")); gexec runs the bytecode "
                                             "form (exec_mode=\"bytecode\", relax.build's default)");
        case function_kind::packed:
          if (builtin_fn b = find_builtin(f.name)) {
            c.what = callee::kind::builtin;
            c.fn = b;
          } else if (void* k = kernel_of(s->library, f.name)) {
            c.what = callee::kind::kernel;
            c.kernel = k;
          } else {
            missing.push_back(f.name);
          }
          break;
      }
      s->callees.push_back(c);
    }
    if (!missing.empty()) {
      std::string names;
      for (const std::string& n : missing) names += (names.empty() ? "\"" : ", \"") + n + "\"";
      throw error(errc::symbol_not_found, s->source + " calls " + names +
                                              ", which is neither a VM builtin gexec runs nor a kernel of the library (__tvm_ffi_<name>)");
    }
    check_devices(*s);
    s->constants.reserve(ex.constants.size());
    for (const vm_constant& c : ex.constants) s->constants.push_back(std::visit([](const auto& x) { return vm_value(x); }, c));
    s->graphs.resize(ex.functions.size());
    s->interpreted.resize(ex.functions.size());
    s->bound.resize(ex.functions.size());
    s->free.resize(ex.functions.size());
    for (std::size_t i = 0; i < ex.functions.size(); ++i) {
      if (ex.functions[i].kind != function_kind::vm) continue;
      const vm_function& f = ex.functions[i];
      s->bound[i].resize(f.param_names.size());
      for (std::size_t a = 0; a < f.param_names.size(); ++a) {
        if (const ndarray* w = options.params.find(f.param_names[a])) {
          if (w->device().device_type != kDLCPU) throw error(errc::device_mismatch, "weight \"" + f.param_names[a] + "\" is not on the host");
          DLTensor t = w->dltensor();
          t.dtype = to_vm_dtype(t.dtype);
          s->bound[i][a] = ndarray::view(t, w->storage_owner());
        } else {
          s->free[i].push_back(a);
        }
      }
      if (!options.graphs) {
        s->interpreted[i] = "graphs are off (executable_options::graphs)";
        continue;
      }
      std::optional<graph_function> g = to_graph(ex, ex.functions[i], s->bound[i], s->interpreted[i]);
      if (!g) continue;
      model_options mo = options.model;
      if (!mo.planner) mo.planner = liveness{};
      validated_graph graph = g->graph;
      const param_dict params = g->params;
      s->graphs[i] = std::make_shared<const graph_program>(graph_program{std::move(*g), gexec::model(std::move(graph), s->library, params, std::move(mo))});
    }
    executable e;
    e.s_ = std::move(s);
    return e;
  }

  [[nodiscard]] const vm_executable& code() const { return require().code; }
  /// The library whose kernels the executable calls.
  [[nodiscard]] const module& library() const { return require().library; }
  [[nodiscard]] const std::string& source() const { return require().source; }
  /// The executable's own functions (what invoke() takes), in table order.
  [[nodiscard]] std::vector<std::string> function_names() const {
    std::vector<std::string> names;
    for (const vm_function& f : require().code.functions)
      if (f.kind == function_kind::vm) names.push_back(f.name);
    return names;
  }
  /// The function called `name`; errc::not_found naming those there are.
  [[nodiscard]] const vm_function& function(std::string_view name) const {
    const state& s = require();
    const std::int64_t i = s.code.find_function(name);
    if (i < 0 || s.code.functions[static_cast<std::size_t>(i)].kind != function_kind::vm) {
      std::string have;
      for (const std::string& n : function_names()) have += (have.empty() ? "" : ", ") + n;
      throw error(errc::not_found, s.source + " has no function \"" + std::string(name) + "\" (it has: " + have + ")");
    }
    return s.code.functions[static_cast<std::size_t>(i)];
  }
  [[nodiscard]] explicit operator bool() const noexcept { return s_ != nullptr; }

  /// Function `name` as a graph model (for gexec's profiler, observers and per-node dumps),
  /// or null where it is interpreted.
  [[nodiscard]] const graph_program* graph_of(std::string_view name) const {
    return require().graphs[index_of(name)].get();
  }
  /// The arguments a caller passes to function `name` (those no weight is bound to).
  [[nodiscard]] std::vector<std::string> input_names(std::string_view name) const {
    const state& s = require();
    const std::size_t fi = index_of(name);
    std::vector<std::string> names;
    for (std::size_t a : s.free[fi]) names.push_back(s.code.functions[fi].param_names[a]);
    return names;
  }
  /// Why function `name` is interpreted ("" where it runs as a graph).
  [[nodiscard]] const std::string& interpreted_because(std::string_view name) const { return require().interpreted[index_of(name)]; }

 private:
  friend class virtual_machine;
  struct state {
    std::string source;
    module library;
    vm_executable code;
    std::vector<callee> callees;
    std::vector<vm_value> constants;
    std::vector<std::shared_ptr<const graph_program>> graphs;  ///< per function; null: interpreted
    std::vector<std::string> interpreted;                       ///< per VM function interpreted: why
    std::vector<std::vector<ndarray>> bound;                    ///< per function, per argument: its weight, where bound
    std::vector<std::vector<std::size_t>> free;                 ///< per function: the arguments callers pass
    std::shared_ptr<runtime> rt;                                ///< executable_options::model.runtime, kept alive
    gexec::detail::run_context context;                             ///< what the kernels the interpreter calls run on
  };

  std::size_t index_of(std::string_view name) const {
    const vm_function& f = function(name);
    return static_cast<std::size_t>(require().code.find_function(f.name));
  }

  const state& require() const {
    if (!s_) throw error(errc::invalid_argument, "an empty relax::executable");
    return *s_;
  }

  static void* kernel_of(const module& library, const std::string& name) {
    if (!library) return nullptr;
    const packed_function f = library.get_function(name);
    if (!f || f.fn != &gexec::detail::call_tvm_ffi) return nullptr;
    return f.resource_handle;
  }

  /// Storage is allocated on the host, the VM's one device: an alloc_storage naming
  /// another device index by an immediate is refused now, not at its first run.
  static void check_devices(const state& s) {
    const vm_executable& ex = s.code;
    for (std::size_t pc = 0; pc < ex.code.size(); ++pc) {
      const vm_instruction& in = ex.code[pc];
      if (in.op != opcode::call || in.index < 0 || static_cast<std::size_t>(in.index) >= ex.functions.size()) continue;
      if (ex.functions[static_cast<std::size_t>(in.index)].name != "vm.builtin.alloc_storage" || in.num_args < 3) continue;
      const vm_arg device = ex.args_of(in)[2];
      if (device.kind == arg_kind::immediate && device.value != 0 && device.value != -1)
        throw error(errc::device_mismatch, s.source + ": instruction " + std::to_string(pc) + " allocates storage on device " +
                                               std::to_string(device.value) + "; gexec runs Relax executables on the host (target \"llvm\")");
    }
  }

  std::shared_ptr<const state> s_;
};

/// Whether `lib` carries a Relax VM executable (a relax.VMExecutable module in its
/// __tvm_ffi__library_bin): what tells a Relax model from a graph executor library.
inline bool carries_executable(const module& lib) {
  const std::span<const std::byte> bin = lib.data_symbol("__tvm_ffi__library_bin");
  if (bin.empty()) return false;
  for (const library_bin_module& m : parse_library_bin(bin, "__tvm_ffi__library_bin of " + lib.path().string()).modules)
    if (m.kind == "relax.VMExecutable") return true;
  return false;
}

namespace detail {
/// load_executable's body; `where` names the module in messages (the path as the caller
/// gave it, for a file).
inline executable read_executable(module lib, const std::string& where, executable_options options) {
  if (!lib) throw error(errc::invalid_argument, "load_executable: an empty module");
  const std::span<const std::byte> bin = lib.data_symbol("__tvm_ffi__library_bin");
  if (bin.empty())
    throw error(errc::invalid_module, where + " carries no __tvm_ffi__library_bin, so no Relax VM executable (TVM >= 0.21's export_library "
                                              "writes one into model.so; with relax.build(..., system_lib=True) and export_library(\"model.tar\"), "
                                              "into the .tar's devc.o, which a static program links whole beside lib0.o: gexec_add_relax_model; "
                                              "a graph executor library is loaded with gexec::model)");
  const library_bin parsed = parse_library_bin(bin, "__tvm_ffi__library_bin of " + where);
  const library_bin_module* found = nullptr;
  for (const library_bin_module& m : parsed.modules)
    if (m.kind == "relax.VMExecutable") {
      if (found) throw error(errc::invalid_module, where + " carries two Relax VM executables");
      found = &m;
    }
  if (!found) throw error(errc::invalid_module, where + " carries no relax.VMExecutable module");
  return executable::from(parse_vm_executable(found->bytes, "relax.VMExecutable of " + where), std::move(lib), "Relax VM executable " + where,
                          std::move(options));
}
}  // namespace detail

/// Reads the executable a single-file library carries (its __tvm_ffi__library_bin) and
/// resolves it against the library's kernels.
inline executable load_executable(const file_path& path, executable_options options = {}) {
  return detail::read_executable(load_module(path), path.string(), std::move(options));
}

/// The same for a module: a library load_module opened, or the system library linked
/// into the program (gexec::system_module(), <gexec/library/system_module.hpp>: its
/// lib0.o's kernels and its devc.o's executable).
inline executable load_executable(const module& lib, executable_options options = {}) {
  return detail::read_executable(lib, lib.path().string(), std::move(options));
}

/// The same, with weights read from a parameter file (TVM's blob or .safetensors) bound
/// to the arguments of their names.
inline executable load_executable(const file_path& path, const file_path& params_file, executable_options options = {}) {
  for (const auto& [name, tensor] : load_param_dict_file(params_file)) options.params.set(name, tensor);
  return load_executable(path, std::move(options));
}

/// One thread's virtual machine over a shared executable.
class virtual_machine {
 public:
  explicit virtual_machine(executable exe) : exe_(std::move(exe)), context_(exe_.require().context) {
    storage_.resize(exe_.require().code.code.size());
    runners_.resize(exe_.require().code.functions.size());
  }
  /// A virtual machine's storage and executors are its own: it moves, never copies.
  virtual_machine(const virtual_machine&) = delete;
  virtual_machine& operator=(const virtual_machine&) = delete;
  virtual_machine(virtual_machine&&) noexcept = default;
  virtual_machine& operator=(virtual_machine&&) noexcept = default;
  ~virtual_machine() = default;

  [[nodiscard]] const executable& get_executable() const noexcept { return exe_; }

  /// Calls function `name` with `args` and returns its result (TVM: vm[name](*args)).
  /// Tensors enter and leave with gexec's dtypes (to_vm_dtype).
  vm_value invoke(std::string_view name, std::span<const vm_value> args) {
    const executable::state& s = exe_.require();
    const vm_function& f = exe_.function(name);
    const auto fi = static_cast<std::size_t>(s.code.find_function(f.name));
    const std::vector<std::size_t>& free = s.free[fi];
    if (args.size() != free.size()) {
      std::string names;
      for (std::size_t a : free) names += (names.empty() ? "" : ", ") + f.param_names[a];
      throw error(errc::invalid_argument, "function \"" + f.name + "\" takes " + std::to_string(free.size()) + " arguments (" + names + "), got " +
                                              std::to_string(args.size()) +
                                              (free.size() < f.param_names.size() ? " (the others are weights bound when it was loaded)" : ""));
    }
    std::vector<vm_value> in;
    in.reserve(args.size());
    for (const vm_value& x : args) in.push_back(translate(x, &to_vm_dtype));
    if (const graph_program* g = s.graphs[fi].get()) return translate(run_graph(f, *g, in), &from_vm_dtype);
    std::vector<vm_value> all(f.param_names.size());
    for (std::size_t a = 0; a < all.size(); ++a)
      if (s.bound[fi][a].defined()) all[a] = s.bound[fi][a];
    for (std::size_t k = 0; k < free.size(); ++k) all[free[k]] = std::move(in[k]);
    return translate(call_function(s, fi, all, 0), &from_vm_dtype);
  }

  /// The executor that runs function `name` where it is a graph (for observers and the
  /// profiler: gexec::profile(vm.graph_executor("main"), ...)); errc::unsupported where
  /// it is interpreted, with the reason.
  gexec::model::executor& graph_executor(std::string_view name) {
    const executable::state& s = exe_.require();
    const std::size_t fi = exe_.index_of(name);
    graph_runner* r = runner(s, fi);
    if (!r) throw error(errc::unsupported, "function \"" + std::string(name) + "\" is interpreted: " + s.interpreted[fi]);
    // Whoever holds the executor may bind its inputs or outputs: from now on every call
    // goes through its checked set_input and copy_output_to.
    r->exposed = true;
    r->direct.clear();
    return r->executor;
  }

  /// Calls `name` with tensors and returns its result flattened to tensors (a tuple's
  /// items in order, nested tuples depth first).
  ///
  /// A function that is a graph runs without the VM's values: the inputs are copied into
  /// its executor, the outputs out of it into tensors this VM hands out again once the
  /// caller holds none of them (so a loop that drops its results allocates nothing).
  std::vector<ndarray> run(std::string_view name, std::span<const ndarray> inputs) {
    std::vector<ndarray> out;
    run_into(name, inputs, out);
    return out;
  }
  /// The same into `outputs`, which a loop keeps from call to call: its last results are
  /// given back first (so that a graph function's output tensors serve again where the
  /// caller kept no other reference to them) and its capacity is reused, so that such a
  /// loop allocates nothing. `inputs` may be `outputs` itself (a result fed back).
  void run(std::string_view name, std::span<const ndarray> inputs, std::vector<ndarray>& outputs) {
    std::vector<ndarray> fed_back;  // the inputs, where they lie in `outputs`: kept alive through the call
    const std::less<const ndarray*> before;  // a total order over unrelated pointers too
    if (!inputs.empty() && !outputs.empty() && !before(inputs.data(), outputs.data()) && before(inputs.data(), outputs.data() + outputs.size()))
      fed_back = std::move(outputs);
    outputs.clear();
    run_into(name, inputs, outputs);
  }
  void run(std::string_view name, std::initializer_list<ndarray> inputs, std::vector<ndarray>& outputs) {
    run(name, std::span<const ndarray>(inputs.begin(), inputs.size()), outputs);
  }
  std::vector<ndarray> run(std::string_view name, std::initializer_list<ndarray> inputs) {
    return run(name, std::span<const ndarray>(inputs.begin(), inputs.size()));
  }

  /// TVM's stateful calling convention: set_input, invoke_stateful, get_outputs.
  void set_input(std::string_view name, std::vector<vm_value> args) {
    const std::size_t n = exe_.input_names(name).size();
    if (args.size() != n)
      throw error(errc::invalid_argument, "function \"" + std::string(name) + "\" takes " + std::to_string(n) + " arguments, got " + std::to_string(args.size()));
    auto& st = stateful(name);
    st.inputs = std::move(args);
    st.set = true;
  }
  void invoke_stateful(std::string_view name) {
    auto& st = stateful(name);
    if (!st.set) throw error(errc::invalid_argument, "function \"" + std::string(name) + "\": set_input was not called");
    st.outputs = invoke(name, st.inputs);
  }
  [[nodiscard]] const vm_value& get_outputs(std::string_view name) { return stateful(name).outputs; }

  static void flatten(const vm_value& v, std::vector<ndarray>& out) {
    if (const auto* t = v.get_if<ndarray>()) {
      out.push_back(*t);
    } else if (const auto* tup = v.get_if<vm_tuple>(); tup && *tup) {
      for (const vm_value& x : **tup) flatten(x, out);
    } else {
      throw error(errc::unsupported, std::string("an output that is a ") + kind_name(v) + ", not a tensor (read it with invoke())");
    }
  }

 private:
  struct stateful_call {
    std::string name;
    std::vector<vm_value> inputs;
    vm_value outputs;
    bool set = false;
  };
  stateful_call& stateful(std::string_view name) {
    for (stateful_call& c : stateful_)
      if (c.name == name) return c;
    stateful_.push_back({std::string(name), {}, {}, false});
    return stateful_.back();
  }

  static constexpr int max_depth = 256;

  /// run()'s work: the result appended to `outputs` (empty).
  void run_into(std::string_view name, std::span<const ndarray> inputs, std::vector<ndarray>& outputs) {
    const executable::state& s = exe_.require();
    const std::size_t fi = lookup(name);
    if (graph_runner* r = runner(s, fi); r && r->plain_dtypes) {
      run_runner(s.code.functions[fi], *r, inputs);
      outputs.reserve(r->flat.size());
      for (int k : r->flat) outputs.push_back(r->outputs[static_cast<std::size_t>(k)]);
      return;
    }
    std::vector<vm_value> args(inputs.begin(), inputs.end());
    flatten(invoke(name, args), outputs);
  }

  /// A function that is a graph: its arguments checked as TVM's checks would, set as
  /// the executor's inputs, run, and its outputs copied out (a call's results are its
  /// own, as TVM's VM returns them).
  /// A function run as a graph: its executor, where each argument goes, and the tensors
  /// its outputs were last copied into.
  struct graph_runner {
    const graph_program& program;
    gexec::model::executor executor;
    std::vector<int> input_index;
    std::vector<ndarray> outputs;
    bool plain_dtypes = true;  ///< no input or output whose dtype gexec names otherwise (bool, float8)
    /// The host memory each input is read from and each output written to, once a call
    /// has set them through the executor (its storage is then the executor's own and its
    /// plan static): later calls copy in and out there directly, after the argument checks
    /// TVM makes, without the executor's per-call entry checks. Empty until the first
    /// call, where an entry is not on the host, and for good once the executor is handed
    /// out (graph_executor()).
    std::vector<void*> direct;
    std::vector<std::size_t> direct_bytes;  ///< each direct entry's size (the shapes are static and checked)
    bool exposed = false;
    std::vector<int> flat;  ///< the outputs in the order run() returns them (the result tree's leaves, depth first)
  };

  graph_runner* runner(const executable::state& s, std::size_t fi) {
    const graph_program* g = s.graphs[fi].get();
    if (!g) return nullptr;
    std::unique_ptr<graph_runner>& r = runners_[fi];
    if (!r) {
      r = std::make_unique<graph_runner>(graph_runner{*g, g->model.instantiate(), {}, {}, true, {}, {}, false, {}});
      for (std::size_t i = 0; i < g->function.inputs.size(); ++i) {
        r->input_index.push_back(r->executor.get_input_index(g->function.inputs[i]));
        r->plain_dtypes = r->plain_dtypes && same_dtype(from_vm_dtype(g->function.input_dtypes[i]), g->function.input_dtypes[i]);
      }
      for (const tensor_info& o : r->executor.get_output_info())
        r->plain_dtypes = r->plain_dtypes && same_dtype(from_vm_dtype(o.dtype), o.dtype);
      r->outputs.resize(static_cast<std::size_t>(r->executor.get_num_outputs()));
      leaves(g->function.result, r->flat);
    }
    return r.get();
  }

  /// a == b, for the few items of a shape or a function's name: a loop, where
  /// std::equal calls memcmp.
  template <class T>
  static bool same_items(std::span<const T> a, std::span<const T> b) noexcept {
    if (a.size() != b.size()) return false;
    for (std::size_t k = 0; k < a.size(); ++k)
      if (a[k] != b[k]) return false;
    return true;
  }

  /// The index of function `name`, the last one asked for remembered.
  std::size_t lookup(std::string_view name) {
    if (last_index_ != no_index && same_items<char>(name, last_name_)) return last_index_;
    last_index_ = exe_.index_of(name);
    last_name_ = name;
    return last_index_;
  }

  /// Argument `i`'s tensor, checked as TVM's checks would.
  static void check_argument(const vm_function& f, const graph_program& g, std::size_t i, const ndarray& t) {
    if (t.defined() && same_dtype(t.dtype(), g.function.input_dtypes[i]) && same_items<std::int64_t>(g.function.input_shapes[i], t.shape())) [[likely]]
      return;
    refuse_argument(f, g, i, t);
  }
  /// check_argument's refusal, out of the call's way.
  [[gnu::noinline, gnu::cold]] static void refuse_argument(const vm_function& f, const graph_program& g, std::size_t i, const ndarray& t) {
    auto at = [&] { return "function \"" + f.name + "\", argument " + std::to_string(i) + " (\"" + g.function.inputs[i] + "\")"; };
    if (!t.defined()) throw error(errc::invalid_argument, at() + ": expect a Tensor but get an empty ndarray");
    const DLDataType want = g.function.input_dtypes[i];
    if (!same_dtype(t.dtype(), want))
      throw error(errc::dtype_mismatch, at() + ": expect Tensor with dtype " + vm_dtype_name(want) + " but get " + vm_dtype_name(t.dtype()));
    const std::vector<std::int64_t>& shape = g.function.input_shapes[i];
    if (!std::equal(shape.begin(), shape.end(), t.shape().begin(), t.shape().end()))
      throw error(errc::shape_mismatch, at() + ": expect Tensor with shape " + gexec::detail::shape_to_string(shape) + " but get " +
                                            gexec::detail::shape_to_string(t.shape()));
  }

  [[gnu::noinline, gnu::cold]] static void refuse_count(const vm_function& f, const graph_program& g, std::size_t given) {
    std::string names;
    for (const std::string& n : g.function.inputs) names += (names.empty() ? "" : ", ") + n;
    throw error(errc::invalid_argument, "function \"" + f.name + "\" takes " + std::to_string(g.function.inputs.size()) + " arguments (" + names +
                                            "), got " + std::to_string(given) +
                                            (g.function.inputs.size() < f.param_names.size() ? " (the others are weights bound when it was loaded)" : ""));
  }

  /// Runs a graph function over `inputs` (already in the executable's dtypes) and
  /// copies its outputs into r.outputs, reusing each tensor nobody else holds.
  void run_runner(const vm_function& f, graph_runner& r, std::span<const ndarray> inputs) {
    const graph_program& g = r.program;
    if (inputs.size() != g.function.inputs.size()) [[unlikely]]
      refuse_count(f, g, inputs.size());
    const bool direct = !r.direct.empty();
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const ndarray& t = inputs[i];
      check_argument(f, g, i, t);
      if (direct && t.device().device_type == kDLCPU && t.is_contiguous())
        std::memcpy(r.direct[i], t.data(), r.direct_bytes[i]);
      else
        r.executor.set_input(r.input_index[i], t);
    }
    r.executor.run();
    for (std::size_t k = 0; k < r.outputs.size(); ++k) {
      ndarray& o = r.outputs[k];
      if (!o.defined() || o.use_count() != 1) {
        const tensor_info info = r.executor.get_output_info()[k];
        o = ndarray::empty(info.shape, info.dtype);
      }
      if (direct)
        std::memcpy(o.data(), r.direct[inputs.size() + k], r.direct_bytes[inputs.size() + k]);
      else
        r.executor.copy_output_to(static_cast<int>(k), o);
    }
    if (!direct && !r.exposed) remember_direct(r);
  }

  /// After a call that went through the executor: where its inputs and outputs lie, if
  /// every one is in host memory the executor owns.
  static void remember_direct(graph_runner& r) {
    std::vector<void*> at;
    std::vector<std::size_t> bytes;
    auto add = [&](const ndarray& v) {
      if (v.device().device_type != kDLCPU) return false;
      at.push_back(v.data());
      bytes.push_back(static_cast<std::size_t>(v.byte_size()));
      return true;
    };
    for (int index : r.input_index)
      if (!add(r.executor.get_input(index))) return;
    for (std::size_t k = 0; k < r.outputs.size(); ++k)
      if (!add(r.executor.get_output(static_cast<int>(k)))) return;
    r.direct = std::move(at);
    r.direct_bytes = std::move(bytes);
  }

  static void leaves(const output_tree& t, std::vector<int>& out) {
    if (t.leaf >= 0) out.push_back(t.leaf);
    for (const output_tree& x : t.items) leaves(x, out);
  }

  /// A graph function called with VM values (invoke): its result built as TVM returns it.
  vm_value run_graph(const vm_function& f, const graph_program& g, std::span<const vm_value> args) {
    graph_runner& r = *runner(exe_.require(), exe_.index_of(f.name));
    std::vector<ndarray> inputs;
    inputs.reserve(args.size());
    for (std::size_t i = 0; i < args.size(); ++i) {
      const auto* t = args[i].get_if<ndarray>();
      if (!t || !t->defined())
        throw error(errc::invalid_argument, "function \"" + f.name + "\", argument " + std::to_string(i) + " (\"" + g.function.inputs[i] +
                                                "\"): expect a Tensor but get " + kind_name(args[i]));
      inputs.push_back(*t);
    }
    run_runner(f, r, inputs);
    // Results handed out by invoke are the caller's own: never reused.
    std::vector<ndarray> outs = std::move(r.outputs);
    r.outputs.assign(outs.size(), ndarray());
    return build_result(g.function.result, outs);
  }

  static vm_value build_result(const output_tree& t, const std::vector<ndarray>& outs) {
    if (t.leaf >= 0) return outs[static_cast<std::size_t>(t.leaf)];
    auto items = std::make_shared<std::vector<vm_value>>();
    for (const output_tree& x : t.items) items->push_back(build_result(x, outs));
    return vm_tuple(std::move(items));
  }

  /// `x` with its tensors' dtypes mapped by `map` (views, where a dtype changes).
  static vm_value translate(const vm_value& x, DLDataType (*map)(DLDataType) noexcept) {
    if (const auto* t = x.get_if<ndarray>(); t && t->defined()) {
      const DLDataType to = map(t->dtype());
      if (same_dtype(to, t->dtype())) return x;
      DLTensor d = t->dltensor();
      d.dtype = to;
      return ndarray::view(d, t->storage_owner());
    }
    if (const auto* tup = x.get_if<vm_tuple>(); tup && *tup) {
      auto items = std::make_shared<std::vector<vm_value>>();
      for (const vm_value& v : **tup) items->push_back(translate(v, map));
      return vm_tuple(std::move(items));
    }
    return x;
  }

  /// One call's frame: its registers and the scratch its instructions' arguments use.
  /// Frames are kept per depth and reused, so a run allocates none once warm.
  struct frame {
    std::vector<vm_value> regs;
    std::vector<vm_value> immediates;
    std::vector<const vm_value*> args;
  };

  vm_value call_function(const executable::state& s, std::size_t fi, std::span<const vm_value> args, int depth) {
    const vm_function& f = s.code.functions[fi];
    if (static_cast<std::int64_t>(args.size()) != f.num_args)
      throw error(errc::invalid_argument, "function \"" + f.name + "\" takes " + std::to_string(f.num_args) + " arguments (" + join(f.param_names) +
                                              "), got " + std::to_string(args.size()));
    if (depth > max_depth) throw error(errc::unsupported, "calls nested deeper than " + std::to_string(max_depth) + " in \"" + f.name + "\"");
    while (frames_.size() <= static_cast<std::size_t>(depth)) frames_.emplace_back();
    frame& fr = frames_[static_cast<std::size_t>(depth)];
    std::vector<vm_value>& regs = fr.regs;
    regs.resize(static_cast<std::size_t>(f.register_file_size));
    // Registers hold nothing once the call is over (tensors released, storage reusable).
    struct clear_on_exit {
      std::vector<vm_value>& r;
      ~clear_on_exit() {
        for (vm_value& x : r) x = vm_value{};
      }
    } clear{regs};
    std::copy(args.begin(), args.end(), regs.begin());
    static const vm_value nothing{};
    std::int64_t pc = f.start_instr;
    for (;;) {
      const vm_instruction& in = s.code.code[static_cast<std::size_t>(pc)];
      switch (in.op) {
        case opcode::call: {
          const std::span<const vm_arg> code_args = s.code.args_of(in);
          fr.immediates.resize(code_args.size());
          fr.args.resize(code_args.size());
          for (std::size_t k = 0; k < code_args.size(); ++k) {
            const vm_arg& a = code_args[k];
            switch (a.kind) {
              case arg_kind::reg:
                fr.args[k] = (a.value == void_register || a.value == vm_register) ? &nothing : &regs[static_cast<std::size_t>(a.value)];
                break;
              case arg_kind::immediate:
                fr.immediates[k] = a.value;
                fr.args[k] = &fr.immediates[k];
                break;
              case arg_kind::constant: fr.args[k] = &s.constants[static_cast<std::size_t>(a.value)]; break;
              case arg_kind::function:
                fr.immediates[k] = function_ref{a.value};
                fr.args[k] = &fr.immediates[k];
                break;
            }
          }
          vm_value result = call(s, f, pc, in, fr.args, depth);
          if (in.reg != void_register && in.reg != vm_register) regs[static_cast<std::size_t>(in.reg)] = std::move(result);
          ++pc;
          break;
        }
        case opcode::ret: return regs[static_cast<std::size_t>(in.reg)];
        case opcode::go_to: pc += in.index; break;
        case opcode::if_false: {
          const vm_value& c = regs[static_cast<std::size_t>(in.reg)];
          bool taken;
          if (const auto* b = c.get_if<bool>()) taken = *b;
          else if (const auto* i = c.get_if<std::int64_t>()) taken = *i != 0;
          else throw error(errc::invalid_argument, at(f, pc) + ": an If condition that is a " + kind_name(c));
          pc += taken ? 1 : in.index;
          break;
        }
      }
    }
  }

  vm_value call(const executable::state& s, const vm_function& f, std::int64_t pc, const vm_instruction& in, std::span<const vm_value* const> args,
                int depth) {
    const callee& c = s.callees[static_cast<std::size_t>(in.index)];
    switch (c.what) {
      case callee::kind::builtin:
        try {
          return c.fn(builtin_call{args, &storage_[static_cast<std::size_t>(pc)]});
        } catch (const error& e) {
          throw error(e.code(), at(f, pc) + " (" + s.code.functions[static_cast<std::size_t>(in.index)].name + "): " + std::string(e.message()));
        }
      case callee::kind::function: {
        std::vector<vm_value> values;
        values.reserve(args.size());
        for (const vm_value* x : args) values.push_back(*x);
        return call_function(s, static_cast<std::size_t>(c.index), values, depth + 1);
      }
      case callee::kind::kernel: return call_kernel(c.kernel, f, pc, s.code.functions[static_cast<std::size_t>(in.index)].name, args);
    }
    return {};
  }

  vm_value call_kernel(void* kernel, const vm_function& f, std::int64_t pc, const std::string& name, std::span<const vm_value* const> args) {
    ffi_args_.resize(args.size());
    for (std::size_t i = 0; i < args.size(); ++i) {
      TVMFFIAny& a = ffi_args_[i];
      a.zero_padding = 0;
      a.v_uint64 = 0;
      const vm_value& x = *args[i];
      if (const auto* t = x.get_if<ndarray>()) {
        a.type_index = ffi_dltensor_ptr;
        a.v_ptr = const_cast<DLTensor*>(&t->dltensor());
      } else if (const auto* n = x.get_if<std::int64_t>()) {
        a.type_index = ffi_int;
        a.v_int64 = *n;
      } else if (const auto* d = x.get_if<double>()) {
        a.type_index = ffi_float;
        a.v_float64 = *d;
      } else if (const auto* b = x.get_if<bool>()) {
        a.type_index = ffi_bool;
        a.v_int64 = *b ? 1 : 0;
      } else if (x.is_none()) {
        a.type_index = ffi_none;
      } else if (const auto* dt = x.get_if<DLDataType>()) {
        a.type_index = ffi_dtype;
        a.v_dtype = *dt;
      } else if (const auto* str = x.get_if<std::string>()) {
        a.type_index = ffi_raw_str;
        a.v_c_str = str->c_str();
      } else {
        throw error(errc::unsupported, at(f, pc) + " (" + name + "): argument " + std::to_string(i) + " is a " + kind_name(x) +
                                           "; gexec passes tensors and scalars to kernels");
      }
    }
    TVMFFIAny result;
    result.type_index = ffi_none;
    result.zero_padding = 0;
    result.v_int64 = 0;
    int rc = 0;
    {  // the kernel's parallel loops and lookups by name go to the executable's runtime
      const gexec::detail::context_scope scope(&context_);
      rc = gexec::detail::call_ffi_kernel(kernel, ffi_args_.data(), static_cast<int>(ffi_args_.size()), &result);
    }
    if (rc != 0) throw error(errc::kernel_failed, at(f, pc) + ": kernel \"" + name + "\" failed: " + gexec::detail::take_last_error());
    switch (result.type_index) {
      case ffi_none: return {};
      case ffi_int: return result.v_int64;
      case ffi_bool: return result.v_int64 != 0;
      case ffi_float: return result.v_float64;
      default:
        throw error(errc::unsupported, at(f, pc) + ": kernel \"" + name + "\" returned a value of TVM-FFI type " + std::to_string(result.type_index));
    }
  }

  static std::string at(const vm_function& f, std::int64_t pc) { return "function \"" + f.name + "\", instruction " + std::to_string(pc); }
  static std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
  }

  executable exe_;
  gexec::detail::run_context context_;  ///< this machine's copy of the executable's (the hooks take it mutable)
  std::vector<std::shared_ptr<vm_storage>> storage_;  ///< per instruction: what alloc_storage made there
  std::vector<TVMFFIAny> ffi_args_;
  std::vector<stateful_call> stateful_;
  std::vector<std::unique_ptr<graph_runner>> runners_;  ///< per function run as a graph
  std::deque<frame> frames_;                            ///< per call depth (a deque: deeper frames never move shallower ones)
  static constexpr std::size_t no_index = static_cast<std::size_t>(-1);
  std::size_t last_index_ = no_index;
  std::string last_name_;
};

}  // namespace relax

GEXEC_NAMESPACE_END
