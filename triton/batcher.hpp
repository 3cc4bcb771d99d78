#pragma once
// Runs the rows of many requests through a model compiled for B rows: rows are packed
// into the executor's inputs in arrival order, a request may span several runs, the last
// run is padded with zero rows, and each output row is copied back to the request it
// came from. Without batching every request is one "row" holding whole tensors.
//
// It sees requests only as byte ranges (inputs, possibly split over several buffers)
// and output destinations, so it is tested without a server.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <span>
#include <string>
#include <vector>

namespace gexec_triton {

/// One input of one request: its bytes, in one or more buffers read in order.
struct input_bytes {
  std::vector<std::span<const std::byte>> buffers;

  [[nodiscard]] std::uint64_t size() const noexcept {
    std::uint64_t n = 0;
    for (auto b : buffers) n += b.size();
    return n;
  }
  /// Copies bytes [offset, offset + n) to `dst`.
  void copy(std::uint64_t offset, std::uint64_t n, std::byte* dst) const {
    for (auto b : buffers) {
      if (n == 0) return;
      if (offset >= b.size()) {
        offset -= b.size();
        continue;
      }
      const std::uint64_t take = std::min<std::uint64_t>(n, b.size() - offset);
      std::memcpy(dst, b.data() + offset, take);
      dst += take;
      n -= take;
      offset = 0;
    }
  }
};

/// A request as the batcher sees it (the bytes its spans point at outlive the call).
struct batch_request {
  std::int64_t rows = 0;                 ///< its batch size (1 without batching)
  std::vector<input_bytes> inputs;       ///< one per model input, each rows x row bytes
  std::vector<std::byte*> outputs;       ///< one per model output: where its rows go, null when not asked for
  std::string error;                     ///< set when a run it took part in failed
};

/// The executor's side: where input rows go and output rows come from.
struct batch_layout {
  std::int64_t rows_per_run = 1;
  std::vector<std::uint64_t> input_row_bytes, output_row_bytes;
};

/// Runs every request's rows. `inputs()` returns the executor's input buffers (one per
/// input, rows_per_run rows each), `run()` runs the model (throwing on failure) and
/// `outputs()` returns its output buffers. A failed run sets the error of every request
/// with rows in it; the others go on. Returns the number of runs that succeeded.
template <class Inputs, class Run, class Outputs>
std::size_t run_batched(std::span<batch_request> requests, const batch_layout& L, Inputs&& inputs, Run&& run, Outputs&& outputs) {
  struct member {
    batch_request* request;
    std::int64_t first_row, rows, slot;
  };
  std::vector<member> members;
  std::vector<std::byte*> in = inputs();
  std::int64_t filled = 0;
  std::size_t runs = 0;
  auto flush = [&] {
    for (std::size_t k = 0; k < in.size(); ++k)  // zero rows pad a short run
      std::memset(in[k] + filled * L.input_row_bytes[k], 0, static_cast<std::size_t>((L.rows_per_run - filled) * L.input_row_bytes[k]));
    try {
      run(filled);
      ++runs;
      const std::vector<const std::byte*> out = outputs();
      for (const member& m : members)
        for (std::size_t j = 0; j < out.size(); ++j)
          if (std::byte* dst = m.request->outputs[j])
            std::memcpy(dst + m.first_row * L.output_row_bytes[j], out[j] + m.slot * L.output_row_bytes[j],
                        static_cast<std::size_t>(m.rows * L.output_row_bytes[j]));
    } catch (const std::exception& e) {
      for (const member& m : members)
        if (m.request->error.empty()) m.request->error = e.what();
    } catch (...) {
      for (const member& m : members)
        if (m.request->error.empty()) m.request->error = "unknown error";
    }
    members.clear();
    filled = 0;
    in = inputs();
  };
  for (batch_request& r : requests) {
    if (!r.error.empty()) continue;
    for (std::int64_t row = 0; row < r.rows;) {
      const std::int64_t n = std::min(r.rows - row, L.rows_per_run - filled);
      for (std::size_t k = 0; k < in.size(); ++k)
        r.inputs[k].copy(static_cast<std::uint64_t>(row) * L.input_row_bytes[k], static_cast<std::uint64_t>(n) * L.input_row_bytes[k],
                         in[k] + filled * L.input_row_bytes[k]);
      members.push_back({&r, row, n, filled});
      filled += n;
      row += n;
      if (filled == L.rows_per_run) flush();
    }
  }
  if (filled > 0) flush();
  return runs;
}

}  // namespace gexec_triton
