#pragma once
// cuda_backend: NVIDIA GPUs through the CUDA driver API (gexec::cuda_driver, loaded at
// run time: nothing links libcuda). It serves kDLCUDA, every device id of it.
//
//   using gpu = gexec::backends<gexec::cpu_backend, gexec::cuda_backend>;
//   gexec::basic_model<gpu> m(...);   // see <gexec/cuda.hpp>
//
// - Memory: cuMemAlloc per request (executors ask once, for their arena).
// - Streams: one per executor and device (non-blocking); copies host-to-device,
//   device-to-host, device-to-device and between devices are enqueued on it.
// - Workspace for compiled kernels (TVMBackendAllocWorkspace with device type 2) comes
//   from a pool per stream: a block freed while the kernels using it are still queued is
//   only handed out again to later work on that same stream, which runs after them, and
//   the steady state allocates nothing, so a run can be captured into a CUDA Graph.
//   Blocks go back to the driver when the stream is destroyed.
// - The driver is acquired on first use, so a program may name this backend and run
//   CPU-only models on a machine without a GPU; a model placed on a CUDA device there
//   fails to build with errc::no_device.

#include "../config.hpp"

#include <dlpack/dlpack.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "../backends/backend.hpp"
#include "../detail/shape.hpp"
#include "../device.hpp"
#include "../error.hpp"
#include "../ndarray.hpp"
#include "driver.hpp"

GEXEC_NAMESPACE_BEGIN

struct cuda_backend_options {
  /// The driver to use; null: cuda_driver::process_default() (GEXEC_CUDA_DRIVER, else libcuda.so.1).
  std::shared_ptr<cuda_driver> driver;
  /// Wait for every kernel right after launching it, so that an asynchronous failure (an
  /// illegal address) is reported by the node that caused it. For debugging: slow.
  bool synchronize_each_launch = false;
};

class cuda_backend {
 public:
  static constexpr int device_type = kDLCUDA;

  /// An executor's queue on one device, with the workspace blocks ordered by it.
  struct stream_state {
    cuda_api::CUstream stream = nullptr;
    int device = 0;
    struct block {
      cuda_api::CUdeviceptr ptr;
      std::uint64_t bytes;
    };
    std::vector<block> free_blocks;  ///< sorted by size
    std::vector<block> used_blocks;
  };
  using stream_type = stream_state*;
  using event_type = cuda_api::CUevent;

  explicit cuda_backend(cuda_backend_options options = {}) : s_(std::make_shared<shared>(std::move(options))) {}

  /// The driver, loaded on first use (errc::no_device where there is none).
  [[nodiscard]] cuda_driver& driver() const { return s_->get(); }

  void* allocate(DLDevice d, std::uint64_t bytes) {
    cuda_driver& drv = current(d);
    cuda_api::CUdeviceptr p = 0;
    const cuda_api::CUresult r = drv.cuMemAlloc(&p, static_cast<std::size_t>(bytes == 0 ? 1 : bytes));
    if (r == cuda_api::CUDA_ERROR_OUT_OF_MEMORY)
      throw error(errc::out_of_memory, "cuMemAlloc of " + std::to_string(bytes) + " bytes on " + to_string(d) + ": " + drv.describe(r));
    drv.check(r, "cuMemAlloc of " + std::to_string(bytes) + " bytes", d.device_id);
    return reinterpret_cast<void*>(static_cast<std::uintptr_t>(p));
  }
  void free(DLDevice d, void* p) noexcept {
    if (!p) return;
    try {
      cuda_driver& drv = s_->get();
      if (drv.sticky_error(d.device_id)) return;  // the context is gone; nothing can be given back
      drv.make_current(d.device_id);
      drv.cuMemFree(reinterpret_cast<std::uintptr_t>(p));
    } catch (...) {
    }
  }

  stream_type create_stream(DLDevice d) {
    cuda_driver& drv = current(d);
    auto state = std::make_unique<stream_state>();
    state->device = d.device_id;
    drv.check(drv.cuStreamCreate(&state->stream, cuda_api::CU_STREAM_NON_BLOCKING), "cuStreamCreate", d.device_id);
    return state.release();
  }
  void destroy_stream(DLDevice d, stream_type& s) noexcept {
    std::unique_ptr<stream_state> state(s);
    s = nullptr;
    if (!state) return;
    try {
      cuda_driver& drv = s_->get();
      if (drv.sticky_error(d.device_id)) return;
      drv.make_current(d.device_id);
      drv.cuStreamSynchronize(state->stream);
      for (const auto& b : state->free_blocks) drv.cuMemFree(b.ptr);
      for (const auto& b : state->used_blocks) drv.cuMemFree(b.ptr);
      drv.cuStreamDestroy(state->stream);
    } catch (...) {
    }
  }
  void* native_handle(stream_type& s) noexcept { return s ? static_cast<void*>(s->stream) : nullptr; }

  /// Enqueues a copy of equal-sized tensors between the host and a CUDA device, within
  /// one device, or between two devices.
  void copy_async(const DLTensor& from, DLTensor& to, stream_type& s) {
    const bool src_gpu = from.device.device_type == kDLCUDA, dst_gpu = to.device.device_type == kDLCUDA;
    if ((!src_gpu && from.device.device_type != kDLCPU) || (!dst_gpu && to.device.device_type != kDLCPU) || (!src_gpu && !dst_gpu))
      throw error(errc::device_mismatch, "cuda backend cannot copy from " + to_string(from.device) + " to " + to_string(to.device));
    const auto bytes = detail::checked_byte_size({from.shape, static_cast<std::size_t>(from.ndim)}, from.dtype).value_or(0);
    const auto room = detail::checked_byte_size({to.shape, static_cast<std::size_t>(to.ndim)}, to.dtype).value_or(0);
    if (bytes != room) throw error(errc::shape_mismatch, "cuda backend: copy of " + std::to_string(bytes) + " bytes into " + std::to_string(room));
    if (bytes == 0) return;
    const int device = s ? s->device : (dst_gpu ? to.device.device_id : from.device.device_id);
    cuda_driver& drv = current({kDLCUDA, device});
    cuda_api::CUstream stream = s ? s->stream : nullptr;
    const auto src = reinterpret_cast<std::uintptr_t>(from.data) + from.byte_offset;
    const auto dst = reinterpret_cast<std::uintptr_t>(to.data) + to.byte_offset;
    const auto n = static_cast<std::size_t>(bytes);
    cuda_api::CUresult r;
    const char* what;
    if (src_gpu && dst_gpu && from.device.device_id != to.device.device_id) {
      what = "cuMemcpyPeerAsync";
      r = drv.cuMemcpyPeerAsync(dst, drv.context(to.device.device_id), src, drv.context(from.device.device_id), n, stream);
    } else if (src_gpu && dst_gpu) {
      what = "cuMemcpyDtoDAsync";
      r = drv.cuMemcpyDtoDAsync(dst, src, n, stream);
    } else if (dst_gpu) {
      what = "cuMemcpyHtoDAsync";
      r = drv.cuMemcpyHtoDAsync(dst, reinterpret_cast<const void*>(src), n, stream);
    } else {
      what = "cuMemcpyDtoHAsync";
      r = drv.cuMemcpyDtoHAsync(reinterpret_cast<void*>(dst), src, n, stream);
    }
    drv.check(r, std::string(what) + " of " + std::to_string(bytes) + " bytes from " + to_string(from.device) + " to " + to_string(to.device), device);
  }
  void synchronize(stream_type& s) {
    if (!s) return;
    cuda_driver& drv = current({kDLCUDA, s->device});
    drv.check(drv.cuStreamSynchronize(s->stream), "waiting for the executor's stream (cuStreamSynchronize; an asynchronous kernel "
                                                  "failure shows here: cuda_backend_options::synchronize_each_launch names the node)",
              s->device);
  }

  event_type create_event(DLDevice d) {
    cuda_driver& drv = current(d);
    event_type e = nullptr;
    drv.check(drv.cuEventCreate(&e, cuda_api::CU_EVENT_DISABLE_TIMING), "cuEventCreate", d.device_id);
    return e;
  }
  void destroy_event(DLDevice d, event_type& e) noexcept {
    if (!e) return;
    try {
      cuda_driver& drv = s_->get();
      if (!drv.sticky_error(d.device_id)) drv.cuEventDestroy(e);
    } catch (...) {
    }
    e = nullptr;
  }
  void record(event_type& e, stream_type& s) {
    cuda_driver& drv = current({kDLCUDA, s->device});
    drv.check(drv.cuEventRecord(e, s->stream), "cuEventRecord", s->device);
  }
  void wait(stream_type& s, event_type& e) {
    cuda_driver& drv = current({kDLCUDA, s->device});
    drv.check(drv.cuStreamWaitEvent(s->stream, e, 0), "cuStreamWaitEvent", s->device);
  }

  /// Device scratch for compiled kernels from the stream's pool (see above); without a
  /// stream (a kernel called outside an executor's run), straight from the driver.
  void* alloc_workspace(DLDevice d, std::uint64_t bytes, stream_type* s) {
    if (bytes > std::numeric_limits<std::uint64_t>::max() - 255)  // rounded up below, it would wrap to a small block
      throw error(errc::out_of_memory, "cuda backend: workspace of " + std::to_string(bytes) + " bytes on " + to_string(d));
    const std::uint64_t size = (std::max<std::uint64_t>(bytes, 1) + 255) / 256 * 256;
    if (s && *s && (*s)->device == d.device_id) {
      stream_state& st = **s;
      auto it = std::lower_bound(st.free_blocks.begin(), st.free_blocks.end(), size, [](const auto& b, std::uint64_t n) { return b.bytes < n; });
      if (it != st.free_blocks.end() && it->bytes <= 2 * size) {
        st.used_blocks.push_back(*it);
        st.free_blocks.erase(it);
        return reinterpret_cast<void*>(static_cast<std::uintptr_t>(st.used_blocks.back().ptr));
      }
      void* p = allocate(d, size);
      st.used_blocks.push_back({reinterpret_cast<std::uintptr_t>(p), size});
      return p;
    }
    return allocate(d, size);
  }
  int free_workspace(DLDevice d, void* p, stream_type* s) noexcept {
    if (!p) return -1;
    if (s && *s && (*s)->device == d.device_id) {
      stream_state& st = **s;
      const auto ptr = reinterpret_cast<std::uintptr_t>(p);
      auto used = std::find_if(st.used_blocks.begin(), st.used_blocks.end(), [&](const auto& b) { return b.ptr == ptr; });
      if (used == st.used_blocks.end()) return -1;
      const stream_state::block b = *used;
      st.used_blocks.erase(used);
      auto at = std::lower_bound(st.free_blocks.begin(), st.free_blocks.end(), b.bytes, [](const auto& x, std::uint64_t n) { return x.bytes < n; });
      try {
        st.free_blocks.insert(at, b);
      } catch (...) {
        free(d, p);
      }
      return 0;
    }
    free(d, p);
    return 0;
  }
  /// Zeroes `bytes` of device memory, complete on return (fresh executor storage).
  void fill_zero(DLDevice d, void* p, std::uint64_t bytes) {
    cuda_driver& drv = current(d);
    drv.check(drv.cuMemsetD8Async(reinterpret_cast<std::uintptr_t>(p), 0, static_cast<std::size_t>(bytes), nullptr),
              "cuMemsetD8Async of " + std::to_string(bytes) + " bytes", d.device_id);
    drv.check(drv.cuStreamSynchronize(nullptr), "zeroing device memory (cuStreamSynchronize)", d.device_id);
  }
  /// Makes `d` current on this thread, as TVM's __tvm_set_device does.
  void set_device(DLDevice d) { current(d); }

  [[nodiscard]] const void* launch_services() const noexcept {
    try {
      s_->get();
    } catch (...) {
      return nullptr;
    }
    return &s_->services;
  }

  /// A device tensor owned by this backend (freed when the last view of it goes).
  [[nodiscard]] ndarray empty(std::vector<std::int64_t> shape, DLDataType dtype, DLDevice d = cuda()) {
    const auto bytes = detail::checked_byte_size(shape, dtype);
    if (!bytes) throw error(errc::out_of_memory, "cuda_backend::empty: the tensor's size overflows");
    void* p = allocate(d, *bytes);
    std::shared_ptr<void> owner(p, [s = s_, d](void* q) { cuda_backend(s).free(d, q); });
    return ndarray::view(DLTensor{p, d, static_cast<int>(shape.size()), dtype, shape.data(), nullptr, 0}, std::move(owner));
  }

 private:
  struct shared {
    explicit shared(cuda_backend_options o) : options(std::move(o)) { services.synchronize_each_launch = options.synchronize_each_launch; }
    cuda_driver& get() {
      if (cuda_driver* d = loaded.load(std::memory_order_acquire)) [[likely]]
        return *d;
      std::lock_guard g(mu);
      if (!options.driver) options.driver = cuda_driver::process_default();
      services.driver = options.driver.get();
      loaded.store(options.driver.get(), std::memory_order_release);
      return *options.driver;
    }
    cuda_backend_options options;
    cuda_launch_services services;
    std::mutex mu;
    std::atomic<cuda_driver*> loaded{nullptr};
  };
  explicit cuda_backend(std::shared_ptr<shared> s) : s_(std::move(s)) {}

  cuda_driver& current(DLDevice d) const {
    if (d.device_type != kDLCUDA) throw error(errc::device_mismatch, "cuda backend: " + to_string(d) + " is not a CUDA device");
    cuda_driver& drv = s_->get();
    drv.make_current(d.device_id);
    return drv;
  }

  std::shared_ptr<shared> s_;
};
static_assert(device_backend<cuda_backend>);

GEXEC_NAMESPACE_END
