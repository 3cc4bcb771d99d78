#pragma once
// gexec::ndarray: a reference-counted handle to a DLTensor that either owns its
// 64-byte aligned storage or views storage kept alive by someone else (a mapped
// parameter file, an executor, a DLPack producer).

#include "config.hpp"

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "detail/aligned_memory.hpp"
#include "detail/shape.hpp"
#include "device.hpp"
#include "dtype.hpp"
#include "error.hpp"

GEXEC_NAMESPACE_BEGIN

/// Alignment of every buffer gexec allocates; TVM-compiled kernels assume it.
inline constexpr std::size_t kernel_alignment = detail::host_alignment;

/// The most dimensions a tensor may have in gexec (TVM's own graphs and parameter files
/// stay far below it); a bound for DLTensors from elsewhere, whose ndim is trusted for
/// reading `shape` and `strides`.
inline constexpr int max_ndim = 64;

namespace detail {

/// Throws errc::invalid_argument, prefixed with `who`, naming what makes `t` unusable: an
/// ndim out of [0, max_ndim], a null shape with ndim > 0, a negative dimension, a size
/// that overflows, or null data for a tensor with elements. (Strides, where given, may
/// be anything: strided tensors are viewed, and what needs compact ones checks them.)
inline void check_dltensor(const DLTensor& t, const char* who) {
  auto fail = [&](const std::string& why) {
    throw error(errc::invalid_argument, std::string(who) + ": malformed DLTensor: " + why);
  };
  if (t.ndim < 0) fail("negative ndim " + std::to_string(t.ndim));
  if (t.ndim > max_ndim) fail("ndim " + std::to_string(t.ndim) + " exceeds gexec's limit of " + std::to_string(max_ndim));
  if (t.ndim > 0 && !t.shape) fail("shape is null with ndim " + std::to_string(t.ndim));
  const std::span<const std::int64_t> shape(t.shape, static_cast<std::size_t>(t.ndim));
  for (std::size_t i = 0; i < shape.size(); ++i)
    if (shape[i] < 0) fail("dimension " + std::to_string(i) + " of shape " + shape_to_string(shape) + " is negative");
  auto bytes = checked_byte_size(shape, t.dtype);
  if (!bytes) fail("shape " + shape_to_string(shape) + " overflows the addressable size");
  if (!t.data && *bytes != 0) fail("data is null for a tensor of " + std::to_string(*bytes) + " bytes");
}

struct ndarray_state {
  DLTensor tensor{};
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
  std::shared_ptr<const void> keepalive;  // whatever owns tensor.data
};

/// Zeroed host memory aligned for kernels; at least one alignment unit so `data` is never null.
inline std::shared_ptr<void> allocate_host(std::uint64_t bytes) {
  void* p = allocate_aligned(bytes);
  std::memset(p, 0, static_cast<std::size_t>(align_up(bytes == 0 ? 1 : bytes, host_alignment)));
  return {p, &free_aligned};
}

}  // namespace detail

class ndarray {
 public:
  ndarray() = default;

  /// A zero-filled, 64-byte aligned host tensor. Device memory comes from an executor's
  /// backends, not from here.
  static ndarray empty(std::vector<std::int64_t> shape, DLDataType dtype, DLDevice device = cpu()) {
    if (device.device_type != kDLCPU)
      throw error(errc::unsupported, "ndarray::empty allocates host tensors only, not on " + to_string(device));
    if (!is_supported(dtype)) throw error(errc::invalid_dtype, "ndarray::empty: unsupported dtype " + to_string(dtype));
    if (shape.size() > static_cast<std::size_t>(max_ndim))
      throw error(errc::invalid_argument, "ndarray::empty: " + std::to_string(shape.size()) +
                                              " dimensions exceed gexec's limit of " + std::to_string(max_ndim));
    auto bytes = detail::checked_byte_size(shape, dtype);
    if (!bytes)
      throw error(errc::invalid_argument, "ndarray::empty: shape " + detail::shape_to_string(shape) +
                                              " is negative or overflows");
    auto storage = detail::allocate_host(*bytes);
    void* data = storage.get();
    return make(std::move(shape), {}, dtype, device, data, std::move(storage));
  }

  /// A host tensor holding a copy of `values`.
  template <class T>
  static ndarray from_values(std::vector<std::int64_t> shape, std::span<const T> values) {
    ndarray a = empty(std::move(shape), dtype_of<T>());
    if (static_cast<std::uint64_t>(values.size()) != a.numel())
      throw error(errc::shape_mismatch, "ndarray::from_values: " + std::to_string(values.size()) +
                                            " values for shape " + detail::shape_to_string(a.shape()));
    if (!values.empty()) std::memcpy(a.data(), values.data(), values.size_bytes());
    return a;
  }
  template <class T>
  static ndarray from_values(std::vector<std::int64_t> shape, std::initializer_list<T> values) {
    return from_values<T>(std::move(shape), std::span<const T>(values.begin(), values.size()));
  }

  /// A view of `t` (shape and strides are copied; data is not). `keepalive` owns the data.
  /// A malformed `t` (see detail::check_dltensor) is errc::invalid_argument.
  static ndarray view(const DLTensor& t, std::shared_ptr<const void> keepalive) {
    detail::check_dltensor(t, "ndarray::view");
    return view_checked(t, std::move(keepalive));
  }

  /// Takes ownership of a DLPack tensor; its deleter runs when the last handle goes, or
  /// at once if the tensor is malformed (errc::invalid_argument, see detail::check_dltensor).
  /// DLPack's bool enters as bool (from_dlpack_dtype), never as TVM's float8 e4m3.
  static ndarray from_dlpack(DLManagedTensor* managed) {
    if (!managed) throw error(errc::invalid_argument, "from_dlpack: null DLManagedTensor");
    std::shared_ptr<const void> owner(managed, [](const void* p) {
      auto* m = static_cast<DLManagedTensor*>(const_cast<void*>(p));
      if (m->deleter) m->deleter(m);
    });
    DLTensor t = managed->dl_tensor;
    t.dtype = from_dlpack_dtype(t.dtype);
    detail::check_dltensor(t, "from_dlpack");
    return view_checked(t, std::move(owner));
  }

 private:
  static ndarray view_checked(const DLTensor& t, std::shared_ptr<const void> keepalive) {
    std::vector<std::int64_t> shape(t.shape, t.shape + t.ndim);
    std::vector<std::int64_t> strides;
    if (t.strides) strides.assign(t.strides, t.strides + t.ndim);
    ndarray a = make(std::move(shape), std::move(strides), t.dtype, t.device, t.data, std::move(keepalive));
    a.state_->tensor.byte_offset = t.byte_offset;
    return a;
  }


 public:
  /// Exports a DLPack tensor sharing this one's storage; the consumer calls its deleter.
  /// TVM's float8 leaves as uint8 bits (to_dlpack_dtype), every other dtype as it is.
  [[nodiscard]] DLManagedTensor* to_dlpack() const {
    require_defined("to_dlpack");
    struct holder {
      DLManagedTensor managed;
      std::shared_ptr<detail::ndarray_state> state;
    };
    auto* h = new holder{{}, state_};
    h->managed.dl_tensor = state_->tensor;
    h->managed.dl_tensor.dtype = to_dlpack_dtype(state_->tensor.dtype);
    h->managed.manager_ctx = h;
    h->managed.deleter = [](DLManagedTensor* self) { delete static_cast<holder*>(self->manager_ctx); };
    return &h->managed;
  }

  [[nodiscard]] bool defined() const noexcept { return state_ != nullptr; }
  /// How many handles share this tensor (copies of one ndarray; a view made of it is a
  /// tensor of its own): 1 when this is the only one.
  [[nodiscard]] long use_count() const noexcept { return state_.use_count(); }
  [[nodiscard]] std::span<const std::int64_t> shape() const noexcept {
    return state_ ? std::span<const std::int64_t>(state_->shape) : std::span<const std::int64_t>();
  }
  [[nodiscard]] int ndim() const noexcept { return state_ ? state_->tensor.ndim : 0; }
  [[nodiscard]] DLDataType dtype() const noexcept { return state_ ? state_->tensor.dtype : DLDataType{}; }
  [[nodiscard]] DLDevice device() const noexcept { return state_ ? state_->tensor.device : DLDevice{}; }
  /// Start of the elements (data + byte_offset).
  [[nodiscard]] void* data() const noexcept {
    if (!state_) return nullptr;
    return static_cast<char*>(state_->tensor.data) + state_->tensor.byte_offset;
  }
  [[nodiscard]] const DLTensor& dltensor() const {
    require_defined("dltensor");
    return state_->tensor;
  }
  [[nodiscard]] std::uint64_t numel() const noexcept { return detail::checked_numel(shape()).value_or(0); }
  [[nodiscard]] std::uint64_t byte_size() const noexcept { return numel() * element_bytes(dtype()); }
  /// Row-major without gaps (strides absent, or equal to the compact ones).
  [[nodiscard]] bool is_contiguous() const noexcept {
    if (!state_ || state_->strides.empty()) return true;
    std::int64_t expected = 1;
    for (int i = ndim() - 1; i >= 0; --i) {
      if (state_->shape[i] != 1 && state_->strides[i] != expected) return false;
      expected *= state_->shape[i];
    }
    return true;
  }
  [[nodiscard]] bool is_aligned(std::size_t alignment = kernel_alignment) const noexcept {
    return reinterpret_cast<std::uintptr_t>(data()) % alignment == 0;
  }

  /// Typed access to a contiguous host tensor whose dtype is exactly T's.
  template <class T>
  [[nodiscard]] std::span<T> values() const {
    require_defined("values");
    if (device().device_type != kDLCPU)
      throw error(errc::device_mismatch, "values(): tensor is on " + to_string(device()) + ", not the host");
    if (!same_dtype(dtype(), dtype_of<T>()))
      throw error(errc::dtype_mismatch, "values(): tensor is " + to_string(dtype()) + ", asked for " +
                                            to_string(dtype_of<T>()));
    if (!is_contiguous()) throw error(errc::invalid_argument, "values(): tensor is strided");
    if (!is_aligned(alignof(T))) throw error(errc::misaligned, "values(): data is not aligned for " + to_string(dtype_of<T>()));
    return {static_cast<T*>(data()), static_cast<std::size_t>(numel())};
  }

  /// A deep copy into new host storage.
  [[nodiscard]] ndarray copy() const {
    require_host_contiguous("copy");
    ndarray a = empty(std::vector<std::int64_t>(shape().begin(), shape().end()), dtype());
    if (byte_size()) std::memcpy(a.data(), data(), byte_size());
    return a;
  }

  /// Copies `src`'s elements into this host tensor; shape and dtype must match.
  void copy_from(const ndarray& src) const {
    require_host_contiguous("copy_from");
    src.require_host_contiguous("copy_from (source)");
    if (!same_dtype(dtype(), src.dtype()))
      throw error(errc::dtype_mismatch, "copy_from: " + to_string(src.dtype()) + " into " + to_string(dtype()));
    if (!std::equal(shape().begin(), shape().end(), src.shape().begin(), src.shape().end()))
      throw error(errc::shape_mismatch, "copy_from: shape " + detail::shape_to_string(src.shape()) + " into " +
                                            detail::shape_to_string(shape()));
    if (byte_size()) std::memmove(data(), src.data(), byte_size());
  }

  /// The handle that keeps this tensor's storage alive, for views derived from it.
  [[nodiscard]] std::shared_ptr<const void> storage_owner() const noexcept { return state_; }

 private:
  static ndarray make(std::vector<std::int64_t> shape, std::vector<std::int64_t> strides, DLDataType dtype,
                      DLDevice device, void* data, std::shared_ptr<const void> keepalive) {
    ndarray a;
    a.state_ = std::make_shared<detail::ndarray_state>();
    auto& s = *a.state_;
    s.shape = std::move(shape);
    s.strides = std::move(strides);
    s.keepalive = std::move(keepalive);
    s.tensor.data = data;
    s.tensor.device = device;
    s.tensor.ndim = static_cast<int>(s.shape.size());
    s.tensor.dtype = dtype;
    s.tensor.shape = s.shape.data();
    s.tensor.strides = s.strides.empty() ? nullptr : s.strides.data();
    s.tensor.byte_offset = 0;
    return a;
  }
  void require_defined(const char* what) const {
    if (!state_) throw error(errc::invalid_argument, std::string(what) + ": undefined ndarray");
  }
  void require_host_contiguous(const char* what) const {
    require_defined(what);
    if (device().device_type != kDLCPU)
      throw error(errc::device_mismatch, std::string(what) + ": tensor is on " + to_string(device()));
    if (!is_contiguous()) throw error(errc::invalid_argument, std::string(what) + ": tensor is strided");
  }

  std::shared_ptr<detail::ndarray_state> state_;
};

namespace detail {

/// Host storage for a tensor read from a file (a parameter blob, a .npy, a module blob),
/// not zeroed (its bytes are about to be overwritten); errc::out_of_memory naming the
/// tensor if it cannot be had.
template <class Reader>
ndarray allocate_tensor(const Reader& in, std::vector<std::int64_t>& shape, DLDataType dtype, std::uint64_t bytes) {
  void* p = nullptr;
  try {
    p = allocate_aligned(bytes);
  } catch (const error&) {
    in.fail(errc::out_of_memory, "cannot allocate " + std::to_string(bytes) + " bytes for the tensor data");
  }
  std::shared_ptr<void> storage(p, &free_aligned);
  // The padding after the elements (up to the alignment) is zeroed, as ndarray::empty's is.
  const auto padded = align_up(bytes == 0 ? 1 : bytes, host_alignment);
  std::memset(static_cast<std::byte*>(p) + bytes, 0, static_cast<std::size_t>(padded - bytes));
  DLTensor t{p, cpu(), static_cast<std::int32_t>(shape.size()), dtype, shape.data(), nullptr, 0};
  return ndarray::view(t, std::move(storage));
}

}  // namespace detail

GEXEC_NAMESPACE_END
