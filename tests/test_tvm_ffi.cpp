// Kernel libraries in the TVM-FFI ABI (TVM >= 0.21), without a TVM install: libraries
// written by hand from tvm-ffi's c_api.h (tests/kernels/ffi_library.c) are recognised,
// their kernels called, their errors reported naming the node, beside packed C
// libraries in the same process; their __tvm_ffi__library_bin is read with bounds
// checks. Kernels compiled by TVM itself are tested by tests/tvm_ffi.

#include <gexec/executor.hpp>

#include "test_support.hpp"

#include <doctest/doctest.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

using namespace test;

namespace {

std::string ffi_library(int which) { return std::string(GEXEC_TEST_FFI_DIR) + "/libgexec_test_ffi_" + std::to_string(which) + ".so"; }

const gexec::module& ffi_kernels() {
  static gexec::module m = gexec::load_module(ffi_library(1));
  return m;
}

gexec::validated_graph add_one_graph(std::int64_t n_in, std::int64_t n_out, const char* func = "ffi_add_one") {
  gexec::graph_builder b;
  auto x = b.input("x", {n_in});
  b.output(b.op("inc", func, {x}, {{{n_out}}}));
  return b.build();
}

}  // namespace

TEST_CASE("a TVM-FFI library's first kernel error is a kernel_failed naming the node, and the process goes on") {
  // First in the program: the error function is bound lazily, so the first failing
  // kernel is the one that would end the process were gexec not to bind it.
  const auto& lib = ffi_kernels();
  CHECK(lib.tvm_ffi());
  auto bad = gexec::create(add_one_graph(4, 5), lib);
  bad.set_input("x", tensor({4}, iota(4)));
  auto e = error_of([&] { bad.run(); });
  CHECK(e.code() == gexec::errc::kernel_failed);
  CHECK(contains(e, "node \"inc\""));
  CHECK(contains(e, "ValueError: Invalid y.shape[0] when calling ffi_add_one(x: Tensor, y: Tensor): expected the length of x"));

  auto good = gexec::create(add_one_graph(4, 4), lib);
  good.set_input("x", tensor({4}, iota(4, -1.5f)));
  good.run();
  CHECK(values_of(good.get_output(0)) == std::vector<float>{-0.5f, 0.5f, 1.5f, 2.5f});
  // The failed executor runs again once its input is right for the kernel... it is not:
  // the graph itself is wrong, so it fails the same way again.
  CHECK(error_of([&] { bad.run(); }).code() == gexec::errc::kernel_failed);
}

TEST_CASE("a TVM-FFI library: func_name resolves to __tvm_ffi_<func_name>, its own functions only") {
  const auto& lib = ffi_kernels();
  CHECK(lib.get_function("ffi_add_one"));
  CHECK(lib.get_function("ffi_scale"));
  CHECK_FALSE(lib.get_function("__tvm_ffi_ffi_add_one"));  // the symbol itself is not a func_name
  CHECK_FALSE(lib.get_function("TVMFFIErrorSetRaisedFromCStrParts"));
  auto e = error_of([&] { (void)gexec::create(add_one_graph(4, 4, "ffi_missing"), lib); });
  CHECK(e.code() == gexec::errc::symbol_not_found);
  CHECK(contains(e, "calls \"ffi_missing\", which TVM-FFI kernel library "));
  CHECK(contains(e, "(as __tvm_ffi_<func_name>) does not provide"));

  // A kernel taking a scalar, called as packed C callers call it: the float reaches it.
  gexec::packed_function scale = lib.get_function("ffi_scale");
  auto x = tensor({3}, {1.0f, 2.0f, -4.0f});
  auto y = tensor({3}, {0.0f, 0.0f, 0.0f});
  DLTensor xt = x.dltensor(), yt = y.dltensor();
  TVMValue args[3];
  args[0].v_handle = &xt;
  args[1].v_handle = &yt;
  args[2].v_float64 = 2.5;
  int codes[3] = {gexec::tc_dltensor, gexec::tc_dltensor, gexec::tc_float};
  TVMValue ret;
  int ret_code = gexec::tc_null;
  REQUIRE(scale.fn(args, codes, 3, &ret, &ret_code, scale.resource_handle) == 0);
  CHECK(values_of(y) == std::vector<float>{2.5f, 5.0f, -10.0f});
  codes[2] = gexec::tc_int;  // an int where the kernel checks for a float: its own error
  args[2].v_int64 = 2;
  gexec::detail::take_last_error();
  CHECK(scale.fn(args, codes, 3, &ret, &ret_code, scale.resource_handle) != 0);
  CHECK(gexec::detail::take_last_error() == "ValueError: Invalid argument #2 when calling ffi_add_one(x: Tensor, y: Tensor): expected a float");
  codes[2] = gexec::tc_module;  // no TVM-FFI value for it: refused before the kernel is called
  CHECK(scale.fn(args, codes, 3, &ret, &ret_code, scale.resource_handle) != 0);
  CHECK(gexec::detail::take_last_error() == "argument 2 has type code 9, which gexec does not pass to TVM-FFI kernels");
}

namespace {
int throwing_kernel(void*, const TVMFFIAny*, int, TVMFFIAny*) { throw std::runtime_error("out of coffee"); }
int throwing_anything(void*, const TVMFFIAny*, int, TVMFFIAny*) { throw 42; }
}  // namespace

TEST_CASE("a TVM-FFI kernel that throws a C++ exception fails the call, as it fails run(): the process goes on") {
  // As module::get_function hands it out: the packed C entry over the kernel's address.
  const gexec::packed_function f{&gexec::detail::call_tvm_ffi, reinterpret_cast<void*>(&throwing_kernel)};
  auto x = tensor({1}, {1.0f});
  DLTensor xt = x.dltensor();
  TVMValue args[1];
  args[0].v_handle = &xt;
  int codes[1] = {gexec::tc_dltensor};
  TVMValue ret;
  int ret_code = gexec::tc_null;
  gexec::detail::take_last_error();
  CHECK(f.fn(args, codes, 1, &ret, &ret_code, f.resource_handle) == -1);
  CHECK(gexec::detail::take_last_error() == "a TVM-FFI kernel threw: out of coffee");
  const gexec::packed_function g{&gexec::detail::call_tvm_ffi, reinterpret_cast<void*>(&throwing_anything)};
  CHECK(g.fn(args, codes, 1, &ret, &ret_code, g.resource_handle) == -1);
  CHECK(gexec::detail::take_last_error() == "a TVM-FFI kernel threw: unknown exception");
  // The executor's own prebuilt-argument entry answers the same.
  TVMFFIAny ffi_args[1];
  REQUIRE(gexec::detail::to_ffi_any(args[0], codes[0], ffi_args[0]));
  CHECK(gexec::detail::call_tvm_ffi_prebuilt(reinterpret_cast<TVMValue*>(ffi_args), codes, 1, &ret, &ret_code,
                                              reinterpret_cast<void*>(&throwing_kernel)) == -1);
  CHECK(gexec::detail::take_last_error() == "a TVM-FFI kernel threw: out of coffee");
}

TEST_CASE("models over a packed C library and over a TVM-FFI library run side by side in one process") {
  CHECK_FALSE(kernels().tvm_ffi());
  gexec::graph_builder b;
  auto x = b.input("x", {2, 3});
  b.output(b.op("inc", "test_add_one", {x}, {{{2, 3}}}));
  gexec::model old_abi(b.build(), kernels());
  gexec::model new_abi(add_one_graph(6, 6), ffi_kernels());
  auto a = old_abi.instantiate();
  auto f = new_abi.instantiate();
  for (int round = 0; round < 3; ++round) {
    const auto v = iota(6, static_cast<float>(round), 0.5f);
    a.set_input("x", tensor({2, 3}, v));
    f.set_input("x", tensor({6}, v));
    a.run();
    f.run();
    std::vector<float> want(6);
    for (std::size_t i = 0; i < 6; ++i) want[i] = v[i] + 1.0f;
    CHECK(values_of(a.get_output(0)) == want);
    CHECK(values_of(f.get_output(0)) == want);
  }
}

TEST_CASE("a TVM-FFI library carrying a device module, or importing what gexec does not provide, is refused at load") {
  auto device = error_of([] { (void)gexec::load_module(ffi_library(2)); });
  CHECK(device.code() == gexec::errc::unsupported);
  CHECK(contains(device, "carries a \"cuda\" module in its __tvm_ffi__library_bin"));
  auto import = error_of([] { (void)gexec::load_module(ffi_library(3)); });
  CHECK(import.code() == gexec::errc::invalid_module);
  CHECK(contains(import, "it imports TVMFFIEnvGetStream, a TVM runtime function gexec does not provide"));
  // Linked to bind every symbol at load: the loader finds no error function, and says so.
  auto bound_now = error_of([] { (void)gexec::load_module(ffi_library(4)); });
  CHECK(bound_now.code() == gexec::errc::io);
  CHECK(contains(bound_now, "undefined symbol: TVMFFIErrorSetRaisedFromCStrParts"));
}

TEST_CASE("__tvm_ffi__library_bin: the import tree first, then the modules, every length checked") {
  const std::vector<std::byte> device_bytes{std::byte{1}, std::byte{2}, std::byte{3}};
  gexec::library_bin bin;
  bin.import_tree_row_ptr = {0, 1, 1};
  bin.import_tree_child_indices = {1};
  bin.modules = {{"_lib", {}}, {"cuda", device_bytes}};
  const std::vector<std::byte> bytes = gexec::write_library_bin(bin);
  // By hand: payload length, the two vectors, "_lib", then "cuda" and its three bytes.
  CHECK(bytes.size() == 8 + (8 + 3 * 8) + (8 + 8) + (8 + 4) + (8 + 4) + (8 + 3));
  const gexec::library_bin back = gexec::parse_library_bin(bytes);
  CHECK(back.import_tree_row_ptr == bin.import_tree_row_ptr);
  CHECK(back.import_tree_child_indices == bin.import_tree_child_indices);
  REQUIRE(back.modules.size() == 2);
  CHECK(back.modules[0].kind == "_lib");
  CHECK(back.modules[0].bytes.empty());
  CHECK(back.modules[1].kind == "cuda");
  CHECK(std::vector<std::byte>(back.modules[1].bytes.begin(), back.modules[1].bytes.end()) == device_bytes);

  // Every cut of the file short is refused, never read past.
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    CAPTURE(n);
    auto e = error_of([&] { (void)gexec::parse_library_bin(std::span(bytes.data(), n)); });
    CHECK(e.code() == gexec::errc::invalid_module);
  }
  auto bad = bin;
  bad.import_tree_child_indices = {2};
  CHECK(contains(error_of([&] { (void)gexec::parse_library_bin(gexec::write_library_bin(bad)); }), "import tree child 2 is not one of the 2 modules"));
  bad = bin;
  bad.modules = {{"_lib", {}}, {"_lib", {}}};
  CHECK(contains(error_of([&] { (void)gexec::parse_library_bin(gexec::write_library_bin(bad)); }), "a second \"_lib\""));
  bad = bin;
  bad.import_tree_row_ptr = {0, 2, 1};
  CHECK(contains(error_of([&] { (void)gexec::parse_library_bin(gexec::write_library_bin(bad)); }), "row pointers do not describe 2 modules"));
  auto huge = bytes;
  huge[8] = std::byte{0xff};  // a row-pointer count past the end
  CHECK(contains(error_of([&] { (void)gexec::parse_library_bin(huge); }), "import tree row pointers"));
}
