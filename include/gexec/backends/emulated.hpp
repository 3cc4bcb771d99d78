#pragma once
// emulated_backend<T>: serves device type T from host memory, so that heterogeneous
// graphs (device_index, __copy between devices, storage on two devices, zero-copy
// rules across devices) run and can be tested on any machine. Work is done at once;
// what the executor asks of the device is counted per device id, so that tests can
// check that every allocation is freed, every stream destroyed, and each copy went
// the way the plan says.
//
//   auto stats = std::make_shared<gexec::emulated_stats>();
//   using two = gexec::backends<gexec::cpu_backend, gexec::emulated_backend<>>;
//   gexec::basic_model<two, gexec::pool_allocator, gexec::registry> m(
//       graph, kernels, {}, {.devices = {gexec::cpu(), gexec::emulated()}}, two({}, {stats}));

#include "../config.hpp"

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "../detail/aligned_memory.hpp"
#include "../detail/shape.hpp"
#include "../device.hpp"
#include "../error.hpp"
#include "backend.hpp"

GEXEC_NAMESPACE_BEGIN

/// The device type emulated_backend serves unless told otherwise.
inline constexpr int emulated_device_type = kDLExtDev;
constexpr DLDevice emulated(int id = 0) noexcept { return {static_cast<DLDeviceType>(emulated_device_type), id}; }

/// What an emulated device was asked to do, per device id (ids >= max_devices share the last).
struct emulated_stats {
  static constexpr int max_devices = 4;
  struct device {
    std::atomic<long> allocations{0}, bytes{0};  ///< live
    std::atomic<long> streams{0}, events{0}, workspaces{0};  ///< live
    std::atomic<long> to_device{0}, to_host{0}, within{0};  ///< copies made
    std::atomic<long> synchronizations{0}, set_device{0};
  };
  device devices[max_devices];
  device& operator[](int id) noexcept { return devices[id < 0 ? 0 : id >= max_devices ? max_devices - 1 : id]; }
};

template <int DeviceType = emulated_device_type>
class emulated_backend {
 public:
  static constexpr int device_type = DeviceType;
  struct stream_type {
    int device_id = 0;
  };
  struct event_type {
    int device_id = 0;
    long recorded = 0;  ///< how many times it was recorded
  };

  explicit emulated_backend(std::shared_ptr<emulated_stats> stats = std::make_shared<emulated_stats>()) : stats_(std::move(stats)) {}

  [[nodiscard]] emulated_stats& stats() const noexcept { return *stats_; }

  void* allocate(DLDevice d, std::uint64_t bytes) {
    check(d, "allocate");
    void* p = detail::allocate_aligned(bytes);
    (*stats_)[d.device_id].allocations += 1;
    (*stats_)[d.device_id].bytes += static_cast<long>(bytes);
    std::lock_guard g(sizes_->mu);
    sizes_->live.push_back({p, bytes});
    return p;
  }
  void free(DLDevice d, void* p) noexcept {
    if (!p) return;
    std::uint64_t bytes = 0;
    {
      std::lock_guard g(sizes_->mu);
      for (auto& a : sizes_->live)
        if (a.ptr == p) {
          bytes = a.bytes;
          a = sizes_->live.back();
          sizes_->live.pop_back();
          break;
        }
    }
    (*stats_)[d.device_id].allocations -= 1;
    (*stats_)[d.device_id].bytes -= static_cast<long>(bytes);
    detail::free_aligned(p);
  }

  stream_type create_stream(DLDevice d) {
    check(d, "create_stream");
    (*stats_)[d.device_id].streams += 1;
    return {d.device_id};
  }
  void destroy_stream(DLDevice d, stream_type&) noexcept { (*stats_)[d.device_id].streams -= 1; }

  /// Host to device, device to host, or within the device type; sizes must agree.
  void copy_async(const DLTensor& from, DLTensor& to, stream_type&) {
    const bool src_here = from.device.device_type == DeviceType, dst_here = to.device.device_type == DeviceType;
    if ((!src_here && from.device.device_type != kDLCPU) || (!dst_here && to.device.device_type != kDLCPU) || (!src_here && !dst_here))
      throw error(errc::device_mismatch, "emulated backend cannot copy from " + to_string(from.device) + " to " + to_string(to.device));
    const auto bytes = detail::checked_byte_size({from.shape, static_cast<std::size_t>(from.ndim)}, from.dtype).value_or(0);
    const auto room = detail::checked_byte_size({to.shape, static_cast<std::size_t>(to.ndim)}, to.dtype).value_or(0);
    if (bytes != room) throw error(errc::shape_mismatch, "emulated backend: copy of " + std::to_string(bytes) + " bytes into " + std::to_string(room));
    if (bytes) std::memmove(static_cast<char*>(to.data) + to.byte_offset, static_cast<const char*>(from.data) + from.byte_offset, bytes);
    auto& s = (*stats_)[dst_here ? to.device.device_id : from.device.device_id];
    (src_here && dst_here ? s.within : dst_here ? s.to_device : s.to_host) += 1;
  }
  void synchronize(stream_type& s) noexcept { (*stats_)[s.device_id].synchronizations += 1; }

  event_type create_event(DLDevice d) {
    check(d, "create_event");
    (*stats_)[d.device_id].events += 1;
    return {d.device_id, 0};
  }
  void destroy_event(DLDevice d, event_type&) noexcept { (*stats_)[d.device_id].events -= 1; }
  void record(event_type& e, stream_type&) noexcept { ++e.recorded; }
  void wait(stream_type&, event_type& e) {
    if (e.recorded == 0) throw error(errc::invalid_argument, "emulated backend: waiting for an event that was never recorded");
  }

  void* alloc_workspace(DLDevice d, std::uint64_t bytes, stream_type*) {
    check(d, "alloc_workspace");
    void* p = detail::allocate_aligned(bytes);
    (*stats_)[d.device_id].workspaces += 1;
    return p;
  }
  int free_workspace(DLDevice d, void* p, stream_type*) noexcept {
    if (!p) return -1;
    (*stats_)[d.device_id].workspaces -= 1;
    detail::free_aligned(p);
    return 0;
  }
  void set_device(DLDevice d) {
    check(d, "set_device");
    (*stats_)[d.device_id].set_device += 1;
  }

 private:
  static void check(DLDevice d, const char* what) {
    if (d.device_type != DeviceType || d.device_id < 0)
      throw error(errc::device_mismatch, std::string("emulated backend ") + what + ": " + to_string(d) + " is not its device");
  }
  struct allocation {
    void* ptr;
    std::uint64_t bytes;
  };
  struct size_table {
    std::mutex mu;
    std::vector<allocation> live;
  };
  std::shared_ptr<emulated_stats> stats_;
  std::shared_ptr<size_table> sizes_ = std::make_shared<size_table>();
};
static_assert(device_backend<emulated_backend<>>);

GEXEC_NAMESPACE_END
