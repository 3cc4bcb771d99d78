#pragma once
// A Relax VM executable's function that gexec interprets (control flow, shapes known only
// at run time) as a served model: its inputs' dtypes, ranks and dimensions read from the
// checks its bytecode makes of its arguments (vm.builtin.check_tensor_info and
// match_shape: a dimension matched against a constant is fixed, any other is -1), and its
// outputs learnt by running it once at load on zero-filled inputs (symbolic dimensions 1,
// then 2: a dimension that follows them is -1). A function whose arguments are not all
// tensors of a checked dtype and rank is refused with the argument named.

#include <gexec/relax.hpp>

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "model_config.hpp"

namespace gexec_triton {

/// What an interpreted function is served as, shared by the model's instances.
struct relax_interpreted {
  gexec::relax::executable exe;
  std::string function;
  std::vector<model_tensor> inputs, outputs;  ///< dims -1 where known only at run time
};

namespace detail {

inline std::optional<std::int64_t> vm_integer(const gexec::relax::vm_executable& ex, const gexec::relax::vm_arg& a) {
  if (a.kind == gexec::relax::arg_kind::immediate) return a.value;
  if (a.kind == gexec::relax::arg_kind::constant && a.value >= 0 && static_cast<std::size_t>(a.value) < ex.constants.size())
    if (const auto* i = std::get_if<std::int64_t>(&ex.constants[static_cast<std::size_t>(a.value)])) return *i;
  return std::nullopt;
}

}  // namespace detail

/// The tensors function `function` takes from callers (those no weight is bound to), as
/// its bytecode checks them on entry.
inline std::vector<model_tensor> interpreted_inputs(const gexec::relax::executable& exe, const std::string& function) {
  namespace r = gexec::relax;
  const r::vm_executable& ex = exe.code();
  const r::vm_function& f = exe.function(function);
  struct seen {
    std::optional<std::int64_t> ndim;
    std::optional<DLDataType> dtype;
    std::optional<std::vector<std::int64_t>> dims;
    bool written = false;
  };
  std::vector<seen> args(static_cast<std::size_t>(f.num_args));
  for (std::int64_t pc = f.start_instr; pc < f.end_instr; ++pc) {
    const r::vm_instruction& in = ex.code[static_cast<std::size_t>(pc)];
    if (in.op != r::opcode::call) continue;
    const std::span<const r::vm_arg> a = ex.args_of(in);
    const std::string& callee = ex.functions[static_cast<std::size_t>(in.index)].name;
    if (!a.empty() && a[0].kind == r::arg_kind::reg && a[0].value >= 0 && a[0].value < f.num_args && !args[static_cast<std::size_t>(a[0].value)].written) {
      seen& s = args[static_cast<std::size_t>(a[0].value)];
      if (callee == "vm.builtin.check_tensor_info" && a.size() >= 3 && !s.ndim) {
        s.ndim = detail::vm_integer(ex, a[1]);
        if (a.size() == 4 && a[2].kind == r::arg_kind::constant)
          if (const auto* t = std::get_if<DLDataType>(&ex.constants[static_cast<std::size_t>(a[2].value)])) s.dtype = r::from_vm_dtype(*t);
      } else if (callee == "vm.builtin.match_shape" && a.size() >= 3 && !s.dims) {
        const auto n = detail::vm_integer(ex, a[2]);
        if (n && *n >= 0 && a.size() >= static_cast<std::size_t>(3 + 2 * *n)) {
          std::vector<std::int64_t> dims;
          for (std::int64_t k = 0; k < *n; ++k) {
            const auto code = detail::vm_integer(ex, a[static_cast<std::size_t>(3 + 2 * k)]);
            const auto value = detail::vm_integer(ex, a[static_cast<std::size_t>(4 + 2 * k)]);
            dims.push_back(code && value && *code == r::builtin::detail::assert_equal_to_imm ? *value : -1);
          }
          s.dims = std::move(dims);
        }
      }
    }
    if (in.reg >= 0 && in.reg < f.num_args) args[static_cast<std::size_t>(in.reg)].written = true;
  }
  std::vector<model_tensor> inputs;
  const std::vector<std::string> names = exe.input_names(function);
  for (std::size_t k = 0; k < names.size(); ++k) {
    std::size_t p = 0;
    while (p < f.param_names.size() && f.param_names[p] != names[k]) ++p;
    const seen& s = args[p];
    const std::string what = "Relax function \"" + function + "\", argument \"" + names[k] + "\"";
    if (!s.ndim || *s.ndim < 0 || !s.dtype)
      throw gexec::error(gexec::errc::unsupported, what + ": the function does not check it as a tensor of one dtype and rank "
                                                          "(vm.builtin.check_tensor_info), so Triton cannot describe it as an input");
    std::vector<std::int64_t> dims = s.dims ? *s.dims : std::vector<std::int64_t>(static_cast<std::size_t>(*s.ndim), -1);
    if (static_cast<std::int64_t>(dims.size()) != *s.ndim)
      throw gexec::error(gexec::errc::invalid_module, what + ": checked with rank " + std::to_string(*s.ndim) + " and matched against " +
                                                          std::to_string(dims.size()) + " dimensions");
    inputs.push_back({names[k], static_cast<int>(k), *s.dtype, std::move(dims)});
  }
  return inputs;
}

/// Runs the function once on zero-filled inputs whose dimensions known only at run time
/// are `symbolic`.
inline std::vector<gexec::ndarray> probe_run(gexec::relax::virtual_machine& vm, const std::string& function, const std::vector<model_tensor>& inputs,
                                             std::int64_t symbolic) {
  std::vector<gexec::ndarray> args;
  for (const model_tensor& t : inputs) {
    std::vector<std::int64_t> shape = t.shape;
    for (std::int64_t& d : shape)
      if (d < 0) d = symbolic;
    gexec::ndarray a = gexec::ndarray::empty(shape, t.dtype);
    if (a.byte_size()) std::memset(a.data(), 0, static_cast<std::size_t>(a.byte_size()));
    args.push_back(std::move(a));
  }
  return vm.run(function, args);
}

/// The function's outputs (its result flattened: a tuple's items in order), learnt by
/// running it on zero-filled inputs; errc::unsupported with the reason where that fails.
inline std::vector<model_tensor> interpreted_outputs(const gexec::relax::executable& exe, const std::string& function, const std::vector<model_tensor>& inputs) {
  bool symbolic = false;
  for (const model_tensor& t : inputs)
    for (std::int64_t d : t.shape) symbolic = symbolic || d < 0;
  gexec::relax::virtual_machine vm(exe);
  std::vector<gexec::ndarray> one, two;
  try {
    one = probe_run(vm, function, inputs, 1);
    two = symbolic ? probe_run(vm, function, inputs, 2) : one;
  } catch (const std::exception& e) {
    throw gexec::error(gexec::errc::unsupported, "Relax function \"" + function + "\" is interpreted; Triton runs it once at load on zero-filled inputs " +
                                                     "(dimensions known only at run time 1, then 2) to learn its outputs, and that run failed: " + e.what());
  }
  if (one.size() != two.size())
    throw gexec::error(gexec::errc::unsupported, "Relax function \"" + function + "\" returns " + std::to_string(one.size()) + " then " +
                                                     std::to_string(two.size()) + " tensors for two input sizes; Triton serves a fixed number of outputs");
  std::vector<model_tensor> outputs;
  for (std::size_t j = 0; j < one.size(); ++j) {
    const gexec::ndarray &a = one[j], &b = two[j];
    const std::string what = "Relax function \"" + function + "\", output " + std::to_string(j);
    if (!gexec::same_dtype(a.dtype(), b.dtype()) || a.ndim() != b.ndim())
      throw gexec::error(gexec::errc::unsupported, what + ": its dtype or rank changes with the inputs' sizes; Triton serves one of each");
    std::vector<std::int64_t> dims(a.shape().begin(), a.shape().end());
    for (std::size_t i = 0; i < dims.size(); ++i)
      if (dims[i] != b.shape()[i]) dims[i] = -1;
    outputs.push_back({"output" + std::to_string(j), static_cast<int>(j), a.dtype(), std::move(dims)});
  }
  return outputs;
}

}  // namespace gexec_triton
