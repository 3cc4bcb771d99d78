#pragma once
// Relax VM executables written by hand, laid out as TVM's ExecBuilder lays them out
// (test_relax.cpp, test_system_module.cpp).

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

}  // namespace relax_test
