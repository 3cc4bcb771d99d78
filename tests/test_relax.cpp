// Relax VM executables written by hand, without TVM: the reader's checks (every
// truncation, every index a function names, magic and version refused with both
// named), the builtins' semantics (the shape heap, storage, tuples, If conditions), and
// the virtual machine (control flow, calls between functions, a TVM-FFI kernel written
// by hand, storage reused only when nothing holds it, refusals at load). Executables
// that TVM built are tested by tests/relax.

#include <gexec/relax.hpp>

#include "relax_builder.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

namespace {

using namespace relax_test;

/// main(x: float32[n]) -> x + 1, through the hand-written TVM-FFI kernel ffi_add_one:
/// the checks TVM emits, storage for the result, the kernel call, Ret.
builder add_one_program() {
  builder b;
  const auto f32 = b.constant(gexec::dtypes::float32);
  const auto ctx = b.constant(std::string("ErrorContext(fn=main, loc=param[0], param=x) "));
  const auto global = b.constant(std::string("global"));
  const auto fn = b.begin("main", {"x"}, 6);
  b.call("vm.builtin.check_tensor_info", {reg(0), imm(1), con(f32), con(ctx)});
  b.call("vm.builtin.alloc_shape_heap", {vm_ctx, imm(1)}, 1);
  b.call("vm.builtin.match_shape", {reg(0), reg(1), imm(1), imm(1), imm(0), con(ctx)});  // n -> heap[0]
  b.call("vm.builtin.make_shape", {reg(1), imm(1), imm(1), imm(0)}, 2);                   // (n,)
  b.call("vm.builtin.shape_of", {reg(0)}, 5);
  b.call("vm.builtin.alloc_storage", {vm_ctx, reg(5), imm(0), con(f32), con(global)}, 3);
  b.call("vm.builtin.alloc_tensor", {reg(3), imm(0), reg(2), con(f32)}, 4);
  b.call("ffi_add_one", {reg(0), reg(4)});
  b.ret(4);
  b.end(fn);
  return b;
}

gexec::module ffi_kernels() { return gexec::load_module(GEXEC_TEST_FFI_LIBRARY); }

template <class F>
void refused(F&& f, gexec::errc code, const std::string& part) {
  try {
    f();
    FAIL_CHECK("no error; expected " << gexec::to_string(code) << " with \"" << part << "\"");
  } catch (const gexec::error& e) {
    CHECK_MESSAGE(e.code() == code, std::string(e.what()));
    CHECK_MESSAGE(std::string(e.what()).find(part) != std::string::npos, std::string(e.what()) << "\n  missing: " << part);
  }
}

}  // namespace

TEST_CASE("an executable written and read back is the same executable") {
  builder b = add_one_program();
  b.constant(gexec::ndarray::from_values<float>({2, 2}, {1.f, 2.f, 3.f, 4.f}));
  b.constant(rx::vm_shape{{3, 4}});
  b.constant(std::int64_t{-7});
  b.constant(2.5);
  b.ex.memory_scopes.emplace_back(1, "global");
  const rx::vm_executable back = b.parsed();
  CHECK(back.functions.size() == b.ex.functions.size());
  CHECK(back.functions[0].name == "main");
  CHECK(back.functions[0].param_names == std::vector<std::string>{"x"});
  CHECK(back.instr_data == b.ex.instr_data);
  CHECK(back.code.size() == b.ex.instr_offset.size());
  CHECK(back.memory_scopes.size() == 1);
  REQUIRE(back.constants.size() == b.ex.constants.size());
  CHECK(rx::describe(back.constants[3]) == "tensor float32[2, 2]");
  CHECK(std::get<gexec::ndarray>(back.constants[3]).values<float>()[3] == 4.f);
  CHECK(std::get<rx::vm_shape>(back.constants[4]) == rx::vm_shape{{3, 4}});
  CHECK(std::get<std::int64_t>(back.constants[5]) == -7);
  CHECK(std::get<double>(back.constants[6]) == 2.5);
  CHECK(rx::write_vm_executable(back) == b.bytes());
  // Arguments keep their kind and sign through the 56-bit packing.
  for (std::int64_t v : {std::int64_t{0}, std::int64_t{-1}, std::int64_t{1} << 40, -(std::int64_t{1} << 40)}) {
    const rx::vm_arg a = rx::vm_arg::decode(rx::vm_arg{rx::arg_kind::immediate, v}.encode());
    CHECK(a.kind == rx::arg_kind::immediate);
    CHECK(a.value == v);
  }
}

/// An executable whose one tensor constant is uint8[2, 4] holding `bits`, its record's dtype
/// code then set to `code` where TVM's format puts it: after the record's magic, reserved
/// word, device (type, id) and ndim, the dtype as u8 code, u8 bits, u16 lanes.
std::vector<std::byte> with_constant_code(const std::vector<std::uint8_t>& bits, std::uint8_t code) {
  builder b = add_one_program();
  b.constant(gexec::ndarray::from_values<std::uint8_t>({2, 4}, bits));
  std::vector<std::byte> bytes = b.bytes();
  constexpr std::uint64_t record_magic = 0xDD5E40F096B4A13FULL;  // TVM's kTVMNDArrayMagic
  std::byte magic[8];
  for (int i = 0; i < 8; ++i) magic[i] = static_cast<std::byte>((record_magic >> (8 * i)) & 0xff);
  std::size_t at = 0;
  int found = 0;
  for (std::size_t i = 0; i + 8 <= bytes.size(); ++i)
    if (std::memcmp(bytes.data() + i, magic, 8) == 0) at = i, ++found;
  REQUIRE(found == 1);
  const std::size_t dtype_at = at + 8 + 8 + 4 + 4 + 4;
  REQUIRE(bytes[dtype_at] == std::byte{1});      // kDLUInt
  REQUIRE(bytes[dtype_at + 1] == std::byte{8});  // bits
  bytes[dtype_at] = static_cast<std::byte>(code);
  return bytes;
}

TEST_CASE("float8 constants (TVM >= 0.21 names e4m3fn and e5m2 with DLPack's codes 10 and 12) load bit for bit") {
  // 0.5, -1.25, 448 (the largest), -0, 2^-9 (the smallest subnormal), 3, -240, 0.0625 in
  // e4m3fn; in e5m2 0.5, -1.25, 57344 (the largest), -0, 2^-16 (the smallest subnormal), 3,
  // -240, 0.0625: the encodings worked out by hand from sign, exponent bias 7 / 15 and mantissa.
  const std::vector<std::uint8_t> e4m3 = {0x30, 0xba, 0x7e, 0x80, 0x01, 0x44, 0xf7, 0x18};
  const std::vector<std::uint8_t> e5m2 = {0x38, 0xbd, 0x7b, 0x80, 0x01, 0x42, 0xdc, 0x2c};
  for (const auto& [code, bits, gexec_code, name] :
       {std::tuple{std::uint8_t{10}, e4m3, gexec::tvm_float8_e4m3_code, "tensor e4m3_float8[2, 4]"},
        std::tuple{std::uint8_t{12}, e5m2, gexec::tvm_float8_e5m2_code, "tensor e5m2_float8[2, 4]"}}) {
    const std::uint8_t c = code;
    CAPTURE(c);
    const rx::vm_executable ex = rx::parse_vm_executable(with_constant_code(bits, code));
    const auto& a = std::get<gexec::ndarray>(ex.constants.back());
    // Held with the executable's code, as kernels compiled by that TVM check it; gexec's own
    // name for it in messages.
    CHECK(a.dtype().code == code);
    CHECK(a.dtype().bits == 8);
    CHECK(a.dtype().lanes == 1);
    CHECK(gexec::same_dtype(rx::from_vm_dtype(a.dtype()), DLDataType{gexec_code, 8, 1}));
    CHECK(rx::describe(ex.constants.back()) == name);
    REQUIRE(a.byte_size() == bits.size());
    CHECK(std::memcmp(a.data(), bits.data(), bits.size()) == 0);
    // Written back as it was read.
    CHECK(rx::write_vm_executable(ex) == with_constant_code(bits, code));
  }
  // A bool constant (DLPack's code 6, 8 bits) is bool, not TVM v0.19's float8 e4m3 of that code.
  const rx::vm_executable b = rx::parse_vm_executable(with_constant_code({1, 0, 1, 1, 0, 0, 1, 0}, 6));
  CHECK(rx::describe(b.constants.back()) == "tensor bool[2, 4]");
  // DLPack's other small floats (e3m4 7, e4m3 8, e4m3b11fnuz 9, e4m3fnuz 11, e5m2fnuz 13,
  // e8m0fnu 14, float6 15-16, float4 17) are refused, never read as a float8 gexec knows.
  for (std::uint8_t code : {7, 8, 9, 11, 13, 14, 15, 16, 17}) {
    CAPTURE(static_cast<int>(code));
    refused([&] { (void)rx::parse_vm_executable(with_constant_code(e4m3, code)); }, gexec::errc::invalid_module,
            "unsupported dtype (code " + std::to_string(code) + ", bits 8)");
  }
}

TEST_CASE("every truncation of an executable is refused as invalid_module, never read past its end") {
  const std::vector<std::byte> whole = add_one_program().bytes();
  for (std::size_t n = 0; n < whole.size(); ++n) {
    CAPTURE(n);
    try {
      (void)rx::parse_vm_executable(std::span(whole).first(n));
      FAIL_CHECK("a truncated executable was read");
    } catch (const gexec::error& e) {
      CHECK(e.code() == gexec::errc::invalid_module);
    }
  }
  std::vector<std::byte> longer = whole;
  longer.push_back(std::byte{0});
  refused([&] { (void)rx::parse_vm_executable(longer); }, gexec::errc::invalid_module, "1 unexpected bytes after the code");
}

TEST_CASE("the reader refuses another magic or version, naming both") {
  std::vector<std::byte> bytes = add_one_program().bytes();
  bytes[0] = std::byte{0x00};
  refused([&] { (void)rx::parse_vm_executable(bytes); }, gexec::errc::invalid_module, "not a Relax VM executable: magic 0xd225de2f42141500");
  bytes = add_one_program().bytes();
  std::memcpy(bytes.data() + 16, "0.13", 4);
  refused([&] { (void)rx::parse_vm_executable(bytes); }, gexec::errc::invalid_module, "bytecode version \"0.13\"; gexec reads version 0.14");
}

TEST_CASE("what a VM function names is checked when it is read") {
  auto bad = [](auto edit, const std::string& part) {
    builder b = add_one_program();
    edit(b);
    refused([&] { (void)b.parsed(); }, gexec::errc::invalid_module, part);
  };
  bad([](builder& b) { b.ex.instr_data[1] = 6; }, "instruction 0 (destination): register 6 outside its 6 registers");
  bad([](builder& b) { b.ex.instr_data[4] = reg(9).encode(); }, "instruction 0 argument 0: register 9 outside");
  bad([](builder& b) { b.ex.instr_data[6] = con(99).encode(); }, "constant 99 of 3");
  bad([](builder& b) { b.ex.instr_data[2] = 50; }, "calls function 50 of");
  bad([](builder& b) { b.ex.instr_data[0] = 9; }, "opcode 9 (the VM has Call 1, Ret 2, Goto 3, If 4)");
  bad([](builder& b) { b.ex.instr_data[4] = rx::vm_arg{static_cast<rx::arg_kind>(7), 0}.encode(); }, "argument 0 has kind 7");
  bad([](builder& b) { b.ex.instr_data[3] = 1000; }, "1000 arguments run past the instruction words");
  bad([](builder& b) { b.ex.instr_offset[1] = 1 << 20; }, "offset outside the");
  bad([](builder& b) { b.ex.functions[0].end_instr = 100; }, "instructions [0, 100) are not within the 9 instructions");
  bad([](builder& b) { b.ex.functions[0].register_file_size = std::int64_t{1} << 40; }, "(gexec's limit is 2^24)");
  bad([](builder& b) { b.ex.functions[0].param_names.push_back("y"); }, "2 parameter names for 1 arguments");
  bad([](builder& b) { b.ex.functions[1].name = "main"; }, "function \"main\" twice");
  bad([](builder& b) { b.ex.functions[0].end_instr -= 1; }, "its last instruction is neither Ret nor Goto");
  bad([](builder& b) { b.ex.memory_scopes.emplace_back(40, "global"); }, "memory scope \"global\" names constant 40 of 3");
  bad([](builder& b) { b.ex.instr_data.back() = 17; }, "instruction 8 (result): register 17");  // Ret's register: the last word
  {
    builder b;
    const auto f = b.begin("main", {}, 1);
    b.go_to(5);
    b.end(f);
    refused([&] { (void)b.parsed(); }, gexec::errc::invalid_module, "jumps by 5, outside the function");
  }
  {
    builder b;
    const auto f = b.begin("main", {}, 1);
    b.go_to(0);
    b.end(f);
    refused([&] { (void)b.parsed(); }, gexec::errc::invalid_module, "a Goto to itself");
  }
  // A constant tagged with a type the pool cannot hold: with no functions and no
  // scopes, the first constant's tag is at byte 8 (magic) + 12 (version) + 8 + 8 + 8.
  builder b;
  b.constant(std::int64_t{5});
  std::vector<std::byte> bytes = b.bytes();
  REQUIRE(bytes[44] == std::byte{1});
  bytes[44] = std::byte{99};
  refused([&] { (void)rx::parse_vm_executable(bytes); }, gexec::errc::invalid_module, "constant 0: constant type 99");
}

TEST_CASE("the virtual machine runs a TVM-FFI kernel between the builtins TVM emits, and reuses storage only when nothing holds it") {
  const rx::executable exe = rx::executable::from(add_one_program().parsed(), ffi_kernels(), "add_one");
  CHECK(exe.function_names() == std::vector<std::string>{"main"});
  rx::virtual_machine vm(exe);
  const auto x = gexec::ndarray::from_values<float>({5}, {0.f, 1.f, 2.f, -3.f, 10.5f});
  const auto first = vm.run("main", {x});
  REQUIRE(first.size() == 1);
  CHECK(std::vector<float>(first[0].values<float>().begin(), first[0].values<float>().end()) == std::vector<float>{1.f, 2.f, 3.f, -2.f, 11.5f});
  // The caller still holds `first`: the second run gets storage of its own.
  const auto second = vm.run("main", {gexec::ndarray::from_values<float>({5}, {5.f, 5.f, 5.f, 5.f, 5.f})});
  CHECK(first[0].data() != second[0].data());
  CHECK(first[0].values<float>()[4] == 11.5f);
  CHECK(second[0].values<float>()[0] == 6.f);
  // A different length is a different storage size: allocated anew, still correct.
  const auto longer = vm.run("main", {gexec::ndarray::from_values<float>({7}, {1.f, 1.f, 1.f, 1.f, 1.f, 1.f, 1.f})});
  CHECK(longer[0].shape()[0] == 7);
  CHECK(longer[0].values<float>()[6] == 2.f);
}

TEST_CASE("storage of an output nobody holds any more is reused by the next run") {
  const rx::executable exe = rx::executable::from(add_one_program().parsed(), ffi_kernels(), "add_one");
  rx::virtual_machine vm(exe);
  const auto x = gexec::ndarray::from_values<float>({3}, {1.f, 2.f, 3.f});
  const void* at = vm.run("main", {x})[0].data();  // the output is dropped at the end of the statement
  CHECK(vm.run("main", {x})[0].data() == at);
}

TEST_CASE("what a run refuses names the function, the instruction, the builtin and TVM's error context; the VM stays usable") {
  const rx::executable exe = rx::executable::from(add_one_program().parsed(), ffi_kernels(), "add_one");
  rx::virtual_machine vm(exe);
  refused([&] { (void)vm.run("main", {gexec::ndarray::empty({2, 2}, gexec::dtypes::float32)}); }, gexec::errc::shape_mismatch,
          "function \"main\", instruction 0 (vm.builtin.check_tensor_info): ErrorContext(fn=main, loc=param[0], param=x)  expect Tensor with ndim 1 but get 2");
  refused([&] { (void)vm.run("main", {gexec::ndarray::empty({2}, gexec::dtypes::int32)}); }, gexec::errc::dtype_mismatch,
          "expect Tensor with dtype float32 but get int32");
  refused([&] { (void)vm.run("main", {}); }, gexec::errc::invalid_argument, "function \"main\" takes 1 arguments (x), got 0");
  refused([&] { (void)vm.run("other", {}); }, gexec::errc::not_found, "add_one has no function \"other\" (it has: main)");
  CHECK(vm.run("main", {gexec::ndarray::from_values<float>({1}, {41.f})})[0].values<float>()[0] == 42.f);
}

TEST_CASE("a kernel's failure is the run's error, with the kernel's message") {
  builder b;
  const auto f = b.begin("main", {"x", "y"}, 2);
  b.call("ffi_add_one", {reg(0), reg(1)});
  b.ret(1);
  b.end(f);
  rx::virtual_machine vm(rx::executable::from(b.parsed(), ffi_kernels()));
  refused([&] { (void)vm.run("main", {gexec::ndarray::empty({3}, gexec::dtypes::float32), gexec::ndarray::empty({4}, gexec::dtypes::float32)}); },
          gexec::errc::kernel_failed, "kernel \"ffi_add_one\" failed: ValueError: Invalid y.shape[0]");
}

TEST_CASE("refused at load, with the names: an entry neither builtin nor kernel, a VM-TIR function, storage on another device") {
  {
    builder b = add_one_program();
    b.ex.functions[b.packed("ffi_add_one")].name = "no_such_kernel";
    refused([&] { (void)rx::executable::from(b.parsed(), ffi_kernels()); }, gexec::errc::symbol_not_found,
            "calls \"no_such_kernel\", which is neither a VM builtin gexec runs nor a kernel of the library");
    refused([&] { (void)rx::executable::from(b.parsed(), gexec::module{}); }, gexec::errc::symbol_not_found, "\"no_such_kernel\"");
  }
  {
    builder b = add_one_program();
    b.ex.functions.push_back({rx::function_kind::vm_tir, "main_tir", 0, 0, 1, 0, {"x"}});
    refused([&] { (void)rx::executable::from(b.parsed(), ffi_kernels()); }, gexec::errc::unsupported, "function \"main_tir\" is a VM-TIR function");
  }
  {
    builder b = add_one_program();
    // alloc_storage's device index (argument 2) is instruction 5's: words 4 + 2 after its offset.
    b.ex.instr_data[static_cast<std::size_t>(b.ex.instr_offset[5] + 4 + 2)] = imm(1).encode();
    refused([&] { (void)rx::executable::from(b.parsed(), ffi_kernels()); }, gexec::errc::device_mismatch,
            "instruction 5 allocates storage on device 1");
  }
}

TEST_CASE("If, Goto, calls between functions, tuples and the shape heap as TVM's VM runs them") {
  // pick(c, x): if c then (x, x) else (x,); main(c, x) calls pick and returns item 0 of
  // its tuple with the tuple's length.
  builder b;
  const auto pick = b.begin("pick", {"c", "x"}, 4);
  b.call("vm.builtin.read_if_cond", {reg(0)}, 2);
  b.if_false(2, 3);
  b.call("vm.builtin.make_tuple", {reg(1), reg(1)}, 3);
  b.go_to(2);
  b.call("vm.builtin.make_tuple", {reg(1)}, 3);
  b.ret(3);
  b.end(pick);
  const auto main = b.begin("main", {"c", "x"}, 4);
  b.call_index(static_cast<std::int64_t>(pick), {reg(0), reg(1)}, 2);
  b.call("vm.builtin.tuple_getitem", {reg(2), imm(0)}, 3);
  b.call("vm.builtin.make_tuple", {reg(3), reg(2)}, 3);
  b.ret(3);
  b.end(main);
  rx::virtual_machine vm(rx::executable::from(b.parsed(), gexec::module{}));
  const auto x = gexec::ndarray::from_values<float>({2}, {1.f, 2.f});
  for (bool c : {true, false}) {
    CAPTURE(c);
    const auto flag = gexec::ndarray::from_values<bool>({}, {c});
    const rx::vm_value out = vm.invoke("main", std::vector<rx::vm_value>{flag, x});
    const auto* tuple = out.get_if<rx::vm_tuple>();
    REQUIRE(tuple);
    REQUIRE((*tuple)->size() == 2);
    CHECK((*tuple)->at(0).get_if<gexec::ndarray>()->data() == x.data());
    const auto* inner = (*tuple)->at(1).get_if<rx::vm_tuple>();
    REQUIRE(inner);
    CHECK((*inner)->size() == (c ? 2u : 1u));
    // run() flattens the nested tuple depth first.
    CHECK(vm.run("main", {flag, x}).size() == (c ? 3u : 2u));
  }
  // An integer tensor of any width is a condition, as read_if_cond reads it.
  CHECK(vm.run("main", {gexec::ndarray::from_values<std::int32_t>({}, {0}), x}).size() == 2u);
  CHECK(vm.run("main", {gexec::ndarray::from_values<std::int64_t>({}, {-5}), x}).size() == 3u);
  refused([&] { (void)vm.run("main", {x, x}); }, gexec::errc::dtype_mismatch, "an If condition of float32[2]");
}

TEST_CASE("recursion deeper than the VM allows is an error, not a stack overflow") {
  builder b;
  const auto f = b.begin("main", {"x"}, 2);
  b.call_index(0, {reg(0)}, 1);
  b.ret(1);
  b.end(f);
  rx::virtual_machine vm(rx::executable::from(b.parsed(), gexec::module{}));
  refused([&] { (void)vm.invoke("main", std::vector<rx::vm_value>{std::int64_t{1}}); }, gexec::errc::unsupported, "calls nested deeper than 256");
}

TEST_CASE("the shape heap: dimensions stored, checked against what was stored, and made into shapes") {
  builder b;
  const auto f = b.begin("main", {"x", "y"}, 4);
  b.call("vm.builtin.alloc_shape_heap", {vm_ctx, imm(2)}, 2);
  // x: (n, 3); y: (n, m) -> n stored from x, checked against y; m stored from y.
  b.call("vm.builtin.match_shape", {reg(0), reg(2), imm(2), imm(1), imm(0), imm(0), imm(3), none});
  b.call("vm.builtin.match_shape", {reg(1), reg(2), imm(2), imm(3), imm(0), imm(1), imm(1), none});
  b.call("vm.builtin.make_shape", {reg(2), imm(3), imm(1), imm(1), imm(0), imm(7), imm(1), imm(0)}, 3);
  b.ret(3);
  b.end(f);
  rx::virtual_machine vm(rx::executable::from(b.parsed(), gexec::module{}));
  const auto shape = [&](std::vector<std::int64_t> x, std::vector<std::int64_t> y) {
    const rx::vm_value out = vm.invoke("main", std::vector<rx::vm_value>{gexec::ndarray::empty(x, gexec::dtypes::float32),
                                                                         gexec::ndarray::empty(y, gexec::dtypes::float32)});
    return out.get_if<rx::vm_shape>()->dims;
  };
  CHECK(shape({4, 3}, {4, 9}) == std::vector<std::int64_t>{9, 7, 4});
  CHECK(shape({1, 3}, {1, 2}) == std::vector<std::int64_t>{2, 7, 1});
  refused([&] { (void)shape({4, 2}, {4, 9}); }, gexec::errc::shape_mismatch, "shape[1] is 2, expected 3");
  refused([&] { (void)shape({4, 3}, {5, 9}); }, gexec::errc::shape_mismatch, "shape[0] is 5, expected 4 (as before)");
  refused([&] { (void)shape({4, 3, 1}, {4, 9}); }, gexec::errc::shape_mismatch, "match_cast shape size mismatch: 3 dimensions, expected 2");
}

TEST_CASE("builtins refuse what does not fit: a tensor past its storage, a reshape that changes the element count") {
  builder b;
  const auto f32 = b.constant(gexec::dtypes::float32);
  const auto bytes16 = b.constant(rx::vm_shape{{16}});
  const auto u8 = b.constant(gexec::dtypes::uint8);
  const auto four = b.constant(rx::vm_shape{{4}});
  const auto five = b.constant(rx::vm_shape{{5}});
  const auto fn = b.begin("main", {"offset"}, 4);
  b.call("vm.builtin.alloc_storage", {vm_ctx, con(bytes16), imm(0), con(u8), none}, 1);
  b.call("vm.builtin.alloc_tensor", {reg(1), reg(0), con(four), con(f32)}, 2);
  b.call("vm.builtin.reshape", {reg(2), con(five)}, 3);
  b.ret(3);
  b.end(fn);
  rx::virtual_machine vm(rx::executable::from(b.parsed(), gexec::module{}));
  refused([&] { (void)vm.invoke("main", std::vector<rx::vm_value>{std::int64_t{4}}); }, gexec::errc::out_of_memory,
          "a float32[4] tensor at offset 4 does not fit in a storage of 16 bytes");
  refused([&] { (void)vm.invoke("main", std::vector<rx::vm_value>{std::int64_t{-1}}); }, gexec::errc::out_of_memory, "at offset -1");
  refused([&] { (void)vm.invoke("main", std::vector<rx::vm_value>{std::int64_t{0}}); }, gexec::errc::shape_mismatch,
          "reshape of [4] to [5]: the element counts differ");
}

TEST_CASE("a static straight-line function runs as a gexec graph, with the interpreter's results, and says why when it cannot") {
  // main(x: float32[4]) -> (reshape(x + 1, [2, 2]), x): every shape a constant.
  builder b;
  add_one_main(b);

  const rx::executable graph = rx::executable::from(b.parsed(), ffi_kernels(), "static");
  const rx::executable interpreted = rx::executable::from(b.parsed(), ffi_kernels(), "static", {.graphs = false});
  REQUIRE_MESSAGE(graph.graph_of("main") != nullptr, graph.interpreted_because("main"));
  CHECK(interpreted.graph_of("main") == nullptr);
  CHECK(interpreted.interpreted_because("main") == "graphs are off (executable_options::graphs)");
  // One kernel node and the reshape's alias, between the input and the outputs.
  const gexec::compact_graph& g = graph.graph_of("main")->model.compact();
  CHECK(g.num_nodes() == 3);
  CHECK(g.func_name(1) == "ffi_add_one");
  CHECK(g.func_name(2) == "__nop");

  const auto x = gexec::ndarray::from_values<float>({4}, {1.f, 2.f, 3.f, 4.f});
  for (const rx::executable* exe : {&graph, &interpreted}) {
    rx::virtual_machine vm(*exe);
    for (int round = 0; round < 2; ++round) {
      const auto out = vm.run("main", {x});
      REQUIRE(out.size() == 2);
      CHECK(std::vector<std::int64_t>(out[0].shape().begin(), out[0].shape().end()) == std::vector<std::int64_t>{2, 2});
      CHECK(std::vector<float>(out[0].values<float>().begin(), out[0].values<float>().end()) == std::vector<float>{2.f, 3.f, 4.f, 5.f});
      CHECK(std::vector<float>(out[1].values<float>().begin(), out[1].values<float>().end()) == std::vector<float>{1.f, 2.f, 3.f, 4.f});
    }
    refused([&] { (void)vm.run("main", {gexec::ndarray::empty({5}, gexec::dtypes::float32)}); }, gexec::errc::shape_mismatch, "5");
  }
  // The graph's outputs are copies: a kept result survives the next run.
  rx::virtual_machine vm(graph);
  const auto first = vm.run("main", {x});
  (void)vm.run("main", {gexec::ndarray::from_values<float>({4}, {0.f, 0.f, 0.f, 0.f})});
  CHECK(first[0].values<float>()[3] == 5.f);

  // A weight bound by name: the caller passes nothing, the function is still a graph.
  gexec::param_dict weights;
  weights.set("x", x);
  const rx::executable bound = rx::executable::from(b.parsed(), ffi_kernels(), "bound", {.params = weights});
  CHECK(bound.graph_of("main") != nullptr);
  CHECK(bound.input_names("main").empty());
  rx::virtual_machine bvm(bound);
  CHECK(bvm.run("main", {})[0].values<float>()[0] == 2.f);
  refused([&] { (void)bvm.run("main", {x}); }, gexec::errc::invalid_argument, "takes 0 arguments (), got 1 (the others are weights bound when it was loaded)");

  // Shapes known only at run time stay interpreted, with the reason.
  const rx::executable dynamic = rx::executable::from(add_one_program().parsed(), ffi_kernels(), "dynamic");
  CHECK(dynamic.graph_of("main") == nullptr);
  CHECK(dynamic.interpreted_because("main") == "argument \"x\" has no static shape and dtype (no check fixes them)");
}

TEST_CASE("a graph function's later calls copy straight to and from its executor's memory, and stop once the executor is handed out") {
  builder b;
  add_one_main(b);
  const rx::executable graph = rx::executable::from(b.parsed(), ffi_kernels(), "direct");
  REQUIRE(graph.graph_of("main") != nullptr);
  rx::virtual_machine vm(graph);
  auto values = [](const gexec::ndarray& t) { return std::vector<float>(t.values<float>().begin(), t.values<float>().end()); };
  // New values every call: the first call goes through the executor, the later ones straight
  // to its memory; each result is x + 1 (reshaped) and x, computed here.
  for (int round = 0; round < 4; ++round) {
    const float base = 10.f * static_cast<float>(round) - 7.5f;
    const auto x = gexec::ndarray::from_values<float>({4}, {base, base + 1, base + 2, base + 3});
    const auto out = vm.run("main", {x});
    REQUIRE(out.size() == 2);
    CHECK(values(out[0]) == std::vector<float>{base + 1, base + 2, base + 3, base + 4});
    CHECK(values(out[1]) == values(x));
  }
  // A strided tensor is refused as the executor refuses it, never copied as if compact.
  std::vector<float> spaced{1.f, -1.f, 2.f, -1.f, 3.f, -1.f, 4.f, -1.f};
  std::int64_t shape[] = {4}, strides[] = {2};
  DLTensor t{};
  t.data = spaced.data();
  t.device = {kDLCPU, 0};
  t.ndim = 1;
  t.dtype = gexec::dtypes::float32;
  t.shape = shape;
  t.strides = strides;
  refused([&] { (void)vm.run("main", {gexec::ndarray::view(t, nullptr)}); }, gexec::errc::invalid_argument, "strided");
  CHECK(values(vm.run("main", {gexec::ndarray::from_values<float>({4}, {0.f, 1.f, 2.f, 3.f})})[0]) == std::vector<float>{1.f, 2.f, 3.f, 4.f});

  // Handed out, the executor may read a caller's tensor in place: its own runs follow that
  // tensor, and the VM's next call sets its input again through the executor.
  gexec::model::executor& ex = vm.graph_executor("main");
  const auto bound = gexec::ndarray::from_values<float>({4}, {100.f, 200.f, 300.f, 400.f});
  ex.set_input_zero_copy(0, bound);
  ex.run();
  CHECK(values(ex.get_output(1)) == std::vector<float>{100.f, 200.f, 300.f, 400.f});
  const auto out = vm.run("main", {gexec::ndarray::from_values<float>({4}, {5.f, 6.f, 7.f, 8.f})});
  CHECK(values(out[0]) == std::vector<float>{6.f, 7.f, 8.f, 9.f});
  CHECK(values(out[1]) == std::vector<float>{5.f, 6.f, 7.f, 8.f});
  CHECK(values(bound) == std::vector<float>{100.f, 200.f, 300.f, 400.f});
}

TEST_CASE("run into a kept vector: the last results given back first, so that the same tensors serve again; a result fed back") {
  builder b;
  add_one_main(b);
  auto values = [](const gexec::ndarray& t) { return std::vector<float>(t.values<float>().begin(), t.values<float>().end()); };
  const rx::executable graph = rx::executable::from(b.parsed(), ffi_kernels(), "kept");
  REQUIRE(graph.graph_of("main") != nullptr);
  rx::virtual_machine vm(graph);
  std::vector<gexec::ndarray> out;
  vm.run("main", {gexec::ndarray::from_values<float>({4}, {1.f, 2.f, 3.f, 4.f})}, out);
  REQUIRE(out.size() == 2);
  CHECK(values(out[0]) == std::vector<float>{2.f, 3.f, 4.f, 5.f});
  const void* tensor = out[0].data();
  const gexec::ndarray* slots = out.data();
  vm.run("main", {gexec::ndarray::from_values<float>({4}, {-1.f, 0.f, 1.f, 2.f})}, out);
  REQUIRE(out.size() == 2);
  CHECK(values(out[0]) == std::vector<float>{0.f, 1.f, 2.f, 3.f});
  CHECK(values(out[1]) == std::vector<float>{-1.f, 0.f, 1.f, 2.f});
  CHECK(out[0].data() == tensor);  // nobody else held it: the same tensor again
  CHECK(out.data() == slots);      // and the vector's own storage
  // A result the caller keeps is its own: the next call writes another tensor.
  const gexec::ndarray kept = out[0];
  vm.run("main", {gexec::ndarray::from_values<float>({4}, {10.f, 20.f, 30.f, 40.f})}, out);
  CHECK(out[0].data() != kept.data());
  CHECK(values(kept) == std::vector<float>{0.f, 1.f, 2.f, 3.f});
  CHECK(values(out[0]) == std::vector<float>{11.f, 21.f, 31.f, 41.f});
  // A result fed back as the input (out[1] is x): read before the results are replaced.
  vm.run("main", std::span<const gexec::ndarray>(out).subspan(1, 1), out);
  REQUIRE(out.size() == 2);
  CHECK(values(out[0]) == std::vector<float>{11.f, 21.f, 31.f, 41.f});
  CHECK(values(out[1]) == std::vector<float>{10.f, 20.f, 30.f, 40.f});
  // The interpreter's results go into the kept vector alike.
  const rx::executable interpreted = rx::executable::from(b.parsed(), ffi_kernels(), "kept", {.graphs = false});
  rx::virtual_machine ivm(interpreted);
  ivm.run("main", {gexec::ndarray::from_values<float>({4}, {1.f, 2.f, 3.f, 4.f})}, out);
  REQUIRE(out.size() == 2);
  CHECK(values(out[0]) == std::vector<float>{2.f, 3.f, 4.f, 5.f});
  ivm.run("main", std::span<const gexec::ndarray>(out).subspan(1, 1), out);
  CHECK(values(out[0]) == std::vector<float>{2.f, 3.f, 4.f, 5.f});
  CHECK(values(out[1]) == std::vector<float>{1.f, 2.f, 3.f, 4.f});
}

TEST_CASE("the kernels the interpreter calls run on the executable's runtime: its thread pool serves their parallel loops") {
  builder b;
  const auto fn = b.begin("main", {}, 1);
  b.call("ffi_pool_tasks", {}, 0);
  b.ret(0);
  b.end(fn);
  const auto tasks_on = [&](int threads) {
    rx::executable_options options;
    options.model.runtime = gexec::runtime::create({.num_threads = threads});
    rx::virtual_machine vm(rx::executable::from(b.parsed(), ffi_kernels(), "pool", options));
    CHECK(vm.get_executable().interpreted_because("main") != "");
    const rx::vm_value tasks = vm.invoke("main", {});
    REQUIRE(tasks.get_if<std::int64_t>() != nullptr);
    return *tasks.get_if<std::int64_t>();
  };
  CHECK(tasks_on(1) == 1);  // a runtime of one thread runs the loop serially, whatever the process default
  CHECK(tasks_on(4) > 1);   // one of four splits it
}
