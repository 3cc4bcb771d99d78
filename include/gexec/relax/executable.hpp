#pragma once
// A Relax VM executable, as TVM >= 0.20 deploys a model (relax.build(...).export_library):
// the module of type key "relax.VMExecutable" inside a single-file library's
// __tvm_ffi__library_bin, beside the kernels it calls. TVM's layout
// (src/runtime/vm/executable.cc, include/tvm/runtime/vm/bytecode.h), little-endian,
// strings and vectors as a u64 count and then their elements:
//
//   u64 magic        0xD225DE2F4214151D, or ...1E when a memory-scope section follows
//   string version   "0.14"
//   functions        u64 count; each: i32 kind (0 packed function, 1 VM function, 2 VM-TIR
//                    function), string name, i64 start_instr, end_instr, num_args,
//                    register_file_size, then its parameter names (a vector of strings)
//   memory scopes    (magic ...1E only) u64 count; each: i64 constant index, string scope
//   constants        u64 count; each: i32 TVM-FFI type index, then the value: 70 tensor
//                    (a tensor record as in a parameter blob), 69 shape (u64 n, n x i64),
//                    65 string (u64 n, n bytes), 1 int (i64), 3 float (f64), 5 dtype
//                    (u8 code, u8 bits, u16 lanes)
//   code             instruction offsets (vector of i64), instruction words (vector of i64)
//
// An instruction is a run of i64 words at its offset: Call (1) dst, function index,
// argument count, arguments; Ret (2) result register; Goto (3) pc offset; If (4) condition
// register, pc offset of the false branch. An argument word holds its kind in its top 8
// bits (register, immediate, constant index, function index) and a signed 56-bit value.
//
// Everything a VM function's code names is checked when it is read: offsets and counts
// against the bytes, registers against the function's register file, function and
// constant indices against their tables, jumps against the function's instructions, and
// its last instruction (Ret or Goto: code never runs off a function's end).

#include "../config.hpp"

#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "../detail/byte_io.hpp"
#include "../detail/json_path.hpp"
#include "../detail/shape.hpp"
#include "../dtype.hpp"
#include "../error.hpp"
#include "../ndarray.hpp"
#include "../params.hpp"

GEXEC_NAMESPACE_BEGIN

namespace relax {

inline constexpr std::uint64_t vm_magic = 0xD225DE2F4214151DULL;
/// The magic of executables that carry a memory-scope section.
inline constexpr std::uint64_t vm_magic_with_scopes = 0xD225DE2F4214151EULL;
/// The bytecode version every TVM from v0.19 to v0.27 writes.
inline constexpr std::string_view vm_version = "0.14";

/// Executables of TVM >= 0.21 name dtypes with DLPack 1.x's codes, where bool is code 6
/// (8 bits) and float8 e4m3fn / e5m2 are codes 10 / 12; gexec's tensors keep TVM v0.19's
/// (bool uint1, float8 e4m3 / e5m2 codes 6 / 7). The virtual machine translates tensors
/// as they enter and leave, and prints the executable's dtypes with gexec's names.
constexpr DLDataType to_vm_dtype(DLDataType t) noexcept {
  if (t.code == kDLUInt && t.bits == 1) return {dlpack_bool_code, 8, t.lanes};
  if (t.code == tvm_float8_e4m3_code && t.bits == 8) return {10, 8, t.lanes};
  if (t.code == tvm_float8_e5m2_code && t.bits == 8) return {12, 8, t.lanes};
  return t;
}
constexpr DLDataType from_vm_dtype(DLDataType t) noexcept {
  if (t.code == dlpack_bool_code && t.bits == 8) return {kDLUInt, 1, t.lanes};
  if (t.code == 10 && t.bits == 8) return {tvm_float8_e4m3_code, 8, t.lanes};
  if (t.code == 12 && t.bits == 8) return {tvm_float8_e5m2_code, 8, t.lanes};
  return t;
}
/// The dtype an executable names with DLPack 1.x's codes, in gexec's: bool (6, 8 bits),
/// float8 e4m3fn (10) and e5m2 (12) and the codes both share; anything else (DLPack's
/// other 4-, 6- and 8-bit floats, codes 7-9, 11, 13-17) becomes an invalid dtype, which
/// readers refuse, never one gexec would read as another type (its code 7 is e5m2).
constexpr DLDataType vm_dtype_in_gexec(DLDataType t) noexcept {
  if (t.code == dlpack_bool_code || t.code == 10 || t.code == 12) return t.bits == 8 ? from_vm_dtype(t) : DLDataType{255, 0, 0};
  if (t.code == kDLInt || t.code == kDLUInt || t.code == kDLFloat || t.code == kDLBfloat) return t;
  return DLDataType{255, 0, 0};
}

/// The registers every function can name besides its own: "no value" and the VM itself.
inline constexpr std::int64_t void_register = std::int64_t{1} << 54;
inline constexpr std::int64_t vm_register = void_register + 1;

enum class opcode : std::int64_t { call = 1, ret = 2, go_to = 3, if_false = 4 };
enum class arg_kind : std::uint8_t { reg = 0, immediate = 1, constant = 2, function = 3 };

/// One argument of a Call: its kind and its (sign-extended 56-bit) value.
struct vm_arg {
  arg_kind kind = arg_kind::reg;
  std::int64_t value = 0;

  static constexpr int value_bits = 56;
  [[nodiscard]] static vm_arg decode(std::int64_t word) noexcept {
    const auto u = static_cast<std::uint64_t>(word);
    const auto kind = static_cast<arg_kind>(static_cast<std::uint8_t>(u >> value_bits));
    // Sign-extend the low 56 bits.
    const auto low = u & ((std::uint64_t{1} << value_bits) - 1);
    const auto value = static_cast<std::int64_t>(low << (64 - value_bits)) >> (64 - value_bits);
    return {kind, value};
  }
  [[nodiscard]] std::int64_t encode() const noexcept {
    const auto low = static_cast<std::uint64_t>(value) & ((std::uint64_t{1} << value_bits) - 1);
    return static_cast<std::int64_t>((static_cast<std::uint64_t>(kind) << value_bits) | low);
  }
};

/// A decoded instruction. call: `reg` is the destination, `index` the function, the
/// arguments args[first_arg, first_arg + num_args); ret: `reg` is the result; go_to:
/// `index` is the pc offset; if_false: `reg` is the condition, `index` the pc offset of
/// the false branch (the true branch is the next instruction).
struct vm_instruction {
  opcode op = opcode::ret;
  std::int64_t reg = 0;
  std::int64_t index = 0;
  std::uint32_t first_arg = 0;
  std::uint32_t num_args = 0;
};

enum class function_kind : std::int32_t { packed = 0, vm = 1, vm_tir = 2 };

/// An entry of the function table: a function the code calls by name (packed: a VM
/// builtin or a kernel of the library), or one of the executable's own.
struct vm_function {
  function_kind kind = function_kind::packed;
  std::string name;
  std::int64_t start_instr = 0;  ///< VM functions: [start_instr, end_instr) of the code
  std::int64_t end_instr = 0;
  std::int64_t num_args = 0;
  std::int64_t register_file_size = 0;
  std::vector<std::string> param_names;
};

/// A shape constant (TVM's ffi.Shape), distinct from a vector of integers.
struct vm_shape {
  std::vector<std::int64_t> dims;
  friend bool operator==(const vm_shape&, const vm_shape&) = default;
};

using vm_constant = std::variant<ndarray, vm_shape, std::string, std::int64_t, double, DLDataType>;

/// TVM-FFI's type indices, as the constant section tags its entries.
namespace constant_tag {
inline constexpr std::int32_t int_ = 1;
inline constexpr std::int32_t float_ = 3;
inline constexpr std::int32_t dtype = 5;
inline constexpr std::int32_t string = 65;
inline constexpr std::int32_t shape = 69;
inline constexpr std::int32_t tensor = 70;
}  // namespace constant_tag

struct vm_executable {
  std::uint64_t magic = vm_magic_with_scopes;
  std::vector<vm_function> functions;
  std::vector<std::pair<std::int64_t, std::string>> memory_scopes;
  std::vector<vm_constant> constants;
  std::vector<std::int64_t> instr_offset;  ///< as read (what write_vm_executable writes back)
  std::vector<std::int64_t> instr_data;
  std::vector<vm_instruction> code;  ///< decoded, one per instr_offset entry
  std::vector<vm_arg> args;

  /// The index of the function named `name`, or -1.
  [[nodiscard]] std::int64_t find_function(std::string_view name) const noexcept {
    for (std::size_t i = 0; i < functions.size(); ++i)
      if (functions[i].name == name) return static_cast<std::int64_t>(i);
    return -1;
  }
  [[nodiscard]] std::span<const vm_arg> args_of(const vm_instruction& in) const noexcept {
    return std::span<const vm_arg>(args).subspan(in.first_arg, in.num_args);
  }
};

/// How a constant prints in messages: "tensor float32[2, 3]", "shape (1, 4)", ...
inline std::string describe(const vm_constant& c) {
  struct visitor {
    std::string operator()(const ndarray& a) const { return "tensor " + to_string(from_vm_dtype(a.dtype())) + detail::shape_to_string(a.shape()); }
    std::string operator()(const vm_shape& s) const { return "shape " + detail::shape_to_string(s.dims); }
    std::string operator()(const std::string& s) const { return "string \"" + detail::printable(s) + "\""; }
    std::string operator()(std::int64_t v) const { return "int " + std::to_string(v); }
    std::string operator()(double v) const { return "float " + std::to_string(v); }
    std::string operator()(DLDataType t) const { return "dtype " + to_string(from_vm_dtype(t)); }
  };
  return std::visit(visitor{}, c);
}

namespace detail {

inline std::string hex64(std::uint64_t v) {
  char hex[19];
  std::snprintf(hex, sizeof hex, "0x%016llx", static_cast<unsigned long long>(v));
  return hex;
}

inline std::vector<std::int64_t> read_i64_vector(gexec::detail::byte_reader& in, const char* field) {
  const auto n = in.read_count(field, sizeof(std::int64_t));
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = in.read<std::int64_t>(field);
  return v;
}

inline std::vector<std::string> read_strings(gexec::detail::byte_reader& in, const char* field) {
  const auto n = in.read_count(field, sizeof(std::uint64_t));
  std::vector<std::string> v;
  v.reserve(static_cast<std::size_t>(n));
  for (std::uint64_t i = 0; i < n; ++i) v.push_back(in.read_string(field));
  return v;
}

inline vm_constant read_constant(gexec::detail::byte_reader& in) {
  const auto tag = in.read<std::int32_t>("constant type");
  switch (tag) {
    case constant_tag::tensor: {
      // Read with gexec's dtype (the copy is allocated and checked as any tensor), held
      // with the executable's own, as the virtual machine passes it to kernels.
      const ndarray a = gexec::detail::read_tensor_record(in, nullptr, &vm_dtype_in_gexec);
      DLTensor t = a.dltensor();
      t.dtype = to_vm_dtype(t.dtype);
      return ndarray::view(t, a.storage_owner());
    }
    case constant_tag::shape: return vm_shape{read_i64_vector(in, "shape")};
    case constant_tag::string: {
      const auto n = in.read<std::uint64_t>("string length");
      const auto s = in.bytes(n, "string");
      return std::string(reinterpret_cast<const char*>(s.data()), s.size());
    }
    case constant_tag::int_: return in.read<std::int64_t>("int");
    case constant_tag::float_: return in.read<double>("float");
    case constant_tag::dtype: {
      DLDataType t{};
      t.code = in.read<std::uint8_t>("dtype code");
      t.bits = in.read<std::uint8_t>("dtype bits");
      t.lanes = in.read<std::uint16_t>("dtype lanes");
      return t;
    }
    default:
      in.fail("constant type " + std::to_string(tag) +
              " (a constant pool holds tensors (70), shapes (69), strings (65), ints (1), floats (3) and dtypes (5))");
  }
}

/// Decodes instruction `i` at instr_offset[i], checking that its words are there.
inline void decode_instruction(gexec::detail::byte_reader& in, vm_executable& ex, std::size_t i) {
  const std::int64_t at = ex.instr_offset[i];
  const auto words = static_cast<std::int64_t>(ex.instr_data.size());
  const std::string where = "instruction " + std::to_string(i) + " (word " + std::to_string(at) + ")";
  auto word = [&](std::int64_t k) -> std::int64_t {
    if (k >= words - at) in.fail(where + " runs past the " + std::to_string(words) + " instruction words");
    return ex.instr_data[static_cast<std::size_t>(at + k)];
  };
  if (at < 0 || at >= words) in.fail(where + ": offset outside the " + std::to_string(words) + " instruction words");
  vm_instruction out;
  switch (const std::int64_t op = word(0)) {
    case static_cast<std::int64_t>(opcode::call): {
      out.op = opcode::call;
      out.reg = word(1);
      out.index = word(2);
      const std::int64_t n = word(3);
      if (n < 0 || n > words - at - 4) in.fail(where + ": " + std::to_string(n) + " arguments run past the instruction words");
      if (n > 0) (void)word(3 + n);
      out.first_arg = static_cast<std::uint32_t>(ex.args.size());
      out.num_args = static_cast<std::uint32_t>(n);
      for (std::int64_t k = 0; k < n; ++k) {
        const vm_arg a = vm_arg::decode(word(4 + k));
        if (static_cast<std::uint8_t>(a.kind) > static_cast<std::uint8_t>(arg_kind::function))
          in.fail(where + ": argument " + std::to_string(k) + " has kind " + std::to_string(static_cast<int>(a.kind)));
        ex.args.push_back(a);
      }
      break;
    }
    case static_cast<std::int64_t>(opcode::ret):
      out.op = opcode::ret;
      out.reg = word(1);
      break;
    case static_cast<std::int64_t>(opcode::go_to):
      out.op = opcode::go_to;
      out.index = word(1);
      break;
    case static_cast<std::int64_t>(opcode::if_false):
      out.op = opcode::if_false;
      out.reg = word(1);
      out.index = word(2);
      break;
    default: in.fail(where + ": opcode " + std::to_string(op) + " (the VM has Call 1, Ret 2, Goto 3, If 4)");
  }
  ex.code.push_back(out);
}

/// Checks what VM function `f` (index `fi`) names: its code range, registers, the
/// functions and constants its calls name, its jumps, and that it ends in Ret or Goto.
inline void check_vm_function(const gexec::detail::byte_reader& in, const vm_executable& ex, std::size_t fi) {
  const vm_function& f = ex.functions[fi];
  const std::string name = "function \"" + gexec::detail::printable(f.name) + "\"";
  const auto n_code = static_cast<std::int64_t>(ex.code.size());
  if (f.start_instr < 0 || f.start_instr >= f.end_instr || f.end_instr > n_code)
    in.fail(name + ": instructions [" + std::to_string(f.start_instr) + ", " + std::to_string(f.end_instr) + ") are not within the " +
            std::to_string(n_code) + " instructions");
  if (f.num_args < 0 || f.register_file_size < f.num_args)
    in.fail(name + ": " + std::to_string(f.num_args) + " arguments and " + std::to_string(f.register_file_size) + " registers");
  // Registers are allocated per call: a file larger than its code could name is a lie.
  if (f.register_file_size > (std::int64_t{1} << 24))
    in.fail(name + ": " + std::to_string(f.register_file_size) + " registers (gexec's limit is 2^24)");
  if (static_cast<std::int64_t>(f.param_names.size()) != f.num_args)
    in.fail(name + ": " + std::to_string(f.param_names.size()) + " parameter names for " + std::to_string(f.num_args) + " arguments");
  auto check_reg = [&](std::int64_t r, const std::string& where, bool special_ok) {
    if (r >= 0 && r < f.register_file_size) return;
    if (special_ok && (r == void_register || r == vm_register)) return;
    in.fail(name + ", " + where + ": register " + std::to_string(r) + " outside its " + std::to_string(f.register_file_size) + " registers");
  };
  for (std::int64_t pc = f.start_instr; pc < f.end_instr; ++pc) {
    const vm_instruction& ins = ex.code[static_cast<std::size_t>(pc)];
    const std::string where = "instruction " + std::to_string(pc);
    switch (ins.op) {
      case opcode::call: {
        check_reg(ins.reg, where + " (destination)", true);
        if (ins.index < 0 || static_cast<std::size_t>(ins.index) >= ex.functions.size())
          in.fail(name + ", " + where + ": calls function " + std::to_string(ins.index) + " of " + std::to_string(ex.functions.size()));
        std::size_t k = 0;
        for (const vm_arg& a : ex.args_of(ins)) {
          const std::string arg = where + " argument " + std::to_string(k++);
          switch (a.kind) {
            case arg_kind::reg: check_reg(a.value, arg, true); break;
            case arg_kind::immediate: break;
            case arg_kind::constant:
              if (a.value < 0 || static_cast<std::size_t>(a.value) >= ex.constants.size())
                in.fail(name + ", " + arg + ": constant " + std::to_string(a.value) + " of " + std::to_string(ex.constants.size()));
              break;
            case arg_kind::function:
              if (a.value < 0 || static_cast<std::size_t>(a.value) >= ex.functions.size())
                in.fail(name + ", " + arg + ": function " + std::to_string(a.value) + " of " + std::to_string(ex.functions.size()));
              break;
          }
        }
        break;
      }
      case opcode::ret: check_reg(ins.reg, where + " (result)", false); break;
      case opcode::if_false: check_reg(ins.reg, where + " (condition)", false); [[fallthrough]];
      case opcode::go_to: {
        // Offsets are relative; the target must be an instruction of this function.
        const std::int64_t target = pc + ins.index;
        if (ins.index == 0 && ins.op == opcode::go_to) in.fail(name + ", " + where + ": a Goto to itself");
        if (ins.index < -n_code || ins.index > n_code || target < f.start_instr || target >= f.end_instr)
          in.fail(name + ", " + where + ": jumps by " + std::to_string(ins.index) + ", outside the function");
        break;
      }
    }
  }
  const opcode last = ex.code[static_cast<std::size_t>(f.end_instr - 1)].op;
  if (last != opcode::ret && last != opcode::go_to) in.fail(name + ": its last instruction is neither Ret nor Goto");
}

}  // namespace detail

/// Reads a Relax VM executable (the bytes of a "relax.VMExecutable" module; all of
/// them). Malformed input is errc::invalid_module naming the section, the offset and
/// `source`; another magic or version is refused with both named.
inline vm_executable parse_vm_executable(std::span<const std::byte> bytes, const std::string& source = "relax.VMExecutable") {
  gexec::detail::byte_reader in(bytes, source, errc::invalid_module);
  vm_executable ex;
  try {
    in.set_context("header");
    ex.magic = in.read<std::uint64_t>("magic");
    if (ex.magic != vm_magic && ex.magic != vm_magic_with_scopes)
      in.fail("not a Relax VM executable: magic " + detail::hex64(ex.magic) + " (TVM writes " + detail::hex64(vm_magic) + " or " +
              detail::hex64(vm_magic_with_scopes) + ")");
    const std::string version = in.read_string("version");
    if (version != vm_version)
      in.fail("bytecode version \"" + gexec::detail::printable(version) + "\"; gexec reads version " + std::string(vm_version) +
              " (TVM v0.19 to v0.27)");

    in.set_context("function table");
    const auto n_functions = in.read_count("functions", 4 + 5 * 8 + 8);
    std::unordered_map<std::string_view, std::size_t> names;  // function name -> its index
    ex.functions.resize(static_cast<std::size_t>(n_functions));
    for (std::size_t i = 0; i < ex.functions.size(); ++i) {
      vm_function& f = ex.functions[i];
      in.set_context("function table, entry " + std::to_string(i));
      const auto kind = in.read<std::int32_t>("kind");
      if (kind < 0 || kind > 2) in.fail("function kind " + std::to_string(kind) + " (0 packed, 1 VM, 2 VM-TIR)");
      f.kind = static_cast<function_kind>(kind);
      f.name = in.read_string("name");
      f.start_instr = in.read<std::int64_t>("start_instr");
      f.end_instr = in.read<std::int64_t>("end_instr");
      f.num_args = in.read<std::int64_t>("num_args");
      f.register_file_size = in.read<std::int64_t>("register_file_size");
      f.param_names = detail::read_strings(in, "param_names");
    }
    for (std::size_t i = 0; i < ex.functions.size(); ++i) {
      const auto [first, fresh] = names.emplace(ex.functions[i].name, i);
      if (!fresh)
        in.fail("function \"" + gexec::detail::printable(ex.functions[i].name) + "\" twice (functions " + std::to_string(first->second) + " and " +
                std::to_string(i) + ")");
    }

    if (ex.magic == vm_magic_with_scopes) {
      in.set_context("memory scopes");
      const auto n = in.read_count("memory scopes", 16);
      for (std::uint64_t i = 0; i < n; ++i) {
        const auto index = in.read<std::int64_t>("constant index");
        ex.memory_scopes.emplace_back(index, in.read_string("scope"));
      }
    }

    const auto n_constants = in.read_count("constants", 4 + 8);
    ex.constants.reserve(static_cast<std::size_t>(n_constants));
    for (std::uint64_t i = 0; i < n_constants; ++i) {
      in.set_context("constant " + std::to_string(i));
      ex.constants.push_back(detail::read_constant(in));
    }
    for (const auto& [index, scope] : ex.memory_scopes)
      if (index < 0 || static_cast<std::uint64_t>(index) >= n_constants)
        in.fail("memory scope \"" + gexec::detail::printable(scope) + "\" names constant " + std::to_string(index) + " of " +
                std::to_string(n_constants));

    in.set_context("code");
    ex.instr_offset = detail::read_i64_vector(in, "instruction offsets");
    ex.instr_data = detail::read_i64_vector(in, "instruction words");
    if (in.remaining() != 0) in.fail(std::to_string(in.remaining()) + " unexpected bytes after the code");
    ex.code.reserve(ex.instr_offset.size());
    for (std::size_t i = 0; i < ex.instr_offset.size(); ++i) detail::decode_instruction(in, ex, i);
    in.set_context({});
    for (std::size_t i = 0; i < ex.functions.size(); ++i)
      if (ex.functions[i].kind == function_kind::vm) detail::check_vm_function(in, ex, i);
  } catch (const std::bad_alloc&) {
    in.fail(errc::out_of_memory, "out of memory");
  }
  return ex;
}

/// Writes `ex` as TVM lays an executable out (the inverse of parse_vm_executable: the
/// code as instr_offset/instr_data hold it).
inline std::vector<std::byte> write_vm_executable(const vm_executable& ex) {
  gexec::detail::byte_writer out;
  out.write(ex.magic);
  out.write_string(vm_version);
  out.write(static_cast<std::uint64_t>(ex.functions.size()));
  for (const vm_function& f : ex.functions) {
    out.write(static_cast<std::int32_t>(f.kind));
    out.write_string(f.name);
    out.write(f.start_instr);
    out.write(f.end_instr);
    out.write(f.num_args);
    out.write(f.register_file_size);
    out.write(static_cast<std::uint64_t>(f.param_names.size()));
    for (const std::string& p : f.param_names) out.write_string(p);
  }
  if (ex.magic == vm_magic_with_scopes) {
    out.write(static_cast<std::uint64_t>(ex.memory_scopes.size()));
    for (const auto& [index, scope] : ex.memory_scopes) {
      out.write(index);
      out.write_string(scope);
    }
  }
  out.write(static_cast<std::uint64_t>(ex.constants.size()));
  for (const vm_constant& c : ex.constants) {
    if (const auto* a = std::get_if<ndarray>(&c)) {
      out.write(constant_tag::tensor);
      gexec::detail::write_tensor_record(out, "constant", *a);
    } else if (const auto* s = std::get_if<vm_shape>(&c)) {
      out.write(constant_tag::shape);
      out.write(static_cast<std::uint64_t>(s->dims.size()));
      for (std::int64_t d : s->dims) out.write(d);
    } else if (const auto* str = std::get_if<std::string>(&c)) {
      out.write(constant_tag::string);
      out.write_string(*str);
    } else if (const auto* i = std::get_if<std::int64_t>(&c)) {
      out.write(constant_tag::int_);
      out.write(*i);
    } else if (const auto* d = std::get_if<double>(&c)) {
      out.write(constant_tag::float_);
      out.write(*d);
    } else {
      const DLDataType t = std::get<DLDataType>(c);
      out.write(constant_tag::dtype);
      out.write(t.code);
      out.write(t.bits);
      out.write(t.lanes);
    }
  }
  out.write(static_cast<std::uint64_t>(ex.instr_offset.size()));
  for (std::int64_t o : ex.instr_offset) out.write(o);
  out.write(static_cast<std::uint64_t>(ex.instr_data.size()));
  for (std::int64_t w : ex.instr_data) out.write(w);
  return std::move(out).take();
}

}  // namespace relax

GEXEC_NAMESPACE_END
