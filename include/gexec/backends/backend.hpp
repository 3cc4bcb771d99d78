#pragma once
// The device-backend policy: what a backend must provide, and backends<...>, the
// compile-time list of backends an executor dispatches device types over.

#include "../config.hpp"

#include <dlpack/dlpack.h>

#include <concepts>
#include <cstdint>
#include <memory>
#include <span>
#include <tuple>
#include <utility>
#include <vector>

GEXEC_NAMESPACE_BEGIN

/// A backend serves one DLDeviceType: it allocates and frees device memory, copies
/// tensors between that device and the host (or within it), and waits for the device.
template <class B>
concept device_backend = requires(B& b, DLDevice d, std::uint64_t bytes, void* p, const DLTensor& src, DLTensor& dst) {
  { B::device_type } -> std::convertible_to<int>;
  { b.allocate(d, bytes) } -> std::same_as<void*>;
  { b.free(d, p) } -> std::same_as<void>;
  { b.copy(src, dst) } -> std::same_as<void>;
  { b.synchronize(d) } -> std::same_as<void>;
};

/// The allocator policy: the buffers for the storage ids on one device, from backend B,
/// as shared_ptrs so that views (get_output, share_params) keep them alive.
template <class A, class B>
concept storage_allocator = requires(A& a, std::shared_ptr<B> backend, DLDevice d, std::span<const std::uint64_t> sizes) {
  { a.allocate(backend, d, sizes) } -> std::same_as<std::vector<std::shared_ptr<void>>>;
};

/// The backends an executor may use; a graph naming a device none of them serves is
/// rejected at load.
template <class... Bs>
class backends {
  // Checked here rather than as a constraint, so that fwd.hpp can name backends<cpu_backend>.
  static_assert((device_backend<Bs> && ...), "every backend must model gexec::device_backend");

 public:
  backends() = default;
  explicit backends(Bs... bs) : list_(std::move(bs)...) {}

  /// Calls f(backend) with the backend serving `device_type`; false if there is none.
  template <class F>
  bool visit(int device_type, F&& f) {
    return std::apply([&](auto&... b) { return ((device_type == std::decay_t<decltype(b)>::device_type ? (f(b), true) : false) || ...); },
                      list_);
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

template <class T>
inline constexpr bool is_backends_v = false;
template <class... Bs>
inline constexpr bool is_backends_v<backends<Bs...>> = true;

GEXEC_NAMESPACE_END
