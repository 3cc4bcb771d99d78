#pragma once
// The device-backend policy: what a backend must provide, and backends<...>, the
// compile-time list of backends an executor dispatches device types over.
//
// A backend serves one DLDeviceType and every device id of it. The executor asks it for
// memory (its storage and parameters), for a stream per device it runs on, for copies
// enqueued on that stream, for events to order streams, for the workspace compiled
// kernels request through TVMBackendAllocWorkspace, and to make a device current.
// Everything that releases something is noexcept: it runs in destructors.
//
//   struct my_backend {
//     static constexpr int device_type = kDLExtDev;
//     using stream_type = my_queue*;
//     using event_type = my_marker;
//     void* allocate(DLDevice, std::uint64_t bytes);
//     void free(DLDevice, void*) noexcept;
//     stream_type create_stream(DLDevice);
//     void destroy_stream(DLDevice, stream_type) noexcept;
//     void copy_async(const DLTensor& from, DLTensor& to, stream_type&);
//     void synchronize(stream_type&);
//     event_type create_event(DLDevice);
//     void destroy_event(DLDevice, event_type&) noexcept;
//     void record(event_type&, stream_type&);
//     void wait(stream_type&, event_type&);
//     void* alloc_workspace(DLDevice, std::uint64_t bytes, stream_type*);
//     int free_workspace(DLDevice, void*, stream_type*) noexcept;
//     void set_device(DLDevice);
//     void* native_handle(stream_type&) noexcept;  // optional: the driver's queue (a CUstream)
//     void fill_zero(DLDevice, void*, std::uint64_t bytes);  // optional: zeroes device memory, done
//                                                           // on return (else: a copy of host zeros)
//   };

#include "../config.hpp"

#include "../device.hpp"
#include "../error.hpp"

#include <dlpack/dlpack.h>

#include <concepts>
#include <cstdint>
#include <memory>
#include <span>
#include <tuple>
#include <utility>
#include <vector>

GEXEC_NAMESPACE_BEGIN

/// Memory of a device: allocate throws gexec::error when it cannot; free never throws.
template <class B>
concept device_memory = requires(B& b, DLDevice d, std::uint64_t bytes, void* p) {
  { B::device_type } -> std::convertible_to<int>;
  { b.allocate(d, bytes) } -> std::same_as<void*>;
  requires noexcept(b.free(d, p));
};

/// An ordered queue of work on a device, and the copies enqueued on it. A copy may
/// touch the host on one side; the executor waits for the stream before the host reads
/// what a copy wrote.
template <class B>
concept device_streams = requires { typename B::stream_type; } &&
                         requires(B& b, DLDevice d, const DLTensor& from, DLTensor& to, typename B::stream_type& s) {
  { b.create_stream(d) } -> std::same_as<typename B::stream_type>;
  requires noexcept(b.destroy_stream(d, s));
  { b.copy_async(from, to, s) } -> std::same_as<void>;
  { b.synchronize(s) } -> std::same_as<void>;
};

/// Sync points between streams: `record` marks what a stream has enqueued so far,
/// `wait` makes another stream wait for it.
template <class B>
concept device_events = requires { typename B::event_type; } &&
                        requires(B& b, DLDevice d, typename B::stream_type& s, typename B::event_type& e) {
  { b.create_event(d) } -> std::same_as<typename B::event_type>;
  requires noexcept(b.destroy_event(d, e));
  { b.record(e, s) } -> std::same_as<void>;
  { b.wait(s, e) } -> std::same_as<void>;
};

/// Scratch memory for compiled kernels (TVMBackendAllocWorkspace with this device type)
/// and TVM's set-device: free_workspace returns 0, or -1 for memory it did not give out.
/// Workspace is ordered by the stream the kernels asking for it run on (null: none), so
/// that a block freed while kernels using it are still queued is only reused behind them.
template <class B>
concept device_runtime_services = requires(B& b, DLDevice d, std::uint64_t bytes, void* p, typename B::stream_type* s) {
  { b.alloc_workspace(d, bytes, s) } -> std::same_as<void*>;
  { b.free_workspace(d, p, s) } noexcept -> std::same_as<int>;
  { b.set_device(d) } -> std::same_as<void>;
};

/// The driver's own handle of a stream (a CUstream), for code that launches on it
/// itself; null for backends without one.
template <class B>
void* native_handle_of(B& b, typename B::stream_type& s) noexcept {
  if constexpr (requires { { b.native_handle(s) } noexcept -> std::same_as<void*>; }) return b.native_handle(s);
  else return nullptr;
}

/// A backend serves one DLDeviceType, every device id of it.
template <class B>
concept device_backend = device_memory<B> && device_streams<B> && device_events<B> && device_runtime_services<B>;

/// The allocator policy: the buffers for the storage slots on one device, from backend
/// B, as shared_ptrs so that views (get_output, share_params) keep them alive.
template <class A, class B>
concept storage_allocator = requires(A& a, std::shared_ptr<B> backend, DLDevice d, std::span<const std::uint64_t> sizes) {
  { a.allocate(backend, d, sizes) } -> std::same_as<std::vector<std::shared_ptr<void>>>;
};

/// The backends an executor may use; a graph naming a device none of them serves is
/// rejected at load.
template <class... Bs>
class backends {
  // Checked here rather than as a constraint, so that fwd.hpp can name backends<cpu_backend>.
  static_assert((device_backend<Bs> && ...),
                "every backend must model gexec::device_backend (memory, streams, events, workspace, set_device)");

 public:
  backends() = default;
  explicit backends(Bs... bs) : list_(std::move(bs)...) {}

  /// Calls f(backend) with the backend serving `device_type`; false if there is none.
  template <class F>
  bool visit(int device_type, F&& f) {
    return std::apply([&](auto&... b) { return ((device_type == std::decay_t<decltype(b)>::device_type ? (f(b), true) : false) || ...); },
                      list_);
  }
  /// A copy of equal-sized tensors by the backend of the device it touches (the host's
  /// when both are host tensors), complete when this returns: on a stream of its own.
  void copy(const DLTensor& from, DLTensor& to) {
    const int type = to.device.device_type != kDLCPU ? to.device.device_type : from.device.device_type;
    const DLDevice d = to.device.device_type != kDLCPU ? to.device : from.device;
    const bool served = visit(type, [&](auto& backend) {
      using B = std::decay_t<decltype(backend)>;
      typename B::stream_type stream = backend.create_stream(d);
      struct release {
        B& owner;
        DLDevice device;
        typename B::stream_type& s;
        ~release() { owner.destroy_stream(device, s); }
      } r{backend, d, stream};
      backend.copy_async(from, to, stream);
      backend.synchronize(stream);
    });
    if (!served) throw error(errc::device_mismatch, "no backend copies from " + to_string(from.device) + " to " + to_string(to.device));
  }
  /// The backend serving device type T.
  template <class B>
  [[nodiscard]] B& get() noexcept {
    return std::get<B>(list_);
  }
  [[nodiscard]] static constexpr bool serves(int device_type) noexcept {
    return ((device_type == Bs::device_type) || ...);
  }
  /// Whether allocator A can allocate on every backend of the list.
  template <class A>
  static constexpr bool allocates_with = (storage_allocator<A, Bs> && ...);

 private:
  std::tuple<Bs...> list_;
};

namespace detail {
/// Whether backend B's allocate() returns memory reading as zeros (B::allocates_zeroed).
template <class B>
inline constexpr bool allocates_zeroed = requires { requires B::allocates_zeroed; };
/// Whether allocator A hands out only memory just taken from the backend, never reused
/// (A::passes_backend_memory): zeroed where the backend's is.
template <class A>
inline constexpr bool passes_backend_memory = requires { requires A::passes_backend_memory; };
}  // namespace detail

template <class T>
inline constexpr bool is_backends_v = false;
template <class... Bs>
inline constexpr bool is_backends_v<backends<Bs...>> = true;

GEXEC_NAMESPACE_END
