#pragma once
// Helpers shared by the executor-level tests: float tensors, the error a call throws,
// and the sample kernel library.

#include <gexec/executor.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <cstdint>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

// AddressSanitizer aborts on a failed allocation instead of returning null: tests that
// exhaust an address-space limit skip under it.
#if defined(__SANITIZE_ADDRESS__)
#define GEXEC_TEST_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GEXEC_TEST_UNDER_ASAN 1
#endif
#endif

// ThreadSanitizer does not support fork() in a multi-threaded process: fork tests skip.
#if defined(__SANITIZE_THREAD__)
#define GEXEC_TEST_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GEXEC_TEST_UNDER_TSAN 1
#endif
#endif

namespace test {

#ifdef GEXEC_TEST_KERNELS
/// The sample kernel library (tests/kernels), loaded once for the test program.
inline const gexec::module& kernels() {
  static gexec::module m = gexec::load_module(GEXEC_TEST_KERNELS);
  return m;
}
#endif

inline std::vector<float> iota(std::size_t n, float start = 0.0f, float step = 1.0f) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = start + step * static_cast<float>(i);
  return v;
}

inline gexec::ndarray tensor(std::vector<std::int64_t> shape, const std::vector<float>& values) {
  return gexec::ndarray::from_values<float>(std::move(shape), std::span<const float>(values));
}

inline std::vector<float> values_of(const gexec::ndarray& a) {
  auto v = a.values<float>();
  return {v.begin(), v.end()};
}

/// A fresh, empty directory for one test, removed with everything in it at the end.
struct scratch_dir {
  std::filesystem::path path;
  explicit scratch_dir(const std::string& name) {
    static std::atomic<int> made{0};
    path = std::filesystem::temp_directory_path() /
           ("gexec_test_" + name + "_" + std::to_string(::getpid()) + "_" + std::to_string(made++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;
  ~scratch_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  /// How many entries the directory holds.
  [[nodiscard]] std::size_t entries() const {
    return static_cast<std::size_t>(std::distance(std::filesystem::directory_iterator(path), {}));
  }
};

/// The gexec::error `f` throws; a test failure if it throws none.
template <class F>
gexec::error error_of(F&& f) {
  try {
    f();
  } catch (const gexec::error& e) {
    return e;
  }
  FAIL("no gexec::error thrown");
  return gexec::error(gexec::errc::unsupported, "unreachable");
}

/// Whether the forked `child` exited with status 0 within `limit`; a child still running
/// then is killed, and the test fails saying so.
inline bool child_succeeded(pid_t child, std::chrono::milliseconds limit = std::chrono::seconds(20)) {
  int status = 0;
  pid_t done = 0;
  for (auto waited = std::chrono::milliseconds(0); waited < limit && done == 0; waited += std::chrono::milliseconds(5)) {
    done = waitpid(child, &status, WNOHANG);
    if (done == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (done == 0) {
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
    FAIL("the forked child hung");
  }
  return done == child && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

inline bool contains(const gexec::error& e, const std::string& s) { return std::string(e.what()).find(s) != std::string::npos; }

}  // namespace test
