#pragma once
// The device-backend policy: what a backend must provide, and backends<...>, the
// compile-time list of backends an executor dispatches device types over.

#include <dlpack/dlpack.h>

#include <concepts>
#include <cstdint>
#include <tuple>
#include <utility>

namespace gexec {

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

/// The backends an executor may use; a graph naming a device none of them serves is
/// rejected at load.
template <device_backend... Bs>
class backends {
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

 private:
  std::tuple<Bs...> list_;
};

}  // namespace gexec
