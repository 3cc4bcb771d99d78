// gexec::runtime and the hooks compiled code calls: registries per runtime, handles
// that outlive modules, context slots, fork, and the workspace stack (the thread
// pool's own tests are in test_thread_pool.cpp).

#include <gexec/detail/clock.hpp>
#include <gexec/detail/workspace.hpp>
#include <gexec/executor.hpp>

#include "test_support.hpp"

#include <doctest/doctest.h>

#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace fs = std::filesystem;

using test::contains;
using test::error_of;

// A private copy of the kernel library: a file no other test has loaded, so that its
// globals (context slots, cached handles) start fresh.
fs::path library_copy(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("gexec_test_runtime_" + std::to_string(getpid()));
  fs::create_directories(dir);
  fs::path p = dir / (name + ".so");
  fs::copy_file(GEXEC_TEST_KERNELS, p, fs::copy_options::overwrite_existing);
  return p;
}

gexec::validated_graph one_kernel(const char* func) {
  gexec::graph_builder b;
  b.output(b.op("k", func, {b.input("x", {4})}, {{{4}}}));
  return b.build();
}

std::vector<float> run_once(gexec::model::executor& ex, std::vector<float> x) {
  ex.set_input("x", gexec::ndarray::from_values<float>({4}, std::span<const float>(x)));
  ex.run();
  auto out = ex.get_output(0).values<float>();
  return {out.begin(), out.end()};
}

void register_scale(gexec::runtime& rt, float factor) {
  rt.register_function("gexec.test.scale", [factor](gexec::packed_args a) {
    const DLTensor& in = a.tensor(0);
    DLTensor& out = a.tensor(1);
    for (std::int64_t i = 0; i < in.shape[0]; ++i)
      static_cast<float*>(out.data)[i] = static_cast<float*>(in.data)[i] * static_cast<float>(a.float_value(2)) * factor;
  });
}

}  // namespace

TEST_CASE("gexec's monotonic clock is the one steady_clock reads, and its sleep lasts at least what it was asked") {
  // The thread pool, the benchmark, node_timer and the launch sites time with
  // detail::monotonic_ns (no <chrono> in the public headers): each reading lies between
  // two readings of std::chrono::steady_clock taken around it.
  for (int i = 0; i < 100; ++i) {
    const auto before = std::chrono::steady_clock::now().time_since_epoch();
    const std::int64_t ns = gexec::detail::monotonic_ns();
    const auto after = std::chrono::steady_clock::now().time_since_epoch();
    CHECK(std::chrono::duration_cast<std::chrono::nanoseconds>(before).count() <= ns);
    CHECK(ns <= std::chrono::duration_cast<std::chrono::nanoseconds>(after).count());
  }
  const auto start = std::chrono::steady_clock::now();
  gexec::detail::sleep_ns(3'000'000);
  CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(3));
  // Nothing to sleep returns at once (the margin is for a loaded machine's scheduler).
  const auto quick = std::chrono::steady_clock::now();
  gexec::detail::sleep_ns(0);
  gexec::detail::sleep_ns(-5);
  CHECK(std::chrono::steady_clock::now() - quick < std::chrono::milliseconds(100));
}

TEST_CASE("each runtime serves its own registered functions to one library's cached handle") {
  const fs::path lib_path = library_copy("env");
  auto rt1 = gexec::runtime::create({.num_threads = 1});
  auto rt2 = gexec::runtime::create({.num_threads = 1});
  register_scale(*rt1, 10);
  register_scale(*rt2, 100);
  gexec::model_options o1, o2;
  o1.runtime = rt1;
  o2.runtime = rt2;
  gexec::module lib = gexec::load_module(lib_path);
  auto a = gexec::model(one_kernel("test_call_env"), lib, o1).instantiate();
  auto b = gexec::model(one_kernel("test_call_env"), lib, o2).instantiate();
  // test_call_env caches the handle in a library global on its first call; the
  // kernel passes 3 as the scale.
  CHECK(run_once(a, {1, 2, 3, 4}) == std::vector<float>{30, 60, 90, 120});
  CHECK(run_once(b, {1, 2, 3, 4}) == std::vector<float>{300, 600, 900, 1200});
  CHECK(run_once(a, {1, 0, 0, 0})[0] == 30);
  // A name removed from a runtime falls back to the process default's registration.
  CHECK(rt1->remove_function("gexec.test.scale"));
  auto e = error_of([&] { (void)run_once(a, {1, 0, 0, 0}); });
  CHECK(contains(e, "function \"gexec.test.scale\" is not registered"));
  register_scale(gexec::runtime::global(), 1000);
  CHECK(run_once(a, {1, 0, 0, 0})[0] == 3000);
  CHECK(run_once(b, {1, 0, 0, 0})[0] == 300);
  CHECK(gexec::remove_global_function("gexec.test.scale"));
  CHECK(rt2->find_function("gexec.test.scale") != nullptr);
  CHECK(gexec::find_global_function("gexec.test.scale") == nullptr);
}

TEST_CASE("handles compiled code cached stay valid after their module is gone and the library is loaded again") {
  const fs::path lib_path = library_copy("own");
  // Another loader keeps the file mapped, so its globals (the cached handle) survive
  // gexec's module, as they do when libtvm_runtime or a plugin also holds the library.
  void* keep = dlopen(lib_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  REQUIRE(keep != nullptr);
  {
    gexec::module lib = gexec::load_module(lib_path);
    auto ex = gexec::model(one_kernel("test_call_own"), lib).instantiate();
    CHECK(run_once(ex, {1, 2, 3, 4}) == std::vector<float>{2, 3, 4, 5});
  }
  // No gexec module holds the library now; the kernel's cached handle fails cleanly.
  auto kernel = reinterpret_cast<gexec::packed_c_func>(dlsym(keep, "test_call_own"));
  REQUIRE(reinterpret_cast<void*>(kernel) != nullptr);
  auto x = gexec::ndarray::from_values<float>({4}, {1, 1, 1, 1});
  auto y = gexec::ndarray::empty({4}, gexec::dtypes::float32);
  TVMValue args[2];
  args[0].v_handle = const_cast<DLTensor*>(&x.dltensor());
  args[1].v_handle = const_cast<DLTensor*>(&y.dltensor());
  int codes[2] = {gexec::tc_dltensor, gexec::tc_dltensor};
  TVMValue ret;
  int ret_code = 0;
  gexec::detail::take_last_error();
  CHECK(kernel(args, codes, 2, &ret, &ret_code, nullptr) == -1);
  const std::string message = gexec::detail::take_last_error();
  CAPTURE(message);
  CHECK(message.find("was unloaded") != std::string::npos);
  {
    gexec::module lib = gexec::load_module(lib_path);
    auto ex = gexec::model(one_kernel("test_call_own"), lib).instantiate();
    CHECK(run_once(ex, {5, 6, 7, 8}) == std::vector<float>{6, 7, 8, 9});
  }
  dlclose(keep);
  // Loaded afresh (unmapped in between): the library starts with no cached handle.
  gexec::module lib = gexec::load_module(lib_path);
  auto ex = gexec::model(one_kernel("test_call_own"), lib).instantiate();
  CHECK(run_once(ex, {0, 0, 0, 1}) == std::vector<float>{1, 1, 1, 2});
}

TEST_CASE("a library whose context slots another runtime filled is refused, not taken over") {
  const fs::path lib_path = library_copy("claimed");
  void* other = dlopen(lib_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  REQUIRE(other != nullptr);
  auto* slot = static_cast<void**>(dlsym(other, "__TVMBackendParallelLaunch"));
  REQUIRE(slot != nullptr);
  *slot = reinterpret_cast<void*>(&dlopen);  // as another runtime's hook would be
  auto e = error_of([&] { (void)gexec::load_module(lib_path); });
  CHECK(e.code() == gexec::errc::invalid_module);
  CHECK(contains(e, "__TVMBackendParallelLaunch is already set by another runtime"));
  CHECK(*slot == reinterpret_cast<void*>(&dlopen));  // left alone
  *slot = nullptr;
  gexec::module lib = gexec::load_module(lib_path);
  CHECK(*slot != nullptr);
  dlclose(other);
}

TEST_CASE("a runtime keeps the modules it loaded and has its own threads") {
  auto rt = gexec::runtime::create({.num_threads = 3});
  CHECK(rt->num_threads() == 3);
  CHECK(gexec::runtime::global().num_threads() >= 1);
  gexec::module a = rt->load_module(GEXEC_TEST_KERNELS);
  CHECK(rt->load_module(GEXEC_TEST_KERNELS) == a);
  CHECK(gexec::load_module(GEXEC_TEST_KERNELS) == a);  // one module per file in a process
}

TEST_CASE("runtime::parallel_for turns a failing task into gexec::error and stays usable") {
  auto rt = gexec::runtime::create({.num_threads = 2});
  auto e = error_of([&] {
    rt->parallel_for(0, [](int task, int) {
      if (task == 0) throw std::runtime_error("task zero refuses");
    });
  });
  CHECK(e.code() == gexec::errc::kernel_failed);
  CHECK(contains(e, "task zero refuses"));
  std::thread other([&] {
    std::atomic<int> ran{0};
    rt->parallel_for(0, [&](int, int) { ++ran; });
    CHECK(ran >= 1);
  });
  other.join();
}

#if !defined(GEXEC_TEST_UNDER_TSAN)
TEST_CASE("after fork() the child runs parallel kernels on a pool whose workers the parent started") {
  auto rt = gexec::runtime::create({.num_threads = 2});
  gexec::model_options options;
  options.runtime = rt;
  gexec::graph_builder b;
  b.output(b.op("dbl", "test_parallel_scale2", {b.input("x", {1000})}, {{{1000}}}));
  auto ex = gexec::model(b.build(), gexec::load_module(GEXEC_TEST_KERNELS), options).instantiate();
  std::vector<float> x(1000);
  for (int i = 0; i < 1000; ++i) x[static_cast<std::size_t>(i)] = static_cast<float>(i);
  ex.set_input("x", gexec::ndarray::from_values<float>({1000}, std::span<const float>(x)));
  ex.run();  // the parent's workers exist now
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    bool ok = true;
    for (int round = 0; round < 20; ++round) {
      ex.run();
      ok = ok && ex.get_output(0).values<float>()[999] == 1998.0f;
    }
    _exit(ok ? 0 : 1);
  }
  CHECK(test::child_succeeded(child));  // no hang in a parallel launch, right outputs
  ex.run();  // and the parent's pool still works
  CHECK(ex.get_output(0).values<float>()[999] == 1998.0f);
}
#endif

TEST_CASE("workspace blocks are 64-byte aligned, distinct, reused LIFO, and tolerate out-of-order frees") {
  gexec::detail::workspace_arena arena;
  void* a = arena.allocate(100);
  void* b = arena.allocate(1 << 20);  // larger than the first chunk
  void* c = arena.allocate(0);
  for (void* p : {a, b, c}) CHECK(reinterpret_cast<std::uintptr_t>(p) % 64 == 0);
  CHECK(a != b);
  CHECK(b != c);
  CHECK(arena.free(b) == 0);  // out of order: released once c is
  CHECK(arena.free(c) == 0);
  void* b2 = arena.allocate(1 << 20);
  CHECK(b2 == b);
  CHECK(arena.free(b2) == 0);
  void* a2 = arena.allocate(64);  // below a, still allocated: a fresh block above it
  CHECK(a2 != a);
  CHECK(arena.free(a2) == 0);
  CHECK(arena.allocate(64) == a2);  // reused
  int x = 0;
  CHECK(arena.free(&x) == -1);
}

TEST_CASE("a workspace arena grown by chunks settles into one chunk of its peak") {
  gexec::detail::workspace_arena arena;
  // 600 KiB, then 800 KiB above it: a second chunk (twice the first), 1800 KiB held.
  void* a = arena.allocate(600 << 10);
  void* b = arena.allocate(800 << 10);
  CHECK(arena.reserved() == (600 + 1200) << 10);
  arena.settle();  // refused: something is allocated
  CHECK(arena.reserved() == (600 + 1200) << 10);
  CHECK(arena.free(b) == 0);
  CHECK(arena.free(a) == 0);
  CHECK(arena.reserved() == (600 + 1200) << 10);  // freeing alone keeps the chunks
  arena.settle();
  CHECK(arena.reserved() == 1400 << 10);  // one chunk of the peak (1400 KiB at once)
  // The same pair fits in it, contiguous, and no further chunk is taken.
  auto* c = static_cast<std::byte*>(arena.allocate(600 << 10));
  auto* d = static_cast<std::byte*>(arena.allocate(800 << 10));
  CHECK(d == c + (600 << 10));
  CHECK(arena.reserved() == 1400 << 10);
  CHECK(arena.free(d) == 0);
  CHECK(arena.free(c) == 0);
  arena.settle();  // one chunk: kept as it is
  CHECK(arena.reserved() == 1400 << 10);
  CHECK(arena.allocate(1 << 10) == c);
}

TEST_CASE("a thread's outermost workspace scope settles its arena; an inner one does not") {
  std::thread([] {
    auto& arena = gexec::detail::workspace_arena::this_thread();
    {
      gexec::detail::workspace_scope run;
      {
        gexec::detail::workspace_scope inner;
        (void)arena.allocate(600 << 10);
        (void)arena.allocate(800 << 10);  // never freed: the scope gives it back
      }
      CHECK(arena.in_use() == 0);
      CHECK(arena.reserved() == (600 + 1200) << 10);  // an inner scope's end keeps the chunks
    }
    CHECK(arena.reserved() == 1400 << 10);
  }).join();
}

TEST_CASE("long-lived host buffers are 64-byte aligned; large ones are mappings of their own, unmapped when freed") {
  using gexec::detail::allocate_long_lived;
  using gexec::detail::free_long_lived;
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  auto mapped = [&](const void* p) {  // whether the page holding p is mapped
    unsigned char resident = 0;
    return mincore(reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(p) / page * page), 1, &resident) == 0;
  };
  // Mapped from 128 KiB on (under AddressSanitizer never, the heap's bounds being checked).
  for (std::uint64_t bytes : {std::uint64_t{0}, std::uint64_t{100}, (std::uint64_t{128} << 10) - 64, std::uint64_t{128} << 10, std::uint64_t{3} << 20}) {
    CAPTURE(bytes);
    auto* p = static_cast<std::byte*>(allocate_long_lived(bytes));
    CHECK(reinterpret_cast<std::uintptr_t>(p) % 64 == 0);
    std::memset(p, 0xab, bytes);  // all of it is writable
    const bool own_mapping = bytes >= gexec::detail::long_lived_mapped_bytes;
    if (own_mapping) CHECK(reinterpret_cast<std::uintptr_t>(p - 64) % page == 0);  // the mapping's start, its header there
    std::byte* last = p + (bytes ? bytes - 1 : 0);
    free_long_lived(p);
    if (own_mapping) CHECK_FALSE(mapped(last));  // given back to the system, not kept by the heap
  }
  free_long_lived(nullptr);
  try {
    (void)allocate_long_lived(UINT64_MAX - 1);  // refused before any allocator is asked
    FAIL("no error");
  } catch (const gexec::error& e) {
    CHECK(e.code() == gexec::errc::out_of_memory);
  }
}

TEST_CASE("a pool is sized and capped with one look at the machine (affinity mask and cgroup quota files)") {
  const unsigned before = gexec::detail::core_probes().load();
  { auto rt = gexec::runtime::create({.num_threads = 0}); }
  CHECK(gexec::detail::core_probes().load() - before == 1);
  const unsigned again = gexec::detail::core_probes().load();
  { auto rt = gexec::runtime::create({.num_threads = 3}); }
  CHECK(gexec::detail::core_probes().load() - again == 1);
}
