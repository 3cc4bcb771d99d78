#pragma once
// gexec::cuda_driver: the CUDA driver API, reached through a table of function pointers
// that cuGetProcAddress fills at run time. Nothing links libcuda, so a program built
// with the CUDA backend starts on a machine without a GPU or driver, and only creating
// something on a CUDA device there fails ("no CUDA driver ...").
//
// The driver library is libcuda.so.1, or the file the environment variable
// GEXEC_CUDA_DRIVER names, or one a program loads itself (cuda_driver::load): tests use
// that to run the whole CUDA path over a host-emulated driver.
//
// A driver object is shared (shared_ptr) by the backends that use it. It keeps each
// device's primary context, and which devices suffered a sticky error: after an illegal
// address or a failed launch a CUDA context cannot be used again, so every later
// call on that device is refused with the error that broke it.

#include "../config.hpp"

#include <dlfcn.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "../error.hpp"
#include "driver_api.hpp"

GEXEC_NAMESPACE_BEGIN

class cuda_driver {
 public:
  static constexpr int max_devices = 64;

#define GEXEC_CUDA_DECLARE_POINTER(name, ...) cuda_api::name##_fn name = nullptr;
  GEXEC_CUDA_DRIVER_FUNCTIONS(GEXEC_CUDA_DECLARE_POINTER)
#undef GEXEC_CUDA_DECLARE_POINTER

  /// Loads the driver library at `path` and initialises it. Throws errc::no_device
  /// naming the path and the loader's reason when it cannot be opened or lacks a
  /// function, errc::device_error when cuInit fails.
  static std::shared_ptr<cuda_driver> load(const std::filesystem::path& path) {
    return std::shared_ptr<cuda_driver>(new cuda_driver(path.string()));
  }

  /// The process's driver: GEXEC_CUDA_DRIVER when set, else libcuda.so.1; loaded on the
  /// first call. A failed load is not remembered: a later call tries again.
  static std::shared_ptr<cuda_driver> process_default() {
    static std::mutex mu;
    static std::shared_ptr<cuda_driver>* driver = new std::shared_ptr<cuda_driver>;  // never destroyed: launchers use it at exit
    std::lock_guard g(mu);
    if (!*driver) {
      const char* env = std::getenv("GEXEC_CUDA_DRIVER");
      *driver = load(env && *env ? env : "libcuda.so.1");
    }
    return *driver;
  }

  cuda_driver(const cuda_driver&) = delete;
  cuda_driver& operator=(const cuda_driver&) = delete;
  ~cuda_driver() {
    for (int d = 0; d < max_devices; ++d)
      if (contexts_[d].load(std::memory_order_relaxed)) cuDevicePrimaryCtxRelease(d);
    // The library stays loaded: handles given to compiled code may still point into it.
  }

  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  [[nodiscard]] int device_count() const noexcept { return device_count_; }
  [[nodiscard]] int version() const noexcept { return version_; }

  /// "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)".
  [[nodiscard]] std::string describe(cuda_api::CUresult r) const {
    const char* name = nullptr;
    const char* text = nullptr;
    if (cuGetErrorName(r, &name) != cuda_api::CUDA_SUCCESS || !name) name = nullptr;
    if (cuGetErrorString(r, &text) != cuda_api::CUDA_SUCCESS || !text) text = nullptr;
    return (name ? std::string(name) : "CUDA error " + std::to_string(r)) + (text ? " (" + std::string(text) + ")" : std::string());
  }

  /// Throws errc::device_error for a failed call `what` on device `device` (-1: none);
  /// a sticky error marks the device unusable first.
  void check(cuda_api::CUresult r, std::string_view what, int device = -1) const {
    if (r == cuda_api::CUDA_SUCCESS) [[likely]]
      return;
    fail(r, what, device);
  }
  [[noreturn]] void fail(cuda_api::CUresult r, std::string_view what, int device = -1) const {
    std::string message = std::string(what) + (device >= 0 ? " on cuda:" + std::to_string(device) : std::string()) + " failed: " + describe(r);
    if (cuda_api::is_sticky(r) && device >= 0 && device < max_devices) {
      int expected = 0;
      broken_[device].compare_exchange_strong(expected, r);
      message += "; the CUDA context of cuda:" + std::to_string(device) + " is unusable from now on (restart the process)";
    }
    throw error(errc::device_error, message);
  }
  /// Refuses work on a device a sticky error broke.
  void check_usable(int device) const {
    if (device < 0 || device >= device_count_)
      throw error(errc::device_mismatch, "cuda:" + std::to_string(device) + " does not exist (" + std::to_string(device_count_) +
                                             " CUDA devices through " + path_ + ")");
    if (const int r = broken_[device].load(std::memory_order_relaxed)) [[unlikely]]
      throw error(errc::device_error, "cuda:" + std::to_string(device) + " is unusable after " + describe(r) +
                                          " (a sticky CUDA error; restart the process)");
  }
  /// The sticky error that broke `device`, or 0.
  [[nodiscard]] int sticky_error(int device) const noexcept {
    return device >= 0 && device < max_devices ? broken_[device].load(std::memory_order_relaxed) : 0;
  }

  /// The primary context of `device`, retained on first use and kept for the driver's life.
  cuda_api::CUcontext context(int device) {
    check_usable(device);
    cuda_api::CUcontext c = contexts_[device].load(std::memory_order_acquire);
    if (c) [[likely]]
      return c;
    std::lock_guard g(mu_);
    c = contexts_[device].load(std::memory_order_relaxed);
    if (!c) {
      cuda_api::CUdevice handle = 0;
      check(cuDeviceGet(&handle, device), "cuDeviceGet", device);
      check(cuDevicePrimaryCtxRetain(&c, handle), "cuDevicePrimaryCtxRetain", device);
      contexts_[device].store(c, std::memory_order_release);
    }
    return c;
  }

  /// Makes `device` current on this thread (its primary context), as cudaSetDevice does.
  void make_current(int device) {
    cuda_api::CUcontext c = context(device);
    current& t = this_thread();
    if (t.driver == this && t.context == c) return;
    check(cuCtxSetCurrent(c), "cuCtxSetCurrent", device);
    t = {this, c, device};
  }
  /// The device this thread last made current through this driver; -1 if none.
  [[nodiscard]] int current_device() const noexcept {
    const current& t = this_thread();
    return t.driver == this ? t.device : -1;
  }

 private:
  struct current {
    const cuda_driver* driver = nullptr;
    cuda_api::CUcontext context = nullptr;
    int device = -1;
  };
  static current& this_thread() noexcept {
    thread_local current t;
    return t;
  }

  explicit cuda_driver(std::string path) : path_(std::move(path)) {
    library_ = dlopen(path_.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!library_) {
      const char* why = dlerror();
      throw error(errc::no_device, "no CUDA driver: cannot load " + path_ + " (" + (why ? why : "unknown reason") +
                                       "); a GPU and NVIDIA's driver are needed, or GEXEC_CUDA_DRIVER naming a driver library");
    }
    auto get_v2 = reinterpret_cast<cuda_api::cuGetProcAddress_v2_fn>(dlsym(library_, "cuGetProcAddress_v2"));
    auto get_v1 = reinterpret_cast<cuda_api::cuGetProcAddress_fn>(dlsym(library_, "cuGetProcAddress"));
    if (!get_v2 && !get_v1)
      throw error(errc::no_device, "no CUDA driver: " + path_ + " has no cuGetProcAddress (a CUDA driver older than 11.3?)");
    auto resolve = [&](const char* name) {
      void* fn = nullptr;
      const cuda_api::CUresult r = get_v2 ? get_v2(name, &fn, cuda_api::requested_cuda_version, cuda_api::CU_GET_PROC_ADDRESS_DEFAULT, nullptr)
                                          : get_v1(name, &fn, cuda_api::requested_cuda_version, cuda_api::CU_GET_PROC_ADDRESS_DEFAULT);
      if (r != cuda_api::CUDA_SUCCESS || !fn)
        throw error(errc::no_device, "no CUDA driver: " + path_ + " does not provide " + name + " (CUDA " +
                                         std::to_string(cuda_api::requested_cuda_version / 1000) + " semantics)");
      return fn;
    };
#define GEXEC_CUDA_RESOLVE(name, ...) name = reinterpret_cast<cuda_api::name##_fn>(resolve(#name));
    GEXEC_CUDA_DRIVER_FUNCTIONS(GEXEC_CUDA_RESOLVE)
#undef GEXEC_CUDA_RESOLVE
    const cuda_api::CUresult r = cuInit(0);
    if (r == cuda_api::CUDA_ERROR_NO_DEVICE)
      throw error(errc::no_device, "no CUDA device: the driver " + path_ + " finds no CUDA-capable device");
    check(r, "cuInit");
    check(cuDriverGetVersion(&version_), "cuDriverGetVersion");
    check(cuDeviceGetCount(&device_count_), "cuDeviceGetCount");
    if (device_count_ <= 0) throw error(errc::no_device, "no CUDA device: the driver " + path_ + " finds none");
    if (device_count_ > max_devices) device_count_ = max_devices;
  }

  std::string path_;
  void* library_ = nullptr;
  int version_ = 0;
  int device_count_ = 0;
  std::mutex mu_;
  std::array<std::atomic<cuda_api::CUcontext>, max_devices> contexts_{};
  mutable std::array<std::atomic<int>, max_devices> broken_{};
};

/// What launchers of TVM's CUDA kernels need from the backend of the running executor
/// (run_context::launch_services on a CUDA device).
struct cuda_launch_services {
  cuda_driver* driver = nullptr;
  bool synchronize_each_launch = false;
};

GEXEC_NAMESPACE_END
