#pragma once
// Where an instance on a CUDA device moves request bytes. It holds the instance's own
// memory for one run of each input and output (on the device, or on the host where a
// heterogeneous graph keeps the tensor there), outputs bound to the executor once. As the
// batcher hands it rows, every copy is enqueued on the executor's stream: an input on
// this device that fills a whole run is bound in place instead, and host inputs (read by
// host kernels) are written at once. The instance waits once per batch.

#include <gexec/all_backends.hpp>
#include <gexec/executor.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <utility>
#include <vector>

#include "batcher.hpp"
#include "model_config.hpp"
#include "model_state.hpp"

namespace gexec_triton {

inline DLDevice memory_at(memory_device d) { return d == host_memory ? gexec::cpu() : gexec::cuda(static_cast<int>(d)); }

/// One input or output of an instance on a CUDA device: where the executor reads (writes)
/// it and the instance's own memory for one run of it.
struct io_slot {
  const served_tensor* tensor = nullptr;
  std::uint64_t run_bytes = 0;  ///< rows_per_run rows
  DLDevice device{kDLCPU, 0};   ///< where the graph places it
  gexec::ndarray own;           ///< the instance's memory for it, bound zero-copy
  const void* bound = nullptr;  ///< what the executor reads now (inputs)
  const void* next = nullptr;   ///< what the next run reads (inputs)
};

/// The request bytes of an instance on CUDA device `device`, run by `ex`, an executor of
/// `m` served as `L`. The batcher's mover calls put, pad, bind_inputs (before each run)
/// and take.
class device_io {
 public:
  device_io(executor& ex, model_type& m, const serving_layout& L, int device) : ex_(ex), m_(m), device_(device) {
    const gexec::compact_graph& g = m_.compact();
    auto placed = [&](std::uint32_t e) { return !g.device_index.empty() && g.device_index[e] == kDLCUDA ? gexec::cuda(device_) : gexec::cpu(); };
    gexec::cuda_backend& cuda = m_.get_backends().get<gexec::cuda_backend>();
    auto own = [&](const served_tensor& t, DLDevice d) {
      own_bytes_ += t.row_bytes * static_cast<std::uint64_t>(L.rows_per_run);
      return d.device_type == kDLCPU ? gexec::ndarray::empty(t.shape, t.dtype) : cuda.empty(t.shape, t.dtype, d);
    };
    std::uint64_t largest = 0;
    for (const served_tensor& t : L.inputs) {
      io_slot s;
      s.tensor = &t;
      s.run_bytes = t.row_bytes * static_cast<std::uint64_t>(L.rows_per_run);
      s.device = placed(g.entry_id(g.arg_nodes[static_cast<std::size_t>(t.index)], 0));
      if (s.device.device_type == kDLCPU) {
        gexec::ndarray zeros = gexec::ndarray::empty(t.shape, t.dtype);
        if (zeros.byte_size()) std::memset(zeros.data(), 0, static_cast<std::size_t>(zeros.byte_size()));
        ex_.set_input(t.index, zeros);
        s.own = ex_.get_input(t.index);
      } else {
        s.own = own(t, s.device);
        s.next = s.own.data();
      }
      largest = std::max(largest, s.run_bytes);
      inputs_.push_back(std::move(s));
    }
    for (const served_tensor& t : L.outputs) {
      io_slot s;
      s.tensor = &t;
      s.run_bytes = t.row_bytes * static_cast<std::uint64_t>(L.rows_per_run);
      s.device = placed(g.entry_id(g.heads[static_cast<std::size_t>(t.index)]));
      s.own = own(t, s.device);
      host_outputs_ = host_outputs_ || s.device.device_type == kDLCPU;
      ex_.set_output_zero_copy(t.index, s.own);
      outputs_.push_back(std::move(s));
    }
    zeros_.assign(static_cast<std::size_t>(largest), std::byte{0});
  }
  device_io(const device_io&) = delete;
  device_io& operator=(const device_io&) = delete;

  void put(std::size_t k, std::int64_t row, const input_bytes& src, std::uint64_t offset, std::uint64_t n) {
    io_slot& in = inputs_[k];
    auto* dst = static_cast<std::byte*>(in.own.data()) + static_cast<std::uint64_t>(row) * in.tensor->row_bytes;
    if (in.device.device_type == kDLCPU) {  // a host input of a heterogeneous graph, read by host kernels: written now
      src.pieces(offset, n, [&](std::span<const std::byte> piece, memory_device where, std::uint64_t at) {
        if (where == host_memory)
          std::memcpy(dst + at, piece.data(), piece.size());
        else
          copy_now(piece.data(), memory_at(where), dst + at, piece.size());
      });
      return;
    }
    if (row == 0 && offset == 0 && n == in.run_bytes && src.buffers.size() == 1 && src.device_of(0) == device_ &&
        reinterpret_cast<std::uintptr_t>(src.buffers[0].data()) % 64 == 0) {
      in.next = src.buffers[0].data();  // the request's own memory on this device, read in place
      return;
    }
    in.next = in.own.data();
    src.pieces(offset, n, [&](std::span<const std::byte> piece, memory_device where, std::uint64_t at) {
      enqueue(piece.data(), memory_at(where), dst + at, in.device, piece.size());
    });
  }
  void pad(std::size_t k, std::int64_t row) {
    io_slot& in = inputs_[k];
    const std::uint64_t at = static_cast<std::uint64_t>(row) * in.tensor->row_bytes, n = in.run_bytes - at;
    auto* dst = static_cast<std::byte*>(in.own.data()) + at;
    if (in.device.device_type == kDLCPU) {
      std::memset(dst, 0, static_cast<std::size_t>(n));
      return;
    }
    in.next = in.own.data();
    enqueue(zeros_.data(), gexec::cpu(), dst, in.device, n);
  }
  /// Points each device input at what the coming run reads (a no-op when unchanged, so a
  /// captured CUDA Graph is replayed as it is).
  void bind_inputs() {
    for (io_slot& in : inputs_) {
      if (in.device.device_type == kDLCPU || in.next == in.bound) continue;
      const served_tensor& t = *in.tensor;
      std::vector<std::int64_t> shape = t.shape;
      DLTensor view{const_cast<void*>(in.next), in.device, static_cast<int>(shape.size()), t.dtype, shape.data(), nullptr, 0};
      ex_.set_input_zero_copy(t.index, gexec::ndarray::view(view, in.next == in.own.data() ? in.own.storage_owner() : nullptr));
      in.bound = in.next;
    }
  }
  void take(std::size_t j, std::int64_t row, std::byte* dst, memory_device where, std::uint64_t n) {
    const io_slot& out = outputs_[j];
    const auto* src = static_cast<const std::byte*>(out.own.data()) + static_cast<std::uint64_t>(row) * out.tensor->row_bytes;
    if (out.device.device_type == kDLCPU && where == host_memory)
      std::memcpy(dst, src, static_cast<std::size_t>(n));
    else
      enqueue(src, out.device, dst, memory_at(where), n);
  }
  /// Whether some outputs are on the host (a heterogeneous graph): a run's must be waited
  /// for before they are read.
  [[nodiscard]] bool host_outputs() const noexcept { return host_outputs_; }
  /// The bytes of the instance's own memory for the inputs and outputs.
  [[nodiscard]] std::uint64_t own_bytes() const noexcept { return own_bytes_; }

 private:
  static DLTensor bytes_at(const void* p, DLDevice d, std::int64_t& n) { return DLTensor{const_cast<void*>(p), d, 1, {kDLUInt, 8, 1}, &n, nullptr, 0}; }

  /// Enqueues a copy of `n` bytes on the executor's stream.
  void enqueue(const void* from, DLDevice from_device, void* to, DLDevice to_device, std::uint64_t n) {
    std::int64_t size = static_cast<std::int64_t>(n);
    if (size == 0) return;
    DLTensor src = bytes_at(from, from_device, size), dst = bytes_at(to, to_device, size);
    ex_.copy_async(src, dst);
  }
  /// A copy complete on return (into host memory that host kernels read).
  void copy_now(const void* from, DLDevice from_device, void* to, std::uint64_t n) {
    std::int64_t size = static_cast<std::int64_t>(n);
    DLTensor src = bytes_at(from, from_device, size), dst = bytes_at(to, gexec::cpu(), size);
    m_.get_backends().copy(src, dst);
  }

  executor& ex_;
  model_type& m_;
  int device_;
  std::vector<io_slot> inputs_, outputs_;
  std::vector<std::byte> zeros_;  ///< what pads short runs
  bool host_outputs_ = false;     ///< some outputs are on the host (a heterogeneous graph)
  std::uint64_t own_bytes_ = 0;
};

}  // namespace gexec_triton
