// The glibc 2.28 binding of the Python wheel's binaries (python/src/glibc_compat.cpp),
// linked into this program as into gexec-run (gexec_glibc_compat(... EXECUTABLE)): every
// function it stands in for does its job here, and the program's constructors ran once,
// before main, though its __libc_start_main is the pre-2.34 one. The symbol versions the
// program needs (at most GLIBC_2.28) are checked by the ctest beside it (objdump).

#define DOCTEST_CONFIG_IMPLEMENT  // main() below: it records what ran before it
#include <doctest/doctest.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

int constructions = 0;
int constructions_at_main = -1;
struct counted {
  counted() { ++constructions; }
};
counted one_object;
__attribute__((constructor)) void count_constructor() { ++constructions; }

std::string temp_file(const char* bytes, std::size_t n) {
  char name[] = "/tmp/gexec_glibc_compat_XXXXXX";
  int fd = mkstemp(name);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, bytes, n) == static_cast<ssize_t>(n));
  close(fd);
  return name;
}

}  // namespace

TEST_CASE("the program's constructors ran once, before main") {
  CHECK(constructions_at_main == 2);
  CHECK(constructions == 2);
}

TEST_CASE("threads, once, thread-specific data, affinity and shared_ptr's counts across threads") {
  std::atomic<int> ran{0};
  std::vector<std::thread> threads;
  auto shared = std::make_shared<int>(7);
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, shared] {
      for (int k = 0; k < 10000; ++k) {
        std::shared_ptr<int> copy = shared;  // atomic counts: __libc_single_threaded is 0 here
        ran.fetch_add(*copy == 7 ? 1 : 0, std::memory_order_relaxed);
      }
    });
  for (auto& t : threads) t.join();
  CHECK(ran.load() == 40000);
  CHECK(shared.use_count() == 1);

  std::once_flag flag;
  int calls = 0;
  for (int i = 0; i < 3; ++i) std::call_once(flag, [&] { ++calls; });
  CHECK(calls == 1);

  pthread_key_t key;
  REQUIRE(pthread_key_create(&key, nullptr) == 0);
  int value = 5;
  CHECK(pthread_setspecific(key, &value) == 0);
  CHECK(pthread_getspecific(key) == &value);
  CHECK(pthread_key_delete(key) == 0);

  pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
  CHECK(pthread_mutex_trylock(&m) == 0);
  CHECK(pthread_mutex_trylock(&m) != 0);
  pthread_mutex_unlock(&m);

  cpu_set_t set;
  CPU_ZERO(&set);
  CHECK(pthread_getaffinity_np(pthread_self(), sizeof set, &set) == 0);
  CHECK(CPU_COUNT(&set) >= 1);
  CHECK(pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0);

  pthread_attr_t attr;
  pthread_attr_init(&attr);
  CHECK(pthread_attr_setstacksize(&attr, 1 << 20) == 0);
  pthread_t t;
  int out = 0;
  REQUIRE(pthread_create(&t, &attr, [](void* p) -> void* { *static_cast<int*>(p) = 42; return p; }, &out) == 0);
  void* result = nullptr;
  CHECK(pthread_join(t, &result) == 0);
  CHECK(result == &out);
  CHECK(out == 42);
  pthread_attr_destroy(&attr);
  std::thread detached([] {});
  detached.detach();
}

TEST_CASE("dlopen, dlsym, dladdr, dlinfo, dlerror and dlclose") {
  void* libm = dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);
  REQUIRE(libm != nullptr);
  auto* cos_fn = reinterpret_cast<double (*)(double)>(dlsym(libm, "cos"));
  REQUIRE(reinterpret_cast<void*>(cos_fn) != nullptr);
  CHECK(cos_fn(0.0) == 1.0);
  Dl_info info{};
  CHECK(dladdr(reinterpret_cast<void*>(cos_fn), &info) != 0);
  REQUIRE(info.dli_fname != nullptr);
  CHECK(std::string(info.dli_fname).find("libm") != std::string::npos);
  void* extra = nullptr;
  CHECK(dladdr1(reinterpret_cast<void*>(cos_fn), &info, &extra, RTLD_DL_LINKMAP) != 0);
  CHECK(extra != nullptr);
  void* map = nullptr;
  CHECK(dlinfo(libm, RTLD_DI_LINKMAP, &map) == 0);
  CHECK(map != nullptr);
  CHECK(dlsym(libm, "gexec_no_such_symbol") == nullptr);
  const char* message = dlerror();
  REQUIRE(message != nullptr);
  CHECK(std::string(message).find("gexec_no_such_symbol") != std::string::npos);
  CHECK(dlclose(libm) == 0);
  CHECK(dlopen("/gexec/no/such/library.so", RTLD_NOW) == nullptr);
  CHECK(dlerror() != nullptr);
}

TEST_CASE("stat, fstat, lstat and fstatat give the file's size and kind") {
  const std::string path = temp_file("twelve bytes", 12);
  struct stat st{};
  REQUIRE(stat(path.c_str(), &st) == 0);
  CHECK(st.st_size == 12);
  CHECK(S_ISREG(st.st_mode));
  const ino_t inode = st.st_ino;
  st = {};
  REQUIRE(lstat(path.c_str(), &st) == 0);
  CHECK(st.st_size == 12);
  CHECK(st.st_ino == inode);
  int fd = open(path.c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  st = {};
  REQUIRE(fstat(fd, &st) == 0);
  CHECK(st.st_size == 12);
  close(fd);
  st = {};
  REQUIRE(fstatat(AT_FDCWD, path.c_str(), &st, 0) == 0);
  CHECK(st.st_ino == inode);
  CHECK(std::filesystem::file_size(path) == 12);  // libstdc++'s own calls, wrapped too
  CHECK(stat("/gexec/no/such/file", &st) == -1);
  CHECK(errno == ENOENT);
  std::remove(path.c_str());
}

TEST_CASE("std::random_device draws different numbers") {
  std::random_device device;
  unsigned a = device(), b = device(), c = device();
  CHECK(!(a == b && b == c));
}

int main(int argc, char** argv) {
  constructions_at_main = constructions;
  doctest::Context context(argc, argv);
  return context.run();
}
