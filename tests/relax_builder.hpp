#pragma once
// Relax VM executables written by hand, laid out as TVM's ExecBuilder lays them out
// (test_relax.cpp, test_system_module.cpp).

#include <gexec/dtype.hpp>
#include <gexec/relax/executable.hpp>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace relax_test {

namespace rx = gexec::relax;

inline rx::vm_arg reg(std::int64_t r) { return {rx::arg_kind::reg, r}; }
inline rx::vm_arg imm(std::int64_t v) { return {rx::arg_kind::immediate, v}; }
inline rx::vm_arg con(std::int64_t c) { return {rx::arg_kind::constant, c}; }
const rx::vm_arg vm_ctx{rx::arg_kind::reg, rx::vm_register};
const rx::vm_arg none{rx::arg_kind::reg, rx::void_register};

/// Builds an executable the way TVM's ExecBuilder lays one out: functions, constants,
/// and the code as instruction offsets and words.
struct builder {
  rx::vm_executable ex;

  std::int64_t packed(const std::string& name) {
    if (const auto i = ex.find_function(name); i >= 0) return i;
    ex.functions.push_back({rx::function_kind::packed, name, 0, 0, -2, 0, {}});
    return static_cast<std::int64_t>(ex.functions.size() - 1);
  }
  std::int64_t constant(rx::vm_constant c) {
    ex.constants.push_back(std::move(c));
    return static_cast<std::int64_t>(ex.constants.size() - 1);
  }
  /// Starts VM function `name`; end() closes it.
  std::size_t begin(const std::string& name, std::vector<std::string> params, std::int64_t registers) {
    const auto n = static_cast<std::int64_t>(params.size());
    ex.functions.push_back({rx::function_kind::vm, name, pc(), 0, n, registers, std::move(params)});
    return ex.functions.size() - 1;
  }
  void end(std::size_t f) { ex.functions[f].end_instr = pc(); }
  [[nodiscard]] std::int64_t pc() const { return static_cast<std::int64_t>(ex.instr_offset.size()); }

  void emit(std::initializer_list<std::int64_t> words) {
    ex.instr_offset.push_back(static_cast<std::int64_t>(ex.instr_data.size()));
    ex.instr_data.insert(ex.instr_data.end(), words.begin(), words.end());
  }
  void call(const std::string& fn, std::vector<rx::vm_arg> args, std::int64_t dst = rx::void_register) {
    const std::int64_t f = packed(fn);
    ex.instr_offset.push_back(static_cast<std::int64_t>(ex.instr_data.size()));
    ex.instr_data.insert(ex.instr_data.end(), {1, dst, f, static_cast<std::int64_t>(args.size())});
    for (const rx::vm_arg& a : args) ex.instr_data.push_back(a.encode());
  }
  void call_index(std::int64_t f, std::vector<rx::vm_arg> args, std::int64_t dst) {
    ex.instr_offset.push_back(static_cast<std::int64_t>(ex.instr_data.size()));
    ex.instr_data.insert(ex.instr_data.end(), {1, dst, f, static_cast<std::int64_t>(args.size())});
    for (const rx::vm_arg& a : args) ex.instr_data.push_back(a.encode());
  }
  void ret(std::int64_t r) { emit({2, r}); }
  void go_to(std::int64_t offset) { emit({3, offset}); }
  void if_false(std::int64_t cond, std::int64_t offset) { emit({4, cond, offset}); }

  [[nodiscard]] std::vector<std::byte> bytes() const { return rx::write_vm_executable(ex); }
  /// Written and read back, as a file would be.
  [[nodiscard]] rx::vm_executable parsed() const { return rx::parse_vm_executable(bytes()); }
};

/// main(x: float32[4]) -> (reshape(x + 1, [2, 2]), x), every shape a constant (so it runs
/// as a graph), over the test kernel ffi_add_one; as relax.build lays out such a function.
inline void add_one_main(builder& b) {
  const auto f32 = b.constant(gexec::dtypes::float32);
  const auto ctx = b.constant(std::string("ErrorContext(fn=main, loc=param[0], param=x) "));
  const auto bytes = b.constant(rx::vm_shape{{16}});
  const auto u8 = b.constant(gexec::dtypes::uint8);
  const auto four = b.constant(rx::vm_shape{{4}});
  const auto two_by_two = b.constant(rx::vm_shape{{2, 2}});
  const auto fn = b.begin("main", {"x"}, 6);
  b.call("vm.builtin.check_tensor_info", {reg(0), imm(1), con(f32), con(ctx)});
  b.call("vm.builtin.match_shape", {reg(0), none, imm(1), imm(0), imm(4), con(ctx)});
  b.call("vm.builtin.alloc_storage", {vm_ctx, con(bytes), imm(0), con(u8), none}, 1);
  b.call("vm.builtin.alloc_tensor", {reg(1), imm(0), con(four), con(f32)}, 2);
  b.call("vm.builtin.null_value", {}, 1);
  b.call("ffi_add_one", {reg(0), reg(2)});
  b.call("vm.builtin.reshape", {reg(2), con(two_by_two)}, 3);
  b.call("vm.builtin.make_tuple", {reg(3), reg(0)}, 4);
  b.ret(4);
  b.end(fn);
}

}  // namespace relax_test
