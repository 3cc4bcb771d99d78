// gexec::module against kernel libraries that try to make it do what it must not: a
// graph calling a symbol that is not one of the library's own functions (libc's abort,
// libm's cos, a data object), context slots gexec must not write, and a data symbol
// whose size in the symbol table runs past what the library maps. The libraries are
// in tests/kernels (hostile_library.c, slot_libraries.c, lying_blob.c).

#include <gexec/detail/last_error.hpp>
#include <gexec/executor.hpp>
#include <gexec/load.hpp>

#include "test_support.hpp"

#include <doctest/doctest.h>

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <thread>
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

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The ELF header and program headers of a library of this machine's class, read from
// and written back to its bytes.
ElfW(Ehdr) elf_header(const std::string& bytes) {
  ElfW(Ehdr) h{};
  REQUIRE(bytes.size() >= sizeof h);
  std::memcpy(&h, bytes.data(), sizeof h);
  REQUIRE(h.e_phentsize == sizeof(ElfW(Phdr)));
  return h;
}

void set_elf_header(std::string& bytes, const ElfW(Ehdr)& h) { std::memcpy(bytes.data(), &h, sizeof h); }

std::vector<ElfW(Phdr)> program_headers(const std::string& bytes) {
  const ElfW(Ehdr) h = elf_header(bytes);
  std::vector<ElfW(Phdr)> ph(h.e_phnum);
  REQUIRE(h.e_phoff + ph.size() * sizeof(ElfW(Phdr)) <= bytes.size());
  std::memcpy(ph.data(), bytes.data() + h.e_phoff, ph.size() * sizeof(ElfW(Phdr)));
  return ph;
}

void set_program_header(std::string& bytes, std::size_t i, const ElfW(Phdr)& p) {
  std::memcpy(bytes.data() + elf_header(bytes).e_phoff + i * sizeof p, &p, sizeof p);
}

/// Indices of the program headers of type `type`, in table order.
std::vector<std::size_t> headers_of_type(const std::vector<ElfW(Phdr)>& ph, std::uint32_t type) {
  std::vector<std::size_t> found;
  for (std::size_t i = 0; i < ph.size(); ++i)
    if (ph[i].p_type == type) found.push_back(i);
  return found;
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
  // The cuts are where the headers say parts end: where they lie in the file depends on
  // the build type (debug information follows the loadable segments).
  const test::scratch_dir scratch("module_truncated");
  const std::string whole = file_bytes(GEXEC_TEST_KERNELS);
  const ElfW(Ehdr) eh = elf_header(whole);
  const std::vector<ElfW(Phdr)> ph = program_headers(whole);
  const std::vector<std::size_t> loads = headers_of_type(ph, PT_LOAD);
  REQUIRE(loads.size() >= 2);
  const std::size_t first = loads.front(), last = loads.back();
  const ElfW(Phdr)& l = ph[last];
  REQUIRE(l.p_filesz > 0);
  struct cut {
    std::size_t keep;
    std::string part;
  };
  const cut cuts[] = {
      {eh.e_phoff + sizeof(ElfW(Phdr)), "program header table"},  // one header of the table left
      {ph[first].p_offset + ph[first].p_filesz - 1, "loadable segment " + std::to_string(first)},
      {l.p_offset, "loadable segment " + std::to_string(last)},
      {l.p_offset + l.p_filesz - 1, "loadable segment " + std::to_string(last)},
  };
  for (const cut& c : cuts) {
    CAPTURE(c.keep);
    const fs::path path = scratch.path / ("cut_" + std::to_string(c.keep) + ".so");
    write_file(path, whole.substr(0, c.keep));
    auto e = error_of([&] { (void)gexec::load_module(path); });
    CHECK(e.code() == gexec::errc::io);
    CHECK(contains(e, "cannot load kernel library " + path.string() + ": the file is truncated: its " + c.part + " ends at byte "));
    CHECK(contains(e, "the file has " + std::to_string(c.keep) + " bytes"));
  }
  // The whole file still loads.
  const fs::path copy = scratch.path / "whole.so";
  write_file(copy, whole);
  CHECK(gexec::load_module(copy));
}

TEST_CASE("program headers the dynamic loader cannot survive are refused before it maps the library") {
  // Each of these made glibc's dlopen() kill the process (SIGSEGV, a stack overflow).
  const test::scratch_dir scratch("module_headers");
  const std::string whole = file_bytes(GEXEC_TEST_KERNELS);
  const std::vector<ElfW(Phdr)> ph = program_headers(whole);
  const std::vector<std::size_t> loads = headers_of_type(ph, PT_LOAD), dynamic = headers_of_type(ph, PT_DYNAMIC);
  REQUIRE(loads.size() >= 3);
  REQUIRE(dynamic.size() == 1);
  auto refused = [&](const std::string& name, const std::string& bytes, const std::string& why) {
    CAPTURE(name);
    const fs::path path = scratch.path / name;
    write_file(path, bytes);
    auto e = error_of([&] { (void)gexec::load_module(path); });
    CHECK(e.code() == gexec::errc::invalid_module);
    CHECK(contains(e, "cannot load kernel library " + path.string() + ": " + why));
  };

  // The dynamic section where no loadable segment maps anything.
  std::string bytes = whole;
  ElfW(Phdr) d = ph[dynamic[0]];
  d.p_vaddr = d.p_paddr = ph[loads.back()].p_vaddr + ph[loads.back()].p_memsz + 0x100000;
  set_program_header(bytes, dynamic[0], d);
  refused("dynamic_outside.so", bytes,
          "program header " + std::to_string(dynamic[0]) + " (PT_DYNAMIC) at address 0x");
  CHECK(contains(error_of([&] { (void)gexec::load_module(scratch.path / "dynamic_outside.so"); }),
                 "lies outside what the loadable segments map from the file"));

  // Two identical loadable segments: the second is mapped over the first.
  bytes = whole;
  set_program_header(bytes, loads[1], ph[loads[0]]);
  refused("same_segment_twice.so", bytes,
          "program header " + std::to_string(loads[1]) + " (PT_LOAD) at address 0x0 overlaps program header " +
              std::to_string(loads[0]) + " at 0x0");
  // Two that share a page, and two out of address order.
  bytes = whole;
  ElfW(Phdr) shifted = ph[loads[1]];
  shifted.p_vaddr = shifted.p_paddr = ph[loads[0]].p_vaddr + ph[loads[0]].p_memsz - 1;
  shifted.p_offset = ph[loads[0]].p_offset + ph[loads[0]].p_memsz - 1;
  set_program_header(bytes, loads[1], shifted);
  refused("shared_page.so", bytes, "program header " + std::to_string(loads[1]) + " (PT_LOAD) at address 0x");
  bytes = whole;
  set_program_header(bytes, loads[1], ph[loads[2]]);
  set_program_header(bytes, loads[2], ph[loads[1]]);
  refused("unordered.so", bytes,
          "program header " + std::to_string(loads[2]) + " (PT_LOAD) at address 0x");
  CHECK(contains(error_of([&] { (void)gexec::load_module(scratch.path / "unordered.so"); }),
                 "the loader needs loadable segments in ascending address order"));

  // Program headers of another size than the class's.
  bytes = whole;
  ElfW(Ehdr) h = elf_header(whole);
  h.e_phentsize = sizeof(ElfW(Phdr)) / 2;
  set_elf_header(bytes, h);
  refused("short_headers.so", bytes,
          "its program headers are " + std::to_string(sizeof(ElfW(Phdr)) / 2) + " bytes each, not the " +
              std::to_string(sizeof(ElfW(Phdr))) + " of its ELF class");

  // 65,535 program headers (the library's own, then empty ones) in a table appended to
  // the file: the loader copies the table onto the stack. Loaded on a thread with a
  // 256 KiB stack, the refusal comes before dlopen() and the thread survives.
  bytes = whole;
  bytes.resize((bytes.size() + 7) / 8 * 8);
  h = elf_header(whole);
  h.e_phoff = bytes.size();
  h.e_phnum = 65535;
  bytes.append(std::size_t{65535} * sizeof(ElfW(Phdr)), '\0');
  set_elf_header(bytes, h);
  for (std::size_t i = 0; i < ph.size(); ++i) set_program_header(bytes, i, ph[i]);
  const fs::path many = scratch.path / "many_headers.so";
  write_file(many, bytes);
  struct outcome {
    fs::path path;
    bool refused = false;
    gexec::errc code{};
    std::string what;
  } result{many, false, {}, {}};
  pthread_attr_t attr;
  REQUIRE(pthread_attr_init(&attr) == 0);
  REQUIRE(pthread_attr_setstacksize(&attr, 256 * 1024) == 0);
  pthread_t thread;
  REQUIRE(pthread_create(
              &thread, &attr,
              [](void* arg) -> void* {
                auto& r = *static_cast<outcome*>(arg);
                try {
                  (void)gexec::load_module(r.path);
                } catch (const gexec::error& e) {
                  r.refused = true;
                  r.code = e.code();
                  r.what = e.what();
                }
                return nullptr;
              },
              &result) == 0);
  REQUIRE(pthread_join(thread, nullptr) == 0);
  pthread_attr_destroy(&attr);
  CHECK(result.refused);
  CHECK(result.code == gexec::errc::invalid_module);
  CHECK(result.what.find("cannot load kernel library " + many.string() + ": its program header table has 65535 entries (" +
                         std::to_string(65535 * sizeof(ElfW(Phdr))) + " bytes); gexec loads at most ") != std::string::npos);

  // The unaltered library still loads, and the libraries loaded before still work.
  const fs::path copy = scratch.path / "whole.so";
  write_file(copy, whole);
  CHECK(gexec::load_module(copy));
  check_loaded_modules_work();
}

TEST_CASE("the header check reads 32-bit libraries too") {
  // A 32-bit ARM shared object in outline: a header, a loadable segment over the whole
  // file and a dynamic section, checked as a 32-bit build checks what it loads.
  const test::scratch_dir scratch("module_elf32");
  std::string bytes(4096, '\0');
  Elf32_Ehdr h{};
  std::memcpy(h.e_ident, ELFMAG, SELFMAG);
  h.e_ident[EI_CLASS] = ELFCLASS32;
  h.e_ident[EI_DATA] = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB : ELFDATA2MSB;
  h.e_ident[EI_VERSION] = EV_CURRENT;
  h.e_type = ET_DYN;
  h.e_machine = EM_ARM;
  h.e_version = EV_CURRENT;
  h.e_phoff = sizeof h;
  h.e_ehsize = sizeof h;
  h.e_phentsize = sizeof(Elf32_Phdr);
  h.e_phnum = 2;
  Elf32_Phdr ph[2]{};
  ph[0].p_type = PT_LOAD;
  ph[0].p_filesz = ph[0].p_memsz = 4096;
  ph[0].p_flags = PF_R | PF_W;
  ph[0].p_align = 4096;
  ph[1].p_type = PT_DYNAMIC;
  ph[1].p_offset = ph[1].p_vaddr = 512;
  ph[1].p_filesz = ph[1].p_memsz = 64;
  ph[1].p_flags = PF_R | PF_W;
  auto check = [&](const std::string& name) {
    std::memcpy(bytes.data(), &h, sizeof h);
    std::memcpy(bytes.data() + sizeof h, ph, sizeof ph);
    const fs::path path = scratch.path / name;
    write_file(path, bytes);
    gexec::detail::check_elf_file(path.c_str(), path.string(), /*this_machine=*/false);
    return path;
  };
  CHECK_NOTHROW(check("sound.so"));
  ph[1].p_vaddr = 0x7ffff000;  // the dynamic section where nothing is mapped
  auto e = error_of([&] { (void)check("dynamic_outside.so"); });
  CHECK(e.code() == gexec::errc::invalid_module);
  CHECK(contains(e, "program header 1 (PT_DYNAMIC) at address 0x7ffff000 (64 bytes) lies outside"));
  ph[1].p_vaddr = 512;
  ph[0].p_vaddr = 0xfffff800;  // a segment past the 4 GiB a 32-bit loader addresses
  e = error_of([&] { (void)check("past_4gib.so"); });
  CHECK(e.code() == gexec::errc::invalid_module);
  CHECK(contains(e, "program header 0 (PT_LOAD) at address 0xfffff800 ends past the end of the address space"));
  ph[0].p_vaddr = 0;
  h.e_phnum = 129;  // the largest table is 4 KiB: 128 32-bit entries
  bytes.resize(8192);
  e = error_of([&] { (void)check("many_headers.so"); });
  CHECK(e.code() == gexec::errc::invalid_module);
  CHECK(contains(e, "its program header table has 129 entries (4128 bytes); gexec loads at most 128 (4096 bytes)"));
}

TEST_CASE("a library built for another machine or word size is named as such, not \"No such file or directory\"") {
  const test::scratch_dir scratch("module_machine");
  const std::string whole = file_bytes(GEXEC_TEST_KERNELS);
  const std::uint16_t other = gexec::detail::native_elf_machine == EM_AARCH64 ? EM_X86_64 : EM_AARCH64;
  std::string foreign = whole;
  std::memcpy(foreign.data() + 18, &other, 2);  // e_machine
  const fs::path path = scratch.path / "foreign.so";
  write_file(path, foreign);
  auto e = error_of([&] { (void)gexec::load_module(path); });
  CHECK(e.code() == gexec::errc::invalid_module);
  CHECK(contains(e, "built for " + gexec::detail::elf_machine_name(other) + ", this process is " +
                        gexec::detail::elf_machine_name(gexec::detail::native_elf_machine)));
  CHECK_FALSE(contains(e, "No such file"));
  CHECK(gexec::detail::elf_machine_name(EM_AARCH64) == "aarch64");
  CHECK(gexec::detail::elf_machine_name(EM_X86_64) == "x86-64");
  std::string narrow = whole;  // this machine, the other word size
  narrow[EI_CLASS] = sizeof(void*) == 8 ? ELFCLASS32 : ELFCLASS64;
  write_file(path, narrow);
  e = error_of([&] { (void)gexec::load_module(path); });
  CHECK(e.code() == gexec::errc::invalid_module);
  CHECK(contains(e, sizeof(void*) == 8 ? "a 32-bit library, this process is 64-bit" : "a 64-bit library, this process is 32-bit"));
}

TEST_CASE("the header check passes the libraries real linkers make") {
  // The test libraries, and every library this process has loaded (libc, libm,
  // libstdc++, the dynamic loader, ...).
  std::vector<fs::path> libraries;
  for (const auto& entry : fs::directory_iterator(GEXEC_TEST_SLOTS_DIR))
    if (entry.path().extension() == ".so") libraries.push_back(entry.path());
  for (const char* p : {GEXEC_TEST_KERNELS, GEXEC_TEST_FACTORY, GEXEC_TEST_HOSTILE, GEXEC_TEST_LYING_BLOB}) libraries.emplace_back(p);
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) -> int {
        if (info->dlpi_name && info->dlpi_name[0] == '/') static_cast<std::vector<fs::path>*>(data)->emplace_back(info->dlpi_name);
        return 0;
      },
      &libraries);
  bool saw_libc = false;
  for (const fs::path& lib : libraries) {
    CAPTURE(lib);
    saw_libc = saw_libc || lib.filename().string().starts_with("libc.so");
    CHECK_NOTHROW(gexec::detail::check_elf_file(lib.c_str(), lib.string()));
  }
  CHECK(saw_libc);
  CHECK(libraries.size() > 12);
}

TEST_CASE("a kernel library replaced by rename while it is loaded again and again never breaks a load") {
  // The way to replace a library that processes may be loading (see load_module): write
  // the new file beside it and rename it over the old one. Each load sees one whole file,
  // the old or the new; a process holding the old one keeps it.
  const test::scratch_dir scratch("module_rename");
  const std::string whole = file_bytes(GEXEC_TEST_KERNELS);
  const fs::path path = scratch.path / "lib.so", next = scratch.path / "lib.so.next";
  write_file(path, whole);
  gexec::module held = gexec::load_module(path);  // stays loaded while its file is replaced
  std::atomic<bool> done{false};
  std::atomic<int> replaced{0};
  std::thread writer([&] {
    while (!done.load()) {
      write_file(next, whole);
      fs::rename(next, path);
      replaced.fetch_add(1);
    }
  });
  int loaded = 0, failed = 0;
  for (int i = 0; i < 40 || replaced.load() < 20; ++i) {
    try {
      held = gexec::module();  // unloaded, so the next load maps the file anew
      held = gexec::load_module(path);
      CHECK(run_once(held, "test_add_one", {1, 2, 3, 4}) == std::vector<float>{2, 3, 4, 5});
      ++loaded;
    } catch (const gexec::error& e) {
      ++failed;
      CAPTURE(e.what());
      CHECK(e.code() == gexec::errc::io);  // a path between renames: never a half-written file
    }
    if (i > 400) break;
  }
  done = true;
  writer.join();
  CHECK(loaded > 0);
  CHECK(failed == 0);
  CHECK(replaced.load() > 0);
  check_loaded_modules_work();
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
  // A symbolic link whose target is gone: the link is named as one, with where it points.
  const fs::path dangling = dir / "dangling.so";
  fs::create_symlink(dir / "gone" / "model.so", dangling);
  const auto gone = error_of([&] { (void)gexec::load_module(dangling); });
  CHECK(gone.code() == gexec::errc::io);
  CHECK(contains(gone, "cannot open kernel library " + dangling.string() + ": it is a symbolic link to " + (dir / "gone" / "model.so").string() +
                           ", which does not exist"));
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

TEST_CASE("a library without the barrier slot gets independent parallel tasks, more than threads; one with it, a task per thread") {
  // test_num_task writes the task count of its launch to out[t] for each task t.
  auto run_once = [](const char* library) {
    auto rt = gexec::runtime::create({.num_threads = 2});  // a fresh pool: nothing learnt yet, the first launch runs in parallel
    gexec::graph_builder b;
    auto x = b.input("x", {64});
    b.output(b.op("count", "test_num_task", {x}, {{{64}}}));
    gexec::model m(b.build(), gexec::packed_c_abi(gexec::load_module(library)), gexec::model_options{.runtime = rt});
    auto ex = m.instantiate();
    ex.set_input("x", gexec::ndarray::empty({64}, gexec::dtypes::float32));
    ex.run();
    return std::pair{ex.get_output(0).values<float>()[0], rt->pool().max_concurrency()};
  };
  const std::pair<float, int> together = run_once(GEXEC_TEST_KERNELS), independent = run_once(GEXEC_TEST_KERNELS_INDEPENDENT);
  CHECK(together.first == static_cast<float>(together.second));
  const int threads = independent.second;
  CHECK(independent.first == static_cast<float>(threads > 1 ? gexec::detail::thread_pool::kTasksPerThread * threads : 1));
  // The barrier-free build's kernel that needs the barrier says so.
  gexec::module lib = gexec::load_module(GEXEC_TEST_KERNELS_INDEPENDENT);
  CHECK_FALSE(lib.has_symbol("__TVMBackendParallelBarrier"));
}
