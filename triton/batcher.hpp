#pragma once
// Runs the rows of many requests through a model compiled for B rows: rows are packed
// into the executor's inputs in arrival order, a request may span several runs, the last
// run is padded with zero rows, and each output row is copied back to the request it
// came from. Without batching every request is one "row" holding whole tensors.
//
// It sees requests only as byte ranges (inputs, possibly split over several buffers, in
// host or device memory) and output destinations, and moves bytes through a mover (host
// memcpy, or copies on a device stream), so it is tested without a server.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace gexec_triton {

/// Where a buffer lies: host memory (-1) or the CUDA device of that id.
using memory_device = std::int64_t;
inline constexpr memory_device host_memory = -1;

/// One input of one request: its bytes, in one or more buffers read in order, each in
/// host memory or on a CUDA device (`devices`, one per buffer; empty: all on the host).
struct input_bytes {
  std::vector<std::span<const std::byte>> buffers;
  std::vector<memory_device> devices;

  [[nodiscard]] std::uint64_t size() const noexcept {
    std::uint64_t n = 0;
    for (auto b : buffers) n += b.size();
    return n;
  }
  [[nodiscard]] memory_device device_of(std::size_t buffer) const noexcept { return buffer < devices.size() ? devices[buffer] : host_memory; }
  /// f(bytes, device, offset into the range) for each piece of bytes [offset, offset + n).
  template <class F>
  void pieces(std::uint64_t offset, std::uint64_t n, F&& f) const {
    std::uint64_t done = 0;
    for (std::size_t i = 0; i < buffers.size() && done < n; ++i) {
      const auto b = buffers[i];
      if (offset >= b.size()) {
        offset -= b.size();
        continue;
      }
      const std::uint64_t take = std::min<std::uint64_t>(n - done, b.size() - offset);
      f(b.subspan(static_cast<std::size_t>(offset), static_cast<std::size_t>(take)), device_of(i), done);
      done += take;
      offset = 0;
    }
  }
  /// Copies bytes [offset, offset + n) to `dst` (host buffers only).
  void copy(std::uint64_t offset, std::uint64_t n, std::byte* dst) const {
    pieces(offset, n, [&](std::span<const std::byte> piece, memory_device, std::uint64_t at) { std::memcpy(dst + at, piece.data(), piece.size()); });
  }
};

/// A request as the batcher sees it (the bytes its spans point at outlive the call).
struct batch_request {
  std::int64_t rows = 0;                 ///< its batch size (1 without batching)
  std::vector<input_bytes> inputs;       ///< one per model input, each rows x row bytes
  std::vector<std::byte*> outputs;       ///< one per model output: where its rows go, null when not asked for
  std::vector<memory_device> output_devices;  ///< where each output lies (empty: all on the host)
  std::string error;                     ///< set when a run it took part in failed

  [[nodiscard]] memory_device output_device(std::size_t j) const noexcept { return j < output_devices.size() ? output_devices[j] : host_memory; }
};

/// The executor's side: where input rows go and output rows come from.
struct batch_layout {
  std::int64_t rows_per_run = 1;
  std::vector<std::uint64_t> input_row_bytes, output_row_bytes;
};

/// What moves rows between requests and an executor (see host_mover for the plain case):
///   put(k, row, src, offset, n)   n bytes of `src` from `offset` into input k at run row `row`
///   pad(k, row)                   zeroes input k from run row `row` to the end
///   run(filled)                   runs the model on the rows put (throws on failure)
///   take(j, row, dst, device, n)  n bytes of output j from run row `row` to `dst`
template <class M>
concept batch_mover = requires(M m, const input_bytes& src, std::byte* dst) {
  m.put(std::size_t{}, std::int64_t{}, src, std::uint64_t{}, std::uint64_t{});
  m.pad(std::size_t{}, std::int64_t{});
  m.run(std::int64_t{});
  m.take(std::size_t{}, std::int64_t{}, dst, memory_device{}, std::uint64_t{});
};

/// Runs every request's rows through `mover`. A failed run sets the error of every
/// request with rows in it; the others go on. Returns the number of runs that succeeded.
template <batch_mover Mover>
std::size_t run_batched(std::span<batch_request> requests, const batch_layout& L, Mover& mover) {
  struct member {
    batch_request* request;
    std::int64_t first_row, rows, slot;
  };
  std::vector<member> members;
  const std::size_t n_in = L.input_row_bytes.size(), n_out = L.output_row_bytes.size();
  std::int64_t filled = 0;
  std::size_t runs = 0;
  auto flush = [&] {
    try {
      if (filled < L.rows_per_run)  // zero rows pad a short run
        for (std::size_t k = 0; k < n_in; ++k) mover.pad(k, filled);
      mover.run(filled);
      ++runs;
      for (const member& m : members)
        for (std::size_t j = 0; j < n_out; ++j)
          if (std::byte* dst = m.request->outputs[j])
            mover.take(j, m.slot, dst + m.first_row * L.output_row_bytes[j], m.request->output_device(j),
                       static_cast<std::uint64_t>(m.rows) * L.output_row_bytes[j]);
    } catch (const std::exception& e) {
      for (const member& m : members)
        if (m.request->error.empty()) m.request->error = e.what();
    } catch (...) {
      for (const member& m : members)
        if (m.request->error.empty()) m.request->error = "unknown error";
    }
    members.clear();
    filled = 0;
  };
  for (batch_request& r : requests) {
    if (!r.error.empty()) continue;
    for (std::int64_t row = 0; row < r.rows;) {
      const std::int64_t n = std::min(r.rows - row, L.rows_per_run - filled);
      try {
        for (std::size_t k = 0; k < n_in; ++k)
          mover.put(k, filled, r.inputs[k], static_cast<std::uint64_t>(row) * L.input_row_bytes[k], static_cast<std::uint64_t>(n) * L.input_row_bytes[k]);
      } catch (const std::exception& e) {  // a copy the device refused: this request fails, the run goes on without it
        r.error = e.what();
        break;
      }
      members.push_back({&r, row, n, filled});
      filled += n;
      row += n;
      if (filled == L.rows_per_run) flush();
    }
  }
  if (filled > 0) flush();
  return runs;
}

/// The plain case: the executor's inputs and outputs are host buffers of rows_per_run
/// rows each, which `inputs()` and `outputs()` return; `run()` runs the model.
template <class Inputs, class Run, class Outputs>
struct host_mover {
  const batch_layout& L;
  Inputs inputs;
  Run run_model;
  Outputs outputs;
  std::vector<std::byte*> in{};
  std::vector<const std::byte*> out{};

  void put(std::size_t k, std::int64_t row, const input_bytes& src, std::uint64_t offset, std::uint64_t n) {
    if (in.empty()) in = inputs();
    src.copy(offset, n, in[k] + row * L.input_row_bytes[k]);
  }
  void pad(std::size_t k, std::int64_t row) {
    if (in.empty()) in = inputs();
    std::memset(in[k] + row * L.input_row_bytes[k], 0, static_cast<std::size_t>((L.rows_per_run - row) * L.input_row_bytes[k]));
  }
  void run(std::int64_t filled) {
    run_model(filled);
    in.clear();  // the next run asks again
    out.clear();
  }
  void take(std::size_t j, std::int64_t row, std::byte* dst, memory_device, std::uint64_t n) {
    if (out.empty()) out = outputs();
    std::memcpy(dst, out[j] + row * L.output_row_bytes[j], static_cast<std::size_t>(n));
  }
};

/// run_batched over host buffers: `inputs()` returns the executor's input buffers (one per
/// input, rows_per_run rows each), `run()` runs the model (throwing on failure) and
/// `outputs()` returns its output buffers.
template <class Inputs, class Run, class Outputs>
std::size_t run_batched(std::span<batch_request> requests, const batch_layout& L, Inputs&& inputs, Run&& run, Outputs&& outputs) {
  host_mover<std::decay_t<Inputs>, std::decay_t<Run>, std::decay_t<Outputs>> mover{L, std::forward<Inputs>(inputs), std::forward<Run>(run),
                                                                                     std::forward<Outputs>(outputs)};
  return run_batched(requests, L, mover);
}

}  // namespace gexec_triton
