// gexec::module against kernel libraries that try to make it do what it must not: a
// graph calling a symbol that is not one of the library's own functions (libc's abort,
// libm's cos, a data object), context slots gexec must not write, and a data symbol
// whose size in the symbol table runs past what the library maps. The libraries are
// in tests/kernels (hostile_library.c, slot_libraries.c, lying_blob.c).

#include <gexec/detail/last_error.hpp>
#include <gexec/executor.hpp>
#include <gexec/factory.hpp>

#include "test_support.hpp"

#include <doctest/doctest.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace {

namespace fs = std::filesystem;

using test::contains;
using test::error_of;

gexec::validated_graph one_kernel(const std::string& func) {
  gexec::graph_builder b;
  b.output(b.op("k", func, {b.input("x", {4})}, {{{4}}}));
  return b.build();
}

std::vector<float> run_once(const gexec::module& lib, const std::string& func, std::vector<float> x) {
  auto ex = gexec::model(one_kernel(func), lib).instantiate();
  ex.set_input("x", gexec::ndarray::from_values<float>({4}, std::span<const float>(x)));
  ex.run();
  auto out = ex.get_output(0).values<float>();
  return {out.begin(), out.end()};
}

std::string canonical(const char* path) { return fs::canonical(path).string(); }

fs::path slot_library(int which) {
  return fs::canonical(fs::path(GEXEC_TEST_SLOTS_DIR) / ("libgexec_test_slots_" + std::to_string(which) + ".so"));
}

const gexec::module& hostile() {
  static gexec::module m = gexec::load_module(GEXEC_TEST_HOSTILE);
  return m;
}

// The sample kernels and the hostile library's own kernel still run.
void check_loaded_modules_work() {
  CHECK(run_once(test::kernels(), "test_add_one", {1, 2, 3, 4}) == std::vector<float>{2, 3, 4, 5});
  CHECK(run_once(hostile(), "hostile_add_one", {0, 1, 2, 3}) == std::vector<float>{1, 2, 3, 4});
}

// Calls hostile_lookup(name) directly: what TVMBackendGetFuncFromEnv returned to the
// library's compiled code for `name`, and the last error it set.
std::pair<std::int64_t, std::string> env_lookup(const std::string& name) {
  gexec::packed_function lookup = hostile().get_function("hostile_lookup");
  REQUIRE(lookup);
  TVMValue arg{};
  arg.v_str = name.c_str();
  int code = gexec::tc_str;
  TVMValue ret{};
  int ret_code = gexec::tc_null;
  gexec::detail::take_last_error();
  REQUIRE(lookup.fn(&arg, &code, 1, &ret, &ret_code, lookup.resource_handle) == 0);
  REQUIRE(ret_code == gexec::tc_int);
  return {ret.v_int64, gexec::detail::take_last_error()};
}

}  // namespace

TEST_CASE("a graph may call only functions the kernel library itself defines, refused at creation") {
  const std::string lib = "kernel library " + canonical(GEXEC_TEST_HOSTILE);
  struct refused {
    const char* func;
    const char* why;
  };
  const refused cases[] = {
      {"abort", "it comes from "},                     // libc: would abort the process at run()
      {"getpid", "it comes from "},                    // libc
      {"cos", "it comes from "},                       // libm, a dependency of the library
      {"__tvm_module_ctx", "it is data (an object of 8 bytes)"},  // a context slot: data run as code
      {"__TVMAPISetLastError", "it is data (an object of 8 bytes)"},
      {"hostile_table", "it is data (an object of 32 bytes)"},
      {"__tvm_dev_mblob", ""},  // not exported here: plainly missing
  };
  for (const refused& r : cases) {
    CAPTURE(r.func);
    auto e = error_of([&] { (void)gexec::model(one_kernel(r.func), hostile()); });
    CHECK(e.code() == gexec::errc::symbol_not_found);
    if (*r.why) {
      CHECK(contains(e, "node \"k\" (nodes[1]): \"" + std::string(r.func) + "\" is not a function defined in " + lib + ": " + r.why));
    } else {
      CHECK(contains(e, "calls \"__tvm_dev_mblob\", which " + lib + " does not provide"));
    }
    CHECK_FALSE(hostile().get_function(r.func));
  }
  CHECK(contains(error_of([&] { (void)gexec::model(one_kernel("abort"), hostile()); }), "libc.so"));
  CHECK(contains(error_of([&] { (void)gexec::model(one_kernel("getpid"), hostile()); }), "libc.so"));
  CHECK(contains(error_of([&] { (void)gexec::model(one_kernel("cos"), hostile()); }), "libm.so"));
  // As gexec::create reads a graph's JSON, too.
  auto e = error_of([&] { (void)gexec::create(gexec::to_json(one_kernel("abort")), hostile()); });
  CHECK(e.code() == gexec::errc::symbol_not_found);
  CHECK(contains(e, "\"abort\" is not a function defined in " + lib));

  // The library's own kernels still bind and run, the one needing libm included.
  check_loaded_modules_work();
  const std::vector<float> c = run_once(hostile(), "hostile_cos", {0, 0, 0, 0});
  CHECK(c == std::vector<float>{1, 1, 1, 1});
}

TEST_CASE("get_function says why a symbol is not a function of the library, and stays empty for a missing one") {
  std::string why;
  CHECK_FALSE(hostile().get_function("abort", &why));
  CHECK(why.find("\"abort\" is not a function defined in kernel library " + canonical(GEXEC_TEST_HOSTILE)) != std::string::npos);
  why.clear();
  CHECK_FALSE(hostile().get_function("hostile_not_there", &why));
  CHECK(why.empty());
  CHECK(hostile().get_function("hostile_add_one", &why));
  CHECK(why.empty());
  CHECK(test::kernels().get_function("test_add"));
}

TEST_CASE("__tvm_main__ must name a function of the library and be a string within its symbol") {
  // The sample library's __tvm_main__ names its own test_add.
  CHECK((test::kernels().get_function("__tvm_main__").fn == test::kernels().get_function("test_add").fn));
  CHECK(test::kernels().get_function("__tvm_main__"));

  // The hostile library's names libc's getpid.
  auto e = error_of([&] { (void)gexec::model(one_kernel("__tvm_main__"), hostile()); });
  CHECK(e.code() == gexec::errc::symbol_not_found);
  CHECK(contains(e, "__tvm_main__ names \"getpid\", which is not a function defined in kernel library " + canonical(GEXEC_TEST_HOSTILE) +
                        ": it comes from "));
  CHECK(contains(e, "libc.so"));

  // The lying library's is four bytes with no NUL: not read past its end.
  gexec::module lying = gexec::load_module(GEXEC_TEST_LYING_BLOB);
  std::string why;
  CHECK_FALSE(lying.get_function("__tvm_main__", &why));
  CHECK(why == "__tvm_main__ of kernel library " + canonical(GEXEC_TEST_LYING_BLOB) + " is not a NUL-terminated string");
  e = error_of([&] { (void)gexec::model(one_kernel("__tvm_main__"), lying); });
  CHECK(e.code() == gexec::errc::symbol_not_found);
  CHECK(contains(e, "__tvm_main__ of kernel library " + canonical(GEXEC_TEST_LYING_BLOB) + " is not a NUL-terminated string"));
  check_loaded_modules_work();
}

TEST_CASE("TVMBackendGetFuncFromEnv hands compiled code only the library's own functions") {
  for (const char* name : {"abort", "getpid", "cos", "__tvm_module_ctx", "hostile_table", "__tvm_main__"}) {
    CAPTURE(name);
    auto [rc, message] = env_lookup(name);
    CHECK(rc == -1);
    CHECK(message.find("function \"" + std::string(name) + "\" is neither in kernel library " + canonical(GEXEC_TEST_HOSTILE)) !=
          std::string::npos);
  }
  CHECK(env_lookup("hostile_add_one").first == 0);  // its own function
  gexec::register_global_function("gexec.test.module.registered", [](gexec::packed_args) {});
  CHECK(env_lookup("gexec.test.module.registered").first == 0);  // and the runtime's
  check_loaded_modules_work();
}

TEST_CASE("a function exported under a context slot's name is refused, not written") {
  const fs::path path = slot_library(1);
  auto e = error_of([&] { (void)gexec::load_module(path); });
  CHECK(e.code() == gexec::errc::invalid_module);
  CHECK(contains(e, "kernel library " + path.string() + ": __TVMAPISetLastError is a function, not a pointer-sized data symbol"));
  check_loaded_modules_work();
}

TEST_CASE("a 4-byte object under a context slot's name is refused; neither it nor its neighbour is written") {
  const fs::path path = slot_library(2);
  void* keep = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);  // keeps it mapped to look at afterwards
  REQUIRE(keep != nullptr);
  auto* slot = static_cast<int*>(dlsym(keep, "__TVMFuncCall"));
  auto* neighbour = static_cast<int*>(dlsym(keep, "slot_neighbour"));
  REQUIRE(slot != nullptr);
  REQUIRE(neighbour != nullptr);
  auto e = error_of([&] { (void)gexec::load_module(path); });
  CHECK(e.code() == gexec::errc::invalid_module);
  CHECK(contains(e, "kernel library " + path.string() + ": __TVMFuncCall is a 4-byte object, not a pointer-sized data symbol"));
  CHECK(*slot == 11);
  CHECK(*neighbour == 22);
  dlclose(keep);
  check_loaded_modules_work();
}

TEST_CASE("a context slot in read-only memory is refused, not written") {
  // Library 3 has it in .rodata; library 4 where the loader makes it read-only after
  // relocation (RELRO).
  for (const auto& c : {std::pair{3, "__TVMBackendAllocWorkspace"}, std::pair{4, "__TVMBackendFreeWorkspace"}}) {
    const int which = c.first;
    const std::string slot = c.second;
    CAPTURE(which);
    const fs::path path = slot_library(which);
    auto e = error_of([&] { (void)gexec::load_module(path); });
    CHECK(e.code() == gexec::errc::invalid_module);
    CHECK(contains(e, "kernel library " + path.string() + ": " + slot + " lies in read-only memory"));
  }
  check_loaded_modules_work();
}

TEST_CASE("a context slot found in a library the kernel library depends on is refused, not written") {
  const fs::path provider = slot_library(5), borrower = slot_library(6);
  void* keep = dlopen(provider.c_str(), RTLD_NOW | RTLD_LOCAL);
  REQUIRE(keep != nullptr);
  auto** slot = static_cast<void**>(dlsym(keep, "__TVMFuncCall"));
  REQUIRE(slot != nullptr);
  auto e = error_of([&] { (void)gexec::load_module(borrower); });
  CHECK(e.code() == gexec::errc::invalid_module);
  CHECK(contains(e, "kernel library " + borrower.string() + ": its context slot __TVMFuncCall comes from " + provider.string() +
                        ", not from the library itself"));
  CHECK(*slot == nullptr);
  dlclose(keep);
  // The provider itself is a library whose slot gexec fills.
  gexec::module own = gexec::load_module(provider);
  CHECK(own);
  check_loaded_modules_work();
}

TEST_CASE("a data symbol whose size runs past the library's loaded segments is refused, not read") {
  gexec::factory before = gexec::load_factory(GEXEC_TEST_FACTORY);
  const std::string lib = canonical(GEXEC_TEST_LYING_BLOB);
  auto e = error_of([&] { (void)gexec::load_factory(GEXEC_TEST_LYING_BLOB); });
  CHECK(e.code() == gexec::errc::invalid_module);
  CHECK(contains(e, "__tvm_dev_mblob of kernel library " + lib + ": the symbol table gives it 67108864 bytes, which run past the "
                    "loaded segment holding it"));
  gexec::module lying = gexec::load_module(GEXEC_TEST_LYING_BLOB);
  e = error_of([&] { (void)lying.data_symbol("__tvm_dev_mblob"); });
  CHECK(e.code() == gexec::errc::invalid_module);
  CHECK(contains(e, "__tvm_dev_mblob of kernel library " + lib));
  // Data symbols that are not data of the library itself are refused too.
  e = error_of([&] { (void)hostile().data_symbol("hostile_add_one"); });
  CHECK(e.code() == gexec::errc::invalid_module);
  CHECK(contains(e, "hostile_add_one of kernel library " + canonical(GEXEC_TEST_HOSTILE) + " is not a data object"));
  e = error_of([&] { (void)hostile().data_symbol("environ"); });
  CHECK(e.code() == gexec::errc::invalid_module);
  CHECK(contains(e, "environ of kernel library " + canonical(GEXEC_TEST_HOSTILE) + " comes from "));
  CHECK(contains(e, "libc.so"));
  CHECK(hostile().data_symbol("hostile_table").size() == 32);
  CHECK(hostile().data_symbol("hostile_not_there").empty());

  // What was loaded before still works.
  auto ex = before.create();
  ex.set_input("x", gexec::ndarray::from_values<float>({1, 4}, {0.5f, -1, 2, 0.25f}));
  ex.run();
  CHECK(ex.get_output(0).values<float>()[0] == doctest::Approx(0.4007862).epsilon(1e-6));
  check_loaded_modules_work();
}

TEST_CASE("a kernel library cut short is an io error naming the part past the end, not a crash") {
  // The dynamic loader maps segments as the program headers describe them; a truncated
  // file would leave pages past its end that kill the process with SIGBUS when touched.
  const test::scratch_dir scratch("module_truncated");
  std::ifstream in(GEXEC_TEST_KERNELS, std::ios::binary);
  const std::string whole((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(whole.size() > 8192);
  for (const std::size_t keep : {std::size_t{200}, std::size_t{1000}, std::size_t{4096}, whole.size() / 2}) {
    CAPTURE(keep);
    const fs::path cut = scratch.path / ("cut_" + std::to_string(keep) + ".so");
    std::ofstream(cut, std::ios::binary).write(whole.data(), static_cast<std::streamsize>(keep));
    auto e = error_of([&] { (void)gexec::load_module(cut); });
    CHECK(e.code() == gexec::errc::io);
    CHECK(contains(e, "cannot load kernel library " + cut.string() + ": the file is truncated: its "));
    CHECK(contains(e, "the file has " + std::to_string(keep) + " bytes"));
  }
  // The whole file still loads.
  const fs::path copy = scratch.path / "whole.so";
  std::ofstream(copy, std::ios::binary).write(whole.data(), static_cast<std::streamsize>(whole.size()));
  CHECK(gexec::load_module(copy));
}

TEST_CASE("a file that is not a kernel library is an io error saying why the loader refused it") {
  const test::scratch_dir scratch("module_files");
  const fs::path& dir = scratch.path;
  // Text, short and long: the dynamic loader's reasons differ ("file too short", "invalid
  // ELF header"), and are what the message ends with, not an errno nobody set.
  const fs::path short_text = dir / "short.so", long_text = dir / "long.so";
  std::ofstream(short_text) << "not a library\n";
  std::ofstream(long_text) << std::string(4096, '#') << '\n';
  for (const fs::path& p : {short_text, long_text}) {
    CAPTURE(p);
    auto e = error_of([&] { (void)gexec::load_module(p); });
    CHECK(e.code() == gexec::errc::io);
    CHECK(contains(e, "cannot load kernel library " + p.string() + ": " + fs::canonical(p).string() + ": "));
    CHECK_FALSE(contains(e, "Bad file descriptor"));
    CHECK_FALSE(contains(e, "boost::dll"));
  }
  CHECK(contains(error_of([&] { (void)gexec::load_module(short_text); }), "file too short"));
  CHECK(contains(error_of([&] { (void)gexec::load_module(long_text); }), "invalid ELF header"));

  // A directory and a FIFO are refused before the loader opens them (it would wait for
  // a FIFO's writer), by load_module, load_factory and a runtime alike.
  const fs::path fifo = dir / "lib.fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    bool ok = true;
    auto refused = [&](const fs::path& p, const char* kind, auto load) {
      try {
        load(p);
        ok = false;
      } catch (const gexec::error& e) {
        ok = ok && e.code() == gexec::errc::io &&
             std::string(e.what()).find("kernel library " + p.string() + " is " + kind + ", not a regular file") != std::string::npos;
      } catch (...) {
        ok = false;
      }
    };
    auto rt = gexec::runtime::create({.num_threads = 1});
    for (const auto& [p, kind] : {std::pair<fs::path, const char*>{dir, "a directory"}, {fifo, "a FIFO"}}) {
      refused(p, kind, [](const fs::path& q) { (void)gexec::load_module(q); });
      refused(p, kind, [](const fs::path& q) { (void)gexec::load_factory(q); });
      refused(p, kind, [&](const fs::path& q) { (void)rt->load_module(q); });
    }
    ::_exit(ok ? 0 : 1);
  }
  if (!test::child_succeeded(child)) {
    int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
    FAIL("loading a directory or a FIFO as a kernel library was not refused with an io error naming it");
  }
  check_loaded_modules_work();
}
