#pragma once
// An executor's streams and events, typed per backend: one stream per model device (a
// stream set; lane policies add more sets), and the events lane policies record after
// steps. Each is held as a variant over the backends' stream_type (event_type), at an
// address that never changes, so the hot loop and TVM's C hooks may point at it: the
// `void*` of run_context::stream is the only place the type is erased.

#include "../config.hpp"

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "../backends/backend.hpp"
#include "../device.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

template <class Backends>
struct backend_types;

/// The stream and event of each backend of the list, as variants indexed like the list
/// (two backends may name the same type).
template <class... Bs>
struct backend_types<backends<Bs...>> {
  using stream = std::variant<typename Bs::stream_type...>;
  using event = std::variant<std::monostate, typename Bs::event_type...>;  ///< alternative I + 1: backend I's
  template <std::size_t I>
  using backend_at = std::tuple_element_t<I, std::tuple<Bs...>>;
  template <class B>
  static constexpr std::size_t index_of = [] {
    std::size_t i = 0;
    (void)((std::is_same_v<B, Bs> ? false : (++i, true)) && ...);
    return i;
  }();

  /// f(backend, stream) with the backend `s` belongs to, typed.
  template <class F>
  static void with(backends<Bs...>& bs, stream& s, F&& f) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (void)((s.index() == I ? (f(bs.template get<backend_at<I>>(), *std::get_if<I>(&s)), true) : false) || ...);
    }(std::index_sequence_for<Bs...>{});
  }
};

/// The executor's stream on one of the model's devices.
template <class Backends>
struct device_stream {
  DLDevice device{kDLCPU, 0};
  typename backend_types<Backends>::stream stream;
};

/// One stream per model device, released with the set (after waiting for it); a set
/// whose construction fails releases the streams it made.
template <class Backends>
class stream_set {
 public:
  using types = backend_types<Backends>;

  stream_set(std::shared_ptr<Backends> backends, std::span<const DLDevice> devices) : backends_(std::move(backends)) {
    list_.reserve(devices.size());  // never grows again: the lanes point into it
    try {
      for (const DLDevice& d : devices)
        backends_->visit(d.device_type, [&](auto& b) {
          constexpr std::size_t i = types::template index_of<std::decay_t<decltype(b)>>;
          list_.push_back({d, typename types::stream(std::in_place_index<i>, b.create_stream(d))});
        });
    } catch (...) {
      release(false);
      throw;
    }
  }
  stream_set(const stream_set&) = delete;
  stream_set& operator=(const stream_set&) = delete;
  ~stream_set() { release(true); }

  [[nodiscard]] std::size_t size() const noexcept { return list_.size(); }
  /// f(backend, stream) for model device `d`.
  template <class F>
  void on(std::size_t d, F&& f) {
    types::with(*backends_, list_[d].stream, std::forward<F>(f));
  }
  /// f(backend, stream) for the first stream on `device`; false where there is none.
  template <class F>
  bool on(DLDevice device, F&& f) {
    for (device_stream<Backends>& d : list_)
      if (same_device(d.device, device)) {
        types::with(*backends_, d.stream, std::forward<F>(f));
        return true;
      }
    return false;
  }
  /// The stream of backend B on model device `d` (B serves it).
  template <class B>
  [[nodiscard]] typename B::stream_type& get(std::size_t d) noexcept {
    return *std::get_if<types::template index_of<B>>(&list_[d].stream);
  }
  /// Waits for every stream (on `device` only, if given).
  void synchronize() {
    for (device_stream<Backends>& d : list_) types::with(*backends_, d.stream, [](auto& b, auto& s) { b.synchronize(s); });
  }
  void synchronize(DLDevice device) {
    for (device_stream<Backends>& d : list_)
      if (same_device(d.device, device)) types::with(*backends_, d.stream, [](auto& b, auto& s) { b.synchronize(s); });
  }
  /// The driver's handle of the stream on model device `d` (a CUstream), or null.
  [[nodiscard]] void* native_handle(std::size_t d) noexcept {
    void* native = nullptr;
    on(d, [&](auto& b, auto& s) { native = native_handle_of(b, s); });
    return native;
  }
  /// The stream objects, per model device, for the hot loop and the C hooks.
  [[nodiscard]] std::vector<void*> pointers() {
    std::vector<void*> out;
    for (device_stream<Backends>& d : list_) out.push_back(std::visit([](auto& s) -> void* { return &s; }, d.stream));
    return out;
  }

 private:
  /// Releases every stream, first waiting for it where `wait`.
  void release(bool wait) noexcept {
    for (device_stream<Backends>& d : list_)
      types::with(*backends_, d.stream, [&](auto& b, auto& s) noexcept {
        if (wait) {
          try {
            b.synchronize(s);
          } catch (...) {  // a device that cannot finish has nothing left to wait for
          }
        }
        b.destroy_stream(d.device, s);
      });
    list_.clear();
  }

  std::shared_ptr<Backends> backends_;
  std::vector<device_stream<Backends>> list_;  ///< per model device
};

/// Per step, the event a lane policy recorded after it, made on first use and
/// destroyed with the set.
template <class Backends>
class step_events {
 public:
  using types = backend_types<Backends>;

  step_events(std::shared_ptr<Backends> backends, std::size_t steps)
      : backends_(std::move(backends)), slots_(std::make_unique<slot[]>(steps)), size_(steps) {}
  step_events(const step_events&) = delete;
  step_events& operator=(const step_events&) = delete;
  ~step_events() {
    for (std::size_t k = 0; k < size_; ++k) {
      slot& s = slots_[k];
      [&]<std::size_t... I>(std::index_sequence<I...>) {
        (void)((s.event.index() == I + 1 ? (destroy<I>(s), true) : false) || ...);
      }(std::make_index_sequence<std::variant_size_v<typename types::event> - 1>{});
    }
  }

  /// Step k's event of backend B on `device`, made there on first use.
  template <class B>
  [[nodiscard]] typename B::event_type& make(std::uint32_t k, B& b, DLDevice device) {
    constexpr std::size_t i = types::template index_of<B> + 1;
    slot& s = slots_[k];
    if (s.event.index() != i) {
      s.event.template emplace<i>(b.create_event(device));
      s.device = device;
    }
    return *std::get_if<i>(&s.event);
  }
  /// Step k's event of backend B, or null if none was recorded.
  template <class B>
  [[nodiscard]] typename B::event_type* find(std::uint32_t k) noexcept {
    return k < size_ ? std::get_if<types::template index_of<B> + 1>(&slots_[k].event) : nullptr;
  }

 private:
  struct slot {
    DLDevice device{kDLCPU, 0};
    typename types::event event;
  };
  template <std::size_t I>
  void destroy(slot& s) noexcept {
    using B = typename types::template backend_at<I>;
    backends_->template get<B>().destroy_event(s.device, *std::get_if<I + 1>(&s.event));
  }

  std::shared_ptr<Backends> backends_;
  std::unique_ptr<slot[]> slots_;
  std::size_t size_;
};

}  // namespace detail
GEXEC_NAMESPACE_END
