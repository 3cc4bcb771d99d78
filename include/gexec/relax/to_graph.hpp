#pragma once
// The fast path for Relax functions: a VM function whose shapes are static and whose
// code is a straight line (what relax.build gives a static model after memory
// planning) is translated, when the executable is loaded, into a gexec graph: each
// kernel call a node, vm.builtin.reshape a "__nop" alias, each constant a parameter,
// each argument an input; the checks TVM emits (check_tensor_info, match_shape against
// constants) fix the inputs' dtypes and shapes, which gexec's executor checks on
// set_input. The graph then runs through gexec's own plan and loop: storage planned by
// liveness, the execution policies, observers, the profiler and per-node dumps.
//
// What the translation does not take is reported as the reason and the function runs
// in the interpreter instead (vm.hpp): If/Goto, shapes known only at run time (the shape
// heap), calls between VM functions, kernels given scalars, an argument whose shape no
// check fixes, a builtin outside the list below.
//
// Storage placement follows gexec's planner, not the executable's memory plan; the
// kernels and their arguments are the executable's, so outputs are bit-identical.

#include "../config.hpp"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "../graph/builder.hpp"
#include "../params.hpp"
#include "builtins.hpp"
#include "executable.hpp"

GEXEC_NAMESPACE_BEGIN

namespace relax {

/// Where a function's result comes from: a graph output (leaf >= 0) or a tuple of them.
struct output_tree {
  int leaf = -1;
  std::vector<output_tree> items;
};

/// A VM function as a graph.
struct graph_function {
  output_tree result;                  ///< how the graph's outputs make the function's result
  validated_graph graph;
  param_dict params;                   ///< the constants its kernels read, by input name
  std::vector<std::string> inputs;     ///< the graph input of each argument the caller passes, in order
  std::vector<DLDataType> input_dtypes;  ///< as the executable names them (to_vm_dtype)
  std::vector<std::vector<std::int64_t>> input_shapes;
};

namespace detail {

/// What the translation knows of a register.
struct tensor_slot {
  node_entry entry{};
  std::vector<std::int64_t> shape;
  DLDataType dtype{};
  bool written = false;  ///< false: alloc_tensor made it and no kernel has written it yet
};
struct arg_slot {
  std::int64_t index = 0;
};
struct shape_slot {
  std::vector<std::int64_t> dims;
};
struct tuple_slot {
  std::vector<std::size_t> items;  ///< indices into the translator's items: the states its registers had when it was made
};
struct storage_slot {};
using slot = std::variant<std::monostate, tensor_slot, arg_slot, shape_slot, tuple_slot, storage_slot>;

class graph_translator {
 public:
  graph_translator(const vm_executable& ex, const vm_function& f, const std::vector<ndarray>& bound)
      : ex_(ex), f_(f), bound_(bound), regs_(static_cast<std::size_t>(f.register_file_size)) {
    for (std::int64_t i = 0; i < f.num_args; ++i) regs_[static_cast<std::size_t>(i)] = arg_slot{i};
    args_.resize(static_cast<std::size_t>(f.num_args));
  }

  /// The graph, or the reason there is none in `why`.
  std::optional<graph_function> run(std::string& why) {
    try {
      for (std::int64_t pc = f_.start_instr; pc < f_.end_instr; ++pc)
        if (const opcode op = ex_.code[static_cast<std::size_t>(pc)].op; op == opcode::go_to || op == opcode::if_false)
          return refuse(why, "control flow (If/Goto) at instruction " + std::to_string(pc));
      // Inputs first, in argument order, once their types are known: a first pass over
      // the checks, so that every input node precedes the kernels. A bound argument
      // (a weight read from a file) is a parameter of the type its tensor has.
      for (std::int64_t pc = f_.start_instr; pc < f_.end_instr; ++pc) learn_argument_types(pc);
      for (std::size_t i = 0; i < args_.size(); ++i) {
        argument& a = args_[i];
        const std::string& name = f_.param_names[i];
        const bool bound = i < bound_.size() && bound_[i].defined();
        if (bound) {
          a.shape = std::vector<std::int64_t>(bound_[i].shape().begin(), bound_[i].shape().end());
          a.dtype = bound_[i].dtype();
        }
        if (!a.shape || !a.dtype) return refuse(why, "argument \"" + name + "\" has no static shape and dtype (no check fixes them)");
        for (std::size_t k = 0; k < i; ++k)
          if (f_.param_names[k] == name) return refuse(why, "two arguments named \"" + name + "\"");
        a.entry = b_.input(name, *a.shape, *a.dtype);
        if (bound) {
          out_.params.set(name, bound_[i]);
          continue;
        }
        out_.inputs.push_back(name);
        out_.input_dtypes.push_back(*a.dtype);
        out_.input_shapes.push_back(*a.shape);
      }
      for (std::int64_t pc = f_.start_instr; pc < f_.end_instr; ++pc) {
        const vm_instruction& in = ex_.code[static_cast<std::size_t>(pc)];
        switch (in.op) {
          case opcode::go_to:
          case opcode::if_false: return refuse(why, "control flow");
          case opcode::ret: {
            std::vector<node_entry> heads;
            if (in.reg < 0 || in.reg >= f_.register_file_size || !outputs_of(regs_[static_cast<std::size_t>(in.reg)], heads, out_.result))
              return refuse(why, "it returns something other than tensors");
            for (const node_entry& h : heads) b_.output(h);
            out_.graph = b_.build();
            return std::move(out_);
          }
          case opcode::call:
            if (std::string r = call(pc, in); !r.empty()) return refuse(why, r + " at instruction " + std::to_string(pc));
            break;
        }
      }
      return refuse(why, "no Ret");
    } catch (const error& e) {
      return refuse(why, std::string(e.message()));
    }
  }

 private:
  struct argument {
    std::optional<std::vector<std::int64_t>> shape;
    std::optional<DLDataType> dtype;
    std::optional<node_entry> entry;
  };

  std::optional<graph_function> refuse(std::string& why, std::string reason) {
    why = std::move(reason);
    return std::nullopt;
  }

  const std::string& callee_name(const vm_instruction& in) const { return ex_.functions[static_cast<std::size_t>(in.index)].name; }

  /// A constant or immediate argument's value, for the builtins read at translation.
  const vm_constant* constant(const vm_arg& a) const {
    return a.kind == arg_kind::constant ? &ex_.constants[static_cast<std::size_t>(a.value)] : nullptr;
  }
  std::optional<std::int64_t> integer(const vm_arg& a) const {
    if (a.kind == arg_kind::immediate) return a.value;
    if (const vm_constant* c = constant(a))
      if (const auto* i = std::get_if<std::int64_t>(c)) return *i;
    return std::nullopt;
  }
  std::optional<DLDataType> dtype_of(const vm_arg& a) const {
    if (const vm_constant* c = constant(a))
      if (const auto* t = std::get_if<DLDataType>(c)) return *t;
    return std::nullopt;
  }
  std::optional<std::vector<std::int64_t>> shape_of(const vm_arg& a) const {
    if (const vm_constant* c = constant(a))
      if (const auto* s = std::get_if<vm_shape>(c)) return s->dims;
    if (a.kind == arg_kind::reg && a.value >= 0 && a.value < f_.register_file_size)
      if (const auto* s = std::get_if<shape_slot>(&regs_[static_cast<std::size_t>(a.value)])) return s->dims;
    return std::nullopt;
  }
  /// The argument index a register still holds from the function's entry, or -1.
  std::int64_t argument_in(const vm_arg& a) const {
    if (a.kind != arg_kind::reg || a.value < 0 || a.value >= f_.num_args) return -1;
    return a.value;
  }

  /// check_tensor_info and match_shape on arguments: their dtype, rank and dimensions.
  /// Only registers that still hold arguments count (the first pass ignores writes, so
  /// an argument register written before its check is not trusted: see set()).
  void learn_argument_types(std::int64_t pc) {
    const vm_instruction& in = ex_.code[static_cast<std::size_t>(pc)];
    if (in.op != opcode::call) return;
    if (in.reg >= 0 && in.reg < f_.num_args) overwritten_.push_back(in.reg);
    const std::span<const vm_arg> a = ex_.args_of(in);
    if (a.empty()) return;
    const std::int64_t i = argument_in(a[0]);
    if (i < 0 || std::find(overwritten_.begin(), overwritten_.end(), i) != overwritten_.end()) return;
    argument& arg = args_[static_cast<std::size_t>(i)];
    const std::string& name = callee_name(in);
    if (name == "vm.builtin.check_tensor_info" && a.size() == 4) {
      if (auto d = dtype_of(a[2])) arg.dtype = *d;
      if (integer(a[1]) == 0) arg.shape = std::vector<std::int64_t>{};  // a scalar: no match_shape follows
    } else if (name == "vm.builtin.match_shape" && a.size() >= 3) {
      const auto n = integer(a[2]);
      if (!n || *n < 0 || a.size() != static_cast<std::size_t>(3 + 2 * *n + 1)) return;
      std::vector<std::int64_t> dims;
      for (std::int64_t k = 0; k < *n; ++k) {
        const auto code = integer(a[static_cast<std::size_t>(3 + 2 * k)]);
        const auto value = integer(a[static_cast<std::size_t>(4 + 2 * k)]);
        if (!code || !value || *code != builtin::detail::assert_equal_to_imm) return;  // a dimension known only at run time
        dims.push_back(*value);
      }
      arg.shape = std::move(dims);
    }
  }

  /// The tensor a call argument names: an argument's input, a constant made a
  /// parameter, or a tensor a kernel wrote.
  std::optional<tensor_slot> tensor(const vm_arg& a) {
    if (a.kind == arg_kind::constant) {
      const vm_constant& c = ex_.constants[static_cast<std::size_t>(a.value)];
      const auto* t = std::get_if<ndarray>(&c);
      if (!t) return std::nullopt;
      auto it = constants_.find(a.value);
      if (it == constants_.end()) {
        std::string name = "relax.const." + std::to_string(a.value);
        for (const std::string& n : f_.param_names)
          if (n == name) throw error(errc::unsupported, "an argument named like a constant (\"" + name + "\")");
        const node_entry e = b_.input(name, {t->shape().begin(), t->shape().end()}, t->dtype());
        out_.params.set(name, *t);
        it = constants_.emplace(a.value, tensor_slot{e, {t->shape().begin(), t->shape().end()}, t->dtype(), true}).first;
      }
      return it->second;
    }
    if (a.kind != arg_kind::reg || a.value < 0 || a.value >= f_.register_file_size) return std::nullopt;
    const slot& s = regs_[static_cast<std::size_t>(a.value)];
    if (const auto* t = std::get_if<tensor_slot>(&s)) return *t;
    if (const auto* g = std::get_if<arg_slot>(&s)) {
      const argument& arg = args_[static_cast<std::size_t>(g->index)];
      return tensor_slot{*arg.entry, *arg.shape, *arg.dtype, true};
    }
    return std::nullopt;
  }

  void set(std::int64_t reg, slot s) {
    if (reg == void_register || reg == vm_register) return;
    regs_[static_cast<std::size_t>(reg)] = std::move(s);
  }

  /// One Call; "" when taken, else why not.
  std::string call(std::int64_t pc, const vm_instruction& in) {
    const std::string& name = callee_name(in);
    const vm_function& target = ex_.functions[static_cast<std::size_t>(in.index)];
    const std::span<const vm_arg> a = ex_.args_of(in);
    if (target.kind != function_kind::packed) return "a call of VM function \"" + name + "\"";
    if (!name.starts_with("vm.builtin.")) return kernel(in, name, a);
    if (name == "vm.builtin.check_tensor_info" || name == "vm.builtin.match_shape") {
      // Checks of arguments became the inputs' types; checks of anything else are not
      // static facts the graph keeps.
      if (a.empty() || argument_in(a[0]) < 0) return "a check of a value other than an argument (" + name + ")";
      if (name == "vm.builtin.match_shape" && !args_[static_cast<std::size_t>(argument_in(a[0]))].shape) return "a shape known only at run time";
      return {};
    }
    if (name == "vm.builtin.alloc_shape_heap") return {};  // unused when every match is against a constant
    if (name == "vm.builtin.null_value") {
      set(in.reg, std::monostate{});
      return {};
    }
    if (name == "vm.builtin.alloc_storage") {
      set(in.reg, storage_slot{});
      return {};
    }
    if (name == "vm.builtin.alloc_tensor") {
      if (a.size() < 4) return "alloc_tensor with " + std::to_string(a.size()) + " arguments";
      auto shape = shape_of(a[2]);
      auto dtype = dtype_of(a[3]);
      if (!shape || !dtype) return "a tensor whose shape is known only at run time";
      set(in.reg, tensor_slot{{}, std::move(*shape), *dtype, false});
      return {};
    }
    if (name == "vm.builtin.make_shape") {
      if (a.size() < 2) return "make_shape with " + std::to_string(a.size()) + " arguments";
      const auto n = integer(a[1]);
      if (!n || *n < 0 || a.size() != static_cast<std::size_t>(2 + 2 * *n)) return "make_shape with a count that does not match";
      shape_slot s;
      for (std::int64_t k = 0; k < *n; ++k) {
        const auto code = integer(a[static_cast<std::size_t>(2 + 2 * k)]);
        const auto value = integer(a[static_cast<std::size_t>(3 + 2 * k)]);
        if (!code || !value || *code != builtin::detail::use_imm) return "a shape known only at run time";
        s.dims.push_back(*value);
      }
      set(in.reg, std::move(s));
      return {};
    }
    if (name == "vm.builtin.reshape") {
      if (a.size() != 2) return "reshape with " + std::to_string(a.size()) + " arguments";
      auto t = tensor(a[0]);
      auto shape = shape_of(a[1]);
      if (!t || !t->written || !shape) return "a reshape of something other than a static tensor";
      const auto n = gexec::detail::checked_numel(*shape);
      if (!n || *n != gexec::detail::checked_numel(t->shape).value_or(0)) return "a reshape that changes the element count";
      const node_entry e = b_.nop("reshape_" + std::to_string(pc), t->entry, *shape);
      set(in.reg, tensor_slot{e, std::move(*shape), t->dtype, true});
      return {};
    }
    if (name == "vm.builtin.copy" || name == "vm.builtin.ensure_zero_offset") {
      if (a.size() != 1 || a[0].kind != arg_kind::reg) return name + " of something other than a register";
      if (auto t = tensor(a[0])) set(in.reg, *t);
      else set(in.reg, regs_[static_cast<std::size_t>(a[0].value)]);
      return {};
    }
    if (name == "vm.builtin.make_tuple") {
      tuple_slot t;
      for (const vm_arg& x : a) {
        if (x.kind != arg_kind::reg || x.value < 0 || x.value >= f_.register_file_size) return "a tuple of something other than registers";
        t.items.push_back(items_.size());
        items_.push_back(regs_[static_cast<std::size_t>(x.value)]);
      }
      set(in.reg, std::move(t));
      return {};
    }
    if (name == "vm.builtin.tuple_getitem") {
      if (a.size() != 2 || a[0].kind != arg_kind::reg) return "tuple_getitem of something other than a register";
      const auto* t = std::get_if<tuple_slot>(&regs_[static_cast<std::size_t>(a[0].value)]);
      const auto k = integer(a[1]);
      if (!t || !k || *k < 0 || static_cast<std::size_t>(*k) >= t->items.size()) return "tuple_getitem of a tuple not made here";
      set(in.reg, items_[t->items[static_cast<std::size_t>(*k)]]);
      return {};
    }
    return "builtin " + name;
  }

  /// A kernel call in destination-passing style: the tensors already written are its
  /// inputs, the ones alloc_tensor made and nothing wrote yet its outputs (trailing).
  std::string kernel(const vm_instruction& in, const std::string& name, std::span<const vm_arg> a) {
    if (in.reg != void_register) return "kernel \"" + name + "\" with a result";
    std::vector<node_entry> inputs;
    std::vector<tensor_type> outputs;
    std::vector<std::int64_t> output_regs;
    for (const vm_arg& x : a) {
      auto t = tensor(x);
      if (!t) return "kernel \"" + name + "\" given something other than a tensor";
      if (t->written) {
        if (!outputs.empty()) return "kernel \"" + name + "\" with an input after its outputs";
        inputs.push_back(t->entry);
      } else {
        for (std::int64_t r : output_regs)
          if (r == x.value) return "kernel \"" + name + "\" writing one tensor twice";
        outputs.push_back({t->shape, t->dtype, 0, -1});
        output_regs.push_back(x.value);
      }
    }
    if (outputs.empty()) return "kernel \"" + name + "\" that writes no fresh tensor (in place)";
    std::string node = name;
    if (const int seen = names_[name]++; seen > 0) node += "_" + std::to_string(seen);
    const node_outputs made = b_.op(node, name, std::move(inputs), outputs);
    for (std::size_t k = 0; k < output_regs.size(); ++k) {
      tensor_slot& t = std::get<tensor_slot>(regs_[static_cast<std::size_t>(output_regs[k])]);
      t.entry = made[static_cast<std::uint32_t>(k)];
      t.written = true;
    }
    return {};
  }

  bool outputs_of(const slot& s, std::vector<node_entry>& heads, output_tree& tree) {
    if (const auto* t = std::get_if<tensor_slot>(&s)) {
      if (!t->written) return false;
      tree.leaf = static_cast<int>(heads.size());
      heads.push_back(t->entry);
      return true;
    }
    if (const auto* g = std::get_if<arg_slot>(&s)) {
      tree.leaf = static_cast<int>(heads.size());
      heads.push_back(*args_[static_cast<std::size_t>(g->index)].entry);
      return true;
    }
    if (const auto* tup = std::get_if<tuple_slot>(&s)) {
      for (std::size_t k : tup->items)
        if (!outputs_of(items_[k], heads, tree.items.emplace_back())) return false;
      return true;
    }
    return false;
  }

  const vm_executable& ex_;
  const vm_function& f_;
  const std::vector<ndarray>& bound_;
  std::vector<slot> regs_;
  std::vector<slot> items_;  ///< the items of every tuple made, in order
  std::vector<argument> args_;
  std::vector<std::int64_t> overwritten_;
  std::unordered_map<std::int64_t, tensor_slot> constants_;
  std::unordered_map<std::string, int> names_;
  graph_builder b_;
  graph_function out_;
};

}  // namespace detail

/// Function `f` of `ex` as a graph, or nullopt with the reason in `why`. `bound[i]`,
/// where defined, is the value of argument i (a weight), which the caller never passes.
inline std::optional<graph_function> to_graph(const vm_executable& ex, const vm_function& f, const std::vector<ndarray>& bound, std::string& why) {
  return detail::graph_translator(ex, f, bound).run(why);
}

}  // namespace relax

GEXEC_NAMESPACE_END
