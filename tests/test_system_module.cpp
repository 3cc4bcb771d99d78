// The TVM-FFI system library without TVM: kernels written here register themselves
// before main(), as the objects of relax.build(..., system_lib=True) do (a static
// constructor calling TVMFFIEnvModRegisterSystemLibSymbol), the executable's library
// binary is registered once a test has written it, and gexec::system_module() serves
// both to the classes that run a loaded library: relax::load_executable, the graphs it
// translates, the interpreter, a graph executor. What a program gets wrong (no
// executable linked, two) is refused, naming what to link; models registered by name
// (as gexec_add_relax_model links them) are each a module of their own. The objects TVM
// itself writes are linked into static programs by tests/relax_static.
//
// The table is the process's: the test cases run in the order written, the first before
// any library binary is registered.

#include <gexec/library/system_module.hpp>
#include <gexec/relax.hpp>

#include "relax_builder.hpp"
#include "test_support.hpp"

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

using namespace relax_test;
using test::contains;
using test::error_of;

namespace {

/// What lib0.o's __tvm_ffi__library_ctx is: a pointer-sized datum the kernels pass on.
void* library_ctx = nullptr;

int fail(const char* what) {
  const char* parts[2] = {"Invalid arguments of ffi_add_one: ", what};
  TVMFFIErrorSetRaisedFromCStrParts("ValueError", parts, 2);
  return -1;
}

/// y = x + 1 over float32 vectors of one length, its arguments checked as TVM's kernels
/// check theirs, failing through TVMFFIErrorSetRaisedFromCStrParts.
int add_one(void*, const TVMFFIAny* args, std::int32_t n, TVMFFIAny*) {
  if (n != 2 || args[0].type_index != gexec::ffi_dltensor_ptr || args[1].type_index != gexec::ffi_dltensor_ptr) return fail("two tensors");
  const auto* x = static_cast<const DLTensor*>(args[0].v_ptr);
  const auto* y = static_cast<const DLTensor*>(args[1].v_ptr);
  if (x->ndim != 1 || y->ndim != 1 || x->shape[0] != y->shape[0]) return fail("vectors of one length");
  for (std::int64_t i = 0; i < x->shape[0]; ++i) static_cast<float*>(y->data)[i] = static_cast<const float*>(x->data)[i] + 1.0f;
  return 0;
}

/// The number of tasks TVMBackendParallelLaunch (the C function) ran its loop in.
int pool_tasks(void*, const TVMFFIAny*, std::int32_t, TVMFFIAny* result) {
  int tasks = 0;
  auto record = [](int, TVMParallelGroupEnv* env, void* cdata) {
    *static_cast<int*>(cdata) = env->num_task;
    return 0;
  };
  if (TVMBackendParallelLaunch(record, &tasks, 0) != 0) return -1;
  result->type_index = gexec::ffi_int;
  result->v_int64 = tasks;
  return 0;
}

/// A kernel calling an extern function: it looks it up among its library's imports.
int extern_call(void*, const TVMFFIAny*, std::int32_t, TVMFFIAny*) {
  void* f = nullptr;
  return TVMFFIEnvModLookupFromImports(library_ctx, "tvm.contrib.sort", &f);
}

// As lib0.o's __tvm_module_startup: the context slot first, then every kernel.
const int registered = [] {
  int rc = TVMFFIEnvModRegisterSystemLibSymbol("__tvm_ffi__library_ctx", &library_ctx);
  rc |= TVMFFIEnvModRegisterSystemLibSymbol("__tvm_ffi_ffi_add_one", reinterpret_cast<void*>(&add_one));
  rc |= TVMFFIEnvModRegisterSystemLibSymbol("__tvm_ffi_ffi_pool_tasks", reinterpret_cast<void*>(&pool_tasks));
  rc |= TVMFFIEnvModRegisterSystemLibSymbol("__tvm_ffi_ffi_extern_call", reinterpret_cast<void*>(&extern_call));
  return rc;
}();

/// main(x: float32[4]) -> (reshape(x + 1, [2, 2]), x), static (a graph); pool() -> the
/// tasks of a parallel loop, extern_call() and bad(x, y) -> kernels that fail.
std::vector<std::byte> executable_bytes() {
  builder b;
  add_one_main(b);
  const auto pool = b.begin("pool", {}, 1);
  b.call("ffi_pool_tasks", {}, 0);
  b.ret(0);
  b.end(pool);
  const auto ext = b.begin("extern_call", {}, 1);
  b.call("ffi_extern_call", {}, 0);
  b.ret(0);
  b.end(ext);
  const auto bad = b.begin("bad", {"x", "y"}, 2);
  b.call("ffi_add_one", {reg(0), reg(1)});
  b.ret(1);
  b.end(bad);
  return b.bytes();
}

/// The library binary devc.o would hold: the executable, importing the host library.
const std::vector<std::byte>& library_bin() {
  static const std::vector<std::byte> code = executable_bytes();
  static const std::vector<std::byte> bin = [] {
    gexec::library_bin b;
    b.import_tree_row_ptr = {0, 1, 1};
    b.import_tree_child_indices = {1};
    b.modules = {{"relax.VMExecutable", code}, {"_lib", {}}};
    return gexec::write_library_bin(b);
  }();
  return bin;
}

std::vector<float> floats(const gexec::ndarray& a) { return {a.values<float>().begin(), a.values<float>().end()}; }

}  // namespace

TEST_CASE("the system module: the kernels registered before main(), as a TVM-FFI library's; no executable yet, and what to link said") {
  REQUIRE(registered == 0);
  const gexec::module& lib = gexec::system_module();
  CHECK(lib == gexec::system_module());  // one per process
  CHECK(lib.tvm_ffi());
  CHECK(lib.path().string() == "<system library>");
  // The context slot is filled with something that lives as long as the process.
  CHECK(library_ctx != nullptr);
  CHECK(lib.has_symbol("__tvm_ffi__library_ctx"));
  CHECK(lib.has_symbol("__tvm_ffi_ffi_add_one"));
  CHECK_FALSE(lib.has_symbol("__tvm_ffi__library_bin"));

  const gexec::packed_function f = lib.get_function("ffi_add_one");
  CHECK((f.fn == &gexec::detail::call_tvm_ffi));
  CHECK(f.resource_handle == reinterpret_cast<void*>(&add_one));
  CHECK_FALSE(lib.get_function("ffi_missing"));
  CHECK_FALSE(lib.get_function("__tvm_ffi_ffi_add_one"));  // the symbol is not a func_name
  CHECK(lib.data_symbol("__tvm_ffi__library_bin").empty());
  CHECK(lib.data_symbol("no_such_symbol").empty());
  const gexec::error kernel_as_data = error_of([&] { (void)lib.data_symbol("__tvm_ffi_ffi_add_one"); });
  CHECK(kernel_as_data.code() == gexec::errc::invalid_module);
  CHECK(contains(kernel_as_data, "a registered address of no known size"));

  CHECK_FALSE(gexec::relax::carries_executable(lib));
  const gexec::error none = error_of([&] { (void)gexec::relax::load_executable(lib); });
  CHECK(none.code() == gexec::errc::invalid_module);
  CHECK(contains(none, "<system library> carries no __tvm_ffi__library_bin, so no Relax VM executable"));
  CHECK(contains(none, "the .tar's devc.o, which a static program links whole beside lib0.o: gexec_add_relax_model"));

  // A graph calling the registered kernels binds to the module as to a loaded library.
  gexec::graph_builder g;
  auto x = g.input("x", {3});
  g.output(g.op("inc", "ffi_add_one", {x}, {{{3}}}));
  auto ex = gexec::create(g.build(), lib);
  ex.set_input("x", test::tensor({3}, {1.f, 2.f, 3.f}));
  ex.run();
  CHECK(test::values_of(ex.get_output(0)) == std::vector<float>{2.f, 3.f, 4.f});
  gexec::graph_builder wrong;
  auto w = wrong.input("x", {3});
  wrong.output(wrong.op("inc", "ffi_add_one", {w}, {{{4}}}));
  auto bad = gexec::create(wrong.build(), lib);
  bad.set_input("x", test::tensor({3}, {1.f, 2.f, 3.f}));
  const gexec::error failed = error_of([&] { bad.run(); });
  CHECK(failed.code() == gexec::errc::kernel_failed);
  CHECK(contains(failed, "node \"inc\""));
  CHECK(contains(failed, "ValueError: Invalid arguments of ffi_add_one: vectors of one length"));
  CHECK(gexec::packed_c_abi(lib).describe() == "TVM-FFI kernel library <system library> (as __tvm_ffi_<func_name>)");
}

TEST_CASE("the registered executable runs as a loaded one: its static function as a graph, the rest interpreted, the kernels on its runtime") {
  REQUIRE(TVMFFIEnvModRegisterSystemLibSymbol("__tvm_ffi__library_bin", const_cast<std::byte*>(library_bin().data())) == 0);
  const gexec::module& lib = gexec::system_module();
  CHECK(lib.has_symbol("__tvm_ffi__library_bin"));
  CHECK(lib.data_symbol("__tvm_ffi__library_bin").size() == library_bin().size());
  CHECK(gexec::relax::carries_executable(lib));

  const gexec::relax::executable graph = gexec::relax::load_executable(lib);
  const gexec::relax::executable interpreted = gexec::relax::load_executable(lib, {.graphs = false});
  CHECK(graph.source() == "Relax VM executable <system library>");
  CHECK(graph.library() == lib);
  CHECK(graph.function_names() == std::vector<std::string>{"main", "pool", "extern_call", "bad"});
  REQUIRE_MESSAGE(graph.graph_of("main") != nullptr, graph.interpreted_because("main"));
  CHECK(graph.graph_of("main")->model.compact().func_name(1) == "ffi_add_one");
  CHECK(interpreted.graph_of("main") == nullptr);

  const auto x = gexec::ndarray::from_values<float>({4}, {1.f, 2.f, 3.f, 4.f});
  for (const gexec::relax::executable* exe : {&graph, &interpreted}) {
    gexec::relax::virtual_machine vm(*exe);
    const auto out = vm.run("main", {x});
    REQUIRE(out.size() == 2);
    CHECK(std::vector<std::int64_t>(out[0].shape().begin(), out[0].shape().end()) == std::vector<std::int64_t>{2, 2});
    CHECK(floats(out[0]) == std::vector<float>{2.f, 3.f, 4.f, 5.f});
    CHECK(floats(out[1]) == std::vector<float>{1.f, 2.f, 3.f, 4.f});
    const gexec::error failed = error_of([&] {
      (void)vm.run("bad", {gexec::ndarray::empty({3}, gexec::dtypes::float32), gexec::ndarray::empty({4}, gexec::dtypes::float32)});
    });
    CHECK(failed.code() == gexec::errc::kernel_failed);
    CHECK(contains(failed, "kernel \"ffi_add_one\" failed: ValueError: Invalid arguments of ffi_add_one: vectors of one length"));
    const gexec::error ext = error_of([&] { (void)vm.invoke("extern_call", {}); });
    CHECK(ext.code() == gexec::errc::kernel_failed);
    CHECK(contains(ext, "looks up function \"tvm.contrib.sort\""));
  }

  // TVMBackendParallelLaunch, the C function, follows the runtime the executable was given.
  const auto tasks_on = [](int threads) {
    gexec::relax::executable_options options;
    options.model.runtime = gexec::runtime::create({.num_threads = threads});
    gexec::relax::virtual_machine vm(gexec::relax::load_executable(gexec::system_module(), options));
    const gexec::relax::vm_value tasks = vm.invoke("pool", {});
    REQUIRE(tasks.get_if<std::int64_t>() != nullptr);
    return *tasks.get_if<std::int64_t>();
  };
  CHECK(tasks_on(1) == 1);
  CHECK(tasks_on(4) > 1);
}

TEST_CASE("two executables registered (two models' devc.o) are refused, naming what to link") {
  static const std::vector<std::byte> second = library_bin();  // the same bytes at another address: another devc.o
  REQUIRE(TVMFFIEnvModRegisterSystemLibSymbol("__tvm_ffi__library_bin", const_cast<std::byte*>(second.data())) == 0);
  // The same object registering again (its constructor run twice) is still one.
  REQUIRE(TVMFFIEnvModRegisterSystemLibSymbol("__tvm_ffi__library_bin", const_cast<std::byte*>(second.data())) == 0);
  const gexec::error two = error_of([] { (void)gexec::relax::load_executable(gexec::system_module()); });
  CHECK(two.code() == gexec::errc::invalid_module);
  CHECK(contains(two, "2 library binaries (__tvm_ffi__library_bin) are registered by the objects linked into the program"));
  CHECK(contains(two, "link each model with gexec_add_relax_model, which keeps them apart (gexec::system_module(name))"));
  CHECK(TVMFFIEnvModRegisterSystemLibSymbol(nullptr, nullptr) == -1);
}

namespace {
/// Model "second"'s kernel of the same name as add_one's (as two models' `add` are): y = 2x.
int times_two(void*, const TVMFFIAny* args, std::int32_t n, TVMFFIAny*) {
  if (n != 2) return fail("two tensors");
  const auto* x = static_cast<const DLTensor*>(args[0].v_ptr);
  const auto* y = static_cast<const DLTensor*>(args[1].v_ptr);
  for (std::int64_t i = 0; i < x->shape[0]; ++i) static_cast<float*>(y->data)[i] = 2.0f * static_cast<const float*>(x->data)[i];
  return 0;
}
void* second_ctx = nullptr;
}  // namespace

// Last: once a named model is registered, the unnamed module has to choose.
TEST_CASE("models linked by gexec_add_relax_model register by name: each its own module, the unnamed one refused where it would choose") {
  // What gexec_relax_register_second, the function gexec_add_relax_model generates, does.
  static const std::vector<std::byte> bin = library_bin();
  REQUIRE(gexec_register_system_lib_symbol_of("second", "__tvm_ffi__library_ctx", &second_ctx) == 0);
  REQUIRE(gexec_register_system_lib_symbol_of("second", "__tvm_ffi_ffi_add_one", reinterpret_cast<void*>(&times_two)) == 0);
  REQUIRE(gexec_register_system_lib_symbol_of("second", "__tvm_ffi_ffi_pool_tasks", reinterpret_cast<void*>(&pool_tasks)) == 0);
  REQUIRE(gexec_register_system_lib_symbol_of("second", "__tvm_ffi_ffi_extern_call", reinterpret_cast<void*>(&extern_call)) == 0);
  REQUIRE(gexec_register_system_lib_symbol_of("second", "__tvm_ffi__library_bin", const_cast<std::byte*>(bin.data())) == 0);
  CHECK(gexec_register_system_lib_symbol_of(nullptr, "__tvm_ffi_x", &second_ctx) == -1);
  CHECK(second_ctx != nullptr);

  const gexec::module& second = gexec::system_module("second");
  CHECK(second == gexec::system_module("second"));
  CHECK_FALSE(second == gexec::system_module());
  CHECK(second.path().string() == "<system library: model second>");
  CHECK(second.get_function("ffi_add_one").resource_handle == reinterpret_cast<void*>(&times_two));
  CHECK_FALSE(second.get_function("ffi_missing"));
  // The unnamed objects' kernel of that name is still theirs.
  CHECK(gexec::detail::ffi_system_lib_symbols().unnamed.symbols.at("__tvm_ffi_ffi_add_one") == reinterpret_cast<void*>(&add_one));
  CHECK(second.data_symbol("__tvm_ffi__library_bin").size() == bin.size());

  // Its executable runs on its own kernels: main(x) = (reshape(2x), x).
  gexec::relax::virtual_machine vm(gexec::relax::load_executable(second));
  const auto out = vm.run("main", {gexec::ndarray::from_values<float>({4}, {1.f, 2.f, 3.f, 4.f})});
  REQUIRE(out.size() == 2);
  CHECK(floats(out[0]) == std::vector<float>{2.f, 4.f, 6.f, 8.f});

  const gexec::error none = error_of([] { (void)gexec::relax::load_executable(gexec::system_module("third")); });
  CHECK(none.code() == gexec::errc::invalid_module);
  CHECK(contains(none, "<system library: model third> carries no __tvm_ffi__library_bin"));

  // The unnamed module would have to choose between model second and the objects
  // registered through TVMFFIEnvModRegisterSystemLibSymbol above.
  const gexec::error choose = error_of([] { (void)gexec::system_module().get_function("ffi_add_one"); });
  CHECK(choose.code() == gexec::errc::invalid_module);
  CHECK(contains(choose, "2 models' system-library objects are linked into the program (second, and objects registered through "
                         "TVMFFIEnvModRegisterSystemLibSymbol): name the one meant, gexec::system_module(\"second\")"));
  CHECK(gexec::system_module("") == gexec::system_module());
}
